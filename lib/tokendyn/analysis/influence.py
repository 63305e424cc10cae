"""High-temperature theory: influence coefficients, Dobrushin's alpha and its bound on mixing.

High temperature. The influence of site ``j`` on site ``i`` is
``c_ij(tau) = sup_{x, y differing only at j} TV(p_tau(. | x_-i), p_tau(. | y_-i))`` and
``alpha(tau) = max_i sum_j c_ij(tau)``. If ``alpha < 1`` path coupling gives
``t_mix(eps) <= n log(n / eps) / (1 - alpha)`` (:func:`dobrushin_bound`).

- :func:`exact_influence` enumerates every state of a toy model: the true sup.
- :func:`estimate_influence` takes the max over sampled contexts and sampled alternatives at
  ``j``: a **lower bound** on the sup, so ``alpha_hat`` crossing 1 says where Dobrushin's condition
  fails for sure, not where it holds.

Low temperature (margins, leave probabilities, dwell times) lives in :mod:`tokendyn.analysis.traps`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.checks import check_choice, check_range
from ..mcmc.conditional import ConditionalModel, check_tokens
from ..mcmc.fill import all_site_logits
from ..mcmc.sampling import PROTOCOLS, check_tau, choose_alternatives, make_generator, probabilities
from ..mcmc.toy import PairwiseConditional, all_states


@dataclass(frozen=True)
class InfluenceEstimate:
    """``c_max`` ``[T, n, n]``: max TV over the sampled (context, alternative) pairs, the lower
    bound on ``c_ij(tau)``; ``c_mean`` ``[T, n, n]``: the mean over them; ``taus`` ``[T]``;
    ``c_by_context`` ``[C, T, n, n]``: the max over each context's alternatives (None for exact
    influence), from which resampling contexts gives the bound's spread."""

    c_max: Tensor
    c_mean: Tensor
    taus: Tensor
    c_by_context: Tensor | None = None

    @property
    def alpha_hat(self) -> Tensor:
        """``[T]`` ``max_i sum_j c_max[i, j]``: a lower bound on ``alpha(tau)``."""
        return alpha(self.c_max)


def alpha(c: Tensor) -> Tensor:
    """Dobrushin's ``alpha = max_i sum_j c_ij`` of influence matrices ``[..., n, n]`` -> ``[...]``."""
    return c.sum(-1).amax(-1)


def dobrushin_bound(alpha_value: float, n: int, eps: float = 0.25) -> float:
    """``n log(n / eps) / (1 - alpha)`` steps (random scan); ``inf`` when ``alpha >= 1``."""
    check_range("alpha_value", alpha_value, 0)
    check_range("n", n, 1, integer=True)
    check_range("eps", eps, 0, 1, lo_open=True)
    return math.inf if alpha_value >= 1 else n * math.log(n / eps) / (1 - alpha_value)


def tv(p: Tensor, q: Tensor) -> Tensor:
    """Total variation between distributions ``[..., V]`` -> ``[...]``."""
    return 0.5 * (p - q).abs().sum(-1)


def _check_taus(taus: Sequence[float]) -> Tensor:
    if isinstance(taus, (int, float)) or not hasattr(taus, "__iter__"):
        raise TypeError(f"taus must be a sequence of temperatures, got {type(taus).__name__}: "
                        f"pass [{taus!r}] for one")
    taus = [float(t) if isinstance(t, Tensor) else t for t in taus]
    if not taus:
        raise ValueError("taus must not be empty")
    for t in taus:
        check_tau(t)
    return torch.tensor(taus, dtype=torch.float64)


def exact_influence(model: PairwiseConditional, taus: Sequence[float]) -> Tensor:
    """The exact ``c_ij(tau)`` of a toy model by enumerating all ``q^n`` states -> ``[T, n, n]``."""
    taus_t = _check_taus(taus)
    n, q = model.n, model.q
    S = all_states(n, q)
    N = len(S)
    out = torch.zeros(len(taus_t), n, n, dtype=torch.float64)
    base = torch.stack([model.site_logits(S, torch.full((N,), i)) for i in range(n)])  # [n, N, q]
    for j in range(n):
        for v in range(q):
            y = S.clone()
            y[:, j] = v
            for i in range(n):
                if i == j:
                    continue
                ly = model.site_logits(y, torch.full((N,), i))
                for t, tau in enumerate(taus_t.tolist()):
                    d = tv(probabilities(base[i], tau), probabilities(ly, tau)).max()
                    out[t, i, j] = torch.maximum(out[t, i, j], d)
    return out


