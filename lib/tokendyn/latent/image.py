"""The image latent model (a VAE analogue): a small convolutional autoencoder on 8x8 digits.

Images ``[B, 1, 8, 8]`` in [0, 1] (scikit-learn's bundled ``load_digits``) map to a ``4 x 4`` grid
of ``channels``-dim latents, standardised per channel with statistics of the training split so the
flow's unit noise has the latents' scale. The grid is handled as a sequence of 16 latent vectors
``[B, 16, channels]``, so the same :class:`~tokendyn.latent.flow.VelocityNet` and samplers serve the
text and the image model. The decoder (GELU convolutions and a sigmoid) is smooth: a small change of
latent gives a small change of pixels, and there is no decision boundary to cross.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from ..checks import check_choice, check_range
from ..paths import data_dir
from .flow import VelocityNet, load_autoencoder_and_flow

SPLITS = ("train", "heldout")


def digits(split: str = "train", *, heldout_every: int = 10) -> torch.Tensor:
    """scikit-learn digits as ``[N, 1, 8, 8]`` float32 in [0, 1]; every ``heldout_every``-th is held out."""
    from sklearn.datasets import load_digits

    check_choice("split", split, SPLITS)
    check_range("heldout_every", heldout_every, 2, None, integer=True)
    x = torch.tensor(load_digits().images, dtype=torch.float32)[:, None] / 16.0
    held = torch.arange(len(x)) % heldout_every == 0
    return x[held] if split == "heldout" else x[~held]


@dataclass(frozen=True)
class ImageAEConfig:
    """Shape of an :class:`ImageAutoencoder`."""

    channels: int = 2
    hidden: int = 32


class ImageAutoencoder(nn.Module):
    """Images ``[B, 1, 8, 8]`` <-> standardised latents ``[B, 16, channels]``."""

    def __init__(self, cfg: ImageAEConfig):
        super().__init__()
        self.cfg = cfg
        h = cfg.hidden
        self.enc = nn.Sequential(nn.Conv2d(1, h, 3, padding=1), nn.GELU(),
                                 nn.Conv2d(h, h, 3, stride=2, padding=1), nn.GELU(),
                                 nn.Conv2d(h, cfg.channels, 1))
        self.dec = nn.Sequential(nn.Conv2d(cfg.channels, h, 1), nn.GELU(),
                                 nn.ConvTranspose2d(h, h, 4, stride=2, padding=1), nn.GELU(),
                                 nn.Conv2d(h, 1, 3, padding=1), nn.Sigmoid())
        # Per-channel standardisation, set from the training split once the autoencoder is trained.
        self.register_buffer("mean", torch.zeros(cfg.channels))
        self.register_buffer("std", torch.ones(cfg.channels))

    def encode_raw(self, x: torch.Tensor) -> torch.Tensor:
        """Unstandardised latent grid: ``[B, 1, 8, 8]`` -> ``[B, channels, 4, 4]``."""
        return self.enc(x)

    def decode_raw(self, g: torch.Tensor) -> torch.Tensor:
        """``[B, channels, 4, 4]`` -> images ``[B, 1, 8, 8]`` in (0, 1)."""
        return self.dec(g)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Images ``[B, 1, 8, 8]`` -> standardised latent sequence ``[B, 16, channels]``."""
        g = self.enc(x).flatten(2).transpose(1, 2)
        return (g - self.mean) / self.std

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Standardised latent sequence ``[B, 16, channels]`` -> images ``[B, 1, 8, 8]``."""
        g = (z * self.std + self.mean).transpose(1, 2).reshape(z.shape[0], self.cfg.channels, 4, 4)
        return self.dec(g)


@dataclass
class ImageLatent:
    """The shipped image latent model: autoencoder, flow and provenance."""

    autoencoder: ImageAutoencoder
    flow: VelocityNet
    config: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return "image-latent"

    def heldout(self, n: int, seed: int = 0) -> torch.Tensor:
        """``n`` held-out digits ``[n, 1, 8, 8]`` (never trained on), chosen by ``seed``."""
        pool = digits("heldout", heldout_every=self.config["data"]["heldout_every"])
        check_range("n", n, 1, len(pool), integer=True)
        g = torch.Generator().manual_seed(seed)
        return pool[torch.randperm(len(pool), generator=g)[:n]]


def model_dir() -> Path:
    """``data/models/image-latent``."""
    return data_dir() / "models" / "image-latent"


def load_image_latent(path: str | Path | None = None) -> ImageLatent:
    """Load the shipped image latent model (safetensors + JSON) from ``path`` or :func:`model_dir`."""
    ae, flow, cfg = load_autoencoder_and_flow(Path(path) if path is not None else model_dir(), "image",
                                              ImageAutoencoder, ImageAEConfig)
    return ImageLatent(ae, flow, cfg)
