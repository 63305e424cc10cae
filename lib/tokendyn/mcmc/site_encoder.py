"""The encoder of a masked LM with its last layer evaluated only at the query sites.

A Glauber step reads the final hidden state at one position per row (the masked site). The full
pass computes the last layer's query projection, attention output, feed-forward and LayerNorms at
every position and throws all but one away. :func:`site_encoder` runs layers ``0 .. N-2`` through
the model's own modules over every position (so its attention implementation, eager or SDPA, is
used there) and the last layer by hand from that layer's own submodules: keys and values over the
whole row, everything else only at the requested ``(row, pos)`` sites.

Supported (keyed on the class of ``model.base_model``, exactly, since a subclass may change its
forward): BERT, RoBERTa, XLM-RoBERTa, MPNet and DistilBERT (post-LayerNorm layers, written once in
:func:`_post_ln_last`), and ModernBERT (pre-norm, fused ``Wqkv``, rotary, global/local attention,
GLU MLP, ``final_norm``). Anything else (or a decoder configuration) gives ``None``. The sequence
follows transformers 5.x's forwards: position ids are the embeddings' own defaults, the padding
mask is ``attention_mask != 0`` on keys, and ModernBERT's local layers see keys with
``|i - j| <= config.sliding_window`` (half of ``local_attention``).

Modules are looked up on every call and weights are never copied, so a model edited in place (or
a layer replaced) is seen by an existing encoder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn


class _PostLN(NamedTuple):
    """The last layer of a post-LayerNorm encoder, as references to its own submodules."""

    q: nn.Module
    k: nn.Module
    v: nn.Module
    n_heads: int
    attn_out: Callable[[Tensor, Tensor], Tensor]  # (context, residual) [M, H] -> LN(out(context) + residual)
    ffn: Callable[[Tensor], Tensor]  # a [M, H] -> LN(FFN(a) + a)


# Each family: prefix(base, ids, mask) -> (hidden states entering the last layer [B, L, H], extra
# input the last layer needs), and last(base, h, extra, allowed [M, L], rows, pos) -> [M, H].
_Prefix = Callable[[Any, Tensor, Tensor | None], tuple[Tensor, Any]]
_Last = Callable[[Any, Tensor, Any, Tensor, Tensor, Tensor], Tensor]


def _padding_mask(base: Any, h: Tensor, attention_mask: Tensor | None) -> Any:
    """The mask the model's own layers expect (additive float for eager, bool or None for SDPA),
    built by the same function the model's forward calls."""
    from transformers.masking_utils import create_bidirectional_mask

    return create_bidirectional_mask(config=base.config, inputs_embeds=h, attention_mask=attention_mask)


def _attend(q: Tensor, k: Tensor, v: Tensor, rows: Tensor, allowed: Tensor,
            bias: Tensor | None = None) -> Tensor:
    """One query per site against its row's keys.

    q ``[M, nh, d]`` (already scaled), k and v ``[B, nh, L, d]``, rows ``[M]``, allowed ``[M, L]``
    bool (key may be attended), bias ``[M, nh, L]`` additive or None -> context ``[M, nh * d]``.

    Plain matmul + softmax, not ``scaled_dot_product_attention``: with a single query per row and a
    mask, CPU SDPA takes its general kernel, which measured 1.2-2.3x slower in fp32 and 3.5-4.5x
    slower in bf16 for M=64, 12 heads, L=34..512 (torch 2.13, one thread). The softmax runs in
    float32 on the small ``[M, nh, L]`` score tensor (as ModernBERT's eager path and SDPA do).
    """
    k, v = k[rows], v[rows]  # [M, nh, L, d]: a row with several sites shares its keys and values
    scores = (q.unsqueeze(2) @ k.transpose(-1, -2)).squeeze(2)  # [M, nh, L]
    if bias is not None:
        scores = scores + bias
    scores = scores.masked_fill(~allowed.unsqueeze(1), float("-inf"))  # the site itself is allowed: no NaN
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype)
    return (probs.unsqueeze(2) @ v).flatten(1)


def _heads(x: Tensor, n_heads: int) -> Tensor:
    """[B, L, H] -> [B, nh, L, d]."""
    return x.unflatten(-1, (n_heads, -1)).transpose(1, 2)


