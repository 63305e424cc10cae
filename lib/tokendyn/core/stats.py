"""Intervals for headline numbers: a seeded percentile bootstrap and exact-enough binomial bounds.

Every number a chapter compares with the paper carries one of these, so a reader can tell a
difference from sampling noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .checks import check_range

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a two-sided interval at ``level`` and the sample size behind it."""

    value: float
    lo: float
    hi: float
    n: int
    level: float = 0.95

    def fmt(self, spec: str = ".3g", pct: bool = False) -> str:
        """``'0.418 [0.35, 0.49]'`` (or percentages with ``pct=True``)."""
        if pct:
            return f"{self.value:.1%} [{self.lo:.1%}, {self.hi:.1%}]"
        return f"{self.value:{spec}} [{self.lo:{spec}}, {self.hi:{spec}}]"

    @classmethod
    def from_columns(cls, row: Any, value: str, *, lo: str | None = None, hi: str | None = None,
                     n: str | int) -> Estimate:
        """The estimate a record stores in columns: ``row[value]`` with ``row[lo]`` and ``row[hi]``
        (default ``value + '_lo'`` and ``value + '_hi'``); ``n`` is a column name or the count.
        ``row``: a mapping or a pandas row."""
        count = int(row[n]) if isinstance(n, str) else int(n)
        return cls(float(row[value]), float(row[lo or f"{value}_lo"]), float(row[hi or f"{value}_hi"]), count)

    def to_dict(self) -> dict[str, float | int]:
        """``{"value", "lo", "hi", "n"}``: the estimate as a recorded run stores it."""
        return {"value": self.value, "lo": self.lo, "hi": self.hi, "n": self.n}

    def overlaps(self, lo: float, hi: float) -> bool:
        """Whether the interval meets the closed range ``[lo, hi]``."""
        return self.hi >= lo and self.lo <= hi


def bootstrap_replicates(x: np.ndarray, stat: Callable[[np.ndarray], float], n_boot: int, seed: int) -> np.ndarray:
    """``stat`` over ``n_boot`` seeded resamples (with replacement) of the 1-d sample ``x`` -> ``[n_boot]``.

    The one resampling scheme behind :func:`bootstrap` and :meth:`tokendyn.publish.checked.StdErr.bootstrap`:
    the same ``x`` and ``seed`` give the same replicates on every machine.
    """
    idx = np.random.default_rng(seed).integers(0, x.size, size=(n_boot, x.size))
    return np.array([stat(x[row]) for row in idx], dtype=np.float64)


