"""Causal-LM scores: sentence log-likelihoods and the cloze probe read through a causal LM.

:func:`causal_cloze_probe` scores a causal LM (SmolLM2, :func:`tokendyn.models.load_ar`) on the
same probe as the masked LMs (:mod:`tokendyn.evaluation.cloze`): a reference point from a model
pre-trained at scale. ``scripts/teacher_targets.py`` uses the likelihood helpers to distil it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..core.checks import check_range
from ..core.positions import check_context
from .cloze import ClozeItem, load_probe, probe_row, probe_scores


def _device(model: Any) -> torch.device:
    return next(model.parameters()).device


def is_word_token(token: str) -> bool:
    """A byte-level BPE (``Ġ``) or SentencePiece (``▁``) token that is a whole space-led ASCII word."""
    return token[:1] in ("\u0120", "\u2581") and token[1:].isascii() and token[1:].isalpha()


def right_pad(seqs: list[list[int]], pad_id: int = 0) -> tuple[Tensor, Tensor]:
    """``(ids (N, L), attention_mask (N, L))`` long tensors for ``N`` token lists of unequal length
    (``L`` the longest), padded on the right with ``pad_id``."""
    width = max(map(len, seqs))
    x = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    att = torch.zeros(len(seqs), width, dtype=torch.long)
    for r, q in enumerate(seqs):
        x[r, :len(q)] = torch.tensor(q)
        att[r, :len(q)] = 1
    return x, att


@torch.no_grad()
def sequence_log_likelihoods(model: Any, x: Tensor, att: Tensor) -> Tensor:
    """``(N,)`` float32: sum of log p(x[:, t] | x[:, :t]) over t >= 1 under a causal LM, for
    right-padded ``x (N, L)`` with ``att (N, L)``; pad positions neither predict nor are predicted."""
    check_context(model, x.shape[1], what=f"texts of up to {x.shape[1]} tokens (start token included)",
                  allowed="tokens per text")
    dev = _device(model)
    logp = model(input_ids=x.to(dev), attention_mask=att.to(dev)).logits[:, :-1].float().log_softmax(-1)
    tok_lp = logp.gather(2, x[:, 1:, None].to(dev))[..., 0] * att[:, 1:].to(dev)
    return tok_lp.sum(1).cpu()


def causal_log_likelihoods(model: Any, tokenizer: Any, texts: list[str], start_id: int, *, batch: int | None = None,
                           per_token: bool = False) -> Tensor:
    """``(N,)``: log p(text) under a causal LM for ``N`` texts, each read after the token ``start_id``
    (right-padded batches of ``batch`` texts, all in one when ``None``; :func:`sequence_log_likelihoods`).
    float32 sums; with ``per_token``, float64 means per text token (``-`` of it: the text's NLL in
    nats, ``exp`` of that its perplexity). A text longer than the model's context raises
    ``ValueError`` naming it, before any compute."""
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty")
    check_range("batch", batch if batch is not None else len(texts), 1, integer=True)
    every = [[start_id] + tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    longest = max(range(len(every)), key=lambda r: len(every[r]))
    check_context(model, len(every[longest]), what=f"texts[{longest}]'s {len(every[longest]) - 1} tokens "
                  "and the start token", allowed="tokens per text, start included")
    step = batch or len(every)
    out = []
    for s in range(0, len(every), step):
        x, att = right_pad(every[s:s + step])
        ll = sequence_log_likelihoods(model, x, att)
        out.append(ll.double() / att[:, 1:].sum(1).clamp_min(1) if per_token else ll)
    return torch.cat(out)


def start_id(tokenizer: Any) -> int:
    """A document-start token for a causal LM: ``<|endoftext|>`` where it exists, else BOS.
    Raises ``ValueError`` when the tokenizer has neither."""
    tid = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    if tid is None or tid == tokenizer.unk_token_id and tokenizer.unk_token != "<|endoftext|>":
        tid = tokenizer.bos_token_id
    if tid is None:
        raise ValueError("tokenizer: no <|endoftext|> or BOS token to start a sentence with")
    return int(tid)


@torch.no_grad()
def causal_cloze_probe(model: Any, tokenizer: Any, k: int = 20,
                       items: list[ClozeItem] | None = None) -> dict[str, Any]:
    """A causal LM on the cloze probe, read as a masked LM: for each sentence, its ``k`` likeliest
    next whole words after the left context, re-ranked by the likelihood of the whole sentence
    with each filled in. That is p(x_i | x_-i) restricted to those ``k`` words, so the right
    context counts. Returns ``{"n", "k", "top1", "top5", "copy_rate", "by_register", "items"}``
    as :func:`~tokendyn.evaluation.cloze.cloze_probe` (a word is a byte-level BPE token with a
    leading space).
    """
    check_range("k", k, 5, 200, integer=True)
    items = load_probe() if items is None else items
    start = start_id(tokenizer)
    vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    is_word = torch.tensor([is_word_token(t) for t in vocab])
    rows = []
    for it in items:
        left, right = it.text.split("[MASK]")
        prefix = [start] + tokenizer(" " + left.rstrip(), add_special_tokens=False)["input_ids"]
        nxt = model(torch.tensor([prefix], device=_device(model))).logits[0, -1].float().cpu()
        nxt[~is_word[:nxt.shape[0]]] = -torch.inf
        cands: list[str] = []
        seen: set[str] = set()
        for t in nxt.argsort(descending=True).tolist():
            w = vocab[t][1:]
            if w.lower() not in seen:
                seen.add(w.lower())
                cands.append(w)
            if len(cands) == k:
                break
        ll = causal_log_likelihoods(model, tokenizer, [" " + left + w + right for w in cands], start)
        rows.append(probe_row(it, [cands[i].lower() for i in ll.argsort(descending=True)[:5].tolist()]))
    return {**probe_scores(rows), "k": k}