def _post_ln_last(layer: _PostLN, h: Tensor, bias: Tensor | None, allowed: Tensor,
                  rows: Tensor, pos: Tensor) -> Tensor:
    """A post-LayerNorm layer (BERT, RoBERTa, MPNet, DistilBERT) at the sites only."""
    x = h[rows, pos]  # [M, H]
    q = layer.q(x).unflatten(-1, (layer.n_heads, -1))  # [M, nh, d]
    q = q * q.shape[-1] ** -0.5
    k, v = _heads(layer.k(h), layer.n_heads), _heads(layer.v(h), layer.n_heads)
    a = layer.attn_out(_attend(q, k, v, rows, allowed, bias), x)
    return layer.ffn(a)


# --- BERT, RoBERTa, XLM-RoBERTa ---------------------------------------------------------------

def _post_ln_prefix(base: Any, h: Tensor, mask: Tensor | None, layers: Any) -> tuple[Tensor, None]:
    """Embeddings ``h`` through every layer of ``layers`` but the last, under the model's own mask."""
    m = _padding_mask(base, h, mask)
    for layer in layers[:-1]:
        h = layer(h, m)
    return h, None


def _bert_prefix(base: Any, ids: Tensor, mask: Tensor | None) -> tuple[Tensor, None]:
    # token types 0, positions as the model makes them
    return _post_ln_prefix(base, base.embeddings(input_ids=ids), mask, base.encoder.layer)


def _bert_last(base: Any, h: Tensor, _: None, allowed: Tensor, rows: Tensor, pos: Tensor) -> Tensor:
    lay = base.encoder.layer[-1]
    s = lay.attention.self
    parts = _PostLN(s.query, s.key, s.value, s.num_attention_heads, lay.attention.output,
                    lay.feed_forward_chunk)
    return _post_ln_last(parts, h, None, allowed, rows, pos)


# --- MPNet: a relative position bias [B, nh, L, L], computed once and added in every layer -------

