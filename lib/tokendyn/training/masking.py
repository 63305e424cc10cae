"""Masking for MLM training: which sites to hide, the logits there, and a penalty on copying.

Every draw comes from the generator passed in (no dropout, no global RNG), so a step is a pure
function of its seed.
"""

from __future__ import annotations

from typing import Any

import torch

from ..evaluation import head_logits


BERT_SHARES: tuple[float, float, float] = (0.8, 0.1, 0.1)
"""What BERT masking does to a picked site: ``(to the mask token, to a random token, left unchanged)``
(Devlin et al. 2019); :func:`mask_batch` applies them and the models appendix states them."""


def special_token_mask(tok: Any) -> torch.Tensor:
    """``(V,)`` bool: True at the tokenizer's special ids ([CLS], [SEP], [PAD], [MASK], [UNK], ...)."""
    special = torch.zeros(len(tok), dtype=torch.bool)
    special[torch.tensor(tok.all_special_ids)] = True
    return special


def mask_batch(ids: torch.Tensor, tok: Any, special: torch.Tensor, rate: float,
               g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """BERT masking of ``ids (B, L)``: pick ``rate`` of real tokens (at least one per row);
    of those :data:`BERT_SHARES` (80%) -> mask token, 10% -> random token, 10% unchanged.

    Returns ``(inputs (B, L), positions (M, 2), targets (M,))``.
    """
    real = ~special[ids]
    u = torch.rand(ids.shape, generator=g)
    pick = (u < rate) & real
    # guarantee one target per row: the real token with the smallest draw
    first = torch.where(real, u, torch.full_like(u, 2.0)).argmin(dim=1)
    pick[torch.arange(ids.shape[0]), first] = True
    action = torch.rand(ids.shape, generator=g)
    rnd = torch.randint(len(tok), ids.shape, generator=g)
    inputs = ids.clone()
    to_mask, to_random, _ = BERT_SHARES
    inputs[pick & (action < to_mask)] = tok.mask_token_id
    swap = pick & (action >= to_mask) & (action < to_mask + to_random) & ~special[rnd]
    inputs[swap] = rnd[swap]
    pos = pick.nonzero()
    return inputs, pos, ids[pick]


def masked_step_logits(model: Any, tok: Any, ids: torch.Tensor, special: torch.Tensor, rate: float,
                       g: torch.Generator, device: torch.device
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mask a batch and return the vocabulary logits at its masked sites only (the head is most of
    the cost otherwise). ``ids (B, L)`` loses its all-padding tail first. Returns ``(ids (B, W),
    pos (M, 2), targets (M,), logits (M, V))``."""
    width = int((ids != tok.pad_token_id).sum(1).max())
    ids = ids[:, :width]
    inputs, pos, targets = mask_batch(ids, tok, special, rate, g)
    attn = (ids != tok.pad_token_id).long()
    base = getattr(model, model.base_model_prefix)
    hidden = base(input_ids=inputs.to(device), attention_mask=attn.to(device)).last_hidden_state
    return ids, pos, targets, head_logits(model, hidden[pos[:, 0], pos[:, 1]])


def context_unlikelihood(logits: torch.Tensor, ids: torch.Tensor, rows: torch.Tensor,
                         targets: torch.Tensor, special: torch.Tensor) -> torch.Tensor:
    """Unlikelihood penalty on copying (Welleck et al. 2019), mean over masked sites.

    ``logits (M, V)`` at the masked sites, ``ids (B, L)`` the clean windows, ``rows (M,)`` the
    window of each site, ``targets (M,)``. For each site, every distinct non-special token of its
    window other than the true answer contributes ``-log(1 - p(token))``. A true repetition (the
    answer occurs elsewhere in the window) is never penalised, so the plain MLM gradient still
    teaches real repetition; only copies that are wrong are pushed down.
    """
    p = logits.softmax(-1)
    ctx = ids[rows]  # (M, L)
    keep = ~special[ctx] & (ctx != targets[:, None])
    # count each distinct context token once per site
    srt, order = ctx.sort(dim=1)
    first = torch.ones_like(srt, dtype=torch.bool)
    first[:, 1:] = srt[:, 1:] != srt[:, :-1]
    keep = keep & torch.zeros_like(first).scatter(1, order, first)
    pc = p.gather(1, ctx).clamp(max=1 - 1e-6)
    return -(torch.log1p(-pc) * keep).sum(1).mean()
