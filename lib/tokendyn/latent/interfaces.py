"""Interface energy of Gaussian partitions: a numeric check of Paper 2's separated-regime theory.

A smooth deterministic map that pushes ``N(0, I_n)`` onto ``M`` separated, equal-weight modes cuts
the source into ``M`` cells and must jump by the separation across every interface between them.
How hard that is depends on ``S``, the Gaussian surface measure of the interfaces. Here: the
isoperimetric lower bound on ``S`` (about ``sqrt(2 log M) / 2``), the exact ``S`` on the line (about
``M / (2 sqrt(pi))``), a Monte Carlo ``S`` for argmax partitions from the tube mass of
:mod:`.tube`, the stiffness bound ``S`` implies, and the bound for a depth-``B`` hierarchy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..core.checks import check_range
from ..core.stats import Estimate, wilson
from .tube import readout_margins, tube_mass


def _phi_of_quantile(p: torch.Tensor) -> torch.Tensor:
    """``phi(Phi^{-1}(p))``: the Gaussian density at the ``p`` quantile, ``[...]`` -> ``[...]``."""
    z = torch.special.ndtri(p.double())
    return torch.exp(-z * z / 2) / math.sqrt(2 * math.pi)


def _bound(cells: float) -> float:
    """The isoperimetric bound at a real cell count ``cells >= 1`` (a hierarchy's ``K`` need not be whole)."""
    return cells / 2 * float(_phi_of_quantile(torch.tensor(1.0 / cells)))


def isoperimetric_lower_bound(M: int) -> float:
    """Lower bound on the total interface measure of ANY partition of ``R^n`` (any ``n``) into ``M``
    cells of Gaussian mass ``1/M`` each: ``(M / 2) * phi(Phi^{-1}(1/M))``.

    Each cell's Gaussian perimeter is at least that of a half-space of the same mass (Gaussian
    isoperimetry), and each interface borders two cells. Scalar -> float; ``/ sqrt(2 ln M)`` tends to
    1/2, slowly (0.45 at ``M = 1e3``, 0.47 at ``1e6``).
    """
    check_range("M", M, 1, None, integer=True)
    return _bound(M)


def line_partition_measure(M: int) -> float:
    """Exact interface measure of the only partition of the line into ``M`` equal-mass intervals:
    ``sum_{k=1}^{M-1} phi(Phi^{-1}(k/M))``, about ``M / (2 sqrt(pi))`` for large ``M``. Scalar -> float."""
    check_range("M", M, 1, None, integer=True)
    k = torch.arange(1, M, dtype=torch.float64)
    return float(_phi_of_quantile(k / M).sum())


def line_readout(M: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The line's equal-mass partition as an affine argmax readout: ``weight [M, 1]``, ``bias [M]``.

    Cell ``i`` is ``[t_i, t_{i+1})`` with ``t_k = Phi^{-1}(k/M)``: slopes ``0..M-1`` and
    ``bias_i - bias_{i-1} = -t_i`` put the switch from ``i - 1`` to ``i`` exactly at ``t_i``.
    """
    check_range("M", M, 1, None, integer=True)
    t = torch.special.ndtri(torch.arange(1, M, dtype=torch.float64) / M)
    bias = torch.cat([torch.zeros(1, dtype=torch.float64), -torch.cumsum(t, 0)])
    return torch.arange(M, dtype=torch.float64)[:, None], bias


@dataclass(frozen=True)
class InterfaceEstimate:
    """Monte Carlo interface measure of an argmax partition (:func:`readout_interface_measure`).

    ``measure``: ``S = F(r) / (2 r)`` with the Wilson interval of ``tube`` (``F(r)``, the source mass
    within ``r`` of a cell boundary) scaled alike; ``largest_cell``: the largest cell's mass times
    the number of cells (1 when the cells are balanced; a max over sampled counts, so inflated when
    ``n_samples / V`` is small); ``cell_bound``: the isoperimetric bound
    ``(1/2) sum_i phi(Phi^{-1}(p_i))`` at the cells' sampled masses ``p_i``, which holds for unequal
    cells too and is below :func:`isoperimetric_lower_bound` then (``phi o Phi^{-1}`` is concave).
    """

    measure: Estimate
    tube: Estimate
    r: float
    largest_cell: float
    cell_bound: float


@torch.no_grad()
def readout_interface_measure(weight: torch.Tensor, bias: torch.Tensor, generator: torch.Generator, *,
                              n_samples: int = 50_000, tube: float = 0.02, level: float = 0.95
                              ) -> InterfaceEstimate:
    """Interface measure of the partition ``x -> argmax(weight @ x + bias)`` under ``x ~ N(0, I_d)``.

    ``weight`` ``[V, d]``, ``bias`` ``[V]``. ``F(r) ~ 2 r S`` as ``r -> 0``; where interfaces meet,
    their bands overlap, so ``F(r) / (2 r)`` is biased low by ``O(r)``. With 1-4e6 samples that bias
    was under 2 % when ``r`` holds a fraction ``tube = 0.02`` of the mass, under 3.5 % at ``0.05``
    (half-spaces, 2-d rays, argmax up to ``V = 1024`` in 28-d). So ``r`` is the ``tube`` quantile
    of the margins of a pilot of ``n_samples // 4`` points, and ``F(r)`` is counted on ``n_samples``
    fresh ones, keeping the Wilson interval exact given ``r``. It does not cover the bias.
    """
    check_range("n_samples", n_samples, 1000, None, integer=True)
    check_range("tube", tube, 0.0, 0.5, lo_open=True)
    weight, bias = weight.double(), bias.double()
    pilot = torch.randn(n_samples // 4, weight.shape[1], generator=generator, dtype=torch.float64)
    r = float(torch.quantile(readout_margins(weight, bias, pilot), tube))
    if not 0 < r < math.inf:
        raise ValueError(f"weight: the boundaries give a tube radius r={r}; are rows repeated, or V < 2?")
    x = torch.randn(n_samples, weight.shape[1], generator=generator, dtype=torch.float64)
    k = round(float(tube_mass(readout_margins(weight, bias, x), [r])[0]) * n_samples)
    f = wilson(k, n_samples, level)
    p = torch.bincount((x @ weight.T + bias).argmax(1), minlength=weight.shape[0]) / n_samples
    return InterfaceEstimate(Estimate(f.value / (2 * r), f.lo / (2 * r), f.hi / (2 * r), n_samples, level),
                             f, r, float(p.max()) * weight.shape[0], float(_phi_of_quantile(p).sum()) / 2)


def argmax_partition_measure(M: int, dim: int, *, n_samples: int = 50_000, seed: int = 0,
                             tube: float = 0.02) -> InterfaceEstimate:
    """:func:`readout_interface_measure` of ``x -> argmax_i <mu_i, x>`` with ``M`` directions ``mu_i``
    ``[M, dim]`` uniform on the unit sphere (seeded; random cells are unequal, see ``largest_cell``).

    ``dim >= 2``: in 1-d the unit directions are +-1, so at most 2 cells; the line's ``M``-cell
    partition is :func:`line_readout`. Every cell is a cone, each interface a piece of a hyperplane
    through 0; in 2-d those are ``M`` rays, so ``S = M / (2 sqrt(2 pi))`` exactly.
    """
    check_range("M", M, 2, None, integer=True)
    check_range("dim", dim, 2, None, integer=True)
    check_range("seed", seed, 0, None, integer=True)
    g = torch.Generator().manual_seed(seed)
    mu = torch.randn(M, dim, generator=g, dtype=torch.float64)
    mu = mu / mu.norm(dim=1, keepdim=True)
    return readout_interface_measure(mu, torch.zeros(M, dtype=torch.float64), g, n_samples=n_samples,
                                     tube=tube)


def stiffness_lower_bound(interface_measure: float, separation: float, error: float) -> float:
    """Lower bound ``Lambda >= separation * S / (2 * error)`` on the Lipschitz constant of a map
    from ``N(0, I)`` to modes ``separation`` apart that puts mass ``<= error`` off-mode (farther than
    ``separation / 4`` from every mode); ``S`` is the interface measure of the cells it sends onto
    the modes (``>= isoperimetric_lower_bound(M)`` for equal masses). Points of different cells are
    ``>= separation / 2`` apart in output, so ``>= w = separation / (2 Lambda)`` apart in the source:
    the ``w/2``-shells around the cells are disjoint and off-mode, of mass ``~ (w/2) * perimeter``
    each, ``w * S`` in all, to first order in ``w``: a bound up to that approximation. Scalars -> float.
    """
    check_range("interface_measure", interface_measure, 0.0, None)
    check_range("separation", separation, 0.0, None, lo_open=True)
    check_range("error", error, 0.0, 1.0, lo_open=True)
    return separation * interface_measure / (2 * error)


@dataclass(frozen=True)
class HierarchyBound:
    """Isoperimetric interface measure per step of a depth-``B`` hierarchy (``K = M^(1/B)`` cells),
    of the flat ``M``-cell partition, and ``ratio = flat / per_step``: the factor by which the
    hierarchy lowers the per-step stiffness bound at equal separation and error per step."""

    per_step: float
    flat: float
    ratio: float


def hierarchy_bound(M: int, B: int) -> HierarchyBound:
    """The :class:`HierarchyBound` of ``M`` modes reached in ``B`` steps of ``K = M^(1/B)`` branches
    (``K`` taken as real when ``M`` is no ``B``-th power). Scalars -> dataclass of floats.

    ``ratio -> sqrt(B)`` as ``M`` grows, from above and slowly (``B = 2``: 1.55 at ``K = 4``, 1.48 at
    ``K = 256``): the bound's ``log log M`` correction weighs more on ``K`` cells than on ``M``.
    """
    check_range("M", M, 2, None, integer=True)
    check_range("B", B, 1, None, integer=True)
    per_step, flat = _bound(M ** (1 / B)), _bound(M)
    return HierarchyBound(per_step, flat, flat / per_step)
