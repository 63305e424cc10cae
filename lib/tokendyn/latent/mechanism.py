"""Where the structured/isotropic flip ratio lives: a map over the exact posterior-mean generator.

Paper 2 reports that the terminal residual of a few-step generator flips 10-33x more tokens than
isotropic noise of the same norm, with 12-41% of tokens flipped at K = 4-16. Our trained flows give
about 2.5x. With the exact posterior mean of a token mixture (:class:`.exact.TokenMixture`) there
is no training error, so each cell of a grid says what the geometry alone gives.

One cell (:func:`map_cell`) is a mixture (``d``, ``M`` tokens, means ``spacing`` apart in root mean
square, spread ``sigma`` per coordinate) and a step count ``K``. The oracle roll-in noises clean
latents to ``t = 1 - 1/K`` and the terminal step returns the exact posterior mean ``x1_hat``
(:func:`.tube.oracle_terminal`'s construction). Coordinates of the cell:

- ``crowding``: the median distance of a clean latent to its nearest Bayes boundary over the
  terminal noise scale ``s = (1 - t) / t``, the tube law's argument (0 at ``K = 1``, ``s`` infinite);
- ``separation``: ``spacing / sigma``, how far apart tokens sit in units of their own spread (what
  makes the Bayes readout sharp: its logit gap grows like ``spacing / sigma^2`` per unit of
  distance; a logit temperature would not move an argmax, so sharpness has no other axis here);
- ``top2`` and ``bimodal``: the token posterior at the terminal step, its mean top-2 mass and the
  share of tokens whose posterior is split between two tokens (top-2 mass >= 0.8, each >= 0.2).

Outcomes: the structured flip rate (``x1_hat`` decoded against the clean decode), the isotropic one
(``x1`` plus a Gaussian direction of the residual's norm), their ratio, all with a paired bootstrap
over sequences (:func:`.tube.sequence_bootstrap`), and the aim ``mean |cos(r, n)|`` of the residual
at the nearest-boundary normal (:func:`.geometry.alignment`). The bimodal split repeats the rates
and the ratio on the bimodal tokens and on the rest, and measures ``|cos(r, mu_a - mu_b)|``, the
residual's aim along the line between the two tokens the posterior is split between: the paper's
mechanism (the deterministic generator lands between modes) where it can be exact.

Shapes: ``B`` sequences (windows) of ``L`` tokens, latents ``[B, L, d]``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from ..core.checks import check_range
from ..core.stats import Estimate, bootstrap
from .dabi import isotropic_like
from .exact import TokenMixture, token_mixture
from .flow import noise_scale, noise_to
from .geometry import alignment
from .samplers import terminal_start
from .tube import sequence_bootstrap

__all__ = ["BIMODAL_TOP2", "BIMODAL_EACH", "PAPER_RATIO", "PAPER_FLIPS", "MapCell", "map_cell", "mechanism_map",
           "latent_separation", "mixture_label", "by_mixture"]

BIMODAL_TOP2 = 0.8   # a token's posterior is split when its two largest responsibilities sum to this ...
BIMODAL_EACH = 0.2   # ... and the second is at least this
PAPER_RATIO = (10.0, 33.0)   # Paper 2: structured over isotropic flips at K = 4, 8, 16 (ELF-B)
PAPER_FLIPS = (0.12, 0.41)   # Paper 2: terminal flip rate at K = 4, 8, 16


@dataclass(frozen=True)
class MapCell:
    """One cell of the map (module docstring). Rates are fractions of tokens; every
    :class:`~tokendyn.core.stats.Estimate` carries a 95% bootstrap interval over sequences. The
    ``bimodal_*`` rates and ratio are on the bimodal tokens only, ``rest_*`` on the others (NaN
    where a group has fewer than two tokens); ``pair_aim`` is the mean ``|cos(r, mu_a - mu_b)|`` over bimodal tokens."""

    d: int
    M: int
    spacing: float
    sigma: float
    K: int
    s: float
    crowding: float
    separation: float
    top2: Estimate
    bimodal: Estimate
    flips: Estimate
    isotropic: Estimate
    ratio: Estimate
    aim: Estimate
    unaimed: float
    bimodal_flips: Estimate
    bimodal_ratio: Estimate
    rest_flips: Estimate
    rest_ratio: Estimate
    pair_aim: Estimate
    n_tokens: int

    def row(self) -> dict[str, float | int]:
        """A flat dict: scalars as they are, each Estimate as ``name``, ``name_lo``, ``name_hi``."""
        out: dict[str, float | int] = {}
        for k, v in asdict(self).items():
            if isinstance(v, dict):
                out.update({k: v["value"], f"{k}_lo": v["lo"], f"{k}_hi": v["hi"]})
            else:
                out[k] = v
        return out


def _nan() -> Estimate:
    return Estimate(math.nan, math.nan, math.nan, 0)


def _per_sequence(values: torch.Tensor, n_boot: int, seed: int) -> Estimate:
    """Mean of ``values`` ``[B, L]`` with a bootstrap over its sequences (rows)."""
    return bootstrap(values.double().mean(1).numpy(), seed=seed, n_boot=n_boot)


def _group(fs: torch.Tensor, fi: torch.Tensor, keep: torch.Tensor, n_boot: int, seed: int
           ) -> tuple[Estimate, Estimate]:
    """Structured flip rate and ratio on the tokens ``keep`` ``[B, L]`` (bool), resampling sequences."""
    tok = keep.sum(1).numpy().astype(float)
    if tok.sum() < 2:
        return _nan(), _nan()
    cs = (fs & keep).sum(1).numpy().astype(float)
    ci = (fi & keep).sum(1).numpy().astype(float)
    st, _, ratio = sequence_bootstrap(cs, ci, tok, n_boot, 0.95, seed)
    return st, ratio


@torch.no_grad()
def map_cell(mix: TokenMixture, K: int, *, spacing: float, windows: int, length: int, seed: int,
             n_boot: int = 1000) -> MapCell:
    """Measure one cell: ``windows`` sequences of ``length`` tokens drawn from ``mix`` (whose means
    are ``spacing`` apart, :func:`.exact.token_means`; seeded by ``seed``), the exact ``K``-step
    generator's terminal step, its flips, ratio, aim and the token posterior at that step
    -> :class:`MapCell`."""
    check_range("K", K, 1, None, integer=True)
    check_range("windows", windows, 2, None, integer=True)
    check_range("length", length, 1, None, integer=True)
    check_range("n_boot", n_boot, 100, None, integer=True)
    g = torch.Generator().manual_seed(seed)
    x1, _ = mix.sample((windows, length), g)
    ref = mix.decode(x1)
    t = terminal_start(0.0, K)
    xt, _ = noise_to(x1, t, g)
    x_hat = mix.posterior_mean(xt, t)
    resp = mix.responsibilities(xt, t)                           # [B, L, M]
    residual = x_hat - x1
    fs = mix.decode(x_hat) != ref                                # [B, L]
    fi = mix.decode(x1 + isotropic_like(residual, g)) != ref
    st, iso, ratio = sequence_bootstrap(fs.sum(1).numpy().astype(float), fi.sum(1).numpy().astype(float), length,
                                        n_boot, 0.95, seed)
    al = alignment(x1, x_hat, mix.readout(), n_boot=n_boot, seed=seed)
    s = math.inf if t == 0 else float(noise_scale(t))
    crowding = 0.0 if math.isinf(s) else float(al.geometry.margin.median()) / s
    top = resp.topk(2, dim=-1)
    mass2 = top.values.sum(-1)
    split = (mass2 >= BIMODAL_TOP2) & (top.values[..., 1] >= BIMODAL_EACH)     # [B, L]
    b_flips, b_ratio = _group(fs, fi, split, n_boot, seed)
    r_flips, r_ratio = _group(fs, fi, ~split, n_boot, seed)
    if int(split.sum()) >= 2:
        a, b = top.indices[..., 0][split], top.indices[..., 1][split]
        gap = mix.means[a] - mix.means[b]                       # [N_split, d]
        r = residual[split].to(torch.float64)
        cos = (r * gap).sum(-1).abs() / (r.norm(dim=-1) * gap.norm(dim=-1)).clamp_min(1e-300)
        pair_aim = bootstrap(cos.numpy(), seed=seed, n_boot=n_boot)
    else:
        pair_aim = _nan()
    return MapCell(d=mix.d, M=mix.M, spacing=float(spacing), sigma=float(mix.sigma), K=int(K), s=s,
                   crowding=crowding, separation=float(spacing) / float(mix.sigma), top2=_per_sequence(mass2, n_boot, seed),
                   bimodal=_per_sequence(split, n_boot, seed), flips=st, isotropic=iso, ratio=ratio, aim=al.mean_abs_cos,
                   unaimed=al.isotropic_abs_cos, bimodal_flips=b_flips, bimodal_ratio=b_ratio, rest_flips=r_flips,
                   rest_ratio=r_ratio, pair_aim=pair_aim, n_tokens=int(windows * length))


def mechanism_map(ds: Sequence[int], Ms: Sequence[int], spacings: Sequence[float], sigmas: Sequence[float],
                  Ks: Sequence[int], *, windows: int, length: int, seed: int, n_boot: int = 1000,
                  first_index: int = 0) -> Iterable[MapCell]:
    """Every cell of the grid ``ds`` x ``Ms`` x ``sigmas`` x ``spacings`` x ``Ks``, yielded in that
    order: one mixture per (d, M, sigma, spacing) with means seeded by ``seed``, each cell's draws
    seeded by ``seed``, the mixture's place in the grid (counted from ``first_index``, so one
    mixture of a larger grid can be remade alone) and ``K`` (:func:`map_cell`)."""
    check_range("first_index", first_index, 0, None, integer=True)
    mixtures = [(d, M, sg, sp) for d in ds for M in Ms for sg in sigmas for sp in spacings]
    for i, (d, M, sg, sp) in enumerate(mixtures, start=first_index):
        mix = token_mixture(int(d), int(M), spacing=float(sp), sigma=float(sg), seed=seed)
        for K in Ks:
            yield map_cell(mix, int(K), spacing=float(sp), windows=windows, length=length,
                           seed=seed + 1000 * i + int(K), n_boot=n_boot)


@torch.no_grad()
def latent_separation(x1: torch.Tensor, ids: torch.Tensor, *, min_count: int = 2) -> tuple[float, float, int]:
    """The map's ``separation`` coordinate measured on any latents: ``x1`` ``[..., d]`` with their
    token ids ``[...]``. Over the tokens seen at least ``min_count`` times: the root-mean-square
    distance between their mean latents (``spacing``), the root-mean-square spread of a latent
    around its token's mean per coordinate (``spread``, pooled) -> (spacing, spread, tokens used).
    For a token mixture they estimate its ``spacing`` and ``sigma``; their ratio is the separation."""
    check_range("min_count", min_count, 2, None, integer=True)
    if x1.shape[:-1] != ids.shape:
        raise ValueError(f"ids must be {tuple(x1.shape[:-1])} to match x1, got {tuple(ids.shape)}")
    z, y = x1.reshape(-1, x1.shape[-1]).to(torch.float64), ids.reshape(-1)
    uniq, inv, counts = torch.unique(y, return_inverse=True, return_counts=True)
    keep = counts[inv] >= min_count
    if int((counts >= min_count).sum()) < 2:
        raise ValueError(f"fewer than two tokens seen {min_count} times: no spacing to measure")
    z, inv = z[keep], inv[keep]
    sums = torch.zeros(len(uniq), z.shape[1], dtype=torch.float64).index_add_(0, inv, z)
    means = sums / counts.to(torch.float64)[:, None]
    spread = float(((z - means[inv]) ** 2).sum() / (len(z) - int((counts >= min_count).sum())) / z.shape[1]) ** 0.5
    m = means[counts >= min_count]
    sq = (m * m).sum(1)
    d2 = (sq[:, None] + sq[None, :] - 2 * m @ m.T).clamp_min(0)
    k = len(m)
    spacing = float(d2.sum() / (k * (k - 1))) ** 0.5
    return spacing, spread, k


def mixture_label(row: Mapping[str, Any]) -> str:
    """The name of a map row's mixture: ``"d=64, M=256, sigma=0.1, spacing=2"``."""
    return f"d={row['d']}, M={row['M']}, sigma={row['sigma']:g}, spacing={row['spacing']:g}"


def by_mixture(rows: Sequence[Mapping[str, Any]], *, n: int, ks: Sequence[int] = (4, 8, 16)
               ) -> dict[str, dict[int, tuple[Estimate, Estimate]]]:
    """A recorded map's rows (:meth:`MapCell.row`) as ``verdicts.exact_generator_regime`` reads
    them: mixture label (:func:`mixture_label`) -> ``{K: (ratio, flips)}`` for ``K`` in ``ks``,
    each an Estimate over ``n`` sequences."""
    out: dict[str, dict[int, tuple[Estimate, Estimate]]] = {}
    for r in rows:
        if int(r["K"]) in ks:
            out.setdefault(mixture_label(r), {})[int(r["K"])] = (Estimate.from_columns(r, "ratio", n=n),
                                                                 Estimate.from_columns(r, "flips", n=n))
    return out
