"""Masked-LM plumbing the probes share: the adapter, the vocabulary head and logits at a mask.

Every masked-LM evaluation takes ``mlm``: an :class:`~tokendyn.mcmc.conditional.MLMConditional`, or
anything it is built from (a :class:`tokendyn.models.LoadedMLM`, a ``(model, tokenizer)`` pair).
:func:`as_mlm` turns it into the adapter once, at the entry point.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..core.positions import check_content_fits
from ..mcmc.conditional import MLMConditional, mlm_head, wrapping_words


def as_mlm(mlm: Any, tokenizer: Any = None) -> MLMConditional:
    """``mlm`` as an :class:`MLMConditional`: returned as is when it already is one, else built
    from ``(mlm, tokenizer)``, a loaded MLM or a ``(model, tokenizer)`` pair (which sets the
    model to eval mode, as evaluation wants)."""
    if tokenizer is None and isinstance(mlm, MLMConditional):
        return mlm
    return MLMConditional(mlm, tokenizer)


def head_logits(model: Any, hidden: Tensor) -> Tensor:
    """Vocabulary logits ``(M, V)`` from final hidden states ``(M, H)`` of a ``*ForMaskedLM``
    (:func:`tokendyn.mcmc.conditional.mlm_head`). Raises ``TypeError`` for an architecture whose head
    is not known: use the full forward pass for those."""
    head = mlm_head(model)
    if head is None:
        raise TypeError(f"unsupported masked LM {type(model).__name__}")
    return head(hidden)


@torch.no_grad()
def masked_logits(mlm: Any, texts: list[str]) -> Tensor:
    """Raw logits ``(N, V)`` float32 on the CPU at the single mask of each of ``N`` texts (the
    literal ``[MASK]`` stands for the tokenizer's own mask token).

    The texts are encoded by the tokenizer, with its own wrapping ([CLS] ... [SEP] or <s> ... </s>),
    and run as one right-padded batch with an attention mask: unlike
    :meth:`~tokendyn.mcmc.conditional.MLMConditional.site_logits`, which takes equal-length content
    rows, sentences of any length share a batch here. No support mask is applied.
    """
    mlm = as_mlm(mlm)
    tok = mlm.tokenizer
    enc = tok([t.replace("[MASK]", tok.mask_token) for t in texts], return_tensors="pt", padding=True)
    longest = int(enc["attention_mask"].sum(1).argmax()) if len(texts) else 0
    check_content_fits(mlm.model, enc["input_ids"].shape[1] - 2, extra=2, label=mlm.name,
                       wrapping=lambda: wrapping_words(tok), where=f"texts[{longest}]: ")
    is_mask = enc["input_ids"] == tok.mask_token_id
    if not bool((is_mask.sum(1) == 1).all()):
        raise ValueError("each text must hold exactly one mask token")
    rows, pos = is_mask.nonzero(as_tuple=True)  # row-major: one (row, position) per text, in order
    dev = mlm.device
    return mlm.logits_at(enc["input_ids"].to(dev), enc["attention_mask"].to(dev),
                         rows.to(dev), pos.to(dev)).float().cpu()
