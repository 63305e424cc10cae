"""Intervals for coupling-time summaries: bootstrap over the runs of each cell.

A cell is the :class:`~tokendyn.mcmc.censored.CensoredTimes` of the runs at one (model, n, tau)
(the pre-registered rules here read it as its ``(times [N], censored [N])`` pair). Resampling runs
with replacement and recomputing the Kaplan-Meier median gives the median's interval; feeding the
resampled medians through :func:`~.scaling.scaling_fit` and :func:`~.scaling.crossover` gives
intervals on ``C(tau)`` and on the crossover ``tau*(n)``. One run is a prefix of any longer run
with the same seed, so :func:`censor_at` (:func:`censor_cells` for every cell of a run) turns a run at
a large budget into the exact run at any smaller one: ``tau*`` against the budget comes from one run.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

from ...core.checks import check_range
from ..censored import CensoredTimes
from .scaling import budget_steps, crossover, n_log_n, scaling_fit, shape_slope
from .survival import as_1d, median_times

K = TypeVar("K", bound=Hashable)

__all__ = ["censor_at", "censor_cells", "bootstrap_medians", "median_draws_interval", "Crossover", "crossover_draws",
           "rise_probability", "scaling_C_interval", "shape_slope_interval", "scaling_table", "Source",
           "CrossoverSurvey", "crossover_survey", "ratios_at"]

Cells = Mapping[tuple[str, int, float], CensoredTimes]
Source = tuple[Cells, Sequence[str], Sequence[int], Sequence[float]]
"""One run's coupling times ``{(model, n, tau): CensoredTimes}`` with its models, lengths and the
temperatures to read ``tau*`` on."""


def censor_at(times: torch.Tensor, censored: torch.Tensor, budget: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The runs as a run stopped at ``budget`` steps would have left them: ``(times [N], censored [N])``.

    Exact for runs that share a seed, because a run with a smaller budget is the prefix of the
    longer one: a pair that coupled by ``budget`` has the same time, any other is censored there.
    ``budget`` must not exceed the budget the runs were made with (every censored time).
    """
    t = torch.as_tensor(times)
    c = torch.as_tensor(censored, dtype=torch.bool)
    check_range("budget", budget, 0, None, integer=True)
    if bool(c.any()) and budget > int(t[c].min()):
        raise ValueError(f"budget={budget} is above the budget these runs were censored at "
                         f"({int(t[c].min())}): allowed 0..{int(t[c].min())}")
    late = c | (t > budget)
    return torch.where(late, torch.full_like(t, budget), t), late


def censor_cells(cells: Cells, budget_factor: float) -> dict[tuple[str, int, float], CensoredTimes]:
    """Every cell of a run as the run stopped at ``budget_factor`` n ln n steps (:func:`budget_steps`
    of the cell's ``n``) would have left it: :func:`censor_at`, with that budget as the new cap."""
    out = {}
    for key, cell in cells.items():
        budget = budget_steps(budget_factor, key[1])
        out[key] = CensoredTimes(*censor_at(cell.times, cell.censored, budget), cap=budget)
    return out


def _as_inf(times: torch.Tensor | Sequence[float], censored: torch.Tensor | Sequence[bool], key: object) -> np.ndarray:
    t = as_1d("times", times).numpy()
    c = torch.as_tensor(censored, dtype=torch.bool).flatten().numpy()
    if c.size != t.size:
        raise ValueError(f"{key!r}: censored has {c.size} entries but times has {t.size}")
    if c.any() and (~c).any() and t[c].min() < t[~c].max():
        raise ValueError(f"{key!r}: a run is censored before another one's event; the bootstrap "
                         "needs one shared budget per cell")
    return np.where(c, np.inf, t)


