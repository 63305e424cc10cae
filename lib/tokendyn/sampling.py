"""Categorical draws shared by every sampler: temperatures, seeded generators, tempered softmax,
inverse-CDF draws and Gumbel top-k draws without replacement.

Precision: draws are made in float64 from ``softmax(logits / tau)`` with one uniform per row,
whatever dtype the model ran in. They are exact at ``tau = 0.05`` and at ``tau = 100``
(``-inf`` logits stay at probability 0).

Each draw comes twice: a checked public function (:func:`inverse_cdf`) for callers, and an
unchecked one (:func:`draw`) that never reads a value back to the host, for inner loops that
validated their inputs once.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .checks import check_choice, check_range

__all__ = ["Temperature", "TAU_MIN", "TAU_MAX", "SEED_MAX", "DRAW_DTYPE", "PROTOCOLS", "check_tau",
           "make_generator", "uniforms", "check_distribution", "probabilities", "inverse_cdf", "draw",
           "no_mass", "choose_alternatives"]

TAU_MIN, TAU_MAX = 1e-3, 1e4
SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed takes at most 64 bits
DRAW_DTYPE = torch.float64
PROTOCOLS = ("model", "uniform")

Temperature = float | Tensor


def check_tau(tau: Temperature, batch: int | None = None) -> None:
    """``tau`` (a float, or a ``[B]`` tensor of per-chain values) must lie in ``[1e-3, 1e4]``
    (0.05 and 100 are well inside; draws stay exact). ``batch``: the ``B`` a tensor must have."""
    if isinstance(tau, Tensor):
        if tau.dim() != 1 or (batch is not None and tau.shape[0] != batch):
            raise ValueError(f"tau as a tensor must have shape [{batch if batch is not None else 'B'}], "
                             f"one temperature per chain; got {tuple(tau.shape)}")
        if tau.is_complex() or tau.dtype == torch.bool:
            raise TypeError(f"tau must hold real temperatures, got a {tau.dtype} tensor")
        if tau.numel():
            for v in (float(tau.min()), float(tau.max())):
                check_range("tau", v, TAU_MIN, TAU_MAX)
        return
    check_range("tau", tau, TAU_MIN, TAU_MAX)


def make_generator(seed: int, device: torch.device | str) -> torch.Generator:
    """An explicit generator on ``device`` seeded with ``seed`` (an integer in ``[0, 2**64 - 1]``)."""
    check_range("seed", seed, 0, SEED_MAX, integer=True)
    return torch.Generator(device=device).manual_seed(seed)


def uniforms(b: int, gen: torch.Generator, device: torch.device) -> Tensor:
    """``[b]`` float64 uniforms in ``[0, 1)`` from ``gen``."""
    return torch.rand(b, generator=gen, device=device, dtype=DRAW_DTYPE)


def check_distribution(name: str, w: Tensor) -> None:
    """``w`` ``[B, V]`` must be a float tensor of non-negative weights with a finite, positive
    total in every row. Raises ``ValueError`` naming ``name`` and the bad rows."""
    if not isinstance(w, Tensor) or not w.is_floating_point() or w.dim() != 2:
        raise ValueError(f"{name} must be a float tensor [B, V] of weights, got "
                         f"{tuple(w.shape) if isinstance(w, Tensor) else type(w).__name__}"
                         f"{' ' + str(w.dtype) if isinstance(w, Tensor) else ''}")
    if w.shape[1] == 0:
        raise ValueError(f"{name} must have at least one column (a vocabulary of size V >= 1)")
    if w.numel() == 0:
        return
    total = w.sum(-1)
    bad = ~(torch.isfinite(total) & (total > 0))
    if bool(bad.any()):
        rows = bad.nonzero().flatten().tolist()
        raise ValueError(f"{name}: row(s) {rows[:8]}{' ...' if len(rows) > 8 else ''} have total "
                         f"{float(total[rows[0]])!r}; every row needs a finite, positive total "
                         "(a nan, inf or all -inf logit row gives none)")
    if bool((w < 0).any()):
        raise ValueError(f"{name} has negative weights; weights must be >= 0")


def check_uniforms(name: str, u: Tensor, batch: int) -> None:
    """``u`` must be a float tensor ``[batch]`` of values in ``[0, 1)``."""
    if not isinstance(u, Tensor) or u.shape != (batch,) or not u.is_floating_point():
        raise ValueError(f"{name} must be a float tensor [B]={(batch,)} of uniforms, got "
                         f"{tuple(u.shape) if isinstance(u, Tensor) else type(u).__name__}")
    if u.numel() and not bool(((u >= 0) & (u < 1)).all()):
        raise ValueError(f"{name} must lie in [0, 1)")


def probabilities(logits: Tensor, tau: Temperature) -> Tensor:
    """logits ``[B, V]`` at ``tau = 1`` -> ``[B, V]`` float64 ``softmax(logits / tau)``;
    ``tau`` a float or a ``[B]`` tensor (one temperature per row)."""
    if isinstance(tau, Tensor):
        tau = tau.to(device=logits.device, dtype=DRAW_DTYPE).unsqueeze(-1)
    z = logits.to(DRAW_DTYPE, copy=True)  # a copy whatever the dtype: the caller's logits stay as they are
    # In place where the result keeps z's shape: a [B, V] float64 buffer less per step.
    if not isinstance(tau, Tensor) or torch.broadcast_shapes(z.shape, tau.shape) == z.shape:
        return torch.softmax(z.div_(tau), dim=-1)
    return torch.softmax(z / tau, dim=-1)


def draw(weights: Tensor, u: Tensor) -> tuple[Tensor, Tensor]:
    """:func:`inverse_cdf` unchecked -> ``(ids [B], row totals [B])``: no host sync, for loops.
    A row whose total is not finite and positive gives a meaningless id: test :func:`no_mass`."""
    c = weights.cumsum(-1)
    total = c[:, -1]
    target = (u.to(c.dtype) * total).unsqueeze(-1)
    # The count of cumulative sums <= target is searchsorted(right=True), and faster on CPU.
    idx = (c <= target).sum(-1)
    return idx.clamp_max(weights.shape[-1] - 1), total


def no_mass(total: Tensor) -> Tensor:
    """``[B]`` True where a row total is not finite and positive (device-side, no sync)."""
    return ~(torch.isfinite(total) & (total > 0))


def inverse_cdf(weights: Tensor, u: Tensor) -> Tensor:
    """Draw from unnormalised non-negative ``weights`` ``[B, V]`` with uniforms ``u`` ``[B]`` in
    ``[0, 1)`` -> ``[B]`` ids. Never returns a zero-weight id when the row total is positive.

    Raises ``ValueError`` for a row whose total is not finite and positive (such a row would
    silently give id 0), negative weights, or ``u`` of the wrong shape or outside ``[0, 1)``.
    """
    check_distribution("weights", weights)
    check_uniforms("u", u, weights.shape[0])
    return draw(weights, u)[0]


def choose_alternatives(logits: Tensor, exclude: Tensor, k: int, protocol: str, tau: float,
                        gen: torch.Generator) -> Tensor:
    """``k`` distinct ids per row ``[B, k]`` from the support (finite ``logits`` ``[B, V]``) minus
    ``exclude`` ``[B]``: weighted by ``p_tau`` (``"model"``) or uniform. Gumbel top-k, which is
    exact sampling without replacement, in float64."""
    check_range("k", k, 1, integer=True)
    check_choice("protocol", protocol, PROTOCOLS)
    w = logits.double() / tau if protocol == "model" else torch.zeros_like(logits, dtype=torch.float64)
    w = w.masked_fill(~torch.isfinite(logits), float("-inf"))
    w = w.scatter(-1, exclude.unsqueeze(-1), float("-inf"))
    if bool((torch.isfinite(w).sum(-1) < k).any()):
        raise ValueError(f"the support minus the current token has fewer than k={k} tokens")
    u = torch.rand(w.shape, generator=gen, device=w.device, dtype=torch.float64)
    gumbel = -torch.log(-torch.log(u.clamp_min(1e-300)))
    return (w + gumbel).topk(k, dim=-1).indices
