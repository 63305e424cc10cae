"""Few-step samplers on one velocity network: the deterministic ODE and the re-injecting SDE.

All samplers run on the uniform grid ``t0 = t_0 < t_1 < ... < t_K = 1`` (K steps). The last step of
every sampler here lands on ``t = 1`` from ``t_{K-1} = 1 - (1 - t0) / K``; for Euler and the SDE
that step outputs the posterior mean ``E[x1 | x_{t_{K-1}}]`` (see :mod:`.flow`).

As for Glauber chains, a sampler is an :func:`init` / step pair over an explicit
:class:`FlowState`: :func:`ode_step` (its integrator a function, :func:`euler` or :func:`heun`)
and :func:`sde_step`, each returning ``(state, FlowInfo)``; :func:`run` drives either to
``t = 1``, and :func:`ode_sample` / :func:`sde_sample` are that loop in one call;
:func:`generate` runs either from seeded pure noise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ..core.checks import check_choice, check_range
from .flow import FlowConfig, VelocityNet



def _check(x: torch.Tensor, t0: float, steps: int) -> None:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a float torch.Tensor [B, L, d], got "
                        f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
    if x.dim() != 3:
        raise ValueError(f"x must be [B, L, d], got shape {tuple(x.shape)}")
    check_range("t0", t0, 0, 1)
    if t0 >= 1:
        raise ValueError(f"t0={t0!r} is out of range: allowed [0, 1)")
    check_range("steps", steps, 1, None, integer=True)


def check_fits(net: VelocityNet, shape: Sequence[int], name: str = "x") -> None:
    """Latents of ``shape`` ``[B, L, d]`` must match the network: ``d = dim``, ``L <= seq_len``
    (before a forward pass fails deep in torch on a matmul or a broadcast)."""
    cfg = getattr(net, "cfg", None)
    if not isinstance(cfg, FlowConfig):
        return
    _, L, d = shape
    if d != cfg.dim or L > cfg.seq_len:
        raise ValueError(f"{name} has shape {tuple(shape)}, but the network takes [B, L, d] with "
                         f"d = dim = {cfg.dim} and L in [1, seq_len = {cfg.seq_len}]")


def time_grid(t0: float, steps: int) -> torch.Tensor:
    """The ``steps + 1`` times from ``t0`` to 1, uniform: ``[steps + 1]`` (float64)."""
    return torch.linspace(t0, 1.0, steps + 1, dtype=torch.float64)


def terminal_start(t0: float, steps: int) -> float:
    """``t_{K-1} = 1 - (1 - t0) / K``: where the terminal (posterior-mean) step starts."""
    return 1.0 - (1.0 - t0) / steps


@torch.no_grad()
def posterior_mean(net: VelocityNet, x: torch.Tensor, t: float) -> torch.Tensor:
    """``E[x1 | x_t] ~ x + (1 - t) v(x, t)`` for ``x`` ``[B, L, d]`` at scalar time ``t`` -> ``[B, L, d]``."""
    check_range("t", t, 0, 1)
    if isinstance(x, torch.Tensor) and x.dim() == 3:
        check_fits(net, x.shape)
    tt = torch.full((x.shape[0],), float(t), dtype=x.dtype, device=x.device)
    return x + (1.0 - t) * net(x, tt)


@dataclass(frozen=True)
class FlowState:
    """Latents ``x`` ``[B, L, d]`` at ``grid[k]`` of a uniform time grid ``grid`` (``K + 1`` floats)."""

    x: torch.Tensor
    k: int
    grid: tuple[float, ...]

    @property
    def t(self) -> float:
        return self.grid[self.k]

    @property
    def done(self) -> bool:
        return self.k == len(self.grid) - 1


@dataclass(frozen=True)
class FlowInfo:
    """One step from time ``t_from`` to ``t_to``; ``x1_hat`` ``[B, L, d]`` is the step's estimate of
    the clean latent ``E[x1 | x_{t_from}] ~ x + (1 - t_from) v(x, t_from)``."""

    t_from: float
    t_to: float
    x1_hat: torch.Tensor


Integrator = Callable[[VelocityNet, torch.Tensor, float, float], tuple[torch.Tensor, torch.Tensor]]
"""``(net, x, a, b) -> (x at b, velocity at (x, a))``: one deterministic step of ``dx/dt = v``."""


def _times(x: torch.Tensor, t: float) -> torch.Tensor:
    return torch.full((x.shape[0],), float(t), dtype=x.dtype, device=x.device)


def euler(net: VelocityNet, x: torch.Tensor, a: float, b: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One Euler step ``x + (b - a) v(x, a)``: one network call."""
    va = net(x, _times(x, a))
    return x + (b - a) * va, va


