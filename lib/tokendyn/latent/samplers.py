"""Few-step samplers on one velocity network: the deterministic ODE and the re-injecting SDE.

All samplers run on the uniform grid ``t0 = t_0 < t_1 < ... < t_K = 1`` (K steps). The last step of
every sampler here lands on ``t = 1`` from ``t_{K-1} = 1 - (1 - t0) / K``; for Euler and the SDE
that step outputs the posterior mean ``E[x1 | x_{t_{K-1}}]`` (see :mod:`.flow`).
"""

from __future__ import annotations

import torch

from ..checks import check_choice, check_range
from .flow import VelocityNet

METHODS = ("euler", "heun")


def _check(x: torch.Tensor, t0: float, steps: int) -> None:
    if x.dim() != 3:
        raise ValueError(f"x must be [B, L, d], got shape {tuple(x.shape)}")
    check_range("t0", t0, 0, 1)
    if t0 >= 1:
        raise ValueError(f"t0={t0!r} is out of range: allowed [0, 1)")
    check_range("steps", steps, 1, None, integer=True)


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
    tt = torch.full((x.shape[0],), float(t), dtype=x.dtype, device=x.device)
    return x + (1.0 - t) * net(x, tt)


@torch.no_grad()
def ode_sample(net: VelocityNet, x: torch.Tensor, t0: float = 0.0, steps: int = 4,
               method: str = "euler") -> torch.Tensor:
    """Integrate ``dx/dt = v(x, t)`` from ``t0`` to 1 in ``steps`` uniform steps; no randomness.

    ``x`` ``[B, L, d]`` is the state at ``t0`` (pure noise when ``t0 = 0``). ``method`` is ``"euler"``
    or ``"heun"`` (second order, two network calls a step). Returns the latents at ``t = 1``.
    """
    _check(x, t0, steps)
    check_choice("method", method, METHODS)
    grid = time_grid(t0, steps).tolist()
    for a, b in zip(grid[:-1], grid[1:]):
        ta = torch.full((x.shape[0],), a, dtype=x.dtype, device=x.device)
        va = net(x, ta)
        if method == "euler":
            x = x + (b - a) * va
        else:
            xe = x + (b - a) * va
            vb = net(xe, torch.full_like(ta, b))
            x = x + (b - a) * 0.5 * (va + vb)
    return x


@torch.no_grad()
def sde_sample(net: VelocityNet, x: torch.Tensor, t0: float = 0.0, steps: int = 4, *,
               generator: torch.Generator) -> torch.Tensor:
    """Stochastic re-injection: at every step jump to the posterior mean, then re-noise it afresh.

    From ``x`` at ``t_k``: ``x1_hat = E[x1 | x]``, then ``x <- t_{k+1} x1_hat + (1 - t_{k+1}) eps``
    with new ``eps ~ N(0, I)`` drawn from ``generator``. Same network and grid as :func:`ode_sample`;
    the last step returns ``x1_hat``. ``x`` ``[B, L, d]`` -> ``[B, L, d]``.
    """
    _check(x, t0, steps)
    grid = time_grid(t0, steps).tolist()
    for a, b in zip(grid[:-1], grid[1:]):
        x1_hat = posterior_mean(net, x, a)
        if b >= 1.0:
            return x1_hat
        eps = torch.randn(x.shape, generator=generator, dtype=x.dtype).to(x.device)
        x = b * x1_hat + (1.0 - b) * eps
    return x
