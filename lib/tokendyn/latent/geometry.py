"""The residual's geometry: how a generator's terminal error sits against a linear readout's boundaries.

For clean latents ``x1`` (token ``y``), a generator's terminal estimate ``x1_hat`` and a linear
argmax readout ``logits = z @ W.T + b``, the residual ``r = x1_hat - x1`` is split along ``n``, the
unit normal from ``x1`` towards its nearest decision boundary (:func:`~.dabi.nearest_boundary`),
and the orthogonal rest:

    r = (r . n) n + r_perp,     cos(r, n) = (r . n) / |r|.

A uniform direction in ``R^d`` has ``E|cos| = Gamma(d/2) / (sqrt(pi) Gamma((d + 1)/2)) ~ sqrt(2 / (pi d))``:
a residual whose ``|cos|`` stays large as ``d`` grows is aimed at the boundaries (:func:`alignment`).

:func:`aligned_counterfactual` asks what that aim is worth in flips: the same residual norms
pushed straight along ``n`` flip a token exactly when its margin is below the norm, while an
isotropic residual of the same norm only has a component ``|r| u1`` along ``n`` with
``u1 ~ g / sqrt(d)``. With margins of density ``f(0) > 0`` at 0 and norms small against their
spread, the flip rates are ``f(0) E|r|`` and ``f(0) E|r| E[u1+]``, so the ratio tends to
``1 / E[u1+] = 2 sqrt(pi) Gamma((d+1)/2) / Gamma(d/2) ~ sqrt(2 pi d)`` (:func:`small_norm_ratio`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..core.checks import check_range
from ..core.stats import Estimate, wilson
from .dabi import isotropic_directions, nearest_boundary
from .tube import oracle_terminal

Readout = tuple[torch.Tensor, torch.Tensor] | nn.Module
"""A linear readout: ``(weight [V, d], bias [V])``, an ``nn.Linear``, or a module whose
``readout`` is one (:class:`~.contextual.LinearReadout`, the latent autoencoders)."""


def readout_parameters(readout: Readout) -> tuple[torch.Tensor, torch.Tensor]:
    """``(weight [V, d], bias [V])`` of a :data:`Readout` (detached)."""
    if isinstance(readout, tuple) and len(readout) == 2:
        weight, bias = readout
    else:
        lin = readout if isinstance(readout, nn.Linear) else getattr(readout, "readout", None)
        if not isinstance(lin, nn.Linear) or lin.bias is None:
            raise TypeError(f"readout must be (weight, bias), an nn.Linear with bias, or a module whose "
                            f"`readout` is one; got {type(readout).__name__}")
        weight, bias = lin.weight, lin.bias
    if not isinstance(weight, torch.Tensor) or not isinstance(bias, torch.Tensor):
        raise TypeError("readout: weight and bias must be torch tensors")
    return weight.detach(), bias.detach()


def _flat(x1: torch.Tensor, x1_hat: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(x1, torch.Tensor) or not isinstance(x1_hat, torch.Tensor):
        raise TypeError("x1 and x1_hat must be torch tensors")
    if x1.shape != x1_hat.shape or x1.dim() < 2:
        raise ValueError(f"x1 and x1_hat must share a shape [N, d] or [B, L, d], got {tuple(x1.shape)} "
                         f"and {tuple(x1_hat.shape)}")
    if x1.shape[-1] != weight.shape[-1]:
        raise ValueError(f"latents are {x1.shape[-1]}-d but the readout takes {weight.shape[-1]}-d")
    d = x1.shape[-1]
    return x1.reshape(-1, d).to(weight.dtype), x1_hat.reshape(-1, d).to(weight.dtype)


def _units(shape: torch.Size) -> np.ndarray:
    """Resampling unit of each token: its sequence for ``[B, L, d]`` (``B >= 2``), else the token."""
    if len(shape) == 3 and shape[0] >= 2:
        return np.repeat(np.arange(shape[0]), shape[1])
    return np.arange(math.prod(shape[:-1]))


@dataclass(frozen=True)
class ResidualGeometry:
    """Per-token decomposition of ``r = x1_hat - x1`` (:func:`residual_geometry`); every tensor is
    flat over tokens, ``[N]`` (or ``[N, d]``), ``N = prod(batch_shape)``.

    ``token``: the id the residual is judged against; ``competitor``: the token across the nearest
    boundary; ``margin``: signed distance of ``x1`` to it (negative if ``x1`` already reads as
    another token); ``normal``: the unit normal towards it ``[N, d]``; ``norm`` ``|r|``; ``along``
    ``r . n`` (positive: towards the boundary); ``orthogonal`` ``|r - (r . n) n|``; ``cos``
    ``along / norm`` (0 where ``r = 0``); ``toward_competitor``: ``r`` along the unit vector from
    the token's class mean to the competitor's (``None`` unless class means were given).
    """

    token: torch.Tensor
    competitor: torch.Tensor
    margin: torch.Tensor
    normal: torch.Tensor
    norm: torch.Tensor
    along: torch.Tensor
    orthogonal: torch.Tensor
    cos: torch.Tensor
    toward_competitor: torch.Tensor | None
    batch_shape: tuple[int, ...]

    @property
    def d(self) -> int:
        return self.normal.shape[1]


@torch.no_grad()
def residual_geometry(x1: torch.Tensor, x1_hat: torch.Tensor, readout: Readout, *, y: torch.Tensor | None = None,
                      class_means: torch.Tensor | None = None, chunk: int = 1024) -> ResidualGeometry:
    """Split each residual ``x1_hat - x1`` along its clean latent's nearest-boundary normal.

    ``x1``, ``x1_hat``: ``[N, d]`` or ``[B, L, d]``; ``readout``: a :data:`Readout` over ``V``
    tokens; ``y``: the ids ``[N]`` / ``[B, L]`` the residual is judged against (``None``: the
    readout's decode of ``x1``, the reference of the tube-law measures); ``class_means``:
    ``[V, d]`` (optional) for :attr:`ResidualGeometry.toward_competitor`. Computed in the readout's
    dtype (pass a float64 readout for exact cosines). -> :class:`ResidualGeometry`.
    """
    weight, bias = readout_parameters(readout)
    z, z_hat = _flat(x1, x1_hat, weight)
    if y is not None:
        if not isinstance(y, torch.Tensor) or y.shape != x1.shape[:-1]:
            raise ValueError(f"y must be ids of shape {tuple(x1.shape[:-1])}, got "
                             f"{tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__}")
        y = y.reshape(-1)
    k_star, margin, normal = nearest_boundary(weight, bias, z, y, chunk=chunk)
    if y is None:
        y = (z @ weight.T + bias).argmax(1)
    r = z_hat - z
    norm = r.norm(dim=1)
    along = (r * normal).sum(1)
    orthogonal = (r - along[:, None] * normal).norm(dim=1)
    cos = torch.where(norm > 0, along / norm.clamp_min(torch.finfo(r.dtype).tiny), torch.zeros_like(norm))
    toward = None
    if class_means is not None:
        if not isinstance(class_means, torch.Tensor) or class_means.shape != weight.shape:
            raise ValueError(f"class_means must be [V, d] = {tuple(weight.shape)}, got "
                             f"{tuple(class_means.shape) if isinstance(class_means, torch.Tensor) else class_means}")
        gap = class_means.to(r.dtype)[k_star] - class_means.to(r.dtype)[y]
        toward = (r * gap).sum(1) / gap.norm(dim=1).clamp_min(torch.finfo(r.dtype).tiny)
    return ResidualGeometry(y, k_star, margin, normal, norm, along, orthogonal, cos, toward,
                            tuple(x1.shape[:-1]))


def isotropic_abs_cos(d: int) -> float:
    """``E|u1|`` for ``u`` uniform on the unit sphere of ``R^d``: the ``|cos|`` of a residual with no aim
    (``1`` at ``d = 1``, ``~ sqrt(2 / (pi d))`` for large ``d``)."""
    check_range("d", d, 1, None, integer=True)
    return math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)


def small_norm_ratio(d: int) -> float:
    """``1 / E[u1+] = 2 / isotropic_abs_cos(d)``: the aligned-over-isotropic flip ratio of
    :func:`aligned_counterfactual` when norms are small against margins with a density at 0
    (``pi`` at ``d = 2``, ``3 pi / 2`` at ``d = 4``, ``~ sqrt(2 pi d)``)."""
    return 2.0 / isotropic_abs_cos(d)


def halfspace_flip_probability(margin: torch.Tensor, norm: torch.Tensor, d: int) -> torch.Tensor:
    """``P(norm * u1 > margin)`` for ``u`` uniform on the sphere of ``R^d``, per token ``[N]`` -> ``[N]``
    (float64): the chance that an isotropic residual of that norm crosses the nearest boundary's
    hyperplane. ``u1^2 ~ Beta(1/2, (d - 1)/2)``, so for ``0 <= a = margin / norm < 1`` it is
    ``I_{1 - a^2}((d - 1)/2, 1/2) / 2``."""
    from scipy.special import betainc

    check_range("d", d, 1, None, integer=True)
    m = margin.detach().double().cpu().numpy()
    r = norm.detach().double().cpu().numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(r > 0, m / np.where(r > 0, r, 1.0), np.where(m < 0, -np.inf, np.inf))
    if d == 1:  # u1 = +-1, each with probability 1/2
        return torch.from_numpy(0.5 * (a < 1) + 0.5 * (a < -1))
    b = np.abs(a)
    tail = np.where(b < 1, 0.5 * betainc((d - 1) / 2, 0.5, np.clip(1 - b * b, 0, 1)), 0.0)
    return torch.from_numpy(np.where(a >= 0, tail, 1 - tail))


def _unit_stat(units: np.ndarray, num: np.ndarray, den: np.ndarray, n_boot: int, level: float, seed: int,
               floor: float = 0.0) -> Estimate:
    """``sum(num) / max(sum(den), floor)`` with a percentile bootstrap over resampling units (paired:
    both sums from the same resample)."""
    check_range("n_boot", n_boot, 100, None, integer=True)
    check_range("level", level, 0.0, 1.0, lo_open=True)
    nu = int(units.max()) + 1
    if nu < 2:
        raise ValueError(f"a bootstrap needs at least 2 sequences or tokens, got {nu}")
    sn, sd = np.bincount(units, num, nu), np.bincount(units, den, nu)
    idx = np.random.default_rng(seed).integers(0, nu, size=(n_boot, nu))
    reps = sn[idx].sum(1) / np.maximum(sd[idx].sum(1), floor)
    a = (1 - level) / 2
    value = float(sn.sum() / max(sd.sum(), floor))
    return Estimate(value, float(np.quantile(reps, a)), float(np.quantile(reps, 1 - a)), nu, level)


@dataclass(frozen=True)
class Alignment:
    """How well residuals aim at the boundaries (:func:`alignment`).

    ``mean_cos``: mean ``cos(r, n)`` (signed: positive means towards the boundary);
    ``mean_abs_cos``: mean ``|cos|``, against ``isotropic_abs_cos`` for unaimed residuals;
    ``energy_along``: ``sum (r . n)^2 / sum |r|^2``, against ``1 / d`` for unaimed ones. Intervals:
    percentile bootstrap over sequences (``[B, L, d]`` input) or tokens (``[N, d]``), seeded.
    """

    geometry: ResidualGeometry
    mean_cos: Estimate
    mean_abs_cos: Estimate
    energy_along: Estimate
    isotropic_abs_cos: float
    isotropic_energy: float


@torch.no_grad()
def alignment(x1: torch.Tensor, x1_hat: torch.Tensor, readout: Readout, *, y: torch.Tensor | None = None,
              class_means: torch.Tensor | None = None, n_boot: int = 2000, level: float = 0.95,
              seed: int = 0) -> Alignment:
    """Per-token cosines of the residual ``x1_hat - x1`` with the nearest-boundary normal and their
    means with bootstrap intervals. Shapes and ``readout``/``y``/``class_means`` as
    :func:`residual_geometry`. -> :class:`Alignment`."""
    geo = residual_geometry(x1, x1_hat, readout, y=y, class_means=class_means)
    units = _units(x1.shape)
    cos = geo.cos.double().cpu().numpy()
    ones = np.ones_like(cos)
    return Alignment(
        geo,
        _unit_stat(units, cos, ones, n_boot, level, seed),
        _unit_stat(units, np.abs(cos), ones, n_boot, level, seed),
        _unit_stat(units, geo.along.double().cpu().numpy() ** 2, geo.norm.double().cpu().numpy() ** 2,
                   n_boot, level, seed, floor=np.finfo(float).tiny),
        isotropic_abs_cos(geo.d), 1.0 / geo.d)


@dataclass(frozen=True)
class Counterfactual:
    """Flips of the same residual norms aimed along the boundary normal vs drawn isotropically
    (:func:`aligned_counterfactual`).

    ``aligned``/``isotropic``: Wilson intervals on the flip rates over ``n`` tokens (``k_*`` flips);
    ``ratio``: aligned over isotropic flips, the isotropic count floored at one (a lower bound when
    ``k_isotropic == 0``), with a paired bootstrap over sequences or tokens. ``predicted_*``: the
    tube-mass argument from the margins and norms alone: aligned, the fraction of margins below the
    norm (exact); isotropic, the mean :func:`halfspace_flip_probability` (exact in expectation for
    two tokens, a lower bound for more: other boundaries add flips), hence ``predicted_ratio`` is an
    upper bound for more than two tokens. ``small_norm_ratio``: :func:`small_norm_ratio` of ``d``,
    the limit of the ratio as the norms shrink.
    """

    aligned: Estimate
    isotropic: Estimate
    ratio: Estimate
    k_aligned: int
    k_isotropic: int
    n: int
    predicted_aligned: float
    predicted_isotropic: float
    predicted_ratio: float
    small_norm_ratio: float


def _decode(weight: torch.Tensor, bias: torch.Tensor, z: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    return torch.cat([(c @ weight.T + bias).argmax(1) for c in z.split(chunk)])


@torch.no_grad()
def aligned_counterfactual(x1: torch.Tensor, x1_hat: torch.Tensor, readout: Readout, *,
                           y: torch.Tensor | None = None, seed: int = 0, n_boot: int = 2000,
                           level: float = 0.95) -> Counterfactual:
    """Flip rate of ``x1 + |r| n`` (each residual's norm pushed along its nearest-boundary normal,
    towards the boundary) against that of ``x1 + |r| u`` (``u`` uniform unit directions drawn from a
    generator seeded by ``seed``), judged against ``y`` (default: the readout's decode of ``x1``).
    ``x1``, ``x1_hat``: ``[N, d]`` or ``[B, L, d]``. -> :class:`Counterfactual`."""
    check_range("seed", seed, 0, None, integer=True)
    geo = residual_geometry(x1, x1_hat, readout, y=y)
    weight, bias = readout_parameters(readout)
    z, _ = _flat(x1, x1_hat, weight)
    u = isotropic_directions(z.shape, torch.Generator().manual_seed(seed), dtype=z.dtype, device=z.device)
    f_al = (_decode(weight, bias, z + geo.norm[:, None] * geo.normal) != geo.token).cpu().numpy()
    f_iso = (_decode(weight, bias, z + geo.norm[:, None] * u) != geo.token).cpu().numpy()
    n, k_al, k_iso = len(z), int(f_al.sum()), int(f_iso.sum())
    ratio = _unit_stat(_units(x1.shape), f_al.astype(float), f_iso.astype(float), n_boot, level, seed, floor=1.0)
    p_al = float((geo.margin < geo.norm).double().mean())
    p_iso = float(halfspace_flip_probability(geo.margin, geo.norm, geo.d).mean())
    return Counterfactual(wilson(k_al, n, level), wilson(k_iso, n, level), ratio, k_al, k_iso, n, p_al, p_iso,
                          p_al / p_iso if p_iso > 0 else math.inf, small_norm_ratio(geo.d))


@torch.no_grad()
def terminal_alignment(net: nn.Module, x1: torch.Tensor, readout: Readout, steps: Sequence[int], *, seed: int = 0,
                       counterfactual: bool = True) -> dict[int, tuple[Alignment, Counterfactual | None]]:
    """The aim of the oracle terminal residual of each ``K``-step generator ``net`` in ``steps``
    (:func:`~.tube.oracle_terminal` on clean latents ``x1`` ``[B, L, d]``): its :func:`alignment`
    with ``readout``'s nearest-boundary normals and, with ``counterfactual``, what the same norms
    pushed along them flip (:func:`aligned_counterfactual`; ``None`` without) -> K -> (alignment,
    counterfactual). The terminal noise for K is drawn from a generator seeded ``seed + 300 + K``
    (apart from the terminal-flip and DABI draws of the same ``seed``), the alignment's bootstrap is
    seeded ``seed`` and the counterfactual's isotropic directions ``seed + K``."""
    out: dict[int, tuple[Alignment, Counterfactual | None]] = {}
    for k in steps:
        x_hat, _ = oracle_terminal(net, x1, k, torch.Generator().manual_seed(seed + 300 + k))
        al = alignment(x1, x_hat, readout, seed=seed)
        out[k] = (al, aligned_counterfactual(x1, x_hat, readout, seed=seed + k) if counterfactual else None)
    return out
