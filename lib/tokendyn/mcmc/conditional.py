"""The narrow model protocol every sampler and metric uses, and its adapter over masked LMs.

A :class:`ConditionalModel` answers one question: the logits of ``p(x_i | x_-i)`` at ``tau = 1``
for one site per row. Samplers (:mod:`tokendyn.mcmc.glauber`), the rectangle test
(:mod:`tokendyn.analysis.rectangle`) and the influence estimates (:mod:`tokendyn.analysis.influence`) only ever call
``site_logits``, so exact toy models (:mod:`tokendyn.mcmc.toy`) and real MLMs are interchangeable.

:class:`MLMConditional` adapts any transformers ``*ForMaskedLM``. ``tokens`` hold content only;
the adapter adds the fixed wrapping, masks the requested site, runs the encoder with its last layer
only at that site (:mod:`tokendyn.mcmc.site_encoder`: keys and values of the whole row, the rest at the
site; every layer at every position for a family it does not know) and applies the vocabulary
head only there (the head is about half the cost at MiniLM size when applied everywhere).
Wrapping schemes (``wrap=``):

- ``"special"`` (default, the paper's): ``[CLS] x_1 .. x_n [SEP]`` for BERT and ModernBERT,
  ``<s> x_1 .. x_n </s>`` for RoBERTa: the tokenizer's own ``cls_token_id`` / ``sep_token_id``
  (falling back to ``bos`` / ``eos``), never the mask id.
- ``"none"``: the content alone.

Special tokens (and head rows beyond the tokenizer's vocabulary, e.g. ModernBERT's padding rows)
are outside the support: their logits are ``-inf``. Logits are returned in float32 whatever dtype
the model runs in, so categorical draws downstream are float32 or better.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from ..core.checks import check_choice, check_range
from ..core.positions import check_content_fits, max_positions
from .site_encoder import site_encoder

WRAPS = ("special", "none")
LAST_LAYERS = ("sites", "full")
_CHOSEN: dict[str, dict[str, Any]] = {}


def record_settings(name: str, entry: dict[str, Any]) -> None:
    """Note how the conditional named ``name`` runs (every MLMConditional notes itself as
    constructed; :func:`tokendyn.mcmc.step_settings.conditional` then adds how its settings were chosen)."""
    _CHOSEN[name] = dict(entry)


def settings_chosen() -> dict[str, dict[str, Any]]:
    """How every masked LM's step ran in this process, by model name: attention, chunk,
    compiled, last layer, and where the settings came from (``source``); results record it."""
    return {k: dict(v) for k, v in _CHOSEN.items()}


@runtime_checkable
class ConditionalModel(Protocol):
    """Local conditionals ``p(x_i | x_-i)`` over a vocabulary of ``vocab_size`` tokens."""

    vocab_size: int

    def site_logits(self, tokens: Tensor, sites: Tensor) -> Tensor:
        """tokens ``[B, n]`` content token ids, sites ``[B]`` one site per row ->
        ``[B, vocab_size]`` float logits of ``p(x_site | x_-site)`` at ``tau = 1`` with the site
        masked; ``-inf`` for tokens outside the support (special tokens)."""
        ...


def check_shapes(tokens: Tensor, sites: Tensor) -> None:
    """Shape and dtype checks of a ``site_logits`` call (no device sync, so cheap per step)."""
    if tokens.dim() != 2 or tokens.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"tokens must be an integer tensor [B, n], got {tuple(tokens.shape)} "
                         f"{tokens.dtype}")
    if sites.shape != tokens.shape[:1]:
        raise ValueError(f"sites must have shape [B]={tuple(tokens.shape[:1])}, got {tuple(sites.shape)}")


def check_tokens(model: ConditionalModel, tokens: Tensor, name: str = "tokens") -> None:
    """Validate states once at a public entry point: ``[B, n]`` integer ids in
    ``[0, vocab_size)``, and ``n`` within what the model can read (a model with a position table
    says so with ``check_n``, as :class:`MLMConditional` does). Raises ``ValueError`` naming the
    argument."""
    if not isinstance(tokens, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids [B, n], got {type(tokens).__name__}")
    if tokens.dim() != 2 or tokens.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{name} must be an integer tensor [B, n], got {tuple(tokens.shape)} "
                         f"{tokens.dtype}")
    if tokens.shape[1] < 1:
        raise ValueError(f"{name} must have at least one site")
    check_n = getattr(model, "check_n", None)
    if callable(check_n):
        check_n(tokens.shape[1], where=f"{name}: ")
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= model.vocab_size):
        raise ValueError(f"{name} must lie in [0, vocab_size={model.vocab_size})")


def _head_bert(m: Any) -> Callable[[Tensor], Tensor]:
    return m.cls


def _head_roberta(m: Any) -> Callable[[Tensor], Tensor]:
    return m.lm_head


def _head_modernbert(m: Any) -> Callable[[Tensor], Tensor]:
    return lambda h: m.decoder(m.head(h))


def _head_distilbert(m: Any) -> Callable[[Tensor], Tensor]:
    return lambda h: m.vocab_projector(m.vocab_layer_norm(m.activation(m.vocab_transform(h))))


# Architecture -> the vocabulary head as a function of hidden states [..., H] -> [..., V].
# Anything else falls back to the full forward pass and a gather (correct, about twice the cost).
_HEADS: dict[str, Callable[[Any], Callable[[Tensor], Tensor]]] = {
    "BertForMaskedLM": _head_bert,
    "RobertaForMaskedLM": _head_roberta,
    "XLMRobertaForMaskedLM": _head_roberta,
    "ModernBertForMaskedLM": _head_modernbert,
    "DistilBertForMaskedLM": _head_distilbert,
    "MPNetForMaskedLM": _head_roberta,  # MPNetLMHead: dense, gelu, layer_norm, decoder (+ bias)
}


def mlm_head(model: Any) -> Callable[[Tensor], Tensor] | None:
    """The vocabulary head of a transformers ``*ForMaskedLM`` as a function of final hidden states
    ``[..., H] -> [..., V]``, or ``None`` for an architecture not in the table above (then only the
    full forward pass gives logits). Applying the head only where it is needed (a masked site) is
    most of the saving in training and evaluation: it is the largest matmul of a small MLM."""
    arch = type(model).__name__
    return _HEADS[arch](model) if arch in _HEADS else None


def special_ids(tokenizer: Any) -> tuple[int, int, int]:
    """``(cls_id, sep_id, mask_id)`` of a tokenizer: the ``"special"`` wrapping and the mask.

    RoBERTa's ``cls``/``sep`` are ``<s>``/``</s>``; a tokenizer without them falls back to
    ``bos``/``eos``. Raises ``ValueError`` if an id is missing or equals the mask id (the bug of a
    well-known BERT Gibbs notebook).
    """
    cls_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    sep_id = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    mask_id = tokenizer.mask_token_id
    if mask_id is None:
        raise ValueError("the tokenizer has no mask token: not a masked LM tokenizer")
    if cls_id is None or sep_id is None:
        raise ValueError("the tokenizer has no cls/bos or sep/eos token: use wrap='none'")
    if mask_id in (cls_id, sep_id):
        raise ValueError(f"wrapping ids (cls={cls_id}, sep={sep_id}) must differ from mask={mask_id}")
    return int(cls_id), int(sep_id), int(mask_id)


def wrapping_words(tokenizer: Any, wrap: str = "special") -> str:
    """How a state is wrapped, for messages: ``" with [CLS]/[SEP] wrapping"``."""
    if wrap == "none":
        return " with no wrapping"
    cls_id, sep_id, _ = special_ids(tokenizer)
    return f" with {tokenizer.convert_ids_to_tokens(cls_id)}/{tokenizer.convert_ids_to_tokens(sep_id)} wrapping"


class MLMConditional:
    """:class:`ConditionalModel` over a transformers ``*ForMaskedLM`` and its tokenizer.

    Bring your own model: ``MLMConditional(model, tokenizer)`` for any Hugging Face
    ``*ForMaskedLM`` and its tokenizer, or ``MLMConditional(loaded)`` with a
    :class:`tokendyn.models.LoadedMLM` (anything with ``.model`` and ``.tokenizer``).
    ``wrap`` is ``"special"`` or ``"none"`` (module docstring). ``chunk`` bounds the rows per
    forward pass (memory). The model keeps its device and dtype (bf16 is fine); logits come back as
    float32 on the device of ``tokens``. ``last_layer="sites"`` (default) computes the final layer
    only at the masked sites where the family allows it (:attr:`last_layer` says what runs);
    ``"full"`` runs every layer at every position, as before (the logits agree within rounding).

    ``compile=True`` runs the encoder through ``torch.compile`` with weight freezing (inductor fuses
    the GELU, LayerNorm, softmax and layout copies around the matmuls). On a 2-core AVX-512 BF16 CPU
    it ran the bf16 step at 0.99x-1.11x the eager rate (``make bench`` times both): little to gain
    at these sizes there. It is for long runs at a fixed batch and ``n``: each new input shape
    compiles first (5-20 s on 2 cores), the weights are read once (edit them afterwards and the
    compiled encoder does not see it), and the logits differ from the eager ones at float rounding,
    so seeded chains are not bit-identical to uncompiled ones. Needs a C++ compiler on the CPU.
    """

    def __init__(self, loaded: Any, tokenizer: Any = None, *, wrap: str = "special",
                 chunk: int = 256, compile: bool = False,  # noqa: A002 (torch's own name)
                 last_layer: str = "sites") -> None:
        check_choice("wrap", wrap, WRAPS)
        check_choice("last_layer", last_layer, LAST_LAYERS)
        check_range("chunk", chunk, 1, integer=True)
        if not isinstance(compile, bool):
            raise TypeError(f"compile must be True or False, got {compile!r}")
        if isinstance(loaded, tuple) and len(loaded) == 2 and tokenizer is None:
            loaded, tokenizer = loaded
        if tokenizer is not None:
            model = loaded
            name = getattr(getattr(model, "config", None), "name_or_path", "") or type(model).__name__
        elif hasattr(loaded, "model") and hasattr(loaded, "tokenizer"):
            model, tokenizer = loaded.model, loaded.tokenizer
            name = getattr(loaded, "name", type(model).__name__)
        else:
            raise TypeError(f"MLMConditional needs (model, tokenizer) or a loaded MLM with .model and "
                            f".tokenizer; got {type(loaded).__name__} and no tokenizer")
        if not hasattr(model, "get_output_embeddings") or model.get_output_embeddings() is None:
            raise TypeError(f"model must be a transformers *ForMaskedLM (with an output head), got "
                            f"{type(model).__name__}")
        if not hasattr(tokenizer, "all_special_ids"):
            raise TypeError(f"tokenizer must be a transformers tokenizer, got {type(tokenizer).__name__}")
        self.name = name
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.wrap = wrap
        self.chunk = chunk
        self.cls_id, self.sep_id, self.mask_id = special_ids(self.tokenizer)
        self.vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
        self._head = mlm_head(self.model)
        self._encoder = self.model.base_model if self._head is not None else None
        self._sites: Any = site_encoder(self.model) if self._head is not None and last_layer == "sites" else None
        self.last_layer = "sites" if self._sites is not None else "full"
        """What runs: ``"sites"`` (the last layer at the masked sites only) or ``"full"``."""
        self._forward: Any = self.model
        self.compiled = compile
        if compile:
            # dynamic=False: one graph per shape, as a chain's batch and n stay fixed; freezing folds
            # the weights in, which lets inductor pre-pack them for the CPU matmul kernels.
            opts = {"dynamic": False, "options": {"freezing": True}}
            if self._sites is not None:
                self._sites = torch.compile(self._sites, **opts)
            elif self._encoder is not None:
                self._encoder = torch.compile(self._encoder, **opts)
            else:
                self._forward = torch.compile(self.model, **opts)
        # Outside the support: every special token and every head row past the tokenizer's vocab.
        unsupported = torch.zeros(self.vocab_size, dtype=torch.bool)
        unsupported[len(self.tokenizer):] = True
        unsupported[[i for i in self.tokenizer.all_special_ids if i < self.vocab_size]] = True
        self.unsupported = unsupported
        self.support_size = int((~unsupported).sum())
        lim = max_positions(self.model)
        self.max_sites: int | None = None if lim is None else lim[0] - 2 * self.offset
        """The most content tokens a state may hold (position table less the wrapping), or None."""
        record_settings(self.name, {"attn": str(getattr(getattr(self.model, "config", None), "_attn_implementation", None) or "eager"),
                           "chunk": chunk, "compile": compile, "last_layer": self.last_layer,
                           "source": "as constructed"})

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def offset(self) -> int:
        """Position of content token 0 in the wrapped input (1 with ``wrap="special"``)."""
        return 1 if self.wrap == "special" else 0

    def check_n(self, n: int, where: str = "") -> None:
        """Raise ``ValueError`` unless ``n`` content tokens and the wrapping fit the model's
        position table (``max_position_embeddings``): before any forward pass, not deep in torch."""
        if self.max_sites is None or n <= self.max_sites:
            return
        check_content_fits(self.model, n, extra=2 * self.offset, label=self.name, where=where,
                           wrapping=lambda: wrapping_words(self.tokenizer, self.wrap))

    def wrap_ids(self, tokens: Tensor) -> Tensor:
        """tokens ``[B, n]`` -> model input ids ``[B, n + 2]`` (``"special"``) or ``[B, n]``."""
        if self.wrap == "none":
            return tokens
        b = tokens.shape[0]
        cls = tokens.new_full((b, 1), self.cls_id)
        sep = tokens.new_full((b, 1), self.sep_id)
        return torch.cat([cls, tokens, sep], dim=1)

    @torch.inference_mode()
    def site_logits(self, tokens: Tensor, sites: Tensor) -> Tensor:
        """tokens ``[B, n]``, sites ``[B]`` -> ``[B, vocab_size]`` float32 masked-site logits,
        ``-inf`` outside the support."""
        check_shapes(tokens, sites)
        self.check_n(tokens.shape[1], where="tokens: ")
        out_device = tokens.device
        dev = self.device
        tokens, sites = tokens.to(dev), sites.to(dev)
        pieces = [self._chunk_logits(tokens[s:s + self.chunk], sites[s:s + self.chunk])
                  for s in range(0, tokens.shape[0], self.chunk)]
        if len(pieces) == 1:  # every piece is a fresh tensor, so the fill below may be in place
            logits = pieces[0]
        else:
            logits = torch.cat(pieces, 0) if pieces else torch.empty(0, self.vocab_size, device=dev)
        if self.unsupported.device != dev:  # move once, not every step
            self.unsupported = self.unsupported.to(dev)
        # In place: a [B, V] float32 buffer less per step (at V = 30k the allocations showed up).
        logits = logits.float().masked_fill_(self.unsupported, float("-inf"))
        return logits.to(out_device)

    def _chunk_logits(self, tokens: Tensor, sites: Tensor) -> Tensor:
        ids = self.wrap_ids(tokens).clone()
        rows = torch.arange(ids.shape[0], device=ids.device)
        pos = sites + self.offset
        ids[rows, pos] = self.mask_id
        return self.logits_at(ids, torch.ones_like(ids), rows, pos)

    def logits_at(self, ids: Tensor, attention_mask: Tensor, rows: Tensor, pos: Tensor) -> Tensor:
        """Raw head logits ``[M, vocab_size]`` (model dtype, no support mask) at positions
        ``(rows[m], pos[m])`` of model input ``ids`` / ``attention_mask`` ``[B, L]`` (already
        wrapped and masked, on :attr:`device`): the encoder runs on the batch (its last layer only
        there when :attr:`last_layer` is ``"sites"``), the head only there."""
        if self._head is None:
            return self._forward(input_ids=ids, attention_mask=attention_mask).logits[rows, pos]
        if self._sites is not None and not self.model.training:  # (training: dropout needs the full pass)
            return self._head(self._sites(ids, attention_mask, rows, pos))
        hidden = self._encoder(input_ids=ids, attention_mask=attention_mask).last_hidden_state
        return self._head(hidden[rows, pos])


def content_ids(loaded: Any, texts: Sequence[str], n: int) -> Tensor:
    """The first ``n`` content token ids of each text -> ``[len(texts), n]``.

    Special tokens are dropped, including ``[UNK]`` for characters the vocabulary lacks: they are
    outside the support, so a state holding one could never be reached or tested by a rectangle.
    Raises ``ValueError`` naming the text that has fewer than ``n`` tokens left, or when ``n``
    tokens and the ``"special"`` wrapping overflow the model's position table.
    """
    check_range("n", n, 1, integer=True)
    tok = loaded.tokenizer
    if isinstance(loaded, MLMConditional):
        loaded.check_n(n)
    elif hasattr(loaded, "model"):
        check_content_fits(loaded.model, n, extra=2, wrapping=lambda: wrapping_words(tok),
                           label=getattr(loaded, "name", type(loaded.model).__name__))
    special = set(tok.all_special_ids)
    rows = []
    for k, text in enumerate(texts):
        ids = [t for t in tok(text, add_special_tokens=False)["input_ids"] if t not in special]
        if len(ids) < n:
            raise ValueError(f"texts[{k}] has {len(ids)} tokens, fewer than n={n}: {text[:60]!r}")
        rows.append(ids[:n])
    if not rows:
        raise ValueError("texts must not be empty")
    return torch.tensor(rows, dtype=torch.long)


def decode(loaded: Any, tokens: Tensor) -> list[str]:
    """tokens ``[B, n]`` content ids -> ``B`` strings (the tokenizer's own detokenisation)."""
    return [loaded.tokenizer.decode(row.tolist()) for row in tokens.reshape(-1, tokens.shape[-1])]


def _token_names(model: ConditionalModel, ids: list[int]) -> str:
    tok = getattr(model, "tokenizer", None)
    try:
        names = tok.convert_ids_to_tokens(ids) if tok is not None else None
    except Exception:  # a tokenizer that cannot name an id (padded head rows) names nothing
        names = None
    return ", ".join(f"{i} ({n})" if names and n is not None else str(i)
                     for i, n in zip(ids, names or [None] * len(ids)))


def check_states(model: ConditionalModel, tokens: Tensor, name: str = "tokens") -> None:
    """Validate states at a public entry point: ``[B, n]`` integer ids in ``[0, vocab_size)``
    that are all in the model's support. A model that leaves tokens out of its support (an
    :class:`~tokendyn.mcmc.conditional.MLMConditional`: special tokens such as ``[MASK]`` and
    ``[CLS]``, and head rows past the tokenizer) says so with a boolean ``unsupported`` mask
    ``[vocab_size]``; a chain can never reach such a token, so a state holding one is refused.
    Raises ``ValueError`` naming the argument and the offending ids."""
    if not isinstance(tokens, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids [B, n], got {type(tokens).__name__}")
    check_tokens(model, tokens, name)
    n_model = getattr(model, "n", None)  # models with a fixed number of sites (the toys) say so
    if isinstance(n_model, int) and not isinstance(n_model, bool) and tokens.shape[1] != n_model:
        raise ValueError(f"{name} must have n={n_model} sites for this model, got {tokens.shape[1]}")
    check_support(model, tokens, name)


def check_support(model: ConditionalModel, ids: Tensor, name: str = "ids") -> None:
    """Token ids of any shape must be integers in ``[0, vocab_size)`` and in the model's support
    (see :func:`check_states`). Raises ``ValueError`` naming the argument and the offending ids."""
    if not isinstance(ids, Tensor) or ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{name} must be an integer tensor of token ids, got "
                         f"{ids.dtype if isinstance(ids, Tensor) else type(ids).__name__}")
    if ids.numel() == 0:
        return
    if int(ids.min()) < 0 or int(ids.max()) >= model.vocab_size:
        raise ValueError(f"{name} must lie in [0, vocab_size={model.vocab_size})")
    mask = getattr(model, "unsupported", None)
    if not (isinstance(mask, Tensor) and mask.dtype == torch.bool and mask.dim() == 1
            and mask.numel() == model.vocab_size):
        return
    bad = mask.to(ids.device)[ids.long()]
    if bool(bad.any()):
        found = sorted(set(ids[bad].tolist()))
        raise ValueError(f"{name} holds {len(found)} token id(s) outside the model's support "
                         f"(special tokens or padded vocabulary rows, which no chain can reach): "
                         f"{_token_names(model, found[:8])}{' ...' if len(found) > 8 else ''}")