def estimate_influence(model: ConditionalModel, contexts: Tensor, taus: Sequence[float], *,
                       n_alt: int = 2, protocol: str = "uniform", seed: int = 0,
                       chunk: int = 256) -> InfluenceEstimate:
    """Sampled influence ``c_ij(tau)`` over contexts ``[C, n]`` and a grid ``taus``.

    For each context ``x`` and site ``j``, ``n_alt`` alternatives ``y_j != x_j`` (``protocol``
    ``"uniform"`` over the support, or ``"model"`` from ``p_1(. | x_-j)``); for every ``i != j`` the
    TV between ``p_tau(. | x_-i)`` and ``p_tau(. | y_-i)``. Logits do not depend on ``tau``, so
    one pass of ``C n (1 + n_alt (n - 1))`` masked evaluations serves the whole grid.
    """
    check_tokens(model, contexts, "contexts")
    taus_t = _check_taus(taus)
    check_range("n_alt", n_alt, 1, integer=True)
    check_choice("protocol", protocol, PROTOCOLS)
    check_range("chunk", chunk, 1, integer=True)
    C, n = contexts.shape
    if n < 2:
        raise ValueError("contexts must have at least 2 sites")
    dev = contexts.device
    gen = make_generator(seed, "cpu")
    sites = torch.arange(n, device=dev)
    flat_x = contexts.repeat_interleave(n, 0)                     # [C n, n], row (c, s)
    flat_s = sites.repeat(C)
    base = model.site_logits(flat_x, flat_s).reshape(C, n, -1)    # [C, i, V]
    alts = choose_alternatives(base.reshape(C * n, -1).cpu(), flat_x[torch.arange(C * n), flat_s].cpu(),
                               n_alt, protocol, 1.0, gen).reshape(C, n, n_alt).to(dev)  # [C, j, a]
    # Every (c, j, a, i != j) row: context c with alts[c, j, a] at j, evaluated at site i.
    cc, jj, aa, ii = torch.meshgrid(torch.arange(C), torch.arange(n), torch.arange(n_alt),
                                    torch.arange(n), indexing="ij")
    keep = ii != jj
    cc, jj, aa, ii = (t[keep].to(dev) for t in (cc, jj, aa, ii))
    T = len(taus_t)
    c_ctx = torch.zeros(T, C, n, n, dtype=torch.float64, device=dev)
    c_sum = torch.zeros(T, n, n, dtype=torch.float64, device=dev)
    for s in range(0, len(cc), chunk):
        c_, j_, a_, i_ = cc[s:s + chunk], jj[s:s + chunk], aa[s:s + chunk], ii[s:s + chunk]
        y = contexts[c_].clone()
        y[torch.arange(len(c_), device=dev), j_] = alts[c_, j_, a_]
        ly = model.site_logits(y, i_)
        lx = base[c_, i_]
        for t, tau in enumerate(taus_t.tolist()):
            d = tv(probabilities(lx, tau), probabilities(ly, tau))
            flat = (i_ * n + j_)
            c_ctx[t].view(-1).scatter_reduce_(0, c_ * (n * n) + flat, d, reduce="amax")
            c_sum[t].view(-1).index_add_(0, flat, d)
    return InfluenceEstimate(c_max=c_ctx.amax(1).cpu(), c_mean=(c_sum / (C * n_alt)).cpu(), taus=taus_t,
                             c_by_context=c_ctx.transpose(0, 1).cpu())


def alpha_by_contexts(est: InfluenceEstimate) -> Tensor:
    """``[C, T]``: ``alpha_hat`` from the first ``k + 1`` contexts in row ``k``. A sampled lower
    bound only grows with more contexts; a last row still climbing says the bound has not settled."""
    if est.c_by_context is None:
        raise ValueError("est has no per-context influence (it was not sampled by estimate_influence)")
    return alpha(torch.cummax(est.c_by_context, dim=0).values)


def crossing_interval(est: InfluenceEstimate, *, level: float = 0.95, n_boot: int = 1000,
                      seed: int = 0) -> tuple[float, float]:
    """Percentile interval of the tau where ``alpha_hat`` falls through 1, over bootstrap
    resamples of the contexts (with replacement). A resample whose bound never falls below 1 on the
    grid counts as ``inf``, one below 1 everywhere as 0. It measures how much the sampled bound
    depends on which contexts were drawn, not how far it is from the true ``alpha``."""
    import numpy as np

    if est.c_by_context is None:
        raise ValueError("est has no per-context influence (it was not sampled by estimate_influence)")
    check_range("level", level, 0.0, 1.0, lo_open=True)
    check_range("n_boot", n_boot, 100, None, integer=True)
    C = est.c_by_context.shape[0]
    rng = np.random.default_rng(seed)
    out = np.empty(n_boot)
    for b in range(n_boot):
        a = alpha(est.c_by_context[torch.as_tensor(rng.integers(0, C, C))].amax(0))
        x = crossing(est.taus, a)
        out[b] = x if not math.isnan(x) else (math.inf if float(a[-1]) >= 1 else 0.0)
    lo, hi = np.quantile(out, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return float(lo), float(hi)


def _check_curve(taus: Sequence[float] | Tensor, values: Tensor) -> None:
    """A curve ``values`` ``[T]`` over ``taus`` ``[T]`` with ``T >= 1``."""
    v = torch.as_tensor(values)
    if v.dim() != 1 or len(taus) != v.shape[0] or v.shape[0] < 1:
        raise ValueError(f"taus and values must be two [T] sequences with T >= 1, got {len(taus)} "
                         f"taus and values of shape {tuple(v.shape)}")


def crossing(taus: Tensor, values: Tensor, level: float = 1.0) -> float:
    """The ``tau`` where ``values`` ``[T]`` (over increasing ``taus`` ``[T]``) last falls through
    ``level``, by log-linear interpolation; ``nan`` if it never crosses."""
    _check_curve(taus, values)
    above = (torch.as_tensor(values) >= level).tolist()
    for k in range(len(above) - 1, 0, -1):
        if above[k - 1] and not above[k]:
            t0, t1 = math.log(taus[k - 1]), math.log(taus[k])
            v0, v1 = float(values[k - 1]), float(values[k])
            return math.exp(t0 + (v0 - level) / (v0 - v1) * (t1 - t0))
    return math.nan


def crossing_bracket(taus: Sequence[float] | Tensor, values: Tensor, level: float = 1.0) -> tuple[float, float]:
    """The two grid temperatures between which ``values`` last falls through ``level``.

    ``(0, taus[0])`` when already below at the first point, ``(taus[-1], inf)`` when never below:
    the resolution of the grid is the honest interval on a crossing read off it.
    """
    _check_curve(taus, values)
    t = [float(v) for v in taus]
    above = (torch.as_tensor(values) >= level).tolist()
    if not above[-1]:
        for k in range(len(above) - 1, 0, -1):
            if above[k - 1]:
                return t[k - 1], t[k]
        return 0.0, t[0]
    return t[-1], math.inf
