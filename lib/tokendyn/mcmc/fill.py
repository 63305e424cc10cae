"""Reading a model's local conditionals at every site of a sequence (the getting-started view).

For each site ``i`` of a content sequence, ``p_tau(. | x_-i)`` is what one Glauber step at ``i``
samples from. :func:`all_site_logits` evaluates it at all sites at once (one batched call of
``site_logits`` with one row per site) and :func:`site_conditionals` summarises it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.checks import check_range
from .conditional import ConditionalModel, check_tokens
from .sampling import check_tau


@dataclass
class SiteConditionals:
    """Per-site summaries of ``p_tau(. | x_-i)`` for one sequence of ``n`` sites.

    ``logp_current`` [n]: log-probability of the token now at each site; ``entropy`` [n] in nats;
    ``top_ids`` / ``top_probs`` [n, k]: the ``k`` most likely tokens; ``is_argmax`` [n]: whether the
    current token is the most likely one (a site a greedy chain would leave alone).
    """

    logp_current: Tensor
    entropy: Tensor
    top_ids: Tensor
    top_probs: Tensor
    is_argmax: Tensor


def all_site_logits(model: ConditionalModel, x: Tensor) -> Tensor:
    """Masked logits at every site of each state: x ``[B, n]`` -> ``[B, n, V]`` at ``tau = 1``
    (one ``site_logits`` call with ``B n`` rows: row ``(b, i)`` is state ``b`` with site ``i``
    masked). For real text (tokenizer, truncation, unscored ``[UNK]``) see
    :func:`tokendyn.evaluation.pseudo_ppl.text_site_logits`."""
    check_tokens(model, x, "x")
    b, n = x.shape
    if b == 0:  # no rows: nothing to reshape
        return torch.empty(0, n, model.vocab_size)
    sites = torch.arange(n, device=x.device).repeat(b)
    return model.site_logits(x.repeat_interleave(n, 0), sites).reshape(b, n, -1)


@torch.inference_mode()
def site_conditionals(model: ConditionalModel, tokens: Tensor, *, tau: float = 1.0,
                      k: int = 5) -> SiteConditionals:
    """tokens ``[n]`` (one content sequence) -> :class:`SiteConditionals` over its ``n`` sites."""
    check_tau(tau)  # an infinite tau made every entropy nan
    check_range("k", k, 1, model.vocab_size, integer=True)
    if not isinstance(tokens, Tensor):
        raise TypeError(f"tokens must be a torch.Tensor of token ids [n], got {type(tokens).__name__}")
    if tokens.dim() != 1:
        raise ValueError(f"tokens must be one sequence [n], got shape {tuple(tokens.shape)}")
    check_tokens(model, tokens.unsqueeze(0))
    n = tokens.shape[0]
    logits = all_site_logits(model, tokens.unsqueeze(0))[0].double() / tau
    logp = torch.log_softmax(logits, -1)
    p = logp.exp()
    ent = -(p * logp.nan_to_num(neginf=0.0)).sum(-1)
    cur = logp.gather(1, tokens.view(n, 1)).squeeze(1)
    top_p, top_i = p.topk(k, dim=-1)
    return SiteConditionals(cur.float(), ent.float(), top_i, top_p.float(), top_i[:, 0] == tokens)
