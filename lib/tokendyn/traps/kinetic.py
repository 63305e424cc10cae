"""Kinetic Monte Carlo: the random-scan Glauber chain simulated rejection-free.

At low temperature a plain sampler spends almost every step re-drawing the current token.
:func:`kinetic_sample` simulates the *same* chain rejection-free (Bortz, Kalos and Lebowitz 1975):
from ``x`` it draws the holding time ``T ~ Geometric(q(x))`` exactly, then the move ``(i, v)`` with
probability ``p_i(v) / (n q)`` for ``v != x_i``. One move costs one evaluation of every site (``n``
masked passes) however many steps it spans, so dwells of thousands of steps cost tens of passes.
:func:`state_at` reads the state at any Glauber step.

Shapes: ``B`` chains, ``n`` content sites, ``M`` moves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..checks import check_range
from ..conditional import ConditionalModel, check_tokens
from ..glauber import check_tau, make_generator
from ..influence import all_site_logits
from ..sampling import Temperature, draw
from .arrhenius import log_exit_probabilities

__all__ = ["KineticRun", "kinetic_sample", "state_at"]

@dataclass(frozen=True)
class KineticRun:
    """Output of :func:`kinetic_sample`.

    ``states`` ``[M + 1, B, n]``: the states visited, one record per move (``states[0]`` the start);
    ``times`` ``[M + 1, B]`` float64: the Glauber step at which each was entered (``times[0] = 0``);
    ``observed_until`` ``[B]`` float64: the step up to which each chain's path is known (the budget
    ``max_steps`` for a chain whose next move would pass it, else the entry time of its last state).
    A chain that stopped repeats its last state and time in later records."""

    states: Tensor
    times: Tensor
    observed_until: Tensor


def kinetic_sample(model: ConditionalModel, x0: Tensor, *, tau: Temperature, moves: int, seed: int,
                   max_steps: float = math.inf) -> KineticRun:
    """Random-scan Glauber from ``x0`` ``[B, n]`` at ``tau`` (float or ``[B]``), simulated one move
    (one change of state) at a time -> :class:`KineticRun` with ``moves`` records after the start.

    In state ``x`` the chain stays ``T ~ Geometric(q(x))`` steps, ``q`` the exact leave probability
    (:func:`log_leave_probability`), then moves to ``x`` with site ``i`` set to ``v != x_i`` with
    probability ``p_tau(v | x_-i) / (n q)``. That is the law of the plain random-scan chain observed
    at its changes, so every statistic of the path (the state at a given step, dwell times, the time
    spent in a region) has the plain chain's law; only the random numbers differ. Each move costs
    ``n`` masked evaluations per chain, so it pays when ``1/q > n``, at low temperature.

    A chain whose next move would come after step ``max_steps`` stops there. Seeded: the same seed
    gives the same run on the CPU.
    """
    check_tokens(model, x0, "x0")
    check_range("moves", moves, 0, integer=True)
    check_range("max_steps", max_steps, 0.0)
    b, n = x0.shape
    tau_all = tau.to(x0.device, torch.float64) if isinstance(tau, Tensor) else tau
    check_tau(tau, b)
    gen = make_generator(seed, "cpu")
    x = x0.clone()
    t = torch.zeros(b, dtype=torch.float64)
    stopped = torch.zeros(b, dtype=torch.bool)
    until = torch.full((b,), math.nan, dtype=torch.float64)
    states, times = [x.clone().cpu()], [t.clone()]
    for _ in range(moves):
        u = torch.rand(b, 3, generator=gen, dtype=torch.float64)   # drawn for every row: a row's
        act = (~stopped).nonzero().flatten()                       # stream never depends on others
        if act.numel():
            xa = x[act.to(x.device)]
            ta = tau_all[act.to(x0.device)] if isinstance(tau_all, Tensor) else tau_all
            L = all_site_logits(model, xa).double()                 # [A, n, V]
            le = log_exit_probabilities(L, xa, ta).cpu()            # [A, n]
            lq = torch.logsumexp(le, -1) - math.log(n)
            q = torch.exp(lq)
            hold = torch.floor(torch.log1p(-u[act, 0]) / torch.log1p(-q)) + 1   # Geometric(q) on {1, 2, ...}
            hold = torch.where(q > 0, hold, torch.full_like(hold, math.inf))
            t_next = t[act] + hold
            go = t_next <= max_steps
            halt = act[~go]
            stopped[halt] = True
            until[halt] = max_steps
            if bool(go.any()):
                g = go.nonzero().flatten()
                rows = act[g]
                w_site = torch.exp(le[g] - le[g].amax(-1, keepdim=True))
                site = draw(w_site, u[rows, 1])[0]
                s = L[g.to(L.device), site.to(L.device)]                 # [G, V]
                tg = ta[g.to(x0.device)].reshape(-1, 1) if isinstance(ta, Tensor) else ta
                s = s / tg
                s = s.scatter(-1, xa[g.to(xa.device), site.to(xa.device)].long().unsqueeze(-1), float("-inf"))
                w_tok = torch.exp(s - s.amax(-1, keepdim=True)).cpu()
                v = draw(w_tok, u[rows, 2])[0]
                x[rows.to(x.device), site.to(x.device)] = v.to(x.device, x.dtype)
                t[rows] = t_next[g]
        states.append(x.clone().cpu())
        times.append(t.clone())
    until = torch.where(stopped, until, t)
    return KineticRun(states=torch.stack(states), times=torch.stack(times), observed_until=until)


def state_at(run: KineticRun, step: float) -> tuple[Tensor, Tensor]:
    """The state of each chain at Glauber step ``step`` -> (tokens ``[B, n]``, known ``[B]`` bool).
    ``known`` is False where ``step`` lies past what the run observed (``observed_until``)."""
    check_range("step", step, 0.0)
    k = (run.times <= step).sum(0) - 1                       # [B], last record entered by ``step``
    tok = run.states[k, torch.arange(run.states.shape[1])]
    return tok, step <= run.observed_until

