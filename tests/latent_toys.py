"""Flow networks with exact answers, shared by the latent tests."""

from __future__ import annotations

import torch


class PointMass(torch.nn.Module):
    """Velocity of data concentrated at mu: (mu - x) / (1 - t); the posterior mean is mu."""

    def __init__(self, mu):
        super().__init__()
        self.mu = mu

    def forward(self, x, t):
        return (self.mu - x) / (1 - t[:, None, None])
