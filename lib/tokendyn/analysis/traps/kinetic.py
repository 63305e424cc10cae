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

from ...core.checks import check_range
from ...mcmc.conditional import ConditionalModel, check_tokens
from ...mcmc.glauber import check_tau, make_generator
from ...mcmc.sampling import Temperature, draw
from ..influence import all_site_logits
from .arrhenius import log_exit_probabilities

# init and step stay module names (tokendyn.analysis.traps.kinetic.init / .step), as glauber.init / glauber.step
__all__ = ["KineticRun", "KineticState", "kinetic_sample", "state_at"]

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


@dataclass(frozen=True)
class KineticState:
    """The kinetic sampler's state: ``tokens`` ``[B, n]``, ``t`` ``[B]`` float64 (the Glauber step at
    which each chain entered its state), ``stopped`` ``[B]`` (its next move would pass the budget)
    and ``until`` ``[B]`` float64 (the budget for a stopped chain, else NaN)."""

    tokens: Tensor
    t: Tensor
    stopped: Tensor
    until: Tensor


def init(x0: Tensor) -> KineticState:
    """The state at ``x0`` ``[B, n]``: every chain at step 0, none stopped."""
    b = x0.shape[0]
    return KineticState(x0.clone(), torch.zeros(b, dtype=torch.float64), torch.zeros(b, dtype=torch.bool),
                        torch.full((b,), math.nan, dtype=torch.float64))


def step(model: ConditionalModel, state: KineticState, gen: torch.Generator, *, tau: Temperature,
         max_steps: float = math.inf) -> KineticState:
    """One move of every chain that has not stopped: its holding time ``T ~ Geometric(q)`` drawn
    exactly, then the site and the new token (see :func:`kinetic_sample`). Three uniforms are drawn
    for every row, so a row's stream never depends on the others. ``tau``: float or ``[B]``
    (float64, on the tokens' device); the arguments are checked by :func:`kinetic_sample`."""
    x, t, stopped, until = state.tokens.clone(), state.t.clone(), state.stopped.clone(), state.until.clone()
    b, n = x.shape
    u = torch.rand(b, 3, generator=gen, dtype=torch.float64)
    act = (~stopped).nonzero().flatten()
    if act.numel():
        xa = x[act.to(x.device)]
        ta = tau[act.to(x.device)] if isinstance(tau, Tensor) else tau
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
            tg = ta[g.to(x.device)].reshape(-1, 1) if isinstance(ta, Tensor) else ta
            s = s / tg
            s = s.scatter(-1, xa[g.to(xa.device), site.to(xa.device)].long().unsqueeze(-1), float("-inf"))
            w_tok = torch.exp(s - s.amax(-1, keepdim=True)).cpu()
            v = draw(w_tok, u[rows, 2])[0]
            x[rows.to(x.device), site.to(x.device)] = v.to(x.device, x.dtype)
            t[rows] = t_next[g]
    return KineticState(x, t, stopped, until)


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
    gives the same run on the CPU. It drives :func:`init` and :func:`step` (one move per call), as
    ``glauber.run`` drives ``glauber.step``: a loop of your own over them draws exactly this run.
    """
    check_tokens(model, x0, "x0")
    check_range("moves", moves, 0, integer=True)
    check_range("max_steps", max_steps, 0.0)
    tau_all = tau.to(x0.device, torch.float64) if isinstance(tau, Tensor) else tau
    check_tau(tau, x0.shape[0])
    gen = make_generator(seed, "cpu")
    state = init(x0)
    states, times = [state.tokens.clone().cpu()], [state.t.clone()]
    for _ in range(moves):
        state = step(model, state, gen, tau=tau_all, max_steps=max_steps)
        states.append(state.tokens.clone().cpu())
        times.append(state.t.clone())
    until = torch.where(state.stopped, state.until, state.t)
    return KineticRun(states=torch.stack(states), times=torch.stack(times), observed_until=until)


def state_at(run: KineticRun, step: float) -> tuple[Tensor, Tensor]:
    """The state of each chain at Glauber step ``step`` -> (tokens ``[B, n]``, known ``[B]`` bool).
    ``known`` is False where ``step`` lies past what the run observed (``observed_until``)."""
    check_range("step", step, 0.0)
    k = (run.times <= step).sum(0) - 1                       # [B], last record entered by ``step``
    tok = run.states[k, torch.arange(run.states.shape[1])]
    return tok, step <= run.observed_until

