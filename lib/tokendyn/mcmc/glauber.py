"""Glauber dynamics on any :class:`~tokendyn.mcmc.conditional.ConditionalModel`, batched and seeded.

One Glauber step on a state ``x`` in ``V^n``: pick a site ``i`` and replace ``x_i`` by a draw from
``p_tau(v | x_-i) ∝ exp(l_i(v) / tau)``. Each of the ``B`` rows of a batch is its own chain with
its own site (one site for the whole batch would make the ``B`` chains one draw, not ``B``).

The kernel is written BlackJAX-style:

- :func:`init` / :func:`step` for chains and :func:`init_coupled` / :func:`coupled_step` for
  pairs of chains, pure functions over an explicit state, the randomness passed in as a
  ``torch.Generator``; each step returns ``(new state, StepInfo)``.
- Variants are functions, not flags: a *scan* (:func:`random_scan`, the paper's chain, or
  :func:`systematic_scan`) picks the sites and a *coupling* (:func:`maximal_coupling` or
  :func:`crn_coupling`) joins two site conditionals. Public entry points also take their names
  (``"random"``, ``"maximal"``, ...) and resolve them once, before the loop.
- :func:`run` is the one driver loop, for chains and pairs alike: it records every ``k`` steps,
  stops when every pair has coupled and can drop coupled pairs. :func:`sample` and
  :func:`coupling_times` are seeded wrappers over it; coupling times come out as
  :class:`~tokendyn.mcmc.censored.CensoredTimes` (a pair still apart is censored at the budget).

Nothing in a step reads a value back to the host, so a CUDA run is not synchronised per step (a
coupled run checks for early exit only every ``check_every`` steps).

Temperature: ``tau`` is a float, or a ``[B]`` tensor giving each chain its own temperature, so a
whole temperature grid runs as one batch (one forward pass per step instead of one per grid
point; on a small model the per-step overhead, not the FLOPs, is most of the cost). A step's draw
is :func:`~tokendyn.mcmc.sampling.draw_tempered` (two-level, float64 where it adds up; exact at
``tau = 0.05`` and ``100``); a coupled step joins two float64 softmax rows (see
:mod:`tokendyn.mcmc.sampling`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.checks import check_choice, check_range
from .censored import CensoredTimes
from .conditional import ConditionalModel, check_states
from .sampling import (Temperature, check_distribution, check_tau, check_uniforms, draw, draw_tempered, make_generator,
                       no_mass, probabilities, uniforms)

__all__ = ["GlauberState", "CoupledState", "StepInfo", "RunResult", "SampleResult", "CouplingResult",
           "Scan", "Coupling", "random_scan", "systematic_scan", "maximal_coupling", "crn_coupling",
           "SCANS", "COUPLINGS", "init", "step", "init_coupled", "coupled_step", "run", "sample",
           "coupled_draw", "coupling_times", "greedy_fixed_point"]

Scan = Callable[[int, int, int, torch.Generator, torch.device], Tensor]
"""``(b, n, t, gen, device) -> sites [b]``: the site each chain updates at step ``t``."""

Coupling = Callable[[Tensor, Tensor, Tensor, Tensor], tuple[Tensor, Tensor, Tensor]]
"""``(p [B, V], q [B, V], u1 [B], u2 [B]) -> (x [B], y [B], no_mass [B])``: a joint draw of
``X ~ p`` and ``Y ~ q`` from two uniforms per row, for normalised ``p`` and ``q``."""


def random_scan(b: int, n: int, t: int, gen: torch.Generator, device: torch.device) -> Tensor:
    """An independent uniform site per chain ``[b]`` (the paper's chain)."""
    return torch.randint(n, (b,), generator=gen, device=device)


def systematic_scan(b: int, n: int, t: int, gen: torch.Generator, device: torch.device) -> Tensor:
    """Site ``t mod n`` for every chain ``[b]``; draws nothing from ``gen``."""
    return torch.full((b,), t % n, device=device, dtype=torch.long)


def maximal_coupling(p: Tensor, q: Tensor, u1: Tensor, u2: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """With probability ``w = sum min(p, q) = 1 - TV(p, q)`` both take one draw from
    ``min(p, q) / w``; otherwise each draws from its own residual ``(p - min) / (1 - w)``
    (disjoint supports, so then ``X != Y``). ``P(X = Y) = 1 - TV``, the most any coupling allows.
    ``no_mass`` is True where ``p`` or ``q`` holds a nan (a softmax row with no finite mass)."""
    m = torch.minimum(p, q)  # propagates nan: w is nan when p or q is
    w = m.sum(-1)
    together = draw(m, u2)[0]
    x = torch.where(u1 < w, together, draw(p - m, u2)[0])
    y = torch.where(u1 < w, together, draw(q - m, u2)[0])
    return x, y, ~torch.isfinite(w)


def crn_coupling(p: Tensor, q: Tensor, u1: Tensor, u2: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Common random numbers: both chains use the inverse CDF with the same uniform ``u1``."""
    (x, tp), (y, tq) = draw(p, u1), draw(q, u1)
    return x, y, no_mass(tp) | no_mass(tq)


SCANS: dict[str, Scan] = {"random": random_scan, "systematic": systematic_scan}
COUPLINGS: dict[str, Coupling] = {"maximal": maximal_coupling, "crn": crn_coupling}


def _resolve(kind: str, value: str | Callable, table: dict[str, Callable]) -> Callable:
    """A variant given by name or as one of the functions in ``table`` -> the function."""
    if callable(value):
        if value not in table.values():
            raise ValueError(f"{kind} must be one of {list(table)} or their functions, got {value!r}")
        return value
    check_choice(kind, value, tuple(table))
    return table[value]


@dataclass(frozen=True)
class GlauberState:
    """The chains: ``tokens`` ``[B, n]`` content ids and ``t``, the number of steps taken."""

    tokens: Tensor
    t: int = 0


@dataclass(frozen=True)
class CoupledState:
    """Pairs of chains: ``x`` and ``y`` ``[B, n]``, updated at the same sites; ``t`` steps taken."""

    x: Tensor
    y: Tensor
    t: int = 0


@dataclass(frozen=True)
class StepInfo:
    """What a step did: ``sites`` ``[B]``, the drawn ``values`` ``[B]`` (``values_y`` for the second
    chain of a pair) and ``no_mass`` ``[B]``, True where a conditional had no finite positive mass
    (kept on the device, so a loop can check it without a per-step sync)."""

    sites: Tensor
    values: Tensor
    no_mass: Tensor
    values_y: Tensor | None = None


@dataclass(frozen=True)
class RunResult:
    """Output of :func:`run`.

    ``state``: the final state (every row, coupled pairs included). For pairs, ``times`` holds
    each row's first all-sites agreement (``0`` if it started equal), a row still apart after
    ``steps`` steps censored there (:class:`~tokendyn.mcmc.censored.CensoredTimes`, ``cap = steps``).
    With ``record_every=k``, ``trajectory`` ``[T, B, n]`` holds the (first) chains at
    ``steps_recorded`` ``[T]`` = ``0, k, 2k, ...``.
    """

    state: GlauberState | CoupledState
    times: CensoredTimes | None = None
    trajectory: Tensor | None = None
    steps_recorded: Tensor | None = None


@dataclass(frozen=True)
class SampleResult:
    """Output of :func:`sample`: final ``tokens`` ``[B, n]``; with ``record_every=k``,
    ``trajectory`` ``[T, B, n]`` holds the states at ``steps_recorded`` ``[T]`` = ``0, k, 2k, ...``."""

    tokens: Tensor
    trajectory: Tensor | None = None
    steps_recorded: Tensor | None = None


@dataclass(frozen=True)
class CouplingResult:
    """Output of :func:`coupling_times`.

    ``times``: for each row ``[B]`` the first step at which its two chains agree at every site
    (``0`` if they start equal); a row that has not coupled within ``max_steps`` is censored there
    (:class:`~tokendyn.mcmc.censored.CensoredTimes`, ``cap = max_steps``). Censored rows are kept, so
    ``P(T > t)`` is read directly for every ``t < max_steps``. With ``record_every=k``,
    ``trajectory`` ``[T, B, n]`` holds the first chain of every pair at ``steps_recorded`` ``[T]``.
    """

    times: CensoredTimes
    trajectory: Tensor | None = None
    steps_recorded: Tensor | None = None


def _tensor(name: str, x: object) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids [B, n], got {type(x).__name__}")


def init(x0: Tensor) -> GlauberState:
    """Start chains at ``x0`` ``[B, n]`` (copied)."""
    _tensor("x0", x0)
    return GlauberState(tokens=x0.clone(), t=0)


def init_coupled(x0: Tensor, y0: Tensor) -> CoupledState:
    """Start pairs of chains at ``x0`` and ``y0`` ``[B, n]`` (copied)."""
    _tensor("x0", x0)
    _tensor("y0", y0)
    if x0.shape != y0.shape:
        raise ValueError(f"x0 and y0 must have the same shape, got {tuple(x0.shape)} and {tuple(y0.shape)}")
    return CoupledState(x=x0.clone(), y=y0.clone(), t=0)


def _set(x: Tensor, sites: Tensor, values: Tensor) -> Tensor:
    x = x.clone()
    x[torch.arange(x.shape[0], device=x.device), sites] = values.to(x.dtype)
    return x


def _step(model: ConditionalModel, x: Tensor, t: int, gen: torch.Generator, tau: Temperature,
          scan: Scan) -> tuple[Tensor, StepInfo]:
    """One unchecked step of chains ``x`` ``[B, n]``. Draws the sites, then one uniform per chain."""
    b, n = x.shape
    sites = scan(b, n, t, gen, x.device)
    new, total = draw_tempered(model.site_logits(x, sites), tau, uniforms(b, gen, x.device))
    return _set(x, sites, new), StepInfo(sites=sites, values=new, no_mass=no_mass(total))


def _coupled_step(model: ConditionalModel, x: Tensor, y: Tensor, t: int, gen: torch.Generator,
                  tau: Temperature, scan: Scan, coupling: Coupling) -> tuple[Tensor, Tensor, StepInfo]:
    """One unchecked step of pairs: one forward pass over both chains, then two uniforms per pair."""
    b, n = x.shape
    sites = scan(b, n, t, gen, x.device)
    logits = model.site_logits(torch.cat([x, y]), torch.cat([sites, sites]))
    probs = probabilities(logits, torch.cat([tau, tau]) if isinstance(tau, Tensor) else tau)
    u1, u2 = uniforms(b, gen, x.device), uniforms(b, gen, x.device)
    vx, vy, bad = coupling(probs[:b], probs[b:], u1, u2)
    return _set(x, sites, vx), _set(y, sites, vy), StepInfo(sites=sites, values=vx, no_mass=bad, values_y=vy)


def _raise_no_mass(where: str) -> None:
    raise ValueError(f"model.site_logits gave a row with no finite probability mass {where} "
                     "(nan or +inf logits, or every logit -inf): the draw would be meaningless. "
                     "Check the model's weights and dtype.")


def _check_step(model: ConditionalModel, gen: torch.Generator, t: int, tau: Temperature,
                *tokens: tuple[str, Tensor]) -> None:
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"gen must be a torch.Generator, got {type(gen).__name__}")
    for name, x in tokens:
        check_states(model, x, name)
    check_range("state.t", t, 0, integer=True)
    check_tau(tau, tokens[0][1].shape[0])


def step(model: ConditionalModel, state: GlauberState, gen: torch.Generator, *, tau: Temperature,
         scan: str | Scan = "random", check: bool = True) -> tuple[GlauberState, StepInfo]:
    """One Glauber step of every chain -> ``(new GlauberState, StepInfo)`` (inputs untouched).

    Draws, in order, the sites (random scan) and one uniform per chain from ``gen``.

    With ``check`` (the default) the arguments are validated first, as :func:`sample` does
    (``tau`` as in :func:`~tokendyn.mcmc.sampling.check_tau`, ``scan``, the states by
    :func:`~tokendyn.mcmc.conditional.check_states`), and a conditional without finite positive mass
    raises ``ValueError``: each check reads a value back to the host. A hand-written loop on a GPU
    can validate once and pass ``check=False`` (then ``info.no_mass`` says where a draw failed).
    """
    if check:
        if not isinstance(state, GlauberState):
            raise TypeError(f"state must be a GlauberState (see init), got {type(state).__name__}")
        _check_step(model, gen, state.t, tau, ("state.tokens", state.tokens))
    scan_fn = _resolve("scan", scan, SCANS)
    x, info = _step(model, state.tokens, state.t, gen, tau, scan_fn)
    if check and bool(info.no_mass.any()):
        _raise_no_mass(f"at step {state.t}")
    return GlauberState(tokens=x, t=state.t + 1), info


def coupled_step(model: ConditionalModel, state: CoupledState, gen: torch.Generator, *, tau: Temperature,
                 scan: str | Scan = "random", coupling: str | Coupling = "maximal",
                 check: bool = True) -> tuple[CoupledState, StepInfo]:
    """One step of every pair: both chains update the same site, their two site conditionals
    joined by ``coupling`` -> ``(new CoupledState, StepInfo)``. Draws the sites, then ``u1`` and
    ``u2`` (one each per pair). A maximal or CRN coupling leaves each chain's own law untouched.
    ``check`` as in :func:`step`."""
    if check:
        if not isinstance(state, CoupledState):
            raise TypeError(f"state must be a CoupledState (see init_coupled), got {type(state).__name__}")
        if state.x.shape != state.y.shape:
            raise ValueError(f"state.x and state.y must have the same shape, got {tuple(state.x.shape)} "
                             f"and {tuple(state.y.shape)}")
        _check_step(model, gen, state.t, tau, ("state.x", state.x), ("state.y", state.y))
    x, y, info = _coupled_step(model, state.x, state.y, state.t, gen, tau, _resolve("scan", scan, SCANS),
                               _resolve("coupling", coupling, COUPLINGS))
    if check and bool(info.no_mass.any()):
        _raise_no_mass(f"at step {state.t}")
    return CoupledState(x=x, y=y, t=state.t + 1), info


def run(model: ConditionalModel, state: GlauberState | CoupledState, gen: torch.Generator, *, steps: int,
        tau: Temperature, scan: str | Scan = "random", coupling: str | Coupling = "maximal",
        record_every: int | None = None, record_steps: int | None = None, check_every: int = 64,
        drop_coupled: bool = False) -> RunResult:
    """The driver: ``steps`` steps of chains (a :class:`GlauberState`) or of coupled pairs (a
    :class:`CoupledState`) -> :class:`RunResult`.

    - ``record_every=k`` records the (first) chains every ``k`` steps, step 0 included, up to
      ``record_steps`` (default ``steps``).
    - Pairs: each row's coupling time is tracked; every ``check_every`` steps (the only host
      syncs) the loop stops if every pair has coupled, and with ``drop_coupled`` removes coupled
      pairs from the batch. Two coupled chains stay equal forever, so dropping changes no pair's
      law, only which random numbers later pairs draw. Nothing is dropped before the last record.

    Validates everything before the first step. The same generator state gives the same run.
    """
    pairs = isinstance(state, CoupledState)
    if not pairs and not isinstance(state, GlauberState):
        raise TypeError(f"state must be a GlauberState or CoupledState, got {type(state).__name__}")
    if not isinstance(gen, torch.Generator):
        raise TypeError(f"gen must be a torch.Generator, got {type(gen).__name__}")
    x = state.x if pairs else state.tokens
    check_states(model, x, "x0")
    if pairs:
        check_states(model, state.y, "y0")
        if state.y.shape != x.shape:
            raise ValueError(f"x0 and y0 must have the same shape, got {tuple(x.shape)} and {tuple(state.y.shape)}")
    check_tau(tau, x.shape[0])
    check_range("steps", steps, 0, integer=True)
    scan_fn = _resolve("scan", scan, SCANS)
    coupling_fn = _resolve("coupling", coupling, COUPLINGS)
    check_range("check_every", check_every, 1, integer=True)
    if record_every is not None:
        check_range("record_every", record_every, 1, integer=True)
        record_steps = steps if record_steps is None else record_steps
        check_range("record_steps", record_steps, 0, steps, integer=True)
    elif record_steps is not None:
        raise ValueError("record_steps needs record_every")

    b, dev, t0 = x.shape[0], x.device, state.t
    frames, at = ([x.clone()], [0]) if record_every else ([], [])
    recording = bool(record_every) and record_steps > 0
    bad = torch.zeros((), dtype=torch.bool, device=dev)  # any draw without finite mass so far
    if pairs:
        y = state.y
        x_all, y_all = x.clone(), y.clone()
        times = torch.where((x == y).all(1), 0, steps + 1).to(dev)  # steps + 1: not coupled yet (inside run only)
        live = torch.arange(b, device=dev)  # rows of the full batch still in x, y
    tau_live = tau.to(dev) if isinstance(tau, Tensor) else tau
    k = 0
    for k in range(1, steps + 1):
        # the kernels themselves, validated once above (check=False: no host sync per step)
        if pairs:
            cur, info = coupled_step(model, CoupledState(x=x, y=y, t=t0 + k - 1), gen, tau=tau_live, scan=scan_fn,
                                     coupling=coupling_fn, check=False)
            x, y = cur.x, cur.y
            t_live = times[live]
            times[live] = torch.where((x == y).all(1) & (t_live > steps), k, t_live)
        else:
            cur, info = step(model, GlauberState(tokens=x, t=t0 + k - 1), gen, tau=tau_live, scan=scan_fn, check=False)
            x = cur.tokens
        bad |= info.no_mass.any()
        if recording:
            if k % record_every == 0:
                frames.append(x.clone())
                at.append(k)
            recording = (k // record_every + 1) * record_every <= record_steps
            continue  # every chain runs (and nothing is dropped) until the last record
        if pairs and k % check_every == 0:
            if bool(bad):
                _raise_no_mass(f"by step {k}")
            open_ = times[live] > steps
            if not bool(open_.any()):
                break
            if drop_coupled and not bool(open_.all()):
                x_all[live], y_all[live] = x, y
                live, x, y = live[open_], x[open_], y[open_]
                if isinstance(tau_live, Tensor):
                    tau_live = tau_live[open_]
    if steps and bool(bad):
        _raise_no_mass(f"within {steps} steps")
    traj = dict(trajectory=torch.stack(frames), steps_recorded=torch.tensor(at)) if record_every else {}
    if not pairs:
        return RunResult(state=GlauberState(tokens=x, t=t0 + k), **traj)
    x_all[live], y_all[live] = x, y
    apart = times > steps
    return RunResult(state=CoupledState(x=x_all, y=y_all, t=t0 + k),
                     times=CensoredTimes(torch.where(apart, steps, times), apart, cap=steps), **traj)


def sample(model: ConditionalModel, x0: Tensor, *, steps: int, tau: Temperature, seed: int,
           scan: str | Scan = "random", record_every: int | None = None) -> SampleResult:
    """Run ``steps`` Glauber steps from ``x0`` ``[B, n]`` at temperature ``tau`` (float or ``[B]``).

    Returns final tokens ``[B, n]`` and, if ``record_every=k``, the states every ``k`` steps
    (``[T, B, n]``, including step 0). The same seed gives the same chains bit for bit on CPU.
    """
    if not isinstance(x0, Tensor):
        raise TypeError(f"x0 must be a torch.Tensor of token ids [B, n], got {type(x0).__name__}")
    gen = make_generator(seed, x0.device)
    r = run(model, init(x0), gen, steps=steps, tau=tau, scan=scan, record_every=record_every)
    return SampleResult(tokens=r.state.tokens, trajectory=r.trajectory, steps_recorded=r.steps_recorded)


def coupled_draw(p: Tensor, q: Tensor, u1: Tensor, u2: Tensor,
                 coupling: str | Coupling = "maximal") -> tuple[Tensor, Tensor]:
    """Draw ``X ~ p``, ``Y ~ q`` (``[B, V]`` each) jointly with ``coupling`` -> ``([B], [B])``,
    checked (see :func:`maximal_coupling` and :func:`crn_coupling`)."""
    fn = _resolve("coupling", coupling, COUPLINGS)
    check_distribution("p", p)
    check_distribution("q", q)
    if q.shape != p.shape:
        raise ValueError(f"p and q must have the same shape, got {tuple(p.shape)} and {tuple(q.shape)}")
    check_uniforms("u1", u1, p.shape[0])
    check_uniforms("u2", u2, p.shape[0])
    x, y, _ = fn(p, q, u1, u2)
    return x, y


def coupling_times(model: ConditionalModel, x0: Tensor, y0: Tensor, *, tau: Temperature, max_steps: int,
                   seed: int, coupling: str | Coupling = "maximal", scan: str | Scan = "random",
                   check_every: int = 64, drop_coupled: bool = False,
                   record_every: int | None = None, record_steps: int | None = None) -> CouplingResult:
    """Couple two Glauber chains per row (``x0``, ``y0`` ``[B, n]``) for up to ``max_steps`` steps
    -> :class:`CouplingResult`: each row's first all-sites agreement time, censored at
    ``max_steps``. ``P(T > t)`` bounds the distance to stationarity ``d(t)`` from these two
    starts. The options are :func:`run`'s; ``tau`` is a float or a ``[B]`` tensor (one temperature
    per pair). Recorded first chains are exact Glauber trajectories (a maximal or CRN coupling
    leaves each chain's law untouched), so a drift measurement gets them for free.
    """
    for name, v in (("x0", x0), ("y0", y0)):
        if not isinstance(v, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of token ids [B, n], got {type(v).__name__}")
    gen = make_generator(seed, x0.device)
    check_range("max_steps", max_steps, 0, integer=True)
    r = run(model, init_coupled(x0, y0), gen, steps=max_steps, tau=tau, scan=scan, coupling=coupling,
            record_every=record_every, record_steps=record_steps, check_every=check_every,
            drop_coupled=drop_coupled)
    return CouplingResult(times=r.times, trajectory=r.trajectory, steps_recorded=r.steps_recorded)


def greedy_fixed_point(model: ConditionalModel, x0: Tensor, *, max_sweeps: int = 50) -> tuple[Tensor, Tensor]:
    """The ``tau -> 0`` limit: systematic sweeps setting each site to its argmax until nothing
    changes. x0 ``[B, n]`` -> (tokens ``[B, n]``, converged ``[B]`` bool). A converged row is a
    *perfect trap*: every token is the model's argmax given the rest."""
    check_states(model, x0, "x0")
    check_range("max_sweeps", max_sweeps, 1, integer=True)
    x = x0.clone()
    b, n = x.shape
    rows = torch.arange(b, device=x.device)
    converged = torch.zeros(b, dtype=torch.bool, device=x.device)
    for _ in range(max_sweeps):
        before = x.clone()
        for i in range(n):
            sites = torch.full((b,), i, device=x.device, dtype=torch.long)
            x[rows, sites] = model.site_logits(x, sites).argmax(-1).to(x.dtype)
        converged = (x == before).all(1)
        if bool(converged.all()):
            break
    return x, converged
