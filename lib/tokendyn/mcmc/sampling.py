"""Categorical draws shared by every sampler: temperatures, seeded generators, tempered softmax,
inverse-CDF draws and Gumbel top-k draws without replacement.

The Glauber step's draw (:func:`draw_tempered`) reads the logits row a few times and never
copies it to float64: the row maximum; ``exp((l - max) / tau)`` in the logits' own precision
(float32 from an MLM, float64 from the exact toys), into one buffer; then a two-level inverse CDF
(:func:`draw`): per-block sums of ``BLOCK`` columns, a float64 cumulative sum over the blocks
(a few dozen numbers per row), and a float64 inverse CDF inside the one chosen block. One
uniform per row. Subtracting the maximum before dividing by ``tau`` keeps the weights of the
tokens that matter exact at small ``tau`` (the largest is exactly 1), so the draw is exact at
``tau = 0.05`` and ``tau = 100`` (``-inf`` logits stay at probability 0). Its law differs from a
float64 softmax only by the float32 rounding of each weight and block sum (relative ~1e-7, and
weights under float32's smallest normal, 1.2e-38 of the largest, are subnormal), below the
rounding of the float32 logits it reads; the golden trajectories of ``tests/test_golden.py``
were recorded with a float64 full-row softmax and come out the same.

Each draw comes twice: a checked public function (:func:`inverse_cdf`, :func:`sample_logits`)
for callers, and the unchecked one it calls (:func:`draw`, :func:`draw_tempered`) that never
reads a value back to the host, for inner loops that validated their inputs once.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..core.checks import check_choice, check_range

__all__ = ["Temperature", "TAU_MIN", "TAU_MAX", "SEED_MAX", "DRAW_DTYPE", "PROTOCOLS", "check_tau",
           "make_generator", "uniforms", "check_distribution", "probabilities", "inverse_cdf", "draw",
           "BLOCK", "tempered", "draw_tempered", "sample_logits", "no_mass", "choose_alternatives"]

TAU_MIN, TAU_MAX = 1e-3, 1e4
SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed takes at most 64 bits
DRAW_DTYPE = torch.float64
PROTOCOLS = ("model", "uniform")
BLOCK = 512
"""Columns per block of :func:`draw`'s two-level inverse CDF: ~60 blocks for a 30,522-token
vocabulary, so both levels are short."""

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


def tempered(logits: Tensor, tau: Temperature) -> Tensor:
    """logits ``[B, V]`` at ``tau = 1`` -> ``[B, V]`` unnormalised ``p_tau``:
    ``exp((logits - row max) / tau)``, in float32 (float64 logits stay float64), in a new tensor.
    ``tau`` a float or a ``[B]`` tensor. A row with a nan, a ``+inf`` or only ``-inf`` logits
    gives nan weights (so :func:`no_mass` flags its total)."""
    if logits.dtype != torch.float64:
        logits = logits.float()
    if isinstance(tau, Tensor):
        tau = tau.to(device=logits.device, dtype=logits.dtype).unsqueeze(-1)
    # max first, then divide: (l - max) is exact for the tokens near the max, so small tau stays exact
    return torch.sub(logits, logits.amax(-1, keepdim=True)).div_(tau).exp_()


def draw(weights: Tensor, u: Tensor, block: int = BLOCK) -> tuple[Tensor, Tensor]:
    """:func:`inverse_cdf` unchecked -> ``(ids [B], row totals [B] float64)``: no host sync, for
    loops. A row whose total is not finite and positive gives a meaningless id: test :func:`no_mass`.

    Two levels, so nothing the size of a row is copied or cumulatively summed: block sums of
    ``block`` columns (in the weights' dtype), their float64 cumulative sum, which picks the block
    where ``u * total`` falls, then a float64 inverse CDF over that block's weights only. Never an
    id of zero weight when the total is positive: a target that rounding puts past the last
    positive block or weight is given to that block or weight."""
    b, v = weights.shape
    full = v // block * block
    parts = [weights[:, :full].unflatten(1, (full // block, block)).sum(-1)] if full else []
    if full < v:
        parts.append(weights[:, full:].sum(-1, keepdim=True))
    sums = torch.cat(parts, 1).to(torch.float64)  # [B, blocks]
    cum = sums.cumsum(-1)
    total = cum[:, -1]
    target = u.to(torch.float64) * total
    j = torch.minimum((cum <= target.unsqueeze(-1)).sum(-1), _last_positive(sums))
    jj = j.unsqueeze(-1)
    before = torch.where(j > 0, cum.gather(1, (jj - 1).clamp_min(0)).squeeze(-1), 0.0)
    cols = jj * block + torch.arange(block, device=weights.device)  # [B, block]
    w = weights.gather(1, cols.clamp_max(v - 1)).to(torch.float64).masked_fill_(cols >= v, 0.0)
    c = w.cumsum(-1)
    # The residual, rescaled to the block's mass as summed here (it differs from the block sum by
    # rounding), so that the draw inside the block is exactly proportional to its weights.
    r = (target - before) * (c[:, -1] / sums.gather(1, jj).squeeze(-1))
    k = torch.minimum((c <= r.unsqueeze(-1)).sum(-1), _last_positive(w))
    return j * block + k, total


def _last_positive(w: Tensor) -> Tensor:
    """``[B]`` index of the last positive entry of each row of ``w`` ``[B, K]`` (``K - 1`` if none)."""
    return (w.shape[1] - 1) - (w > 0).flip(-1).to(torch.uint8).argmax(-1)


def draw_tempered(logits: Tensor, tau: Temperature, u: Tensor) -> tuple[Tensor, Tensor]:
    """:func:`sample_logits` unchecked -> ``(ids [B], row totals [B])``: :func:`tempered` then
    :func:`draw`. The Glauber step's draw; no host sync."""
    return draw(tempered(logits, tau), u)


def sample_logits(logits: Tensor, tau: Temperature, u: Tensor) -> Tensor:
    """Draw from ``p_tau ∝ exp(logits / tau)`` (logits ``[B, V]``, ``-inf`` outside the support;
    ``tau`` a float or ``[B]``) with uniforms ``u`` ``[B]`` in ``[0, 1)`` -> ``[B]`` ids.

    Raises ``ValueError`` for logits that are not a float ``[B, V]`` tensor, a bad ``tau`` or ``u``,
    and any row without finite positive mass (a nan or ``+inf`` logit, or only ``-inf``)."""
    if not isinstance(logits, Tensor) or not logits.is_floating_point() or logits.dim() != 2 or not logits.shape[1]:
        raise ValueError(f"logits must be a float tensor [B, V] with V >= 1, got "
                         f"{tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__}")
    check_tau(tau, logits.shape[0])
    check_uniforms("u", u, logits.shape[0])
    ids, total = draw_tempered(logits, tau, u)
    bad = no_mass(total)
    if bool(bad.any()):
        rows = bad.nonzero().flatten().tolist()
        raise ValueError(f"logits: row(s) {rows[:8]}{' ...' if len(rows) > 8 else ''} have no finite positive "
                         "mass (a nan or +inf logit, or every logit -inf)")
    return ids


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
