"""Leave probabilities of a trap and the exp(1/tau) law.

The exact per-step leave probability of random-scan Glauber from ``x`` is
``q(tau) = (1/n) sum_i P_tau(draw != x_i | x_-i)`` (:func:`log_leave_probability`), computed in log
space from the probabilities of the *other* tokens, so it stays exact when ``q`` is far below
float64's ``1e-16`` resolution next to 1 (``1 - p_stay`` would round to 0 there).

As ``tau -> 0``, ``q(tau) ~ (k/n) exp(-m/tau)`` with ``m`` the smallest margin and ``k`` the number
of (site, token) pairs that attain it, so on an Arrhenius plot (``log q`` against ``1/tau``) the
slope tends to ``-m`` and the intercept to ``log(k/n)`` (:func:`arrhenius_fit`,
:func:`arrhenius_asymptote`). The uniform-margin bound of the paper, ``q <= (|V| - 1) exp(-m/tau)``,
is the line every trap stays under (:func:`log_margin_bound`).

Shapes: ``B`` states, ``n`` content sites, ``V`` vocabulary, ``T`` temperatures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ...core.checks import check_range
from ...mcmc.glauber import check_tau
from ...mcmc.sampling import Temperature
from .perfect import _check_logits

__all__ = ["log_exit_probabilities", "log_leave_probability", "leave_curve", "ArrheniusFit", "arrhenius_fit",
           "arrhenius_asymptote", "log_margin_bound", "margin_bound", "closest_leave_temperature",
           "tau_for_dwell"]

def _tau_column(tau: Temperature, b: int, device: torch.device) -> Tensor:
    check_tau(tau, b)
    if isinstance(tau, Tensor):
        return tau.to(device=device, dtype=torch.float64).reshape(b, 1, 1)
    return torch.full((b, 1, 1), float(tau), dtype=torch.float64, device=device)


def log_exit_probabilities(logits: Tensor, x: Tensor, tau: Temperature) -> Tensor:
    """``log P_tau(draw != x_i | x_-i)`` per site: ``logits`` ``[B, n, V]``, ``x`` ``[B, n]``, ``tau``
    a float or ``[B]`` -> ``[B, n]`` float64.

    Computed as ``logsumexp_{v != x_i}(l_v / tau) - logsumexp_v(l_v / tau)``: exact in relative
    terms down to ``exp(-745)``, where ``log(1 - p_stay)`` would give ``-inf`` below ``1e-16``.
    ``-inf`` logits (tokens outside the support) have probability 0.
    """
    _check_logits(logits, x)
    s = logits.double() / _tau_column(tau, x.shape[0], logits.device)
    total = torch.logsumexp(s, -1)
    others = torch.logsumexp(s.scatter(-1, x.long().unsqueeze(-1), float("-inf")), -1)
    return others - total


def log_leave_probability(logits: Tensor, x: Tensor, tau: Temperature) -> Tensor:
    """``log q`` with ``q = (1/n) sum_i P_tau(draw != x_i | x_-i)``, the exact per-step leave
    probability of random-scan Glauber from ``x``: ``[B, n, V]``, ``[B, n]`` -> ``[B]`` float64."""
    le = log_exit_probabilities(logits, x, tau)
    return torch.logsumexp(le, -1) - math.log(x.shape[1])


def leave_curve(logits: Tensor, x: Tensor, taus: Sequence[float]) -> Tensor:
    """``log q(tau)`` over a grid ``taus`` ``[T]``: ``[B, n, V]``, ``[B, n]`` -> ``[T, B]`` float64.
    The logits do not depend on ``tau``, so the whole curve costs no model evaluation."""
    taus = [float(t) for t in taus]
    if not taus:
        raise ValueError("taus must not be empty")
    for t in taus:
        check_tau(t)
    return torch.stack([log_leave_probability(logits, x, t) for t in taus])


@dataclass(frozen=True)
class ArrheniusFit:
    """Least-squares line ``log q = intercept + slope / tau`` per state: ``slope``, ``intercept``
    ``[B]`` float64, and ``taus`` the grid it was fitted on."""

    slope: Tensor
    intercept: Tensor
    taus: tuple[float, ...]


def arrhenius_fit(taus: Sequence[float], log_q: Tensor) -> ArrheniusFit:
    """Fit ``log q`` ``[T, B]`` against ``1 / tau`` over ``taus`` ``[T]`` (at least two distinct),
    one line per column -> :class:`ArrheniusFit`."""
    taus = tuple(float(t) for t in taus)
    for t in taus:
        check_tau(t)
    if len(set(taus)) < 2:
        raise ValueError("taus must hold at least two distinct temperatures to fit a line")
    if log_q.dim() != 2 or log_q.shape[0] != len(taus):
        raise ValueError(f"log_q must be [T={len(taus)}, B], got {tuple(log_q.shape)}")
    if not bool(torch.isfinite(log_q).all()):
        raise ValueError("log_q must be finite (a leave probability of exactly 0 has no Arrhenius line)")
    u = torch.tensor([1.0 / t for t in taus], dtype=torch.float64)
    uc = u - u.mean()
    y = log_q.double()
    slope = (uc[:, None] * (y - y.mean(0))).sum(0) / (uc * uc).sum()
    return ArrheniusFit(slope=slope, intercept=y.mean(0) - slope * u.mean(), taus=taus)


def arrhenius_asymptote(logits: Tensor, x: Tensor, *, rel_tol: float = 1e-9) -> tuple[Tensor, Tensor]:
    """The ``tau -> 0`` asymptote of ``log q`` for perfect traps: ``(slope, intercept)`` ``[B]``
    float64 with ``slope = -m`` (the smallest margin) and ``intercept = log(k / n)``, ``k`` the number
    of (site, token) pairs within ``rel_tol`` of that margin."""
    _check_logits(logits, x)
    L = logits.double()
    gap = L.gather(-1, x.long().unsqueeze(-1)) - L       # [B, n, V], margins to each token
    gap = gap.scatter(-1, x.long().unsqueeze(-1), float("inf"))
    m = gap.flatten(1).amin(-1)                           # [B]
    k = (gap.flatten(1) <= m[:, None] + rel_tol * m.abs().clamp_min(1.0)[:, None]).sum(-1)
    return -m, torch.log(k.double() / x.shape[1])


def log_margin_bound(margin: float | Tensor, support_size: int, tau: float) -> float | Tensor:
    """``log[(|V| - 1) exp(-m / tau)]``, the uniform-local-margin bound on ``log q`` for a state
    whose every site has margin ``>= m`` (``margin`` a float or a tensor of them)."""
    check_range("support_size", support_size, 2, integer=True)
    check_tau(tau)
    return math.log(support_size - 1) - margin / tau


def margin_bound(margin: float, support_size: int, tau: float) -> float:
    """``(|V| - 1) exp(-m / tau)``, the exp of :func:`log_margin_bound` for one margin: ``inf`` where
    it overflows (a very negative margin: the bound says nothing), 0 for a one-token support."""
    check_range("margin", margin)
    check_range("support_size", support_size, 1, integer=True)
    check_tau(tau)
    if support_size == 1:
        return 0.0
    log_b = float(log_margin_bound(margin, support_size, tau))
    return math.exp(log_b) if log_b < 709.0 else math.inf


def closest_leave_temperature(logits: Tensor, x: Tensor, taus: Sequence[float], target: float) -> tuple[float, float]:
    """The grid temperature whose exact leave probability from one state is closest to ``target``
    on a log scale: ``logits`` ``[1, n, V]``, ``x`` ``[1, n]`` -> ``(tau, q)``, the first such tau of
    ``taus`` on a tie."""
    check_range("target", target, 0.0, 1.0, lo_open=True)
    if x.dim() != 2 or x.shape[0] != 1:
        raise ValueError(f"x must be one state [1, n], got {tuple(x.shape)}")
    if len(taus) == 0:
        raise ValueError("taus is empty")
    log_q = leave_curve(logits, x, taus)[:, 0]
    k = int(torch.argmin((log_q - math.log(target)).abs()))
    return taus[k], float(log_q[k].exp())


def tau_for_dwell(logits: Tensor, x: Tensor, steps: float, *, lo: float = 1e-3, hi: float = 10.0,
                  iters: int = 24) -> Tensor:
    """The temperature at which the expected dwell ``1/q`` in each perfect trap equals ``steps``:
    ``[B, n, V]``, ``[B, n]`` -> ``[B]`` float64, by bisection in ``log tau`` (``q`` rises with
    ``tau`` on a perfect trap); ``iters`` halvings of ``[log lo, log hi]`` give ``tau`` to a relative
    ``(log(hi / lo)) / 2^iters`` (``6e-7`` at the defaults). ``lo`` (``hi``) is returned where even
    ``tau = lo`` (``hi``) gives a longer (shorter) dwell."""
    check_range("steps", steps, 1.0, lo_open=True)
    check_range("iters", iters, 1, 60, integer=True)
    check_tau(lo)
    check_tau(hi)
    if not lo < hi:
        raise ValueError(f"lo={lo} must be below hi={hi}")
    target = -math.log(steps)
    a = torch.full((x.shape[0],), math.log(lo), dtype=torch.float64)
    b = torch.full((x.shape[0],), math.log(hi), dtype=torch.float64)
    for _ in range(iters):
        mid = (a + b) / 2
        lq = log_leave_probability(logits, x, torch.exp(mid).to(logits.device)).cpu()
        above = lq > target   # leaves too often: colder
        b = torch.where(above, mid, b)
        a = torch.where(above, a, mid)
    return torch.exp((a + b) / 2)
