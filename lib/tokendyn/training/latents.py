"""Stages shared by the Part II latent models (``scripts/train_latents.py``): batches, the flow, saving.

The text and the image model are trained the same way once their autoencoder is: a rectified-flow
velocity network (:class:`~tokendyn.latent.flow.VelocityNet`) on the frozen training latents,
seeded by ``seed + 1``, with the loop of :func:`tokendyn.training.loop.train`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from ..core.atomic import write_atomic
from ..core.integrity import record
from ..latent.flow import FlowConfig, VelocityNet, flow_loss
from ..models.weights_init import init_weights
from .loop import train


def batch_of(data: torch.Tensor, size: int, g: torch.Generator,
             device: str | torch.device = "cpu") -> torch.Tensor:
    """``size`` rows of ``data (N, ...)`` drawn with replacement from ``g``, on ``device``."""
    return data[torch.randint(len(data), (size,), generator=g)].to(device)


def train_flow(latents: torch.Tensor, cfg: FlowConfig, *, seed: int, steps: int, batch: int, lr: float,
               checkpoint: Path, label: str, device: str | torch.device = "cpu",
               log: Callable[[str], None] = print, stop: int | None = None,
               checkpoint_every: int = 200, log_every: int = 100) -> tuple[VelocityNet, list[float]]:
    """A rectified flow on ``latents (N, seq_len, dim)``, initialised from ``seed + 1``, trained
    ``steps`` steps of ``batch`` (resuming from ``checkpoint``, written every ``checkpoint_every``
    steps; the mean loss logged every ``log_every``). ``stop``: end this call at that step, as
    :func:`~tokendyn.training.loop.train`. Returns the net and its logged losses."""
    g = torch.Generator().manual_seed(seed + 1)
    flow = init_weights(VelocityNet(cfg), g).to(device)
    losses = train(flow, lambda gen: flow_loss(flow, batch_of(latents, batch, gen, device), gen),
                   steps=steps, lr=lr, generator=g, checkpoint=checkpoint, label=label, log=log,
                   stop=stop, checkpoint_every=checkpoint_every, log_every=log_every)
    return flow, losses


def save_modules(folder: Path, **modules: nn.Module) -> None:
    """Write each module's state dict to ``folder/<name>.safetensors`` (CPU, contiguous) and record
    its SHA-256 in ``folder/SHA256SUMS`` (what the loaders check)."""
    for name, m in modules.items():
        state = {k: v.detach().cpu().contiguous() for k, v in m.state_dict().items()}
        record(write_atomic(folder / f"{name}.safetensors", lambda p: save_file(state, str(p))))
