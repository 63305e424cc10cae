"""Semantic drift ``1 - cos(e(x_t), e(x_0))`` of chains in sentence-embedding space: the drift
to a chain's own start, the *forgotten* level (the drift to the other chains' starts), the
plateau and the hitting time of a fraction of the forgotten level."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ...core.checks import check_range
from .survival import as_1d

__all__ = ["drift", "forgotten_drift", "plateau", "hitting_times", "DriftRun"]


def drift(emb_t: torch.Tensor, emb_0: torch.Tensor) -> torch.Tensor:
    """Semantic drift ``1 - cos(e_t, e_0)``.

    ``emb_t`` [T, B, d]: embeddings of the B chains at T recorded times; ``emb_0`` [B, d]: the
    embeddings of their starting states. Returns [T, B] in [0, 2], computed in float64.
    """
    if emb_t.dim() != 3 or emb_0.dim() != 2 or emb_t.shape[1:] != emb_0.shape:
        raise ValueError(f"need emb_t [T, B, d] and emb_0 [B, d], got {tuple(emb_t.shape)} and "
                         f"{tuple(emb_0.shape)}")
    a = torch.nn.functional.normalize(emb_t.double(), dim=-1)
    b = torch.nn.functional.normalize(emb_0.double(), dim=-1)
    return 1.0 - (a * b[None]).sum(-1)


def plateau(d: torch.Tensor, *, tail: float = 0.25, rel_tol: float = 0.05) -> tuple[float, bool]:
    """The drift plateau of a group of chains, and whether it was reached.

    ``d`` [T, B] drift at T recorded times. The plateau is the mean over chains and over the last
    ``tail`` fraction of the recorded times. It counts as reached when the mean over the window just
    before the tail (same length) is within two standard errors, or within ``rel_tol`` of the level
    (5%), of it: a drift curve still rising at the end of the budget has not plateaued.
    """
    check_range("tail", tail, 0.0, 0.5, lo_open=True)
    check_range("rel_tol", rel_tol, 0.0)
    T = d.shape[0]
    k = max(1, int(round(T * tail)))
    if 2 * k > T:
        raise ValueError(f"need at least {2 * k} recorded times for tail={tail}, got {T}")
    last = d[T - k:].double().mean(0)  # [B]: per-chain tail means
    prev = d[T - 2 * k:T - k].double().mean(0)
    level = float(last.mean())
    diff = last - prev
    se = float(diff.std() / math.sqrt(diff.numel())) if diff.numel() > 1 else 0.0
    reached = abs(float(diff.mean())) <= max(2.0 * se, rel_tol * abs(level))
    return level, reached


def hitting_times(d: torch.Tensor, t: torch.Tensor | Sequence[float], *, level: float,
                  reached: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Drift hitting times: per chain, the first recorded time with drift ``>= level``.

    The chapter's definition: ``level = theta * F`` (``theta = 0.9``) where ``F`` is the
    *forgotten level* of the same (model, tau, n) group: :func:`forgotten_drift` averaged over the
    chains and the last quarter of the run. A chain hits when it is nearly as far from its own start
    as from the other chains' starts; a chain stuck near its start never does, however flat its own
    curve. ``d`` [T, B] drift at the times ``t`` [T].
    Returns ``(times [B], censored [B])``: a chain that never reaches ``level`` is censored at the
    last recorded time; if the group's plateau was not ``reached`` every chain is censored there,
    because the level itself is not yet known.
    """
    tt = as_1d("t", t)
    if d.dim() != 2 or d.shape[0] != tt.numel():
        raise ValueError(f"d must be [T, B] with T = len(t) = {tt.numel()}, got {tuple(d.shape)}")
    above = d >= level  # [T, B]
    first = torch.where(above.any(0), above.double().argmax(0), torch.full_like(above[0], -1,
                                                                                   dtype=torch.long))
    censored = (first < 0) | (not reached)
    times = torch.where(censored, tt[-1].expand(d.shape[1]), tt[first.clamp(min=0)])
    return times, censored


def forgotten_drift(emb_t: torch.Tensor, emb_0: torch.Tensor) -> torch.Tensor:
    """Mean ``1 - cos(e(x_t^b), e(x_0^c))`` over the other chains ``c != b``.

    ``emb_t`` [T, B, d], ``emb_0`` [B, d] with B >= 2 -> [T, B] float64. A chain that has forgotten
    its start is as far from its own start as from the others': ``drift`` reaches this level.
    """
    if emb_0.shape[0] < 2:
        raise ValueError("forgotten_drift needs at least 2 chains (B >= 2)")
    a = torch.nn.functional.normalize(emb_t.double(), dim=-1)
    b = torch.nn.functional.normalize(emb_0.double(), dim=-1)
    cos = torch.einsum("tbd,cd->tbc", a, b)  # [T, B, B]
    B = emb_0.shape[0]
    off = ~torch.eye(B, dtype=torch.bool)
    return 1.0 - (cos * off).sum(-1) / (B - 1)


@dataclass(frozen=True)
class DriftRun:
    """Drift along B chains recorded at T times.

    ``t`` [T] steps; ``drift`` [T, B] ``1 - cos`` to each chain's own start; ``forgotten``
    [T, B] the mean ``1 - cos`` to the *other* chains' starts (the drift a chain shows once it has
    forgotten where it started); ``trajectory`` [T, B, n] the recorded states.
    """

    t: torch.Tensor
    drift: torch.Tensor
    forgotten: torch.Tensor
    trajectory: torch.Tensor