def bootstrap_medians(cells: Mapping[K, tuple[torch.Tensor, torch.Tensor]], *, n_boot: int = 1000,
                      seed: int = 0) -> dict[K, np.ndarray]:
    """Kaplan-Meier medians of ``n_boot`` resamples of each cell: ``{key: (times, censored)}`` ->
    ``{key: medians [n_boot]}`` (``inf`` where more than half a resample is censored).

    With one budget per cell the Kaplan-Meier median is the ``ceil(N/2)``-th smallest time, a
    censored run counting as infinite: the same value as :func:`~.survival.median_times`. Each cell
    draws from its own seeded stream (cells are independent samples).
    """
    check_range("n_boot", n_boot, 100, None, integer=True)
    out = {}
    for k, (key, (times, censored)) in enumerate(cells.items()):
        t = _as_inf(times, censored, key)
        rng = np.random.default_rng([seed, k])
        idx = rng.integers(0, t.size, size=(n_boot, t.size))
        out[key] = np.sort(t[idx], axis=1)[:, math.ceil(t.size / 2) - 1]
    return out


def median_draws_interval(draws: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of bootstrap draws (``inf`` ends stay ``inf``)."""
    check_range("level", level, 0.0, 1.0, lo_open=True)
    a = (1 - level) / 2
    s = np.sort(np.asarray(draws, dtype=np.float64))
    # order statistics, not interpolation: an interval end is a value some resample gave
    lo = s[max(0, math.ceil(a * len(s)) - 1)]
    hi = s[min(len(s) - 1, math.ceil((1 - a) * len(s)) - 1)]
    return float(lo), float(hi)


@dataclass(frozen=True)
class Crossover:
    """``tau*`` at one length: the grid bracket of the data, and its bootstrap draws.

    ``tau_star`` / ``tau_below``: as :func:`~.scaling.crossover` (``nan`` off the grid);
    ``draws`` [n_boot]: ``tau*`` of each resample, ``inf`` when it lies above the grid;
    ``lo``, ``hi``: the percentile interval of the draws.
    """

    tau_below: float
    tau_star: float
    draws: np.ndarray
    lo: float
    hi: float


def crossover_draws(medians: Mapping[float, float], draws: Mapping[float, np.ndarray], n: int, *,
                    blowup: float = 3.0, level: float = 0.95) -> Crossover:
    """The crossover at length ``n`` from the medians per tau and their bootstrap draws
    (:func:`bootstrap_medians`, same ``n_boot`` for every tau)."""
    scale = n_log_n(n)
    below, star = crossover({t: m / scale for t, m in medians.items()}, blowup=blowup)
    taus = sorted(draws)
    n_boot = len(draws[taus[0]])
    stars = np.empty(n_boot)
    for b in range(n_boot):
        _, hi = crossover({t: float(draws[t][b]) / scale for t in taus}, blowup=blowup)
        stars[b] = math.inf if math.isnan(hi) else hi
    lo, hi = median_draws_interval(stars, level)
    return Crossover(below, star, stars, lo, hi)


def rise_probability(first: Crossover, last: Crossover) -> float:
    """Share of bootstrap draws in which ``tau*`` at the last length is above that at the first
    (the two lengths' runs are independent, so draws are paired by index). "Rising with n beyond
    the noise" is a rise probability of at least 0.975."""
    a, b = first.draws, last.draws
    if a.shape != b.shape:
        raise ValueError(f"draw counts differ: {a.shape} and {b.shape}")
    return float(np.mean(b > a))


def scaling_C_interval(ns: Sequence[int], draws: Mapping[int, np.ndarray],
                       level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of ``C`` in ``T = C n ln n`` over bootstrap draws of the median at
    each ``n`` (``inf`` ends when censored resamples are that common)."""
    n_boot = len(draws[ns[0]])
    cs = np.array([scaling_fit(ns, [float(draws[n][b]) for n in ns]).C for b in range(n_boot)])
    return median_draws_interval(cs, level)


def shape_slope_interval(ns: Sequence[int], draws: Mapping[int, np.ndarray],
                         level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the slope of ``log T`` on ``log(n ln n)`` (:func:`~.scaling.shape_slope`)
    over bootstrap draws of the median at each ``n`` (:func:`bootstrap_medians`; the lengths' runs
    are independent, so draws are paired by index). A resample with a censored median gives an
    infinite slope, so the upper end is ``inf`` when that is common."""
    n_boot = len(draws[ns[0]])
    if any(len(draws[n]) != n_boot for n in ns):
        raise ValueError("every length needs the same number of bootstrap draws")
    slopes = np.array([shape_slope(ns, [float(draws[n][b]) for n in ns]) for b in range(n_boot)])
    return median_draws_interval(slopes, level)


def scaling_table(cells: Cells, names: Sequence[str], ns: Sequence[int], taus: Sequence[float], *,
                  n_boot: int = 1000, seed: int = 0, cap: float = math.inf) -> tuple[list[dict], list[dict]]:
    """The n ln n scaling of one run, with bootstrap intervals over the runs of each cell.

    ``cells`` maps ``(model, n, tau)`` to the runs' :class:`~tokendyn.mcmc.censored.CensoredTimes`
    for every model in ``names``, length in ``ns`` and temperature in ``taus``. Returns
    ``(fits, ratios)``:

    - ``fits``, one row per (model, tau): ``C`` of ``T = C n ln n`` and its interval
      (``C_lo``, ``C_hi``), the flatness ``slope`` of :func:`~.scaling.scaling_fit`, and the
      exponent ``b`` of ``T ~ (n ln n)^b`` (:func:`~.scaling.shape_slope`, ``nan`` with fewer
      than two lengths) with its interval (``b_lo``, ``b_hi``);
    - ``ratios``, one row per (model, tau, n): the median over ``n ln n`` and its interval, drawn
      at ``cap`` when censored (``censored`` says so).
    """
    med = median_times(cells)
    draws = bootstrap_medians(cells, n_boot=n_boot, seed=seed)
    fits, ratios = [], []
    for name in names:
        for tau in taus:
            fit = scaling_fit(ns, [med[(name, n, tau)] for n in ns])
            per_n = {n: draws[(name, n, tau)] for n in ns}
            c_lo, c_hi = scaling_C_interval(ns, per_n)
            if len(set(ns)) >= 2:
                shape = shape_slope(ns, [med[(name, n, tau)] for n in ns])
                s_lo, s_hi = shape_slope_interval(ns, per_n)
            else:
                shape = s_lo = s_hi = math.nan
            fits.append({"model": name, "tau": tau, "C": fit.C, "C_lo": c_lo, "C_hi": c_hi, "slope": fit.slope,
                         "b": shape, "b_lo": s_lo, "b_hi": s_hi})
            for n, r in zip(ns, fit.ratios):
                lo, hi = median_draws_interval(per_n[n])
                ratios.append({"model": name, "tau": tau, "n": n, "T / (n ln n)": min(r, cap),
                               "lo": min(lo / n_log_n(n), cap), "hi": min(hi / n_log_n(n), cap),
                               "censored": not math.isfinite(r)})
    return fits, ratios


def ratios_at(cells: Cells, model: str, budget_factor: float, *, n_boot: int, seed: int) -> list[dict]:
    """:func:`scaling_table`'s ratio rows of one ``model`` at every length and temperature it was run
    at (its hotter ones too), the run re-censored at ``budget_factor`` n ln n and drawn there when
    censored."""
    cut = censor_cells({k: cell for k, cell in cells.items() if k[0] == model}, budget_factor)
    ns, taus = sorted({k[1] for k in cut}), sorted({k[2] for k in cut})
    return scaling_table(cut, [model], ns, taus, n_boot=n_boot, seed=seed, cap=budget_factor)[1]


def _cut_medians(cells: Cells, budget_factor: float, *, n_boot: int, seed: int
                 ) -> tuple[dict[tuple[str, int, float], float], dict[tuple[str, int, float], np.ndarray]]:
    """Medians and their bootstrap draws of every cell, re-censored at ``budget_factor`` n ln n."""
    cut = censor_cells(cells, budget_factor)
    return median_times(cut), bootstrap_medians(cut, n_boot=n_boot, seed=seed)


def _surveyed(sources: Mapping[str, Source], min_grid: int) -> list[tuple[str, Source]]:
    """The sources a crossover is read on: the live run always, a recorded run only on at least
    ``min_grid`` temperatures (on fewer it gives the n log n shape, not a crossover)."""
    return [(label, src) for label, src in sources.items() if label == "live" or len(src[3]) >= min_grid]


def _crossovers(med: Mapping, boot: Mapping, name: str, grid: Sequence[float], lengths: Sequence[int], *,
                blowup: float) -> dict[int, Crossover]:
    """:func:`crossover_draws` of one model at every length, from medians and draws keyed ``(model, n, tau)``."""
    return {n: crossover_draws({t: med[(name, n, t)] for t in grid}, {t: boot[(name, n, t)] for t in grid}, n,
                               blowup=blowup) for n in lengths}


@dataclass(frozen=True)
class CrossoverSurvey:
    """Chapter 3's crossover survey (:func:`crossover_survey`).

    ``rows``: one ``{source, model, n, budget_factor, tau_below, tau_star, lo, hi}`` per length and
    budget; ``rises[(source, model, budget)]``: the share of resamples in which ``tau*`` is higher at
    the last length than at the first; ``draws[(source, model, budget)] = {n: Crossover}``;
    ``by_blowup``: one ``{source, model, blowup, n, tau_star, lo, hi}`` per threshold and length, at
    the largest budget."""

    rows: list[dict]
    rises: dict[tuple[str, str, float], float]
    draws: dict[tuple[str, str, float], dict[int, Crossover]]
    by_blowup: list[dict]


def crossover_survey(sources: Mapping[str, Source], budget_factors: Sequence[float], *, blowup: float,
                     blowups: Sequence[float] = (), n_boot: int, seed: int, min_grid: int = 4) -> CrossoverSurvey:
    """``tau*(n)`` of every run, model and budget, and at every mixing threshold in ``blowups``.

    For each source (label -> :data:`Source`; a recorded run on fewer than ``min_grid``
    temperatures gives the n log n shape, not a crossover, and is skipped unless it is ``"live"``),
    each budget in ``budget_factors`` (times n ln n: the run re-censored there, exactly the run that
    budget would have given) and each model: :func:`crossover_draws` at every length, and
    :func:`rise_probability` from the first length to the last. At the largest budget the same
    bootstrap draws also give ``tau*`` at each threshold in ``blowups``: a crossover that moves
    with the threshold belongs to the definition, not to the chain.
    """
    rows: list[dict] = []
    rises: dict[tuple[str, str, float], float] = {}
    draws: dict[tuple[str, str, float], dict[int, Crossover]] = {}
    by_blowup: list[dict] = []
    for source, (cells, names, lengths, grid) in _surveyed(sources, min_grid):
        for bf in budget_factors:
            med, boot = _cut_medians(cells, bf, n_boot=n_boot, seed=seed)
            for name in names:
                cr = _crossovers(med, boot, name, grid, lengths, blowup=blowup)
                rises[(source, name, bf)] = rise_probability(cr[lengths[0]], cr[lengths[-1]])
                draws[(source, name, bf)] = cr
                rows += [{"source": source, "model": name, "n": n, "budget_factor": bf, "tau_below": c.tau_below,
                          "tau_star": c.tau_star, "lo": c.lo, "hi": c.hi} for n, c in cr.items()]
                if bf != max(budget_factors):
                    continue
                for b in blowups:
                    at_b = cr if b == blowup else _crossovers(med, boot, name, grid, lengths, blowup=b)
                    by_blowup += [{"source": source, "model": name, "blowup": b, "n": n, "tau_star": c.tau_star,
                                   "lo": c.lo, "hi": c.hi} for n, c in at_b.items()]
    return CrossoverSurvey(rows, rises, draws, by_blowup)
