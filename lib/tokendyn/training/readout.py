"""Readouts retrained on frozen latents: the decoder interventions of Paper 2 (chapter 7's groundwork).

The paper retrains a sharp text readout three ways and finds none recovers flipped tokens:

- ``"smooth"``: cross-entropy with label smoothing ``epsilon`` (logit smoothing);
- ``"hinge"``: the multiclass max-margin (Crammer-Singer) loss ``max(0, margin - (l_y - max_{k != y} l_k))``;
- an MLP readout (:class:`ResidualMLPReadout`): ``z -> z + B gelu(A z)`` then the linear readout,
  so it starts as the linear one (``B = 0``) and can bend its boundaries.

``"ce"`` (plain cross-entropy) is the reference. :func:`retrain` warm-starts from a given linear
readout and takes ``steps`` AdamW steps on batches of frozen ``(latent, id)`` pairs, seeded.
:func:`tokendyn.latent.decoders.argmax_decoder` turns any head into the decode function the
tube-law measures take; :func:`tokendyn.latent.decoders.logit_gaps` reads how sharp a head is.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..core.checks import check_choice, check_range
from .loop import train

OBJECTIVES = ("ce", "smooth", "hinge")


def objective(name: str, *, epsilon: float = 0.1, margin: float = 1.0
              ) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The loss ``(logits [N, V], ids [N]) -> scalar`` of one readout objective (see the module)."""
    check_choice("objective", name, OBJECTIVES)
    check_range("epsilon", epsilon, 0.0, 1.0)
    check_range("margin", margin, 0.0, None, lo_open=True)
    if name == "ce":
        return nn.functional.cross_entropy
    if name == "smooth":
        def smooth(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
            return nn.functional.cross_entropy(logits, ids, label_smoothing=epsilon)
        return smooth

    def hinge(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        own = logits.gather(1, ids[:, None])[:, 0]
        other = logits.scatter(1, ids[:, None], float("-inf")).max(1).values
        return (margin - (own - other)).clamp_min(0).mean()
    return hinge


class ResidualMLPReadout(nn.Module):
    """``logits = W (z + B gelu(A z)) + b``: a 2-layer MLP in front of a linear readout ``[..., d] -> [..., V]``.

    ``A`` is ``[hidden, d]``, ``B`` ``[d, hidden]`` and starts at zero, so the module starts as the
    given linear readout exactly."""

    def __init__(self, linear: nn.Linear, hidden: int, generator: torch.Generator):
        super().__init__()
        check_range("hidden", hidden, 1, None, integer=True)
        d = linear.in_features
        self.readout = nn.Linear(d, linear.out_features)
        self.readout.load_state_dict(linear.state_dict())
        self.a = nn.Linear(d, hidden)
        self.b = nn.Linear(hidden, d)
        with torch.no_grad():
            self.a.weight.copy_(torch.randn(hidden, d, generator=generator) / d ** 0.5)
            self.a.bias.zero_()
            self.b.weight.zero_()
            self.b.bias.zero_()

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.readout(z + self.b(nn.functional.gelu(self.a(z))))


def retrain(head: nn.Module, z: torch.Tensor, ids: torch.Tensor, loss_name: str, *, steps: int, batch: int = 512,
            lr: float = 1e-3, seed: int = 0, epsilon: float = 0.1, margin: float = 1.0) -> list[float]:
    """Train ``head`` (``[N, d] -> [N, V]``, e.g. a copy of a linear readout or a
    :class:`ResidualMLPReadout`) in place on latents ``z`` ``[N, d]`` and ids ``[N]`` with objective
    ``loss_name``; returns the logged losses. Seeded batches; no checkpoint (minutes at most)."""
    if z.dim() != 2 or ids.shape != z.shape[:1]:
        raise ValueError(f"z must be [N, d] and ids [N], got {tuple(z.shape)} and {tuple(ids.shape)}")
    check_range("steps", steps, 1, None, integer=True)
    check_range("batch", batch, 1, None, integer=True)
    loss = objective(loss_name, epsilon=epsilon, margin=margin)
    g = torch.Generator().manual_seed(seed)

    def step_loss(gen: torch.Generator) -> torch.Tensor:
        rows = torch.randint(len(z), (batch,), generator=gen)
        return loss(head(z[rows]), ids[rows])

    return train(head, step_loss, steps=steps, lr=lr, generator=g, log_every=max(steps // 4, 1),
                 label=f"readout-{loss_name}", log=lambda msg: None)
