"""Scaling of mixing times with ``n ln n``: the fitted constant ``C(tau)``, the flatness slope,
and the crossover temperature ``tau*(n)`` below which mixing leaves the budget or ``C`` blows up."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...core.checks import check_range

__all__ = ["n_log_n", "budget_steps", "ScalingFit", "scaling_fit", "shape_slope", "crossover"]


def n_log_n(n: int | float) -> float:
    """``n ln n``, the Dobrushin-regime mixing scale (natural log)."""
    if isinstance(n, bool) or not isinstance(n, numbers.Real):  # numpy integers are welcome
        raise TypeError(f"n must be a number, got {n!r}")
    check_range("n", n if isinstance(n, (int, float)) else float(n), 1)
    return n * math.log(n)


def budget_steps(factor: float, n: int) -> int:
    """The step budget ``factor`` n ln n of a chain of length ``n``, rounded to a whole step."""
    return int(round(factor * n_log_n(n)))


@dataclass(frozen=True)
class ScalingFit:
    """``T(n) ~ C n ln n`` fitted through the origin over lengths ``ns``.

    ``ratios`` [len(ns)]: ``T(n) / (n ln n)`` (inf where T is censored); ``C`` the least-squares
    constant (inf if any T is inf); ``slope`` the exponent ``beta`` of ``ratio ~ n^beta`` (0 when
    the n ln n law holds exactly; nan with fewer than two finite points).
    """

    ns: tuple[int, ...]
    ratios: tuple[float, ...]
    C: float
    slope: float


def scaling_fit(ns: Sequence[int], times: Sequence[float]) -> ScalingFit:
    """Fit ``T = C n ln n`` (least squares through the origin) and the flatness slope.

    ``ns`` [K] lengths (>= 2) and ``times`` [K] a typical time at each (the chapter uses the
    Kaplan-Meier median, which is ``inf`` when more than half the runs are censored).
    """
    if len(ns) != len(times) or len(ns) == 0:
        raise ValueError("ns and times must be non-empty and of equal length")
    for n in ns:
        check_range("n", n, 2, None, integer=True)
    x = [n_log_n(n) for n in ns]
    ratios = tuple(float(T) / xi for T, xi in zip(times, x))
    if any(not math.isfinite(float(T)) for T in times):
        C = math.inf
    else:
        C = sum(float(T) * xi for T, xi in zip(times, x)) / sum(xi * xi for xi in x)
    fin = [(math.log(n), math.log(r)) for n, r in zip(ns, ratios) if math.isfinite(r) and r > 0]
    if len(fin) >= 2:
        mx = sum(a for a, _ in fin) / len(fin)
        my = sum(b for _, b in fin) / len(fin)
        slope = (sum((a - mx) * (b - my) for a, b in fin) / sum((a - mx) ** 2 for a, _ in fin))
    else:
        slope = math.nan
    return ScalingFit(ns=tuple(int(n) for n in ns), ratios=ratios, C=C, slope=slope)


def shape_slope(ns: Sequence[int], times: Sequence[float]) -> float:
    """The exponent ``b`` of ``T ~ (n ln n)^b``: least-squares slope of ``log T`` on ``log(n ln n)``.

    ``ns`` [K] lengths (>= 2, at least two distinct) and ``times`` [K] a typical time at each.
    ``b = 1`` is the ``n log n`` law; ``b`` near 2 is quadratic growth. ``inf`` when any time is
    censored (``inf``): a chain that did not mix within the budget only bounds the slope from below
    at its length, so no finite slope is reported.
    """
    if len(ns) != len(times) or len(ns) < 2:
        raise ValueError(f"ns and times must have equal length >= 2, got {len(ns)} and {len(times)}")
    for n in ns:
        check_range("n", n, 2, None, integer=True)
    if len(set(ns)) < 2:
        raise ValueError(f"ns={list(ns)}: a slope needs at least two distinct lengths")
    if any(not math.isfinite(float(T)) for T in times):
        return math.inf
    if any(float(T) <= 0 for T in times):
        raise ValueError(f"times={list(times)}: a slope on log T needs positive times")
    x = [math.log(n_log_n(n)) for n in ns]
    y = [math.log(float(T)) for T in times]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / sum((a - mx) ** 2 for a in x)


def crossover(ratios: Mapping[float, float], *, blowup: float = 3.0) -> tuple[float, float]:
    """The crossover temperature for one length n, bracketed on the tau grid.

    ``ratios`` maps tau -> ``T / (n ln n)`` at this n (inf when censored past the budget). The
    reference ``C_inf`` is the ratio at the highest tau. A temperature *mixes* when its ratio is
    finite and at most ``blowup * C_inf``. Returns ``(tau_lo, tau_hi)``: ``tau_hi`` the smallest
    grid tau from which every higher tau mixes, ``tau_lo`` the grid point just below it (``nan``
    when even the lowest tau mixes: the crossover is below the grid; ``tau_hi`` is ``nan`` when the
    highest tau does not mix, so the crossover is above the grid).
    """
    check_range("blowup", blowup, 1.0, None)
    if not ratios:
        raise ValueError("ratios is empty")
    taus = sorted(ratios)
    ref = ratios[taus[-1]]
    if not math.isfinite(ref):
        return taus[-1], math.nan
    hi_idx = len(taus) - 1
    for k in range(len(taus) - 1, -1, -1):
        r = ratios[taus[k]]
        if math.isfinite(r) and r <= blowup * ref:
            hi_idx = k
        else:
            break
    return (taus[hi_idx - 1] if hi_idx > 0 else math.nan), taus[hi_idx]
