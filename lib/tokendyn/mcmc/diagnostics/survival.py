"""Survival curves of hitting and coupling times, with runs that never hit kept as censored.

``P(T > t)`` of coupling times ``T`` bounds the total-variation distance to stationarity,
``d(t) <= P(T > t)``; runs that never coupled inside their budget are kept as *censored*
(Kaplan-Meier), never dropped, so the curve is exact below the budget.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch

from ...core.checks import check_range

K = TypeVar("K", bound=Hashable)

__all__ = ["Survival", "survival", "mixing_time", "median_times", "as_1d"]


@dataclass(frozen=True)
class Survival:
    """A Kaplan-Meier survival curve evaluated on a grid of times.

    ``t`` [G] the grid; ``surv`` [G] the estimate of ``P(T > t)``; ``known`` [G] False where the
    estimate is undefined (beyond the last observed time when that one was censored: we only know
    ``P(T > t) <= surv`` there). ``n`` runs, ``n_censored`` of them never hit within their budget.
    """

    t: torch.Tensor
    surv: torch.Tensor
    known: torch.Tensor
    n: int
    n_censored: int

    def median(self) -> float:
        """The first grid time with ``surv <= 1/2`` (``inf`` if the known part never gets there).

        The product-limit estimate is a product of ``1 - d/r`` factors, so an exactly-half
        survival can come out an ulp above 1/2; a 1e-12 tolerance keeps that case exact."""
        hit = (self.surv <= 0.5 + 1e-12) & self.known
        return float(self.t[hit][0]) if bool(hit.any()) else math.inf


def as_1d(name: str, x: torch.Tensor | Sequence[float]) -> torch.Tensor:
    x = torch.as_tensor(x, dtype=torch.float64).flatten()
    if x.numel() == 0:
        raise ValueError(f"{name} is empty: need at least one run")
    return x


def survival(times: torch.Tensor | Sequence[float], censored: torch.Tensor | Sequence[bool],
             grid: torch.Tensor | Sequence[float]) -> Survival:
    """Kaplan-Meier estimate of ``P(T > t)`` on ``grid`` from possibly censored times.

    ``times`` [N]: the hitting time of each run, or for a censored run the last time it was
    watched (its budget); ``censored`` [N] bool: True where the run had not hit by then. ``grid``
    [G] ascending. When every censored run shares one budget this is the plain fraction of runs
    with ``T > t`` for ``t`` below the budget; unequal budgets are handled exactly too.
    """
    t = as_1d("times", times)
    c = torch.as_tensor(censored, dtype=torch.bool).flatten()
    g = as_1d("grid", grid)
    if c.numel() != t.numel():
        raise ValueError(f"censored has {c.numel()} entries but times has {t.numel()}")
    if bool((t < 0).any()) or not bool(torch.isfinite(t).all()):
        raise ValueError("times must be finite and >= 0 (mark runs that never hit as censored)")
    if bool((g[1:] < g[:-1]).any()):
        raise ValueError("grid must be ascending")
    event_t = torch.unique(t[~c])
    surv_at_event = torch.ones(event_t.numel(), dtype=torch.float64)
    s = 1.0
    for k, te in enumerate(event_t.tolist()):
        at_risk = int((t >= te).sum())  # censored at te still counts as at risk at te
        deaths = int(((t == te) & ~c).sum())
        s *= 1.0 - deaths / at_risk
        surv_at_event[k] = s
    # S(g) = product over events <= g: index of the last event <= g
    idx = torch.searchsorted(event_t, g, right=True) - 1
    padded = torch.cat([torch.ones(1, dtype=torch.float64), surv_at_event])  # S = 1 before any event
    surv = padded[idx + 1]
    last_obs = float(t.max())
    last_censored = bool(c[t == last_obs].any())
    known = (g < last_obs) | ~torch.tensor(last_censored) | (surv == 0)
    return Survival(t=g, surv=surv, known=known, n=int(t.numel()), n_censored=int(c.sum()))


def mixing_time(d: torch.Tensor, eps: float = 0.25) -> float:
    """The first t with ``d[t] <= eps`` for a curve ``d`` [T+1] indexed by t (``inf`` if never)."""
    check_range("eps", eps, 0.0, 1.0, lo_open=True)
    hit = (d <= eps).nonzero()
    return float(hit[0, 0]) if hit.numel() else math.inf


def median_times(runs: Mapping[K, tuple[torch.Tensor, torch.Tensor]]) -> dict[K, float]:
    """Kaplan-Meier median of each group of step counts: ``{key: (times [N], censored [N])}`` ->
    ``{key: median}``, ``inf`` where more than half the group is censored.

    The survival is read on the steps ``0, 1, ..., max(times)`` of each group; its median there is
    the one on any longer grid (past the last time the curve is flat or unknown). Times must be
    whole steps.
    """
    out = {}
    for key, (times, censored) in runs.items():
        t = as_1d("times", times)
        if not bool((t == t.round()).all()):
            raise ValueError(f"times of {key!r} must be whole steps, got {t[t != t.round()][:3].tolist()}")
        out[key] = survival(t, censored, torch.arange(float(t.max()) + 1.0)).median()
    return out
