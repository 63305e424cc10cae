"""Rectified flow on a sequence of latent vectors: the velocity network, noising and its loss.

Convention: ``t = 0`` is noise and ``t = 1`` is data, ``x_t = t * x1 + (1 - t) * eps`` with
``eps ~ N(0, I)``, and the network learns ``v(x_t, t) ~ E[x1 - eps | x_t]``. Then

    x1_hat(x_t, t) = x_t + (1 - t) * v(x_t, t) = E[x1 | x_t]

is the posterior mean, and a deterministic step that lands on ``t = 1`` outputs exactly that.
Because ``x_t / t = x1 + ((1 - t) / t) * eps``, the state at time ``t`` is the clean latent plus
Gaussian noise of standard deviation

    s(t) = (1 - t) / t      (in units of the latent's own scale, which is ~1 per coordinate)

which is the *effective noise scale* of a posterior-mean step taken from ``t`` (:func:`noise_scale`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..core.checks import check_range


@dataclass(frozen=True)
class FlowConfig:
    """Shape of a :class:`VelocityNet`: latent ``dim`` per position, ``seq_len`` positions."""

    dim: int
    seq_len: int
    width: int = 96
    depth: int = 3
    heads: int = 4
    ff: int = 256


class VelocityNet(nn.Module):
    """A small transformer ``v(x, t)``: latents ``[B, L, dim]`` and times ``[B]`` -> ``[B, L, dim]``."""

    def __init__(self, cfg: FlowConfig):
        super().__init__()
        self.cfg = cfg
        self.inp = nn.Linear(cfg.dim, cfg.width)
        self.pos = nn.Parameter(torch.zeros(cfg.seq_len, cfg.width))
        self.time_mlp = nn.Sequential(nn.Linear(32, cfg.width), nn.SiLU(), nn.Linear(cfg.width, cfg.width))
        layer = nn.TransformerEncoderLayer(cfg.width, cfg.heads, cfg.ff, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, cfg.depth, enable_nested_tensor=False)
        self.out_norm = nn.LayerNorm(cfg.width)
        self.out = nn.Linear(cfg.width, cfg.dim)

    @staticmethod
    def time_features(t: torch.Tensor) -> torch.Tensor:
        """Sinusoidal features of ``t`` ``[B]`` -> ``[B, 32]`` (frequencies 1..~1000)."""
        freqs = torch.exp(torch.linspace(0, math.log(1000.0), 16, device=t.device, dtype=t.dtype))
        ang = t[:, None] * freqs[None, :] * math.pi
        return torch.cat([ang.sin(), ang.cos()], dim=-1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Velocity at ``x`` ``[B, L, dim]``, time ``t`` ``[B]`` (or a 0-d tensor) -> ``[B, L, dim]``."""
        if t.dim() == 0:
            t = t.expand(x.shape[0])
        h = self.inp(x) + self.pos[: x.shape[1]] + self.time_mlp(self.time_features(t))[:, None, :]
        return self.out(self.out_norm(self.blocks(h)))


def noise_scale(t: float | torch.Tensor) -> float | torch.Tensor:
    """Effective noise scale ``s(t) = (1 - t) / t`` of a posterior-mean step from time ``t`` in (0, 1]."""
    if isinstance(t, torch.Tensor):
        return (1 - t) / t
    check_range("t", t, 0, 1, lo_open=True)
    return (1 - t) / t


def noise_to(x1: torch.Tensor, t: float | torch.Tensor, generator: torch.Generator
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Noise clean latents ``x1`` ``[B, L, d]`` to time ``t`` (scalar or ``[B]``); return ``(x_t, eps)``."""
    if not isinstance(t, torch.Tensor):
        check_range("t", t, 0, 1)
    eps = torch.randn(x1.shape, generator=generator, dtype=x1.dtype).to(x1.device)
    tt = torch.as_tensor(t, dtype=x1.dtype, device=x1.device)
    if tt.dim() == 1:
        tt = tt[:, None, None]
    return tt * x1 + (1 - tt) * eps, eps


def flow_loss(net: VelocityNet, x1: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Rectified-flow regression loss on a batch of clean latents ``x1`` ``[B, L, d]`` (a scalar).

    Times are uniform on [0, 1]: every noise level the samplers visit is trained.
    """
    t = torch.rand(x1.shape[0], generator=generator).to(x1.device)
    xt, eps = noise_to(x1, t, generator)
    return ((net(xt, t) - (x1 - eps)) ** 2).mean()


@torch.no_grad()
def fixed_flow_loss(net: VelocityNet, z: torch.Tensor, *, windows: int, draws: int, seed: int,
                    chunk: int = 256) -> float:
    """The rectified-flow loss of ``net`` on a fixed sample (a float): ``windows`` rows of ``z``
    ``[N, L, d]`` (a seeded permutation), each under ``draws`` draws of time and noise, all from one
    generator seeded ``seed``. The same rows, times and noise at every call, so two flows (or two
    snapshots of one) are compared on identical draws and differ only by their weights."""
    g = torch.Generator().manual_seed(seed)
    x = z[torch.randperm(len(z), generator=g)[:windows]]
    total = 0.0
    for _ in range(draws):
        for c in x.split(chunk):
            total += float(flow_loss(net, c, g)) * len(c)
    return total / (draws * len(x))


def load_autoencoder_and_flow(d: Path, kind: str, autoencoder: type[nn.Module],
                              config: type) -> tuple[nn.Module, VelocityNet, dict]:
    """A shipped latent model folder ``d`` -> ``(autoencoder, flow, config dict)`` in eval mode,
    from ``config.json`` and two safetensors files, each checked against ``d/SHA256SUMS`` first.
    ``kind`` (``"text"``, ``"image"``) names the ``scripts/train_latents.py`` command that rebuilds
    a missing folder."""
    from safetensors.torch import load_file

    from ..core.integrity import verify

    if not (d / "config.json").is_file():
        raise FileNotFoundError(f"{d} holds no {kind} latent model: run `python scripts/train_latents.py {kind}`")
    for f in ("autoencoder.safetensors", "flow.safetensors"):
        verify(d / f)
    cfg = json.loads((d / "config.json").read_text())
    ae = autoencoder(config(**cfg["autoencoder"]))
    ae.load_state_dict(load_file(d / "autoencoder.safetensors"))
    flow = VelocityNet(FlowConfig(**cfg["flow"]))
    flow.load_state_dict(load_file(d / "flow.safetensors"))
    return ae.eval(), flow.eval(), cfg