def _mpnet_prefix(base: Any, ids: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    h = base.embeddings(input_ids=ids)
    m = _padding_mask(base, h, mask)
    bias = base.encoder.compute_position_bias(h)
    for layer in base.encoder.layer[:-1]:
        h = layer(h, m, bias)[0]
    return h, bias


def _mpnet_last(base: Any, h: Tensor, bias: Tensor, allowed: Tensor, rows: Tensor, pos: Tensor) -> Tensor:
    lay = base.encoder.layer[-1]
    s, att = lay.attention.attn, lay.attention
    parts = _PostLN(s.q, s.k, s.v, s.num_attention_heads,
                    lambda c, x: att.LayerNorm(s.o(c) + x),
                    lambda a: lay.output(lay.intermediate(a), a))
    return _post_ln_last(parts, h, bias[rows, :, pos], allowed, rows, pos)


# --- DistilBERT -------------------------------------------------------------------------------

def _distil_prefix(base: Any, ids: Tensor, mask: Tensor | None) -> tuple[Tensor, None]:
    return _post_ln_prefix(base, base.embeddings(ids), mask, base.transformer.layer)


def _distil_last(base: Any, h: Tensor, _: None, allowed: Tensor, rows: Tensor, pos: Tensor) -> Tensor:
    lay = base.transformer.layer[-1]
    s = lay.attention
    parts = _PostLN(s.q_lin, s.k_lin, s.v_lin, s.n_heads,
                    lambda c, x: lay.sa_layer_norm(s.out_lin(c) + x),
                    lambda a: lay.output_layer_norm(lay.ffn(a) + a))
    return _post_ln_last(parts, h, None, allowed, rows, pos)


# --- ModernBERT: pre-norm, fused Wqkv, rotary, global/local layers, GLU MLP, final_norm ----------

def _modernbert_prefix(base: Any, ids: Tensor, mask: Tensor | None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    from transformers.masking_utils import create_bidirectional_sliding_window_mask

    h = base.embeddings(input_ids=ids)
    position_ids = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)  # as the forward: 0..L-1, padding or not
    kw = {"config": base.config, "inputs_embeds": h, "attention_mask": mask}
    masks = {"full_attention": _padding_mask(base, h, mask),
             "sliding_attention": create_bidirectional_sliding_window_mask(**kw)}
    rope = {t: base.rotary_emb(h, position_ids, t) for t in set(base.config.layer_types)}
    for layer in base.layers[:-1]:
        t = layer.attention_type
        h = layer(h, attention_mask=masks[t], position_embeddings=rope[t])
    return h, rope[base.layers[-1].attention_type]


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary embedding as ModernBERT applies it (in float32, back to x's dtype); cos, sin
    broadcast against x [..., d]."""
    xf = x.float()
    half = x.shape[-1] // 2
    return (xf * cos + torch.cat((-xf[..., half:], xf[..., :half]), dim=-1) * sin).to(x.dtype)


def _modernbert_last(base: Any, h: Tensor, rope: tuple[Tensor, Tensor], allowed: Tensor,
                     rows: Tensor, pos: Tensor) -> Tensor:
    lay = base.layers[-1]
    att = lay.attn
    n_heads, d = base.config.num_attention_heads, att.head_dim
    hid = n_heads * d
    if lay.attention_type == "sliding_attention":  # keys within the half window, inclusive
        j = torch.arange(h.shape[1], device=h.device)
        allowed = allowed & ((j - pos.unsqueeze(1)).abs() <= base.config.sliding_window)
    normed = lay.attn_norm(h)
    w, b = att.Wqkv.weight, att.Wqkv.bias  # rows of Wqkv: [q | k | v], each nh * d (the forward's view(3, nh, d))
    q = nn.functional.linear(normed[rows, pos], w[:hid], None if b is None else b[:hid])
    kv = nn.functional.linear(normed, w[hid:], None if b is None else b[hid:])
    cos, sin = rope  # [1, L, d] in the model's dtype
    q = _rotate(q.unflatten(-1, (n_heads, d)), cos[0, pos].unsqueeze(1), sin[0, pos].unsqueeze(1))
    k = _rotate(_heads(kv[..., :hid], n_heads), cos.unsqueeze(1), sin.unsqueeze(1))
    v = _heads(kv[..., hid:], n_heads)
    x = h[rows, pos] + att.out_drop(att.Wo(_attend(q * d ** -0.5, k, v, rows, allowed)))
    x = x + lay.mlp(lay.mlp_norm(x))
    return base.final_norm(x)  # part of last_hidden_state: what the MLM head reads


_FAMILIES: dict[str, tuple[_Prefix, _Last]] = {
    "BertModel": (_bert_prefix, _bert_last),
    "RobertaModel": (_bert_prefix, _bert_last),
    "XLMRobertaModel": (_bert_prefix, _bert_last),
    "MPNetModel": (_mpnet_prefix, _mpnet_last),
    "DistilBertModel": (_distil_prefix, _distil_last),
    "ModernBertModel": (_modernbert_prefix, _modernbert_last),
}


class SiteEncoder:
    """``(input_ids [B, L], attention_mask [B, L] | None, rows [M], pos [M]) -> hidden [M, H]``:
    ``model.base_model(input_ids, attention_mask).last_hidden_state[rows, pos]`` within float
    rounding, with the last layer computed only at the M sites. Made by :func:`site_encoder`."""

    def __init__(self, model: Any, prefix: _Prefix, last: _Last) -> None:
        self.model = model
        self._prefix, self._last = prefix, last

    def __call__(self, input_ids: Tensor, attention_mask: Tensor | None, rows: Tensor, pos: Tensor) -> Tensor:
        """input_ids ``[B, L]`` int, attention_mask ``[B, L]`` (0 = padded key; None = no padding),
        rows, pos ``[M]`` int (any M, repeats allowed; sites should not be padded) -> ``[M, H]`` in
        the model's dtype."""
        base = self.model.base_model
        if base.training:  # the hand-written layer has no dropout; the full pass would
            raise RuntimeError("site_encoder needs the model in eval mode (dropout off)")
        if input_ids.dim() != 2 or rows.shape != pos.shape or rows.dim() != 1:
            raise ValueError(f"need input_ids [B, L] and rows, pos [M]; got {tuple(input_ids.shape)}, "
                             f"{tuple(rows.shape)}, {tuple(pos.shape)}")
        h, extra = self._prefix(base, input_ids, attention_mask)
        allowed = (torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None
                   else attention_mask.to(device=h.device, dtype=torch.bool))[rows]  # [M, L]
        return self._last(base, h, extra, allowed, rows, pos)


def site_encoder(model: Any) -> SiteEncoder | None:
    """For a transformers ``*ForMaskedLM`` of a supported family: a callable
    ``(input_ids [B, L], attention_mask [B, L], rows [M], pos [M]) -> hidden [M, H]`` equal to
    ``model.base_model(input_ids, attention_mask).last_hidden_state[rows, pos]`` within float
    rounding, with layers ``0 .. N-2`` run over every position and layer ``N-1`` only at
    ``(rows[m], pos[m])`` (ModernBERT: its ``final_norm`` applied too, so the result is what the
    MLM head reads). ``None`` for an architecture it does not know (callers then fall back to the
    full pass). The model and its config are not changed."""
    base = getattr(model, "base_model", None)
    config = getattr(base, "config", None)
    family = _FAMILIES.get(type(base).__name__)
    if family is None or getattr(config, "is_decoder", False):  # a causal BERT masks differently
        return None
    return SiteEncoder(model, *family)
