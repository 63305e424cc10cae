"""How long chains stay: in a trap's exact state, and in its basin.

The dwell in the exact state is Geometric(q): :func:`dwell_check` compares observed dwells
(censored at the budget) with it, through the restricted mean ``E[min(T, S + 1)]``, which is exact
under censoring, and the largest gap between survival curves; :func:`dwell_law` runs the chains
that feed it. :func:`basin_dwell` starts chains in each trap and times their exit from its Hamming
ball of radius ``h`` (:func:`basin_exit_times`): the dwell in the trap's basin, not only in the
exact state.

Shapes: ``B`` chains or states, ``n`` content sites, ``V`` vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ...core.checks import check_range
from ...core.stats import Estimate, bootstrap, kolmogorov_band
from ...mcmc.conditional import ConditionalModel, check_tokens
from ...mcmc.glauber import check_tau, sample
from .arrhenius import log_leave_probability

__all__ = ["restricted_mean_geometric", "geometric_survival", "DwellCheck", "dwell_check",
           "first_exit_times", "DwellLaw", "dwell_law", "basin_exit_times", "BasinDwell", "basin_dwell"]

def restricted_mean_geometric(q: float, steps: int) -> float:
    """``E[min(T, S + 1)]`` for ``T ~ Geometric(q)`` on ``{1, 2, ...}`` and ``S = steps``:
    ``(1 - (1 - q)^(S + 1)) / q``. The mean dwell a budget of ``S`` steps can show, with chains still
    in the state at the end counted as ``S + 1`` (:func:`first_exit_times`)."""
    check_range("q", q, 0.0, 1.0, lo_open=True)
    check_range("steps", steps, 0, integer=True)
    return -math.expm1((steps + 1) * math.log1p(-q)) / q if q < 1 else 1.0


def geometric_survival(q: float, t: Tensor) -> Tensor:
    """``P(T > t) = (1 - q)^t`` for a Geometric(q) dwell time, at steps ``t`` ``[K]`` -> ``[K]``."""
    check_range("q", q, 0, 1)
    return (1 - q) ** t.double()


def first_exit_times(trajectory: Tensor) -> tuple[Tensor, Tensor]:
    """Steps until each chain first leaves its starting state, from states recorded every step
    ``[S + 1, B, n]`` -> (times ``[B]``, exited ``[B]`` bool); a chain still there after ``S`` steps
    is censored at ``S + 1``."""
    if trajectory.dim() != 3 or trajectory.shape[0] < 2:
        raise ValueError(f"trajectory must be [S + 1, B, n] with S >= 1, got {tuple(trajectory.shape)}")
    S = trajectory.shape[0] - 1
    moved = (trajectory[1:] != trajectory[:1]).any(-1)    # [S, B]
    exited = moved.any(0)
    first = torch.where(exited, moved.long().argmax(0) + 1, torch.full_like(exited, S + 1, dtype=torch.long))
    return first, exited


@dataclass(frozen=True)
class DwellCheck:
    """Observed dwell in one state against Geometric(q), for chains watched ``steps`` steps.

    ``observed``: mean of ``min(T, S + 1)`` with a bootstrap interval; ``predicted``: its exact
    value :func:`restricted_mean_geometric`; ``max_gap``: the largest ``|P_obs(T > t) - (1-q)^t|``
    over ``t = 0..S``; ``band``: the 95% Kolmogorov band (:func:`~tokendyn.core.stats.kolmogorov_band`) it is judged against;
    ``censored``: chains still in the state at the end."""

    q: float
    steps: int
    observed: Estimate
    predicted: float
    max_gap: float
    band: float
    censored: int

    @property
    def consistent(self) -> bool:
        """The prediction lies in the observed interval and the survival gap within the band."""
        return self.observed.lo <= self.predicted <= self.observed.hi and self.max_gap <= self.band


def dwell_check(times: Tensor, exited: Tensor, q: float | Tensor, steps: int, *, seed: int = 0,
                n_boot: int = 2000) -> DwellCheck:
    """Compare first-exit ``times`` ``[N]`` (censored at ``steps + 1`` where ``exited`` is False,
    as :func:`first_exit_times` gives them) with Geometric(``q``) -> :class:`DwellCheck`.

    ``q`` is one leave probability for every chain, or one per chain (``[N]``, chains started in
    different states): then the prediction is the mean of the chains' restricted means, the
    survival curve the mean of their Geometric survivals, and :attr:`DwellCheck.q` the mean ``q``.
    The band is the same Kolmogorov band (independent chains; conservative for discrete laws)."""
    t = times.double().flatten()
    e = exited.bool().flatten()
    if t.numel() < 2 or e.numel() != t.numel():
        raise ValueError("times and exited must hold the same N >= 2 chains")
    per_chain = isinstance(q, Tensor) and q.numel() > 1
    if per_chain:
        qv = q.detach().double().flatten().cpu()
        if qv.numel() != t.numel():
            raise ValueError(f"q holds {qv.numel()} values for {t.numel()} chains")
        if bool(((qv <= 0) | (qv > 1) | qv.isnan()).any()):
            raise ValueError("q must lie in (0, 1] for every chain")
    else:
        q = float(q)
        check_range("q", q, 0.0, 1.0, lo_open=True)
    check_range("steps", steps, 1, integer=True)
    if bool((t < 1).any()) or bool((t > steps + 1).any()) or bool((t[~e] != steps + 1).any()):
        raise ValueError(f"times must lie in [1, steps + 1 = {steps + 1}], censored ones at steps + 1")
    grid = torch.arange(steps + 1, dtype=torch.float64)
    surv_obs = (t[None, :] > grid[:, None]).double().mean(1)
    if per_chain:
        surv_geo = torch.where(qv[None, :] < 1, torch.exp(grid[:, None] * torch.log1p(-torch.where(qv < 1, qv, 0.0))[None, :]),
                               (grid[:, None] == 0).double()).mean(1)
        predicted = float(np.mean([restricted_mean_geometric(float(v), steps) for v in qv]))
        q_out = float(qv.mean())
    else:
        surv_geo = torch.exp(grid * math.log1p(-q)) if q < 1 else (grid == 0).double()
        predicted = restricted_mean_geometric(q, steps)
        q_out = q
    return DwellCheck(q=q_out, steps=int(steps), observed=bootstrap(t.numpy(), seed=seed, n_boot=n_boot),
                      predicted=predicted, max_gap=float((surv_obs - surv_geo).abs().max()),
                      band=kolmogorov_band(t.numel()), censored=int((~e).sum()))


@dataclass(frozen=True)
class DwellLaw:
    """Output of :func:`dwell_law`, one temperature: ``chains`` chains started in each of ``traps``
    traps and watched ``steps`` steps. ``check``: the pooled :class:`DwellCheck` (every chain
    against Geometric of its own trap's exact ``q``); ``ratio``: observed over predicted restricted
    mean dwell, with the observed interval divided by the prediction; ``times`` and ``exited``
    ``[traps, chains]``, ``q`` ``[traps]``."""

    tau: float
    traps: int
    chains: int
    steps: int
    check: DwellCheck
    ratio: Estimate
    times: Tensor
    exited: Tensor
    q: Tensor


def basin_exit_times(model: ConditionalModel, centres: Tensor, *, tau: float, steps: int, h: int, seed: int,
                     first_segment: int = 4, max_segment: int = 1024) -> tuple[Tensor, Tensor]:
    """First exit of plain random-scan chains from the Hamming ball of radius ``h`` around their
    start: chain ``b`` starts at ``centres[b]`` (``[B, n]``) and exits at the first step its state
    differs from ``centres[b]`` at more than ``h`` sites (``h = 0``: the exact state, the trap's
    Geometric(q) dwell; ``h = 2``: the basin of Paper 1's approximate traps). Watched up to
    ``steps`` steps -> (times ``[B]`` long, censored at ``steps + 1``; exited ``[B]`` bool), on CPU.

    The chains run in segments of ``first_segment``, ``first_segment``, then doubling up to
    ``max_segment`` steps; a chain that has exited drops out and the others continue from their
    state with the next seed (``seed + segment``), the same Markov chain, so the cost is the chains'
    dwell, not ``steps`` each.
    """
    check_tokens(model, centres, "centres")
    check_tau(tau)
    check_range("steps", steps, 1, integer=True)
    check_range("h", h, 0, centres.shape[1] - 1, integer=True)
    check_range("first_segment", first_segment, 1, integer=True)
    check_range("max_segment", max_segment, first_segment, integer=True)
    B = centres.shape[0]
    t_exit = torch.full((B,), steps + 1, dtype=torch.long)
    live = torch.arange(B)
    x = centres
    done, seg, length = 0, 0, first_segment
    while done < steps and live.numel():
        s = min(length, steps - done)
        run = sample(model, x, steps=s, tau=float(tau), seed=seed + seg, record_every=1)
        far = (run.trajectory[1:].cpu() != centres[live.to(centres.device)].cpu()[None]).sum(-1) > h   # [s, b]
        e = far.any(0)
        t_exit[live[e]] = done + far.long().argmax(0)[e] + 1
        keep = (~e).to(x.device)
        x, live = run.tokens[keep], live[~e]
        done += s
        if seg >= 1:
            length = min(2 * length, max_segment)
        seg += 1
    return t_exit, t_exit <= steps


def dwell_law(model: ConditionalModel, tokens: Tensor, logits: Tensor, taus: Sequence[float], *, chains: int,
              steps: int, seed: int, first_segment: int = 4) -> dict[float, DwellLaw]:
    """The dwell law in many traps at once: ``chains`` plain random-scan chains
    (:func:`tokendyn.mcmc.glauber.sample`) start in each trap ``tokens`` ``[K, n]`` at each temperature
    of ``taus``, are watched up to ``steps`` steps, and their first exit times
    (:func:`basin_exit_times` with ``h = 0``) are compared with Geometric of the trap's exact ``q`` (from its
    ``logits`` ``[K, n, V]``) by :func:`dwell_check`.

    The exit times are :func:`basin_exit_times` with ``h = 0`` (seed ``seed + 1000 j`` at the
    ``j``-th temperature): a chain still in its trap at the end of a segment restarts there with a
    fresh seed, by the Markov property the law of one uninterrupted run. -> ``{tau: DwellLaw}``."""
    check_range("chains", chains, 1, integer=True)
    check_range("steps", steps, 1, integer=True)
    check_range("first_segment", first_segment, 1, integer=True)
    if tokens.dim() != 2 or tokens.shape[0] < 1 or tokens.shape[0] * chains < 2:
        raise ValueError(f"tokens must be [K, n] with K chains >= 2, got {tuple(tokens.shape)} and chains={chains}")
    K = tokens.shape[0]
    start = tokens.repeat_interleave(chains, 0)
    out = {}
    for j, tau in enumerate(taus):
        tau = float(tau)
        check_tau(tau)
        q = log_leave_probability(logits, tokens, tau).exp().cpu()
        t_exit, exited = basin_exit_times(model, start, tau=tau, steps=steps, h=0, seed=seed + 1000 * j,
                                          first_segment=first_segment)
        chk = dwell_check(t_exit, exited, q.repeat_interleave(chains), steps, seed=seed)
        ratio = Estimate(chk.observed.value / chk.predicted, chk.observed.lo / chk.predicted,
                         chk.observed.hi / chk.predicted, chk.observed.n)
        out[tau] = DwellLaw(tau=tau, traps=K, chains=chains, steps=steps, check=chk, ratio=ratio,
                            times=t_exit.reshape(K, chains), exited=exited.reshape(K, chains), q=q)
    return out


@dataclass(frozen=True)
class BasinDwell:
    """Dwell in the basin of each trap at one temperature (:func:`basin_dwell`): ``times``
    ``[K, chains]`` first exits from the Hamming ball of radius ``h`` (censored at ``steps + 1``
    where ``exited`` ``[K, chains]`` is False), ``per_trap`` ``[K]`` each trap's median, and
    ``median`` their median over traps with a bootstrap interval over traps."""

    tau: float
    h: int
    steps: int
    chains: int
    times: Tensor
    exited: Tensor
    per_trap: Tensor
    median: Estimate


def basin_dwell(model: ConditionalModel, tokens: Tensor, taus: Sequence[float], *, h: int, chains: int, steps: int,
                seed: int) -> dict[float, BasinDwell]:
    """How long plain random-scan chains stay near each trap ``tokens`` ``[K, n]``: ``chains``
    chains start in every trap at each temperature of ``taus`` and are watched until they differ
    from it at more than ``h`` sites (:func:`basin_exit_times`), at most ``steps`` steps; seed
    ``seed + 1000 j`` at the ``j``-th temperature. A trap's statistic is the median of its chains'
    exit times (a censored median is exact while under half its chains are censored; above, it is
    ``steps + 1``, a lower bound). -> ``{tau: BasinDwell}``."""
    check_range("chains", chains, 1, integer=True)
    if tokens.dim() != 2 or tokens.shape[0] < 2:
        raise ValueError(f"tokens must be [K, n] with K >= 2 traps, got {tuple(tokens.shape)}")
    K = tokens.shape[0]
    out = {}
    for j, tau in enumerate(taus):
        t, e = basin_exit_times(model, tokens.repeat_interleave(chains, 0), tau=float(tau), steps=steps, h=h,
                                seed=seed + 1000 * j)
        t, e = t.reshape(K, chains), e.reshape(K, chains)
        per_trap = torch.from_numpy(np.median(t.double().numpy(), 1))
        out[float(tau)] = BasinDwell(tau=float(tau), h=int(h), steps=int(steps), chains=int(chains), times=t,
                                     exited=e, per_trap=per_trap,
                                     median=bootstrap(per_trap.numpy(), np.median, seed=seed))
    return out

