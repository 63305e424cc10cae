"""CCI: the categorical commitment index of a sampler, read from its own trajectory.

Paper 2's taxonomy crosses DABI with CCI, the fraction of positions where the sampler makes an
irreversible discrete selection: 0 for a continuous flow, 1 for autoregressive and masked-diffusion
samplers. A trajectory is every state the sampler visited, the start included:

- discrete samplers: token ids ``[steps + 1, B, n]`` (integer), with ``undecided`` (``-1`` or a
  mask id) where a position has no token yet -> :func:`commitment_index`;
- continuous samplers: latents ``[steps + 1, B, n, d]`` (floating) -> :func:`continuous_commitment_index`;
  :func:`flow_trajectory` records one from the samplers of :mod:`.samplers`.

Both return a :class:`Commitment`, so a chapter can tabulate samplers of either kind in one table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .samplers import FlowInfo, FlowState


@dataclass(frozen=True)
class Commitment:
    """``value = committed / n``: committed positions out of all ``n = B * n_positions``, and why."""

    value: float
    committed: int
    n: int
    reason: str


def commitment_index(states: torch.Tensor, *, undecided: int = -1) -> Commitment:
    """CCI of a discrete trajectory ``states`` ``[steps + 1, B, n]`` (integer ids).

    A position is *committed* when it is ``undecided`` in the first state, holds a token in the
    last, and from the first step it holds a token it never changes again (neither to another
    token nor back to ``undecided``). The index is the fraction of all ``B * n`` positions that are
    committed. So unmask-and-commit samplers (autoregressive, masked diffusion without remasking)
    that finish get 1; a position that is remasked or re-chosen later, or never filled, counts 0.

    A Glauber chain gets exactly 0: its positions start decided (a full sequence) and are
    resampled, so no position ever goes from undecided to a token; every value it ends with is the
    latest of revisable draws, even at a position the chain happened never to revisit. A prompt is
    decided at the start too: slice its positions off ``states`` to score only the generated ones.
    """
    if states.dim() != 3 or states.shape[0] < 2 or states.shape[1] < 1 or states.shape[2] < 1:
        raise ValueError(f"states must be [steps + 1, B, n] with steps, B, n >= 1, got shape {tuple(states.shape)}")
    if states.is_floating_point() or states.is_complex() or states.dtype == torch.bool:
        raise ValueError(f"states must hold integer ids, got {states.dtype}")
    if isinstance(undecided, bool) or not isinstance(undecided, int):
        raise TypeError(f"undecided must be an integer id, got {undecided!r}")
    decided = states != undecided  # [T, B, n]
    first = decided.int().argmax(0)  # first decided step (0 if never decided)
    value = states.gather(0, first[None])[0]  # [B, n]
    steps = torch.arange(states.shape[0], device=states.device)[:, None, None]
    changed = ((states != value) & (steps >= first)).any(0)
    committed = int((~decided[0] & decided[-1] & ~changed).sum())
    n = states.shape[1] * states.shape[2]
    return Commitment(committed / n, committed, n,
                      "positions chosen from undecided once and never changed, out of all positions")


def continuous_commitment_index(latents: torch.Tensor) -> Commitment:
    """CCI of a continuous trajectory ``latents`` ``[steps + 1, B, n, d]`` (floating): 0 by construction.

    Every step moves the latents continuously and no discrete selection is ever made; the readout
    decodes only the final state, and that state can still move at every step before it.
    """
    if latents.dim() != 4 or latents.shape[0] < 2 or min(latents.shape[1:]) < 1:
        raise ValueError(f"latents must be [steps + 1, B, n, d] with steps, B, n, d >= 1, "
                         f"got shape {tuple(latents.shape)}")
    if not latents.is_floating_point():
        raise ValueError(f"latents must be a floating tensor, got {latents.dtype}")
    return Commitment(0.0, 0, latents.shape[1] * latents.shape[2],
                      "continuous latents: no discrete selection is made, so no position is committed")


def flow_trajectory(state: FlowState, step: Callable[[FlowState], tuple[FlowState, FlowInfo]]) -> torch.Tensor:
    """Every latent state of :func:`.samplers.run` from ``state`` (``x`` ``[B, L, d]``) to ``t = 1``,
    the start included: ``[steps + 1, B, L, d]``, with ``step`` e.g. ``lambda s: ode_step(net, s)``."""
    xs = [state.x]
    while not state.done:
        state, _ = step(state)
        xs.append(state.x)
    return torch.stack(xs)


def revised_share(states: torch.Tensor, *, undecided: int = -1) -> float:
    """The share of positions of a discrete trajectory ``states`` ``[steps + 1, B, n]`` whose token
    changed at some step after the position first held one: how much a sampler re-chooses (0 for
    unmask-and-commit, > 0 for a Glauber chain that revisits its sites)."""
    if states.dim() != 3 or states.shape[0] < 2:
        raise ValueError(f"states must be [steps + 1, B, n] with steps >= 1, got shape {tuple(states.shape)}")
    decided = states != undecided
    change = (states[1:] != states[:-1]) & decided[:-1] & decided[1:]
    return float(change.any(0).double().mean())
