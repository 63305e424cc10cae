"""The image latent models (VAE analogues): small convolutional autoencoders on digits and on faces.

Images ``[B, 1, S, S]`` in [0, 1] map to a ``G x G`` grid (``G = S / 2**downsamples``) of
``channels``-dim latents, standardised per channel with statistics of the training split so the
flow's unit noise has the latents' scale. The grid is handled as a sequence of ``P = G * G`` latent
vectors ``[B, P, channels]``, so the same :class:`~tokendyn.latent.flow.VelocityNet` and samplers
serve the text and the image models. The decoder (GELU convolutions and a sigmoid) is smooth: a small
change of latent gives a small change of pixels, and there is no decision boundary to cross.

Two models ship:

- ``image-latent`` (:func:`load_image_latent`): 8x8 digits (scikit-learn's bundled ``load_digits``,
  :func:`digits`) -> a 4x4 grid of 2 channels, ``P = 16``;
- ``faces-latent`` (:func:`load_faces_latent`): 24x24 faces (the 100 faces of scikit-image's bundled
  ``lfw_subset``, :func:`faces`) -> a 6x6 grid of 4 channels, ``P = 36``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from ..core.checks import check_choice, check_range
from ..core.paths import data_dir
from ..evaluation.heldout import choose
from .flow import VelocityNet, load_autoencoder_and_flow

SPLITS = ("train", "heldout")
#: Side of the face images returned by :func:`faces` (lfw_subset's 25x25, last row and column cropped).
FACE_SIZE = 24
#: The faces in lfw_subset: its first 100 images (the other 100 are non-face background patches).
N_FACES = 100


def digits(split: str = "train", *, heldout_every: int = 10) -> torch.Tensor:
    """scikit-learn digits as ``[N, 1, 8, 8]`` float32 in [0, 1]; every ``heldout_every``-th is held out."""
    from sklearn.datasets import load_digits

    check_choice("split", split, SPLITS)
    check_range("heldout_every", heldout_every, 2, None, integer=True)
    x = torch.tensor(load_digits().images, dtype=torch.float32)[:, None] / 16.0
    held = torch.arange(len(x)) % heldout_every == 0
    return x[held] if split == "heldout" else x[~held]


def faces(split: str = "train", heldout_every: int = 10) -> torch.Tensor:
    """Faces from scikit-image's bundled ``lfw_subset`` as ``[N, 1, 24, 24]`` float32 in [0, 1].

    Only the 100 faces are used (``lfw_subset`` also holds 100 non-face background patches, its
    images 100-199). Each 25x25 face is cropped to 24x24 by dropping its last row and column, so two
    stride-2 convolutions reach a 6x6 grid. Face ``i`` is held out when ``i % heldout_every == 0``
    (deterministic; ``heldout_every=10``: 90 train, 10 held-out faces).
    """
    check_choice("split", split, SPLITS)
    check_range("heldout_every", heldout_every, 2, N_FACES, integer=True)
    from skimage.data import lfw_subset

    x = torch.tensor(lfw_subset()[:N_FACES, :FACE_SIZE, :FACE_SIZE], dtype=torch.float32)[:, None]
    held = torch.arange(len(x)) % heldout_every == 0
    return x[held] if split == "heldout" else x[~held]


@dataclass(frozen=True)
class ImageAEConfig:
    """Shape of an :class:`ImageAutoencoder`: ``size x size`` images, ``downsamples`` stride-2
    convolutions of width ``hidden`` down to a ``size / 2**downsamples`` grid of ``channels``.
    The defaults are the digits model."""

    channels: int = 2
    hidden: int = 32
    size: int = 8
    downsamples: int = 1

    def __post_init__(self) -> None:
        check_range("channels", self.channels, 1, None, integer=True)
        check_range("hidden", self.hidden, 1, None, integer=True)
        check_range("downsamples", self.downsamples, 1, 4, integer=True)
        check_range("size", self.size, 2 ** self.downsamples, None, integer=True)
        if self.size % 2 ** self.downsamples:
            raise ValueError(f"size={self.size} is not allowed: it must be a multiple of "
                             f"2**downsamples = {2 ** self.downsamples}")

    @property
    def grid(self) -> int:
        """Side ``G`` of the latent grid."""
        return self.size // 2 ** self.downsamples

    @property
    def seq_len(self) -> int:
        """Number ``P = G * G`` of latent vectors per image."""
        return self.grid ** 2


class ImageAutoencoder(nn.Module):
    """Images ``[B, 1, S, S]`` <-> standardised latents ``[B, P, channels]`` (``P = G * G``;
    digits: ``S = 8``, ``G = 4``)."""

    def __init__(self, cfg: ImageAEConfig):
        super().__init__()
        self.cfg = cfg
        h = cfg.hidden
        # Registration order (and so state-dict keys and seeded init) of the digits model is kept
        # for downsamples=1: enc.0 / enc.2 / enc.4, dec.0 / dec.2 / dec.4.
        enc: list[nn.Module] = [nn.Conv2d(1, h, 3, padding=1), nn.GELU()]
        dec: list[nn.Module] = [nn.Conv2d(cfg.channels, h, 1), nn.GELU()]
        for _ in range(cfg.downsamples):
            enc += [nn.Conv2d(h, h, 3, stride=2, padding=1), nn.GELU()]
            dec += [nn.ConvTranspose2d(h, h, 4, stride=2, padding=1), nn.GELU()]
        self.enc = nn.Sequential(*enc, nn.Conv2d(h, cfg.channels, 1))
        self.dec = nn.Sequential(*dec, nn.Conv2d(h, 1, 3, padding=1), nn.Sigmoid())
        # Per-channel standardisation, set from the training split once the autoencoder is trained.
        self.register_buffer("mean", torch.zeros(cfg.channels))
        self.register_buffer("std", torch.ones(cfg.channels))

    def _check_images(self, x: torch.Tensor) -> None:
        s = self.cfg.size
        if x.dim() != 4 or tuple(x.shape[1:]) != (1, s, s):
            raise ValueError(f"x must have shape [B, 1, {s}, {s}], got {list(x.shape)}")

    def _check_grid(self, g: torch.Tensor) -> None:
        c, n = self.cfg.channels, self.cfg.grid
        if g.dim() != 4 or tuple(g.shape[1:]) != (c, n, n):
            raise ValueError(f"g must have shape [B, {c}, {n}, {n}], got {list(g.shape)}")

    def encode_raw(self, x: torch.Tensor) -> torch.Tensor:
        """Unstandardised latent grid: ``[B, 1, S, S]`` -> ``[B, channels, G, G]``."""
        self._check_images(x)
        return self.enc(x)

    def decode_raw(self, g: torch.Tensor) -> torch.Tensor:
        """``[B, channels, G, G]`` -> images ``[B, 1, S, S]`` in (0, 1)."""
        self._check_grid(g)
        return self.dec(g)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Images ``[B, 1, S, S]`` -> standardised latent sequence ``[B, P, channels]``."""
        self._check_images(x)
        g = self.enc(x).flatten(2).transpose(1, 2)
        return (g - self.mean) / self.std

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Standardised latent sequence ``[B, P, channels]`` -> images ``[B, 1, S, S]`` in (0, 1)."""
        c, n = self.cfg.channels, self.cfg.grid
        if z.dim() != 3 or tuple(z.shape[1:]) != (n * n, c):
            raise ValueError(f"z must have shape [B, {n * n}, {c}], got {list(z.shape)}")
        g = (z * self.std + self.mean).transpose(1, 2).reshape(z.shape[0], c, n, n)
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

    def _pool(self) -> torch.Tensor:
        return digits("heldout", heldout_every=self.config["data"]["heldout_every"])

    def heldout(self, n: int, seed: int = 0) -> torch.Tensor:
        """``n`` held-out images ``[n, 1, S, S]`` (never trained on), chosen by ``seed``
        (digits: ``S = 8``)."""
        return choose(self._pool(), n, seed)


@dataclass
class FacesLatent(ImageLatent):
    """The shipped faces latent model: :class:`ImageLatent` on 24x24 faces (``P = 36`` latents of 4)."""

    @property
    def name(self) -> str:
        return "faces-latent"

    def _pool(self) -> torch.Tensor:
        return faces("heldout", heldout_every=self.config["data"]["heldout_every"])


def model_dir() -> Path:
    """``data/models/image-latent``."""
    return data_dir() / "models" / "image-latent"


def faces_model_dir() -> Path:
    """``data/models/faces-latent``."""
    return data_dir() / "models" / "faces-latent"


def load_image_latent(path: str | Path | None = None) -> ImageLatent:
    """Load the shipped image latent model (safetensors + JSON) from ``path`` or :func:`model_dir`."""
    ae, flow, cfg = load_autoencoder_and_flow(Path(path) if path is not None else model_dir(), "image",
                                              ImageAutoencoder, ImageAEConfig)
    return ImageLatent(ae, flow, cfg)


def load_faces_latent(path: str | Path | None = None) -> FacesLatent:
    """Load the shipped faces latent model (safetensors + JSON) from ``path`` or :func:`faces_model_dir`."""
    ae, flow, cfg = load_autoencoder_and_flow(Path(path) if path is not None else faces_model_dir(), "faces",
                                              ImageAutoencoder, ImageAEConfig)
    return FacesLatent(ae, flow, cfg)
