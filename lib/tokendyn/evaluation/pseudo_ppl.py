"""Pseudo-log-likelihoods and pseudo-perplexity of a masked LM on real text (Salazar et al. 2020).

Each content token of a passage is masked in turn and scored by the model's conditional at that
site, :meth:`~tokendyn.mcmc.conditional.MLMConditional.site_logits`: the same conditional the book's
chains sample from. :func:`heldout_scores` runs it on held-out passages
(:func:`tokendyn.evaluation.heldout.heldout_passages`) and also compares how often the text and the
model's guesses repeat a token of the window.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..core.checks import check_range
from ..core.positions import max_positions
from .masked import as_mlm


def text_site_logits(mlm: Any, text: str, max_len: int = 64,
                     batch: int = 64) -> tuple[Tensor, Tensor]:
    """Mask each in-support token of a real ``text`` in turn: ``(ids (n,), logits (n, V))``.

    The text is tokenized without special tokens and cut to ``max_len`` model-input tokens with
    the adapter's wrapping (``max_len - 2`` content tokens with ``wrap="special"``, which is the
    tokenizer's own [CLS] ... [SEP]; the shipped models were trained on 64-token windows). Row ``i``
    holds the float32 logits at the ``i``-th token whose id is in the support, with that token
    masked and ``-inf`` outside the support; tokens outside it (``[UNK]``) stay as context but are
    not scored. ``batch`` sites share one forward pass. This differs from
    :func:`tokendyn.mcmc.fill.all_site_logits` (every site of a content state, the chains' view) only in
    reading real text: the tokenizer, the truncation and the unscored ``[UNK]``.
    """
    mlm = as_mlm(mlm)
    lim = max_positions(mlm.model)
    check_range("max_len", max_len, 3, 512 if lim is None else lim[0], integer=True)
    width = max_len - 2 * mlm.offset
    content = torch.tensor(mlm.tokenizer(text, add_special_tokens=False, truncation=True,
                                         max_length=width)["input_ids"][:width], dtype=torch.long)
    sites = (~mlm.unsupported.cpu()[content]).nonzero().squeeze(1)
    pieces = [mlm.site_logits(content.repeat(len(sub), 1), sub) for sub in sites.split(batch)]
    logits = torch.cat(pieces) if pieces else torch.empty(0, mlm.vocab_size)
    return content[sites], logits.cpu()


def pseudo_log_likelihoods(mlm: Any, text: str, max_len: int = 64, batch: int = 64) -> Tensor:
    """Log p(x_i | x_-i) ``(n,)`` float32 for each of the ``n`` in-support tokens of ``text``, each
    masked in turn (:func:`text_site_logits`)."""
    ids, logits = text_site_logits(mlm, text, max_len, batch)
    return logits.log_softmax(-1)[torch.arange(len(ids)), ids]


def heldout_scores(mlm: Any, texts: list[str], max_len: int = 64) -> dict[str, Any]:
    """Pseudo-perplexity and repetition rates of a masked LM on ``texts``, from one masked pass.

    ``pseudo_perplexity``: exp(- mean pseudo-log-likelihood) over all scored tokens (Salazar et
    al. 2020). It depends on the tokenizer: compare it between models that share one
    (BERT-uncased WordPiece), not across tokenizers.

    ``repetition``: over the same masked tokens, ``data`` is the share whose true token occurs
    elsewhere in the window and ``model`` the share whose top-1 prediction does. A model that
    copies its context has ``model`` well above ``data``; one trained against copying too hard
    falls well below it. Paper 1's repetition basins are evidence about the dynamics only when
    the two are close. Returns ``{"pseudo_perplexity", "repetition": {"data", "model", "sites"}}``.
    """
    if not texts:
        raise ValueError("texts is empty: give at least one passage")
    mlm = as_mlm(mlm)
    lls, rep_data, rep_model = [], 0, 0
    for t in texts:
        ids, logits = text_site_logits(mlm, t, max_len)
        lls.append(logits.log_softmax(-1)[torch.arange(len(ids)), ids])
        top = logits.argmax(-1)
        same = ids[None, :] == ids[:, None]  # [i, j]: token j equals token i
        elsewhere = ~torch.eye(len(ids), dtype=torch.bool)
        rep_data += int((same & elsewhere).any(1).sum())
        rep_model += int(((ids[None, :] == top[:, None]) & elsewhere).any(1).sum())
    ll = torch.cat(lls)
    return {"pseudo_perplexity": float(torch.exp(-ll.mean())),
            "repetition": {"data": rep_data / len(ll), "model": rep_model / len(ll), "sites": len(ll)}}


def pseudo_perplexity(mlm: Any, texts: list[str], max_len: int = 64) -> float:
    """exp(- mean pseudo-log-likelihood) over all scored tokens of ``texts`` (:func:`heldout_scores`)."""
    return heldout_scores(mlm, texts, max_len)["pseudo_perplexity"]
