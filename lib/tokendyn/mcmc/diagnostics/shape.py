"""Which growth law do coupling times follow: ``C n ln n`` or ``C n^p``? A censored likelihood answer.

A slope of log T on log(n ln n) cannot tell the two apart over short ranges of n: between n = 8
and 128, ``n^1.5`` is ``(n ln n)^1.15``, inside any band wide enough for a noisy slope. The
likelihood of the raw times can: each shape ``g(n)`` is fitted as an accelerated-failure-time
model, ``log T = log C + log g(n) + sigma * eps`` with standard normal ``eps``, right-censored at
each run's cap (a chain pair still apart at the budget only says ``T > cap``). Two shapes with the
same free parameters (``C``, ``sigma``) are compared by their maximised log-likelihoods; the free
exponent ``p`` of ``n^p`` gets a profile-likelihood interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy import optimize, special

from ...core.checks import check_range
from ..censored import CensoredTimes

__all__ = ["ShapeComparison", "censored_lognormal_fit", "compare_shapes", "shapes_by_model", "shape_words"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def censored_lognormal_fit(log_t: np.ndarray, log_g: np.ndarray, censored: np.ndarray) -> tuple[float, float, float]:
    """Maximum likelihood of ``log T = mu + log g + sigma * eps`` with right-censoring.

    ``log_t`` [N] the log times (the log cap where ``censored``), ``log_g`` [N] the shape's log at
    each time's length, ``censored`` [N] bool. Returns ``(loglik, mu, sigma)``: the maximised log
    density of the log times (observed: normal log-density; censored: log survival), ``mu`` the
    fitted ``log C``. Needs at least two uncensored times that differ.
    """
    y = np.asarray(log_t, np.float64) - np.asarray(log_g, np.float64)
    c = np.asarray(censored, bool)
    obs = y[~c]
    if obs.size < 2 or float(np.ptp(obs)) == 0.0:
        raise ValueError(f"censored_lognormal_fit: needs two distinct uncensored times, got {obs.size}")
    cen = y[c]

    def nll(theta: np.ndarray) -> float:
        mu, log_s = float(theta[0]), float(theta[1])
        s = math.exp(log_s)
        z = (obs - mu) / s
        ll = float(np.sum(-0.5 * z * z)) - obs.size * (log_s + _LOG_SQRT_2PI)
        if cen.size:
            ll += float(np.sum(special.log_ndtr(-(cen - mu) / s)))  # log P(eps > z): log survival
        return -ll

    start = np.array([float(obs.mean()), math.log(float(obs.std()) + 1e-9)])
    res = optimize.minimize(nll, start, method="Nelder-Mead",
                            options={"xatol": 1e-9, "fatol": 1e-10, "maxiter": 4000})
    return -float(res.fun), float(res.x[0]), math.exp(float(res.x[1]))


@dataclass(frozen=True)
class ShapeComparison:
    """Two growth laws fitted to one temperature's coupling times over several lengths.

    ``loglik_nlogn`` and ``loglik_power``: the maximised censored log-likelihoods of ``C n ln n``
    and of ``C n^power`` (each with its own ``C`` and ``sigma``); ``log_lr`` their difference
    (positive: the data favour ``n ln n``; ``log 20 = 3.0`` is a likelihood ratio of 20).
    ``p``, ``p_lo``, ``p_hi``: the free exponent of ``C n^p`` and its 95% profile interval.
    ``medians_finite``: every length's Kaplan-Meier median lies inside its budget (more than half
    the pairs coupled). ``ns``, ``n_times``, ``n_censored``: the sample.
    """

    power: float
    loglik_nlogn: float
    loglik_power: float
    log_lr: float
    C: float
    sigma: float
    p: float
    p_lo: float
    p_hi: float
    medians_finite: bool
    ns: tuple[int, ...]
    n_times: int
    n_censored: int


def _stack(cells: Mapping[int, tuple[torch.Tensor, torch.Tensor]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # reads each cell as a (times, censored) pair, as compare_shapes (pre-registered rule code) hands it
    ns, lt, cen = [], [], []
    for n, (T, c) in sorted(cells.items()):
        check_range("n", n, 2, None, integer=True)
        t = torch.as_tensor(T, dtype=torch.float64).reshape(-1).numpy()
        cc = torch.as_tensor(c, dtype=torch.bool).reshape(-1).numpy()
        if t.shape != cc.shape:
            raise ValueError(f"n={n}: times {t.shape} and censored {cc.shape} differ in shape")
        if (t <= 0).any():
            raise ValueError(f"n={n}: coupling times must be positive (a censored one sits at its cap)")
        ns.append(np.full(t.size, float(n)))
        lt.append(np.log(t))
        cen.append(cc)
    return np.concatenate(ns), np.concatenate(lt), np.concatenate(cen)


def compare_shapes(cells: Mapping[int, tuple[torch.Tensor, torch.Tensor]], *, power: float = 1.5,
                   p_grid: Sequence[float] | None = None) -> ShapeComparison:
    """``C n ln n`` against ``C n^power`` on one temperature's coupling times.

    ``cells``: ``{n: (times [B], censored [B])}`` over at least three lengths, a censored pair's
    time set to its cap (``tokendyn.analysis.experiments`` does). ``p_grid``: exponents for the profile
    interval of ``C n^p`` (default 0.5 to 3 by 0.005).
    """
    if len(cells) < 3:
        raise ValueError(f"compare_shapes: needs at least 3 lengths to test a shape, got {sorted(cells)}")
    check_range("power", power, 0.0, None, lo_open=True)
    n, lt, cen = _stack(cells)
    log_n = np.log(n)
    fit: Callable[[np.ndarray], tuple[float, float, float]] = lambda lg: censored_lognormal_fit(lt, lg, cen)
    ll_a, mu_a, s_a = fit(log_n + np.log(np.log(n)))
    ll_b, _, _ = fit(power * log_n)
    grid = np.arange(0.5, 3.0 + 1e-9, 0.005) if p_grid is None else np.asarray(p_grid, np.float64)
    prof = np.array([fit(p * log_n)[0] for p in grid])
    best = int(np.argmax(prof))
    inside = grid[prof >= prof[best] - 0.5 * 3.841458820694124]  # chi-square(1) at 95%
    medians = [float(np.median(np.where(cc, np.inf, t))) for t, cc in
               ((torch.as_tensor(T, dtype=torch.float64).numpy(), torch.as_tensor(c, dtype=torch.bool).numpy())
                for T, c in cells.values())]
    return ShapeComparison(power=float(power), loglik_nlogn=ll_a, loglik_power=ll_b, log_lr=ll_a - ll_b,
                           C=math.exp(mu_a), sigma=s_a, p=float(grid[best]), p_lo=float(inside.min()),
                           p_hi=float(inside.max()), medians_finite=all(math.isfinite(m) for m in medians),
                           ns=tuple(int(k) for k in sorted(cells)), n_times=int(n.size), n_censored=int(cen.sum()))


def shapes_by_model(cells: Mapping[tuple[str, int, float], CensoredTimes], models: Sequence[str], taus: Sequence[float],
                    *, power: float = 1.5) -> dict[str, dict[float, ShapeComparison]]:
    """:func:`compare_shapes` for every model and temperature of a run's cells ``{(model, n, tau): CensoredTimes}``
    -> ``{model: {tau: ShapeComparison}}``, each over every length the run has for it (what claim 4's rule reads)."""
    out: dict[str, dict[float, ShapeComparison]] = {}
    for m in models:
        for t in taus:
            by_n = {n: tc for (mm, n, tt), tc in cells.items() if mm == m and tt == t}
            if by_n:
                out.setdefault(m, {})[float(t)] = _no_fit(by_n, power) or compare_shapes(by_n, power=power)
    return out


def _no_fit(cells: Mapping[int, CensoredTimes], power: float) -> ShapeComparison | None:
    """A temperature too cold to fit: fewer than two distinct coupled times over all its lengths (no
    likelihood has a scale to fit), so no median can lie inside its budget either. Its comparison
    says *did not couple* (``medians_finite`` False, the fits NaN) instead of failing the whole run;
    any other cell (None here) is fitted."""
    if len(cells) < 3:
        return None  # compare_shapes says why
    _, lt, cen = _stack(cells)
    if np.unique(lt[~cen]).size >= 2:
        return None
    medians = [float(np.median(np.where(cell.censored.numpy(), np.inf, cell.times.double().numpy())))
               for cell in cells.values()]
    if all(math.isfinite(v) for v in medians):
        return None  # every median coupled on one repeated time: let the fit say what is wrong
    nan = math.nan
    return ShapeComparison(power=float(power), loglik_nlogn=nan, loglik_power=nan, log_lr=nan, C=nan, sigma=nan,
                           p=nan, p_lo=nan, p_hi=nan, medians_finite=False, ns=tuple(int(k) for k in sorted(cells)),
                           n_times=int(lt.size), n_censored=int(cen.sum()))


def shape_words(shapes: Mapping[float, ShapeComparison]) -> str:
    """One model's comparisons in one line: per temperature the log likelihood ratio of ``n ln n``
    over ``n^power`` and the fitted exponent of ``n^p`` with its 95% profile interval."""
    return ", ".join(f"tau={t:g}: log LR {s.log_lr:+.1f}" + ("" if s.medians_finite else " (a median censored)")
                     + f", p = {s.p:.2f} [{s.p_lo:.2f}, {s.p_hi:.2f}]" for t, s in sorted(shapes.items()))