def bootstrap(values: Sequence[float] | np.ndarray, stat: Callable[[np.ndarray], float] = np.mean, *,
              n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> Estimate:
    """Percentile bootstrap of ``stat`` over the 1-d sample ``values`` (resampled with replacement).

    Seeded, so the same values give the same interval on every machine.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    check_range("n_boot", n_boot, 100, None, integer=True)
    check_range("level", level, 0.0, 1.0, lo_open=True)
    if x.size < 2:
        raise ValueError(f"values: a bootstrap needs at least 2 values, got {x.size}")
    reps = bootstrap_replicates(x, stat, n_boot, seed)
    a = (1 - level) / 2
    return Estimate(float(stat(x)), float(np.quantile(reps, a)), float(np.quantile(reps, 1 - a)),
                    int(x.size), level)


# The asymptotic critical values c of the Kolmogorov statistic sqrt(n) sup|F_n - F| (Smirnov):
# P(sqrt(n) D_n > c) = 1 - level for a continuous law; conservative for a discrete one.
_KOLMOGOROV_C = {0.95: 1.36, 0.99: 1.63}


def kolmogorov_band(n: int, level: float = 0.95) -> float:
    """Half-width ``c / sqrt(n)`` of the ``level`` Kolmogorov band around an exact distribution or
    survival curve, for an empirical one from ``n`` independent samples (c = 1.36 at 95%, 1.63 at
    99%)."""
    if level not in _KOLMOGOROV_C:
        raise ValueError(f"level must be one of {sorted(_KOLMOGOROV_C)}, got {level!r}")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n!r}")
    return _KOLMOGOROV_C[level] / math.sqrt(n)


def wilson(k: int, n: int, level: float = 0.95) -> Estimate:
    """The Wilson score interval for a binomial proportion ``k / n``."""
    check_range("n", n, 1, None, integer=True)
    check_range("k", k, 0, n, integer=True)
    z = _z(level)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    lo = 0.0 if k == 0 else max(0.0, centre - half)   # exact ends, not round-off near them
    hi = 1.0 if k == n else min(1.0, centre + half)
    return Estimate(p, lo, hi, n, level)


def seed_interval(values: Sequence[float] | np.ndarray, level: float = 0.95,
                  bounds: tuple[float, float] = (-math.inf, math.inf)) -> Estimate:
    """Mean of per-seed values ``[S]`` with a Student-t interval over seeds (``S - 1`` degrees of
    freedom): for statistics that a bootstrap over items would bias, such as the unigram entropy
    of pooled samples (resampled duplicates lower it). The interval is clipped to ``bounds``
    (``(0, 1)`` for a rate: a t interval knows no range)."""
    from scipy.stats import t as student_t

    x = np.asarray(values, dtype=np.float64).ravel()
    check_range("level", level, 0.0, 1.0, lo_open=True)
    if x.size < 2:
        raise ValueError(f"values: an interval over seeds needs at least 2 seeds, got {x.size}")
    half = float(student_t.ppf(0.5 + level / 2, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    lo, hi = max(bounds[0], float(x.mean()) - half), min(bounds[1], float(x.mean()) + half)
    return Estimate(float(x.mean()), lo, hi, int(x.size), level)


def ratio_interval(k_a: int, n_a: int, k_b: int, n_b: int, *, n_boot: int = 2000, level: float = 0.95,
                   seed: int = 0) -> Estimate:
    """Ratio of two proportions ``(k_a/n_a) / (k_b/n_b)`` with a parametric-bootstrap interval.

    A zero denominator is floored at one count (so a ratio is a lower bound, never infinite).
    """
    for name, v in (("n_a", n_a), ("n_b", n_b)):
        check_range(name, v, 1, None, integer=True)
    check_range("k_a", k_a, 0, n_a, integer=True)
    check_range("k_b", k_b, 0, n_b, integer=True)
    check_range("level", level, 0.0, 1.0, lo_open=True)
    rng = np.random.default_rng(seed)
    pa, pb = rng.binomial(n_a, k_a / n_a, n_boot) / n_a, rng.binomial(n_b, k_b / n_b, n_boot) / n_b
    floor_b = 1 / n_b
    reps = pa / np.maximum(pb, floor_b)
    a = (1 - level) / 2
    value = (k_a / n_a) / max(k_b / n_b, floor_b)
    return Estimate(value, float(np.quantile(reps, a)), float(np.quantile(reps, 1 - a)), n_a + n_b, level)


def size_slope(n_params: Sequence[float], samples: Sequence[Sequence[float] | np.ndarray],
               stat: Callable[[np.ndarray], float] = np.mean, *, n_boot: int = 2000, level: float = 0.95,
               seed: int = 0, groups: Sequence[str] | None = None) -> Estimate:
    """Slope of ``stat`` against ln(parameters) across models, with a percentile bootstrap interval.

    ``n_params (R,)``: each model's parameter count; ``samples``: R 1-d samples (one model's
    rectangles, traps, ...). The point is the least-squares slope of the R values ``stat(sample)``
    on ``ln n_params`` (change per e-fold of parameters); each bootstrap replicate resamples every
    model's sample with replacement, so the interval is the measurement noise of these models, not
    the spread of all models of a size. ``n`` is R. Seeded: the same samples give the same interval.

    ``groups (R,)`` (e.g. each model's backbone) makes it the *within-group* slope: each group gets
    its own intercept (sizes and values centred per group), so a difference between groups that is
    not size cannot move the slope; only groups with two distinct sizes inform it.
    """
    x = np.log(np.asarray(n_params, dtype=np.float64))
    ys = [np.asarray(v, dtype=np.float64).ravel() for v in samples]
    check_range("n_boot", n_boot, 100, None, integer=True)
    check_range("level", level, 0.0, 1.0, lo_open=True)
    if len(ys) != len(x) or len(x) < 2 or np.ptp(x) == 0:
        raise ValueError(f"n_params: a slope needs at least 2 distinct sizes, one sample each; got {len(x)} sizes "
                         f"and {len(ys)} samples")
    if min(len(v) for v in ys) < 2:
        raise ValueError("samples: each model needs at least 2 values")
    labels = np.zeros(len(x), dtype=int) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1]
    if len(labels) != len(x):
        raise ValueError(f"groups: one label per model, got {len(labels)} for {len(x)} models")
    onehot = np.eye(labels.max() + 1)[labels]          # (R, G)

    def centred(v: np.ndarray) -> np.ndarray:
        return v - onehot @ (onehot.T @ v / onehot.sum(0))

    xc = centred(x)
    if not np.dot(xc, xc) > 0:
        raise ValueError("groups: no group holds two distinct sizes, so there is no within-group slope")

    def fit(vals: list[float]) -> float:
        return float(np.dot(xc, centred(np.asarray(vals))) / np.dot(xc, xc))

    rng = np.random.default_rng(seed)
    reps = np.array([fit([stat(v[rng.integers(0, len(v), len(v))]) for v in ys]) for _ in range(n_boot)])
    a = (1 - level) / 2
    return Estimate(fit([stat(v) for v in ys]), float(np.quantile(reps, a)), float(np.quantile(reps, 1 - a)),
                    len(ys), level)


def _quantile(q: float) -> Callable[[Any], float]:
    """A named aggregation for pandas: the ``q`` quantile of a group (linear interpolation)."""
    def agg(s: Any) -> float:
        return s.quantile(q)
    agg.__name__ = f"q{round(100 * q)}"
    return agg


def group_summary(frame: pd.DataFrame, by: Sequence[str], column: str, *, seed: int = 0,
                  level: float = 0.95) -> tuple[pd.DataFrame, dict[tuple, Estimate]]:
    """Per group of ``frame`` (rows grouped by the columns ``by``): the mean, median and quartiles
    of ``column``, and a seeded :func:`bootstrap` interval on the mean.

    Returns ``(summary, intervals)``: ``summary`` has one row per group (sorted by ``by``), the
    columns ``by`` then ``mean``, ``median``, ``q25``, ``q75`` and ``"mean 95% CI"`` (the interval
    as text, 2 decimals; the percentage is ``level``); ``intervals`` maps each group's key tuple -> its :class:`Estimate`.
    """
    by = list(by)
    groups = frame.groupby(by)[column]
    summary = groups.agg(mean="mean", median="median", q25=_quantile(0.25), q75=_quantile(0.75)).reset_index()
    intervals = {(key if isinstance(key, tuple) else (key,)): bootstrap(g.to_numpy(), seed=seed, level=level)
                 for key, g in groups}
    summary[f"mean {level:.0%} CI"] = [f"[{intervals[k].lo:.2f}, {intervals[k].hi:.2f}]"
                                       for k in summary[by].itertuples(index=False, name=None)]
    return summary, intervals


def _z(level: float) -> float:
    from statistics import NormalDist

    check_range("level", level, 0.0, 1.0, lo_open=True, hi_open=True)  # level 1 has no finite z
    return NormalDist().inv_cdf(0.5 + level / 2)