def heun(net: VelocityNet, x: torch.Tensor, a: float, b: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One Heun step (second order): an Euler predictor, then the mean of both slopes. Two calls."""
    va = net(x, _times(x, a))
    xe = x + (b - a) * va
    vb = net(xe, _times(x, b))
    return x + (b - a) * 0.5 * (va + vb), va


METHODS: dict[str, Integrator] = {"euler": euler, "heun": heun}


def init(x: torch.Tensor, t0: float = 0.0, steps: int = 4) -> FlowState:
    """Start at ``x`` ``[B, L, d]`` (the state at ``t0``; pure noise when ``t0 = 0``) on the uniform
    grid of ``steps`` steps to ``t = 1``."""
    _check(x, t0, steps)
    return FlowState(x=x, k=0, grid=tuple(time_grid(t0, steps).tolist()))


def _check_state(state: FlowState) -> None:
    if not isinstance(state, FlowState):
        raise TypeError(f"state must be a FlowState (see init), got {type(state).__name__}")
    if state.done:
        raise ValueError(f"state is already at t = 1 (step {state.k} of {len(state.grid) - 1})")


@torch.no_grad()
def ode_step(net: VelocityNet, state: FlowState, method: str | Integrator = "euler") -> tuple[FlowState, FlowInfo]:
    """One deterministic step of ``dx/dt = v(x, t)`` to the next grid time -> ``(state, info)``."""
    _check_state(state)
    fn = _integrator(method)
    a, b = state.grid[state.k], state.grid[state.k + 1]
    x, va = fn(net, state.x, a, b)
    return FlowState(x=x, k=state.k + 1, grid=state.grid), FlowInfo(a, b, state.x + (1.0 - a) * va)


@torch.no_grad()
def sde_step(net: VelocityNet, state: FlowState, *, generator: torch.Generator) -> tuple[FlowState, FlowInfo]:
    """Stochastic re-injection: jump to the posterior mean ``x1_hat = E[x1 | x]``, then re-noise it
    afresh, ``x <- t' x1_hat + (1 - t') eps`` with new ``eps ~ N(0, I)`` from ``generator``; the
    step that reaches ``t = 1`` returns ``x1_hat`` itself. -> ``(state, info)``."""
    _check_state(state)
    if not isinstance(generator, torch.Generator):  # None would draw from torch's global RNG
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    a, b = state.grid[state.k], state.grid[state.k + 1]
    x1_hat = posterior_mean(net, state.x, a)
    if b >= 1.0:
        x = x1_hat
    else:
        eps = torch.randn(state.x.shape, generator=generator, dtype=state.x.dtype).to(state.x.device)
        x = b * x1_hat + (1.0 - b) * eps
    return FlowState(x=x, k=state.k + 1, grid=state.grid), FlowInfo(a, b, x1_hat)


def _integrator(method: str | Integrator) -> Integrator:
    """An integrator given by name or as one of :data:`METHODS`' functions -> the function."""
    if callable(method):
        if method not in METHODS.values():
            raise ValueError(f"method must be one of {list(METHODS)} or their functions, got {method!r}")
        return method
    check_choice("method", method, tuple(METHODS))
    return METHODS[method]


def run(state: FlowState, step: Callable[[FlowState], tuple[FlowState, FlowInfo]]) -> FlowState:
    """Apply ``step`` (e.g. ``lambda s: ode_step(net, s)``) until the state reaches ``t = 1``."""
    while not state.done:
        state, _ = step(state)
    return state


@torch.no_grad()
def ode_sample(net: VelocityNet, x: torch.Tensor, t0: float = 0.0, steps: int = 4,
               method: str | Integrator = "euler") -> torch.Tensor:
    """Integrate ``dx/dt = v(x, t)`` from ``t0`` to 1 in ``steps`` uniform steps; no randomness.

    ``x`` ``[B, L, d]`` is the state at ``t0`` (pure noise when ``t0 = 0``). ``method`` is ``"euler"``
    or ``"heun"`` (second order, two network calls a step), or either function. Returns the
    latents at ``t = 1``.
    """
    state = init(x, t0, steps)
    check_fits(net, x.shape)
    fn = _integrator(method)
    return run(state, lambda s: ode_step(net, s, fn)).x


@torch.no_grad()
def sde_sample(net: VelocityNet, x: torch.Tensor, t0: float = 0.0, steps: int = 4, *,
               generator: torch.Generator) -> torch.Tensor:
    """Stochastic re-injection from ``x`` at ``t0`` to ``t = 1`` (see :func:`sde_step`). Same network
    and grid as :func:`ode_sample`; ``x`` ``[B, L, d]`` -> ``[B, L, d]``."""
    state = init(x, t0, steps)
    check_fits(net, x.shape)
    return run(state, lambda s: sde_step(net, s, generator=generator)).x


SAMPLERS = ("ode", "sde")


@torch.no_grad()
def generate(net: VelocityNet, shape: tuple[int, int, int], steps: int, sampler: str, *, seed: int) -> torch.Tensor:
    """Generate latents ``shape`` = ``[B, L, d]`` from pure noise in ``steps`` steps with the ODE
    (Euler) or the SDE, in float32 (the network's dtype). One generator seeded by ``seed`` draws
    the start noise and then the SDE's fresh noise, so at equal ``seed`` the ODE and the SDE start
    from the same noise and, at ``steps = 1``, return the same latents."""
    check_choice("sampler", sampler, SAMPLERS)
    check_range("steps", steps, 1, None, integer=True)
    check_range("seed", seed, 0, None, integer=True)
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"shape must be [B, L, d] with every size >= 1, got {tuple(shape)}")
    check_fits(net, shape, "shape")
    g = torch.Generator().manual_seed(seed)
    x0 = torch.randn(*shape, generator=g)
    if sampler == "ode":
        return ode_sample(net, x0, 0.0, steps)
    return sde_sample(net, x0, 0.0, steps, generator=g)
