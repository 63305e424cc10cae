"""The rectangle test of compatibility, its autoregressive control and the K x K Arnold-Press grid.

For sites ``i != j`` with current tokens ``a = x_i``, ``b = x_j`` and alternatives ``a'``, ``b'``::

    delta = | [l_i(a'|b) - l_i(a|b)] + [l_j(b'|a') - l_j(b|a')]
            - [l_j(b'|a) - l_j(b|a)] - [l_i(a'|b') - l_i(a|b')] | / tau

where ``l_i(.|b)`` are the masked-site logits at ``i`` with ``b`` at ``j`` (rest of ``x`` fixed).
Log-normalisers cancel inside each bracket, so four masked evaluations give one ``delta``. If a
joint ``pi`` had these conditionals both paths would equal ``log pi(z) / pi(x)`` and ``delta = 0``.

Regrouped, ``delta = |I_i - I_j|`` (:func:`interactions`): ``I_i`` is how much site ``i``'s
log-odds of ``a'`` over ``a`` change when ``j`` flips ``b -> b'``, ``I_j`` the same from ``j``;
a joint would give both its interaction. :func:`normalized_delta` divides by ``|I_i| + |I_j|``, so
that a model whose sites barely respond to each other (small ``I``, small ``delta``) does not
pass for a compatible one. :func:`draw_interactions` draws rectangles and measures both in one go.

Alternatives (:func:`draw_rectangles`): ``protocol="model"`` draws ``a'`` from the model's own
conditional ``p_tau(. | x_-i)`` with the current token excluded (the states a chain actually
visits); ``protocol="uniform"`` draws it uniformly over the support minus the current token.

:func:`arnold_press` generalises the rectangle to ``K`` values at ``i`` and ``K`` at ``j``
(Arnold & Press 1989; Torroba Hennigen & Kim 2023): the conditionals are compatible on the grid iff
``M[k, l] = log p_i(a_k | b_l) - log p_j(b_l | a_k)`` is additive, ``u_k + v_l``. Every 2 x 2 minor
contrast of ``M`` is a rectangle ``delta``; ``2 K`` masked evaluations give all ``K^2 (K-1)^2 / 4``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..core.checks import check_choice, check_range
from ..core.positions import check_context
from ..core.stats import Estimate
from ..mcmc.conditional import ConditionalModel, check_states, check_support
from ..mcmc.sampling import PROTOCOLS, check_tau, choose_alternatives, make_generator


NORMALIZED_INDEPENDENT = 0.5 + math.log(2) / math.pi
"""Mean :func:`normalized_delta` when ``I_i`` and ``I_j`` are independent draws of one centred
Gaussian (``1/2 + ln 2 / pi ~ 0.72``): the level of two sites whose views of their interaction are
unrelated. (Opposite signs, half the time, give 1; same signs give ``|tan(pi/4 - theta)|`` with
``theta`` uniform on ``[0, pi/2]``, mean ``2 ln 2 / pi``.) A reference point, not a bound."""


@dataclass(frozen=True)
class Rectangles:
    """One rectangle per row: sites ``i``, ``j`` and alternatives ``a2`` (at ``i``), ``b2`` (at ``j``),
    each ``[B]``."""

    i: Tensor
    j: Tensor
    a2: Tensor
    b2: Tensor


@dataclass(frozen=True)
class ArnoldPressResult:
    """Per row: ``log_ratio`` ``M`` ``[B, K, K]``, its double-centred ``residual`` ``[B, K, K]``
    (zero iff compatible on the grid), ``rms`` ``[B]`` of the residual, ``max_delta`` ``[B]``, the
    largest rectangle ``delta`` among the grid's 2 x 2 minors, and ``rms_delta`` ``[B]``, the
    root-mean-square ``delta`` over those minors.

    ``rms_delta = 2 K / (K - 1) * rms`` exactly (each minor's contrast is one of the residual's, and
    the residual's rows and columns sum to zero), so the residual RMS in ``delta`` units is
    ``rms_delta``: the grid's number to put next to the RMS ``delta`` of single random rectangles.
    ``max_delta`` is a maximum over ``K^2 (K-1)^2 / 4`` minors and is larger than one rectangle's
    ``delta`` by construction."""

    log_ratio: Tensor
    residual: Tensor
    rms: Tensor
    max_delta: Tensor
    rms_delta: Tensor


def _with(x: Tensor, site: Tensor, value: Tensor) -> Tensor:
    """x ``[B, n]`` with ``x[r, site[r]] = value[r]`` (a copy)."""
    y = x.clone()
    y[torch.arange(x.shape[0], device=x.device), site] = value.to(x.dtype)
    return y


def _check_ids(name: str, t: Any, shape: tuple[int, ...]) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be an integer torch.Tensor of shape {list(shape)}, got {type(t).__name__}")
    if t.dtype not in (torch.int64, torch.int32) or tuple(t.shape) != shape:
        raise ValueError(f"{name} must be an integer tensor of shape {list(shape)}, got "
                         f"{tuple(t.shape)} {t.dtype}")


def _check_pair(x: Tensor, i: Tensor, j: Tensor) -> None:
    if not isinstance(x, Tensor) or x.dim() != 2:
        raise ValueError(f"x must be a tensor [B, n], got "
                         f"{tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
    b, n = x.shape
    for name, s in (("i", i), ("j", j)):
        _check_ids(name, s, (b,))
        if s.numel() and (int(s.min()) < 0 or int(s.max()) >= n):
            raise ValueError(f"{name} must lie in [0, n={n})")
    if bool((i == j).any()):
        raise ValueError("i and j must differ in every row")


def _check_values(model: ConditionalModel | None, x: Tensor, site: Tensor, values: Tensor,
                  name: str, site_name: str) -> None:
    """Alternatives ``values`` ``[B]`` (or ``[B, K]``) at ``site``: ids in range, in the support, and
    (for ``[B]``) different from the current token ``x[r, site[r]]``. Checked before any model call."""
    b = x.shape[0]
    if not isinstance(values, Tensor):
        raise TypeError(f"{name} must be an integer torch.Tensor, got {type(values).__name__}")
    _check_ids(name, values, (b,) if values.dim() <= 1 else (b, values.shape[-1]))
    if model is not None:
        check_support(model, values, name)
    if values.dim() == 1 and bool((values == _gather(x, site)).any()):
        rows = (values == _gather(x, site)).nonzero().flatten().tolist()
        raise ValueError(f"{name} must differ from the current token x[r, {site_name}[r]] in every row "
                         f"(a rectangle with a' = a has delta = 0 by construction); equal in row(s) "
                         f"{rows[:8]}{' ...' if len(rows) > 8 else ''}")


def _gather(logits: Tensor, ids: Tensor) -> Tensor:
    return logits.gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def interactions(model: ConditionalModel, x: Tensor, i: Tensor, j: Tensor, a_new: Tensor, b_new: Tensor,
                 *, tau: float = 1.0) -> tuple[Tensor, Tensor]:
    """Each site's view of the interaction between the two flips: ``(I_i, I_j)``, each ``[B]`` float64.

    x ``[B, n]``, sites ``i``, ``j`` ``[B]``, alternatives ``a_new`` (``a'``, at ``i``) and ``b_new``
    (``b'``, at ``j``) ``[B]``. With ``l`` the masked-site logits divided by ``tau``::

        I_i = [l_i(a'|b') - l_i(a|b')] - [l_i(a'|b) - l_i(a|b)]
        I_j = [l_j(b'|a') - l_j(b|a')] - [l_j(b'|a) - l_j(b|a)]

    ``I_i`` is how much site ``i``'s log-odds of ``a'`` over ``a`` change when site ``j`` flips
    ``b -> b'``, and ``I_j`` the same seen from ``j``. If a joint ``pi`` had these conditionals both
    would equal its interaction ``log pi(z) pi(x) / (pi(y) pi(w))``, so a compatible model has
    ``I_i = I_j`` on every rectangle and ``delta = |I_i - I_j|`` (:func:`delta`). A model that
    ignores its context has ``I_i ~ I_j ~ 0``: small ``delta`` without being compatible
    (:func:`normalized_delta` tells the two apart).

    One batched call of ``4 B`` masked evaluations. Raises ``ValueError``, before any model
    call, if an alternative equals the current token (``a_new == x[i]`` makes both zero by
    construction) or a token of the rectangle is outside the model's support; a model without a
    support mask is checked after the evaluations instead (its logit is ``-inf``).
    """
    check_states(model, x, "x")
    _check_pair(x, i, j)
    _check_values(model, x, i, a_new, "a_new", "i")
    _check_values(model, x, j, b_new, "b_new", "j")
    check_tau(tau)
    w = _with(x, j, b_new)   # (a, b')
    y = _with(x, i, a_new)   # (a', b)
    Li_b, Li_b2, Lj_a, Lj_a2 = model.site_logits(torch.cat([x, w, x, y]), torch.cat([i, i, j, j])).chunk(4)
    return _interactions_from(x, i, j, a_new, b_new, Li_b, Li_b2, Lj_a, Lj_a2, tau)


def _interactions_from(x: Tensor, i: Tensor, j: Tensor, a_new: Tensor, b_new: Tensor, Li_b: Tensor,
                       Li_b2: Tensor, Lj_a: Tensor, Lj_a2: Tensor, tau: float) -> tuple[Tensor, Tensor]:
    """``(I_i, I_j)`` from the four masked logits ``[B, V]``: site ``i`` with ``b`` / ``b'`` at ``j``,
    site ``j`` with ``a`` / ``a'`` at ``i``."""
    a, b = _gather(x, i), _gather(x, j)
    terms = torch.stack([_gather(Li_b, a_new), _gather(Li_b, a), _gather(Li_b2, a_new), _gather(Li_b2, a),
                         _gather(Lj_a, b_new), _gather(Lj_a, b), _gather(Lj_a2, b_new), _gather(Lj_a2, b)]).double()
    if not bool(torch.isfinite(terms).all()):
        raise ValueError("a token of the rectangle is outside the model's support (logit -inf)")
    li_ab_new, li_ab, li_b2_new, li_b2 = terms[:4]   # l_i(a'|b), l_i(a|b), l_i(a'|b'), l_i(a|b')
    lj_a_new, lj_a, lj_a2_new, lj_a2 = terms[4:]     # l_j(b'|a), l_j(b|a), l_j(b'|a'), l_j(b|a')
    I_i = (li_b2_new - li_b2) - (li_ab_new - li_ab)
    I_j = (lj_a2_new - lj_a2) - (lj_a_new - lj_a)
    return I_i / tau, I_j / tau


def delta(model: ConditionalModel, x: Tensor, i: Tensor, j: Tensor, a_new: Tensor, b_new: Tensor,
          *, tau: float = 1.0, signed: bool = False) -> Tensor:
    """Rectangle discrepancy per row: x ``[B, n]``, sites ``i``, ``j`` ``[B]``, alternatives
    ``a_new`` (at ``i``), ``b_new`` (at ``j``) ``[B]`` -> ``[B]`` float64 (``signed`` keeps the sign).

    ``delta = |I_i - I_j|`` with ``(I_i, I_j)`` from :func:`interactions` at ``tau`` (the module's
    formula regrouped: the paths ``x -> y -> z`` and ``x -> w -> z`` differ by ``I_j - I_i``, the
    signed value). Same checks and the same ``4 B`` masked evaluations as :func:`interactions`.
    """
    I_i, I_j = interactions(model, x, i, j, a_new, b_new, tau=tau)
    d = I_j - I_i
    return d if signed else d.abs()


def normalized_delta(I_i: Tensor, I_j: Tensor, *, atol: float = 0.0) -> Tensor:
    """``|I_i - I_j| / (|I_i| + |I_j|)`` per row, in ``[0, 1]``: ``I_i``, ``I_j`` ``[B]`` -> ``[B]`` float64.

    0 when the two sites see the same interaction (compatible), 1 when one sees none or they
    disagree in sign. Unlike ``delta`` it does not shrink with the size of the interaction, so a
    model that ignores its context (``I_i ~ I_j ~ 0``) does not pass as compatible. It is the
    same at every ``tau``. Rows where ``|I_i| + |I_j| <= atol`` (``0 / 0`` when ``atol = 0``:
    neither site responds to the other) are ``nan``; drop or count them, never average them as 0.
    """
    for name, t in (("I_i", I_i), ("I_j", I_j)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor [B], got {type(t).__name__}")
    if I_i.shape != I_j.shape:
        raise ValueError(f"I_i and I_j must have the same shape, got {tuple(I_i.shape)} and {tuple(I_j.shape)}")
    check_range("atol", atol, 0.0)
    a, b = I_i.double(), I_j.double()
    den = a.abs() + b.abs()
    out = (a - b).abs() / den.clamp_min(torch.finfo(torch.float64).tiny)
    return torch.where(den > atol, out, torch.full_like(out, float("nan")))


def tau_slope(taus: Sequence[float], deltas: Tensor | np.ndarray, *, n_boot: int = 2000,
              level: float = 0.95, seed: int = 0) -> Estimate:
    """Least-squares slope of ``log(mean delta)`` against ``log(tau)``, with a seeded percentile
    bootstrap over rectangles.

    ``deltas`` ``[T, B]``: row ``t`` holds ``B`` rectangles' ``delta`` at ``taus[t]``. Column ``r``
    must be the same state (and sites) at every ``tau``, as :func:`draw_rectangles` with one seed
    gives, so the bootstrap resamples columns, keeping each rectangle's ``T`` values together.
    Slope ``-1`` is pure ``1 / tau`` scaling (exact on fixed rectangles).
    """
    d = np.asarray(deltas.cpu() if isinstance(deltas, Tensor) else deltas, dtype=np.float64)
    t = np.asarray(list(taus), dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != t.size or t.size < 2 or d.shape[1] < 2:
        raise ValueError(f"deltas must have shape [T, B] with T = len(taus) >= 2 and B >= 2, got "
                         f"{tuple(d.shape)} for {t.size} taus")
    for v in t:
        check_range("taus", float(v), 0.0, lo_open=True)
    if not (np.isfinite(d).all() and (d >= 0).all() and (d.mean(1) > 0).all()):
        raise ValueError("deltas must be finite, non-negative, with a positive mean at every tau")
    check_range("n_boot", n_boot, 100, None, integer=True)
    check_range("level", level, 0.0, 1.0, lo_open=True)
    lx = np.log(t) - np.log(t).mean()

    def slope(means: np.ndarray) -> np.ndarray:   # means [T, ...] -> slopes [...]
        ly = np.log(means)
        return np.tensordot(lx, ly - ly.mean(0), axes=(0, 0)) / (lx ** 2).sum()

    idx = np.random.default_rng(seed).integers(0, d.shape[1], size=(n_boot, d.shape[1]))
    reps = slope(d[:, idx].mean(-1))               # [n_boot]
    a = (1 - level) / 2
    return Estimate(float(slope(d.mean(1))), float(np.quantile(reps, a)), float(np.quantile(reps, 1 - a)),
                    int(d.shape[1]), level)


def delta_from_log_joint(lp_x: Tensor, lp_y: Tensor, lp_w: Tensor, lp_z: Tensor) -> Tensor:
    """The rectangle formula from joint log-probabilities of x=(a,b), y=(a',b), w=(a,b'), z=(a',b')
    (each ``[B]``) -> ``[B]``. For a true joint each bracket is a log-ratio of the joint, so this is
    zero up to rounding: the control that the formula itself does not manufacture a ``delta``."""
    lp = [t.double() for t in (lp_x, lp_y, lp_w, lp_z)]
    return ((lp[1] - lp[0]) + (lp[3] - lp[1]) - (lp[2] - lp[0]) - (lp[3] - lp[2])).abs()


@torch.inference_mode()
def ar_log_joint(ar: Any, ids: Tensor, *, prefix: list[int] | None = None) -> Tensor:
    """Joint log-probability of each content sequence under an autoregressive LM.

    ``ar`` is a :class:`tokendyn.models.LoadedAR`; ids ``[B, n]`` -> ``[B]`` float64
    ``sum_t log p(x_t | prefix, x_<t)``. ``prefix`` defaults to the tokenizer's BOS (or EOS) id so
    that the first content token is scored too.
    """
    if prefix is None:
        tok = ar.tokenizer
        first = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        prefix = [int(first)] if first is not None else []
    dev = next(ar.model.parameters()).device
    ids = ids.to(dev)
    pre = torch.tensor(prefix, dtype=ids.dtype, device=dev).expand(ids.shape[0], -1)
    full = torch.cat([pre, ids], 1)
    check_context(ar.model, full.shape[1], what=f"n={ids.shape[1]} tokens + a prefix of {len(prefix)}",
                  allowed="n + prefix", label=getattr(ar, "name", ""))
    logp = torch.log_softmax(ar.model(input_ids=full).logits.double(), -1)
    p0 = len(prefix)
    start = max(p0 - 1, 0)
    targets = full[:, start + 1:]
    picked = logp[:, start:-1].gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked.sum(1).cpu()


def ar_delta(ar: Any, x: Tensor, i: Tensor, j: Tensor, a_new: Tensor, b_new: Tensor) -> Tensor:
    """Rectangle ``delta`` of an autoregressive LM from the joint log-probabilities of the four
    full sequences (x ``[B, n]`` in the AR tokenizer's ids; sites and alternatives ``[B]``) -> ``[B]``.
    Raises ``ValueError`` if an alternative equals the current token."""
    _check_pair(x, i, j)
    _check_values(None, x, i, a_new, "a_new", "i")
    _check_values(None, x, j, b_new, "b_new", "j")
    y, w = _with(x, i, a_new), _with(x, j, b_new)
    z = _with(y, j, b_new)
    lp = ar_log_joint(ar, torch.cat([x, y, w, z])).chunk(4)
    return delta_from_log_joint(*lp)


def draw_sites(b: int, n: int, gen: torch.Generator, gap: int | None = None) -> tuple[Tensor, Tensor]:
    """Site pairs ``([b], [b])`` with ``i != j``: uniform over ordered pairs, or ``|i - j| = gap``."""
    check_range("b", b, 0, integer=True)
    check_range("n", n, 2, integer=True)  # two distinct sites
    if gap is None:
        i = torch.randint(n, (b,), generator=gen)
        j = (i + 1 + torch.randint(n - 1, (b,), generator=gen)) % n
        return i, j
    check_range("gap", gap, 1, n - 1, integer=True)
    lo = torch.randint(n - gap, (b,), generator=gen)
    flip = torch.rand(b, generator=gen) < 0.5
    return torch.where(flip, lo + gap, lo), torch.where(flip, lo, lo + gap)


def draw_rectangles(model: ConditionalModel, x: Tensor, *, protocol: str = "model", tau: float = 1.0,
                    seed: int = 0, gap: int | None = None) -> Rectangles:
    """A random rectangle per row of x ``[B, n]`` (``n >= 2``): sites by :func:`draw_sites`,
    alternatives ``a' != x_i`` and ``b' != x_j`` by ``protocol`` (``"model"``: from
    ``p_tau(. | x_-site)``; ``"uniform"``: uniform over the support). Seeded, CPU generator."""
    return _draw(model, x, protocol, tau, seed, gap)[0]


def draw_interactions(model: ConditionalModel, x: Tensor, *, protocol: str = "model", tau: float = 1.0,
                      seed: int = 0, gap: int | None = None) -> tuple[Rectangles, Tensor, Tensor]:
    """:func:`draw_rectangles` then :func:`interactions` at the same ``tau``, in ``4 B`` masked
    evaluations instead of ``6 B`` (the logits that choose the alternatives are the unflipped ones
    the interactions need). x ``[B, n]`` -> ``(rectangles, I_i [B], I_j [B])``; the same rectangles
    as :func:`draw_rectangles` with the same arguments, and the same ``I`` up to float rounding of
    the model's batched evaluations."""
    r, L = _draw(model, x, protocol, tau, seed, gap)
    b = x.shape[0]
    w, y = _with(x, r.j, r.b2), _with(x, r.i, r.a2)   # (a, b'), (a', b)
    L2 = model.site_logits(torch.cat([w, y]), torch.cat([r.i, r.j])).to(x.device)
    I_i, I_j = _interactions_from(x, r.i, r.j, r.a2, r.b2, L[:b], L2[:b], L[b:], L2[b:], tau)
    return r, I_i, I_j


def _draw(model: ConditionalModel, x: Tensor, protocol: str, tau: float, seed: int,
          gap: int | None) -> tuple[Rectangles, Tensor]:
    """The rectangles of :func:`draw_rectangles` and the logits ``[2 B, V]`` that chose them:
    site ``i`` of ``x`` (rows ``:B``), then site ``j`` (rows ``B:``), on ``x``'s device."""
    check_states(model, x, "x")
    check_choice("protocol", protocol, PROTOCOLS)
    check_tau(tau)
    b, n = x.shape
    if n < 2:
        raise ValueError("x must have at least 2 sites for a rectangle")
    gen = make_generator(seed, "cpu")
    i, j = draw_sites(b, n, gen, gap)
    i, j = i.to(x.device), j.to(x.device)
    L = model.site_logits(torch.cat([x, x]), torch.cat([i, j]))
    Lc = L.cpu()
    a2 = choose_alternatives(Lc[:b], _gather(x, i).cpu(), 1, protocol, tau, gen)[:, 0]
    b2 = choose_alternatives(Lc[b:], _gather(x, j).cpu(), 1, protocol, tau, gen)[:, 0]
    return Rectangles(i=i, j=j, a2=a2.to(x.device), b2=b2.to(x.device)), L.to(x.device)


def draw_grid(model: ConditionalModel, x: Tensor, i: Tensor, j: Tensor, k: int, *,
              protocol: str = "model", tau: float = 1.0, seed: int = 0) -> tuple[Tensor, Tensor]:
    """``K = k`` values per site for :func:`arnold_press`: the current token first, then ``k - 1``
    distinct alternatives by ``protocol`` -> ``(a_values [B, k], b_values [B, k])``."""
    check_states(model, x, "x")
    _check_pair(x, i, j)
    check_range("k", k, 2, integer=True)
    check_choice("protocol", protocol, PROTOCOLS)
    check_tau(tau)
    gen = make_generator(seed, "cpu")
    b = x.shape[0]
    a, bb = _gather(x, i), _gather(x, j)
    L = model.site_logits(torch.cat([x, x]), torch.cat([i, j])).cpu()
    a_alt = choose_alternatives(L[:b], a.cpu(), k - 1, protocol, tau, gen).to(x.device)
    b_alt = choose_alternatives(L[b:], bb.cpu(), k - 1, protocol, tau, gen).to(x.device)
    return torch.cat([a[:, None], a_alt], 1), torch.cat([bb[:, None], b_alt], 1)


def arnold_press(model: ConditionalModel, x: Tensor, i: Tensor, j: Tensor, a_values: Tensor,
                 b_values: Tensor, *, tau: float = 1.0) -> ArnoldPressResult:
    """The K x K compatibility grid per row: x ``[B, n]``, sites ``i``, ``j`` ``[B]``, values
    ``a_values``, ``b_values`` ``[B, K]`` (distinct per row, in the support) -> :class:`ArnoldPressResult`.

    ``2 K`` masked evaluations per row: ``l_i(. | b_l)`` for each ``l`` and ``l_j(. | a_k)`` for each ``k``.
    """
    check_states(model, x, "x")
    _check_pair(x, i, j)
    check_tau(tau)
    b, n = x.shape
    for name, v in (("a_values", a_values), ("b_values", b_values)):
        if not isinstance(v, Tensor):
            raise TypeError(f"{name} must be an integer torch.Tensor [B, K], got {type(v).__name__}")
    K = a_values.shape[1] if a_values.dim() == 2 else 0
    if a_values.shape != (b, K) or b_values.shape != (b, K) or K < 2:
        raise ValueError(f"a_values and b_values must both have shape [B, K] with K >= 2, got "
                         f"{tuple(a_values.shape)} and {tuple(b_values.shape)}")
    for name, v, site in (("a_values", a_values, "i"), ("b_values", b_values, "j")):
        _check_values(model, x, i if site == "i" else j, v, name, site)
        if b and bool((v.sort(-1).values.diff(dim=-1) == 0).any()):
            raise ValueError(f"{name} must hold K distinct ids in every row")
    rows = torch.arange(b, device=x.device)
    xb = x[:, None].repeat(1, K, 1)                 # [B, K, n]
    with_b = xb.clone()
    ks = torch.arange(K, device=x.device)[None]
    with_b[rows[:, None], ks, j[:, None].expand(b, K)] = b_values.to(x.dtype)  # row l holds b_l
    with_a = xb.clone()
    with_a[rows[:, None], ks, i[:, None].expand(b, K)] = a_values.to(x.dtype)  # row k holds a_k
    sites = torch.cat([i[:, None].expand(b, K), j[:, None].expand(b, K)]).reshape(-1)
    L = model.site_logits(torch.cat([with_b.reshape(b * K, n), with_a.reshape(b * K, n)]), sites)
    logp = torch.log_softmax(L.double() / tau, -1)
    Li, Lj = logp[: b * K].reshape(b, K, -1), logp[b * K:].reshape(b, K, -1)
    li = Li.gather(-1, a_values[:, None, :].expand(b, K, K))   # [B, l, k] = log p_i(a_k | b_l)
    lj = Lj.gather(-1, b_values[:, None, :].expand(b, K, K))   # [B, k, l] = log p_j(b_l | a_k)
    if not bool(torch.isfinite(li).all() and torch.isfinite(lj).all()):
        raise ValueError("a grid value is outside the model's support (logit -inf)")
    M = li.transpose(1, 2) - lj                                 # [B, k, l]
    R = M - M.mean(1, keepdim=True) - M.mean(2, keepdim=True) + M.mean((1, 2), keepdim=True)
    # contrast over all pairs (k, k') x (l, l'): M[k',l'] - M[k',l] - M[k,l'] + M[k,l]
    C = (M[:, :, None, :, None] - M[:, :, None, None, :]
         - M[:, None, :, :, None] + M[:, None, :, None, :])
    proper = (ks[0][:, None] != ks[0][None, :]).double()            # k != k' (and l != l')
    minors = proper[:, :, None, None] * proper[None, None]          # [k, k', l, l']
    rms_delta = ((C.pow(2) * minors).flatten(1).sum(1) / minors.sum()).sqrt()
    return ArnoldPressResult(log_ratio=M, residual=R, rms=R.pow(2).mean((1, 2)).sqrt(),
                             max_delta=C.abs().flatten(1).max(1).values, rms_delta=rms_delta)


def draw_rectangles_uniform(vocab_size: int, excluded: list[int], x: Tensor, *, seed: int = 0,
                            gap: int | None = None) -> Rectangles:
    """Random rectangles for a model without masked conditionals (the autoregressive control):
    sites by :func:`draw_sites`, alternatives uniform over ``[0, vocab_size)`` minus ``excluded``
    (special ids) and minus the current token. x ``[B, n]`` -> :class:`Rectangles`."""
    check_range("vocab_size", vocab_size, 2, integer=True)
    b, n = x.shape
    if n < 2:
        raise ValueError("x must have at least 2 sites for a rectangle")
    gen = make_generator(seed, "cpu")
    i, j = draw_sites(b, n, gen, gap)
    L = torch.zeros(b, vocab_size)
    L[:, [e for e in excluded if 0 <= e < vocab_size]] = float("-inf")
    xc = x.cpu()
    a2 = choose_alternatives(L, _gather(xc, i), 1, "uniform", 1.0, gen)[:, 0]
    b2 = choose_alternatives(L, _gather(xc, j), 1, "uniform", 1.0, gen)[:, 0]
    dev = x.device
    return Rectangles(i=i.to(dev), j=j.to(dev), a2=a2.to(dev), b2=b2.to(dev))
