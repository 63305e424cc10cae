"""The tube law, measured: readout margins, tube mass, oracle roll-in, structured vs isotropic residuals.

Paper 2, Theorem 3 (readout-calibrated non-commitment): when the terminal step of a deterministic
generator outputs the posterior mean, the probability that the decoded token differs from the clean
one grows linearly in the effective noise scale ``s`` as ``s -> 0``, in proportion to the latent mass
inside an ``O(s)`` tube around the readout's decision boundaries. For a linear readout
``logits = W z + c`` the distance of ``z`` (decoded as ``a``) to the boundary with ``b`` is

    ((w_a - w_b) . z + c_a - c_b) / ||w_a - w_b||,

the margin ``m(z)`` is the smallest over ``b != a`` and the tube mass is ``F(r) = P(m(z) < r)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..core.checks import check_range
from ..core.stats import Estimate
from .dabi import isotropic_like, residual_dabi
from .flow import VelocityNet, noise_scale, noise_to
from .samplers import ode_sample, posterior_mean, terminal_start


@torch.no_grad()
def readout_margins(weight: torch.Tensor, bias: torch.Tensor, z: torch.Tensor,
                    chunk: int = 1024) -> torch.Tensor:
    """Euclidean distance of each latent to the nearest decision boundary of a linear argmax readout.

    ``weight`` ``[V, d]``, ``bias`` ``[V]``, ``z`` ``[..., d]`` -> margins ``[...]`` (>= 0).
    """
    for name, t in (("weight", weight), ("bias", bias), ("z", z)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise TypeError(f"{name} must be a float torch.Tensor, got "
                            f"{t.dtype if isinstance(t, torch.Tensor) else type(t).__name__}")
    if z.dtype != weight.dtype:
        raise TypeError(f"z ({z.dtype}) and weight ({weight.dtype}) must share a dtype")
    if weight.dim() != 2 or bias.shape != weight.shape[:1] or z.shape[-1] != weight.shape[1]:
        raise ValueError(f"shapes do not fit a linear readout: weight {tuple(weight.shape)}, "
                         f"bias {tuple(bias.shape)}, z {tuple(z.shape)}")
    flat = z.reshape(-1, z.shape[-1])
    sq = (weight * weight).sum(1)  # [V]
    out = []
    for zc in flat.split(chunk):
        logits = zc @ weight.T + bias  # [n, V]
        a = logits.argmax(1)
        gap = logits.gather(1, a[:, None]) - logits  # [n, V], >= 0
        wa = weight[a]  # [n, d]
        dist2 = (sq[a][:, None] + sq[None, :] - 2 * wa @ weight.T).clamp_min(1e-12)
        d = gap / dist2.sqrt()
        d.scatter_(1, a[:, None], float("inf"))
        out.append(d.min(1).values)
    return torch.cat(out).reshape(z.shape[:-1])


def tube_mass(margins: torch.Tensor, r: torch.Tensor | Sequence[float]) -> torch.Tensor:
    """``F(r)``: the fraction of latents closer than ``r`` to a boundary. ``margins`` ``[...]``, ``r`` ``[R]`` -> ``[R]``."""
    m = margins.flatten().double()
    r = torch.as_tensor(r, dtype=torch.float64)
    return (m[None, :] < r[:, None]).double().mean(1)


def flip_rate(reference: torch.Tensor, decoded: torch.Tensor) -> float:
    """Fraction of positions where ``decoded`` differs from ``reference`` (same shape, int ids)."""
    if reference.shape != decoded.shape:
        raise ValueError(f"shapes differ: {tuple(reference.shape)} vs {tuple(decoded.shape)}")
    return float((reference != decoded).double().mean())


def unit(v: torch.Tensor) -> torch.Tensor:
    """Each vector of ``v`` ``[..., d]`` scaled to norm 1 (a zero vector stays zero) -> ``[..., d]``."""
    return v / v.norm(dim=-1, keepdim=True).clamp_min(1e-12)


@torch.no_grad()
def residual_flips(decode: Callable[[torch.Tensor], torch.Tensor], reference: torch.Tensor,
                   x1: torch.Tensor, x_hat: torch.Tensor, generator: torch.Generator) -> dict[str, float]:
    """Flip rates of the structured residual ``x_hat - x1`` and of a norm-matched isotropic one.

    ``x1``/``x_hat`` ``[B, L, d]``; ``decode`` maps latents to ids ``[B, L]``; ``reference`` ``[B, L]``.
    Returns ``{"structured", "isotropic", "residual_rms"}``; ``structured`` is the flip rate of
    ``x_hat`` itself.
    """
    residual = x_hat - x1
    return {"structured": flip_rate(reference, decode(x_hat)),
            "isotropic": flip_rate(reference, decode(x1 + isotropic_like(residual, generator))),
            "residual_rms": float(residual.pow(2).mean().sqrt())}


@torch.no_grad()
def oracle_terminal(net: VelocityNet, x1: torch.Tensor, steps: int, generator: torch.Generator
                    ) -> tuple[torch.Tensor, float]:
    """Oracle roll-in of a ``steps``-step generator from noise, up to its terminal step.

    The state before the last step is the true noisy latent at ``t_{K-1} = 1 - 1/K`` (clean ``x1``
    ``[B, L, d]`` noised there), and the generator's terminal step maps it to the posterior mean.
    Returns ``(x1_hat [B, L, d], s)`` with ``s = s(t_{K-1}) = 1 / (K - 1)``; ``K = 1`` is the single
    step from pure noise (``t = 0``, ``s = inf``).
    """
    check_range("steps", steps, 1, None, integer=True)
    t = terminal_start(0.0, steps)
    xt, _ = noise_to(x1, t, generator)
    return posterior_mean(net, xt, t), (float("inf") if t == 0 else float(noise_scale(t)))


@dataclass(frozen=True)
class TerminalFlips:
    """Flips at the oracle terminal step of a ``K``-step generator (:func:`terminal_flips`).

    ``structured``: the generator's output ``x1_hat`` decoded against the clean decode;
    ``isotropic``: ``x1`` plus an isotropic residual of the same norm at every position. Rates carry
    a bootstrap interval over sequences (tokens of one sequence are not independent); ``ratio`` is
    structured over isotropic flips with the isotropic count floored at one token (so with no
    isotropic flip it is a lower bound, ``ratio_is_bound``). ``k_*`` are the flipped tokens behind
    each rate, out of ``n_tokens`` in ``n_sequences`` sequences.
    """

    K: int
    s: float
    structured: Estimate
    isotropic: Estimate
    ratio: Estimate
    k_structured: int
    k_isotropic: int
    n_tokens: int
    n_sequences: int
    residual_rms: float

    @property
    def ratio_is_bound(self) -> bool:
        return self.k_isotropic == 0


def sequence_bootstrap(cs: np.ndarray, ci: np.ndarray, tokens: int | np.ndarray, n_boot: int, level: float, seed: int
                       ) -> tuple[Estimate, Estimate, Estimate]:
    """Flip rates of per-sequence counts ``cs`` (structured) and ``ci`` (isotropic) ``[B]`` out of
    ``tokens`` per sequence (an int, or ``[B]`` when sequences count different tokens), and their
    ratio (``ci`` floored at one), with a paired percentile bootstrap over the ``B`` sequences
    -> (structured, isotropic, ratio)."""
    b = len(cs)
    tok = np.broadcast_to(np.asarray(tokens, dtype=float), (b,))
    idx = np.random.default_rng(seed).integers(0, b, size=(n_boot, b))
    s_rep, i_rep, n_rep = cs[idx].sum(1), ci[idx].sum(1), np.maximum(tok[idx].sum(1), 1)
    a = (1 - level) / 2
    n_tok = max(float(tok.sum()), 1.0)

    def est(value: float, reps: np.ndarray) -> Estimate:
        return Estimate(float(value), float(np.quantile(reps, a)), float(np.quantile(reps, 1 - a)), b, level)

    return (est(cs.sum() / n_tok, s_rep / n_rep), est(ci.sum() / n_tok, i_rep / n_rep),
            est(cs.sum() / max(ci.sum(), 1), s_rep / np.maximum(i_rep, 1)))


@torch.no_grad()
def terminal_flips(decode: Callable[[torch.Tensor], torch.Tensor], net: VelocityNet, x1: torch.Tensor,
                   reference: torch.Tensor, steps: Sequence[int], *, seed: int = 0, n_boot: int = 2000,
                   level: float = 0.95) -> list[TerminalFlips]:
    """Terminal flip rates of ``K``-step generators, one :class:`TerminalFlips` per ``K`` in ``steps``.

    ``x1`` ``[B, L, d]`` clean latents, ``reference`` ``[B, L]`` their clean decode, ``decode`` maps
    latents to ids. Each ``K`` draws its own noise and isotropic directions (generator seeded by
    ``(seed, K)``), so no two rows share a draw. Intervals: percentile bootstrap over the ``B``
    sequences (``n_boot`` resamples, seeded).
    """
    if x1.dim() != 3 or reference.shape != x1.shape[:2]:
        raise ValueError(f"x1 must be [B, L, d] and reference [B, L], got {tuple(x1.shape)} and "
                         f"{tuple(reference.shape)}")
    if x1.shape[0] < 2:
        raise ValueError(f"x1: a bootstrap over sequences needs B >= 2, got {x1.shape[0]}")
    for k in steps:
        check_range("steps", k, 1, None, integer=True)
    check_range("n_boot", n_boot, 100, None, integer=True)
    out = []
    for k in steps:
        g = torch.Generator().manual_seed(1_000_003 * seed + int(k))
        x_hat, s = oracle_terminal(net, x1, int(k), g)
        residual = x_hat - x1
        fs = (decode(x_hat) != reference).sum(1).cpu().numpy().astype(float)
        fi = (decode(x1 + isotropic_like(residual, g)) != reference).sum(1).cpu().numpy().astype(float)
        st, iso, ratio = sequence_bootstrap(fs, fi, x1.shape[1], n_boot, level, seed)
        out.append(TerminalFlips(int(k), s, st, iso, ratio, int(fs.sum()), int(fi.sum()), reference.numel(),
                                 x1.shape[0], float(residual.pow(2).mean().sqrt())))
    return out


def terminal_rows(model: str, flips: Sequence[TerminalFlips]) -> list[dict]:
    """The terminal-step table of one model: two rows per :class:`TerminalFlips` of ``flips`` (one
    per K), the ``"structured"`` and the ``"isotropic"`` residual, each with ``model``, ``K``, ``s``,
    ``residual``, its ``rate`` and interval (``lo``, ``hi``), its flipped tokens ``k`` out of ``n``,
    and the K's ``ratio`` (``ratio_lo``, ``ratio_hi``, ``bound``: a lower bound) and ``residual_rms``
    on both rows, so that either row alone carries the comparison."""
    rows = []
    for r in flips:
        shared = {"ratio": r.ratio.value, "ratio_lo": r.ratio.lo, "ratio_hi": r.ratio.hi,
                  "bound": r.ratio_is_bound, "residual_rms": r.residual_rms}
        for kind, est, k in (("structured", r.structured, r.k_structured), ("isotropic", r.isotropic, r.k_isotropic)):
            rows.append({"model": model, "K": r.K, "s": r.s, "residual": kind, "rate": est.value, "lo": est.lo,
                         "hi": est.hi, "k": k, "n": r.n_tokens, **shared})
    return rows


def terminal_fit(flips: Sequence[TerminalFlips], margins: torch.Tensor) -> dict:
    """The tube law fitted to terminal flips: ``kappa`` (:func:`fit_tube_constant` on the structured
    rates of ``flips`` with a finite ``s``; ``K = 1`` starts from pure noise, ``s`` infinite), the
    prediction ``F(kappa s)`` from the clean latents' ``margins`` ``[...]`` at each of those K
    (``predicted``: K -> rate) and its mean absolute miss of the measured rates (``mean_abs_error``)."""
    finite = [r for r in flips if np.isfinite(r.s)]
    measured = [r.structured.value for r in finite]
    kappa = fit_tube_constant(margins, [r.s for r in finite], measured)
    pred = predict_flips(margins, [r.s for r in finite], kappa)
    return {"kappa": kappa, "mean_abs_error": float(np.mean(np.abs(pred - measured))),
            "predicted": {r.K: float(p) for r, p in zip(finite, pred)}}


@torch.no_grad()
def terminal_dabi(net: VelocityNet, x1: torch.Tensor, loss: Callable[[torch.Tensor], float], steps: Sequence[int], *,
                  seed: int = 0) -> dict[int, float]:
    """DABI (:func:`~.dabi.residual_dabi`) of the oracle terminal residual of each ``K``-step generator
    in ``steps`` on clean latents ``x1`` ``[B, L, d]``, under the decoder's ``loss`` -> K -> DABI. The
    terminal step's noise for K is drawn from a generator seeded ``seed + K`` and the isotropic
    comparison from one seeded ``seed + 100 + K``, so every K has draws of its own."""
    out = {}
    for k in steps:
        x_hat, _ = oracle_terminal(net, x1, k, torch.Generator().manual_seed(seed + k))
        out[k] = residual_dabi(loss, x1, x_hat - x1, torch.Generator().manual_seed(seed + 100 + k))
    return out


@torch.no_grad()
def rollin_curve(net: VelocityNet, x1: torch.Tensor,
                 metric: Callable[[torch.Tensor], float | dict[str, float]],
                 t0s: Sequence[float], steps: Sequence[int], *, method: str = "euler",
                 seed: int = 0) -> list[dict]:
    """Noise clean latents ``x1`` ``[B, L, d]`` to each ``t0``, integrate the ODE with each K, score.

    Every (K, ``t0``) draws its own noise (one generator seeded by ``seed``, drawn in order), so
    no collapse across K is built in by a shared draw. ``metric(x1_hat)`` scores the terminal
    latents (a flip rate for text, a pixel error for images). One row per (K, t0): ``K``, ``t0``,
    ``s_start = s(t0)``, ``t_terminal``, ``s = s(t_terminal)`` (the effective noise scale of the
    terminal step) and ``value`` (or, when ``metric`` returns a dict, its keys).
    """
    for t0 in t0s:
        check_range("t0", t0, 0, 1, lo_open=True)
        if t0 >= 1:
            raise ValueError(f"t0={t0!r} is out of range: allowed (0, 1)")
    for k in steps:
        check_range("steps", k, 1, None, integer=True)
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for k in steps:
        for t0 in t0s:
            eps = torch.randn(x1.shape, generator=gen, dtype=x1.dtype).to(x1.device)
            x_hat = ode_sample(net, t0 * x1 + (1 - t0) * eps, t0, k, method)
            tt = terminal_start(t0, k)
            v = metric(x_hat)
            rows.append({"K": int(k), "t0": float(t0), "s_start": float(noise_scale(float(t0))),
                         "t_terminal": tt, "s": float(noise_scale(tt)),
                         **({k2: float(x) for k2, x in v.items()} if isinstance(v, dict) else {"value": float(v)})})
    return rows


def fit_tube_constant(margins: torch.Tensor, s: Sequence[float], flips: Sequence[float]) -> float:
    """The one constant ``kappa`` of the tube-law prediction ``flip(s) ~ F(kappa * s)``.

    Least squares over the given points, by a log-spaced search then a local refinement.
    """
    s = np.asarray(s, dtype=float)
    f = np.asarray(flips, dtype=float)
    if s.shape != f.shape or s.size == 0:
        raise ValueError("s and flips must be non-empty and of equal length")
    m = np.sort(margins.flatten().double().numpy())

    def err(k: float) -> float:
        pred = np.searchsorted(m, k * s, side="left") / m.size
        return float(((pred - f) ** 2).sum())

    grid = np.logspace(-3, 3, 241)
    best = grid[int(np.argmin([err(k) for k in grid]))]
    fine = best * np.logspace(-0.03, 0.03, 61)
    return float(fine[int(np.argmin([err(k) for k in fine]))])


def predict_flips(margins: torch.Tensor, s: Sequence[float], kappa: float) -> np.ndarray:
    """Tube-law prediction ``F(kappa * s)`` for each ``s``: ``[len(s)]``."""
    return tube_mass(margins, torch.as_tensor(np.asarray(s, dtype=float) * kappa)).numpy()


def slope_through_origin(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Least-squares ``y ~ a x`` (a line through 0): returns ``(a, R^2)``; the linearity check as s -> 0."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    a = float((x * y).sum() / (x * x).sum())
    ss = float(((y - y.mean()) ** 2).sum())
    return a, (1.0 - float(((y - a * x) ** 2).sum()) / ss) if ss > 0 else float("nan")


def curve_spread(curves: dict[int, tuple[Sequence[float], Sequence[float]]], grid: Sequence[float]) -> float:
    """How far apart curves ``{K: (x, y)}`` are: max over ``grid`` of (max_K y - min_K y) / mean_K y.

    Each curve is interpolated linearly in log x; grid points outside any curve's range are skipped.
    0 means a perfect collapse onto one curve.
    """
    vals = []
    for g in grid:
        ys = []
        for x, y in curves.values():
            x, y = np.asarray(x, float), np.asarray(y, float)
            order = np.argsort(x)
            x, y = x[order], y[order]
            if not x[0] <= g <= x[-1]:
                break
            ys.append(np.interp(np.log(g), np.log(x), y))
        else:
            mean = float(np.mean(ys))
            if mean > 0:
                vals.append((max(ys) - min(ys)) / mean)
    if not vals:
        raise ValueError("no grid point lies inside every curve's range")
    return float(max(vals))


def flip_score(decode: Callable[[torch.Tensor], torch.Tensor], reference: torch.Tensor, x1: torch.Tensor,
               generator: torch.Generator) -> Callable[[torch.Tensor], dict[str, float]]:
    """The :func:`rollin_curve` metric that scores terminal latents ``x_hat`` by
    :func:`residual_flips` against the clean ``x1`` ``[B, L, d]`` and ``reference`` ids ``[B, L]``:
    structured and isotropic flip rates and the residual's RMS. ``generator`` draws the isotropic
    directions, one draw per call."""
    def score(x_hat: torch.Tensor) -> dict[str, float]:
        return residual_flips(decode, reference, x1, x_hat, generator)
    return score


def cross_entropy_loss(logits: Callable[[torch.Tensor], torch.Tensor],
                       reference: torch.Tensor) -> Callable[[torch.Tensor], float]:
    """The text decoder's :func:`dabi` loss: mean cross-entropy of the readout ``logits(z)``
    ``[B, L, V]`` against the ``reference`` ids ``[B, L]``."""
    @torch.no_grad()
    def loss(z: torch.Tensor) -> float:
        return float(torch.nn.functional.cross_entropy(logits(z).flatten(0, 1), reference.flatten()))
    return loss


def pixel_error(decode: Callable[[torch.Tensor], torch.Tensor], clean: torch.Tensor, *,
                root: bool = True) -> Callable[[torch.Tensor], float]:
    """The image decoder's error against its ``clean`` decode ``[B, C, H, W]``: the pixel RMS error
    of ``decode(z)`` (``root=False``: the mean squared error, the :func:`dabi` loss)."""
    @torch.no_grad()
    def error(z: torch.Tensor) -> float:
        mse = (decode(z) - clean).pow(2).mean()
        return float(mse.sqrt() if root else mse)
    return error
