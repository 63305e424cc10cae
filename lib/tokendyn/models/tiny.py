"""Tiny random masked LMs built in code, for tests and fast examples.

Three architectures the paper uses, each at toy size with randomly initialised weights (seeded)
and a tokenizer built in code from a small word list:

- ``"bert"``: ``BertForMaskedLM`` with a WordPiece tokenizer (``[CLS] [SEP] [MASK] [PAD] [UNK]``).
- ``"roberta"``: ``RobertaForMaskedLM`` with a byte-level BPE tokenizer
  (``<s> </s> <mask> <pad> <unk>``).
- ``"modernbert"``: ``ModernBertForMaskedLM`` with a byte-level BPE tokenizer and BERT-style
  specials (``[CLS] [SEP] [MASK] [PAD] [UNK]``), like ModernBERT-base.

:func:`build_tiny` returns a :class:`~tokendyn.models.LoadedMLM`; :func:`save_tiny` writes it with
``save_pretrained`` (safetensors) so that ``tokendyn.models.load_mlm(<dir>)`` loads it back the way
it loads any local model. The weights are random: these models check wiring and numerics, not
language.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..core.atomic import write_atomic, write_text
from ..core.checks import check_choice, check_range
from .loaded import LoadedMLM, n_params

ARCHS = ("bert", "roberta", "modernbert")

# A fixed word list: enough to make real multi-token words and a vocabulary of a few hundred.
_WORDS = (
    "the of and to in a is was for on that with as by it at from his her he she they we you "
    "are were be been has have had not this which or but an their its one all would there "
    "city capital river music song theme film team game season player health disease food "
    "bread cheese science energy planet president party election government law state population "
    "density square mile used been known first new year years people world war history village "
    "county school church station museum album band record league football cup club village "
    "north south east west small large old early late national american english french german"
).split()
_CORPUS = [" ".join(_WORDS[k:k + 12]) for k in range(0, len(_WORDS), 5)]


def _wordpiece_vocab() -> dict[str, int]:
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = sorted({c for w in _WORDS for c in w})
    pieces = specials + list(dict.fromkeys(_WORDS)) + chars + ["##" + c for c in chars]
    pieces += ["##s", "##ed", "##ing", ".", ",", "!", "?"]
    return {p: i for i, p in enumerate(dict.fromkeys(pieces))}


def _bpe_tokenizer_object(specials: list[str], vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    return tok


def _tokenizer(arch: str) -> Any:
    if arch == "bert":
        from transformers import BertTokenizer

        return BertTokenizer(vocab=_wordpiece_vocab(), do_lower_case=True)
    if arch == "roberta":
        from transformers import RobertaTokenizer

        obj = _bpe_tokenizer_object(["<s>", "<pad>", "</s>", "<unk>", "<mask>"], 400)
        import json

        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
                  for m in json.loads(obj.to_str())["model"]["merges"]]
        vocab = obj.get_vocab()
        return RobertaTokenizer(vocab=vocab, merges=merges)
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    obj = _bpe_tokenizer_object(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], 400)
    cls_id, sep_id = obj.token_to_id("[CLS]"), obj.token_to_id("[SEP]")
    obj.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return PreTrainedTokenizerFast(tokenizer_object=obj, cls_token="[CLS]", sep_token="[SEP]",
                                   mask_token="[MASK]", pad_token="[PAD]", unk_token="[UNK]")


def _model(arch: str, vocab_size: int, tok: Any, hidden: int, layers: int, init_std: float) -> Any:
    common = dict(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                  initializer_range=init_std,
                  num_attention_heads=2, intermediate_size=2 * hidden,
                  pad_token_id=tok.pad_token_id)
    if arch == "bert":
        from transformers import BertConfig, BertForMaskedLM

        return BertForMaskedLM(BertConfig(max_position_embeddings=128, **common))
    if arch == "roberta":
        from transformers import RobertaConfig, RobertaForMaskedLM

        cfg = RobertaConfig(max_position_embeddings=130, bos_token_id=tok.bos_token_id,
                            eos_token_id=tok.eos_token_id, **common)
        return RobertaForMaskedLM(cfg)
    from transformers import ModernBertConfig, ModernBertForMaskedLM

    cfg = ModernBertConfig(max_position_embeddings=128, cls_token_id=tok.cls_token_id,
                           sep_token_id=tok.sep_token_id, bos_token_id=tok.cls_token_id,
                           eos_token_id=tok.sep_token_id, global_attn_every_n_layers=2,
                           local_attention=16, attn_implementation="eager", **common)
    return ModernBertForMaskedLM(cfg)


def build_tiny(arch: str = "bert", *, seed: int = 0, hidden: int = 32, layers: int = 2,
               pad_vocab: int = 0, init_std: float = 0.3) -> LoadedMLM:
    """A tiny random ``*ForMaskedLM`` of architecture ``arch`` with its code-built tokenizer.

    ``pad_vocab`` extra head rows beyond the tokenizer (as ModernBERT-base pads 50,280 to 50,368)
    exercise the adapter's support mask. ``init_std`` is the weights' initial standard deviation:
    larger than transformers' 0.02 so that the random conditionals depend visibly on context.
    Weights are seeded by ``seed`` through an explicit
    ``torch.Generator`` (the global RNG is restored afterwards).
    """
    check_choice("arch", arch, ARCHS)
    check_range("seed", seed, 0, integer=True)
    check_range("hidden", hidden, 2, integer=True)
    check_range("layers", layers, 1, integer=True)
    check_range("pad_vocab", pad_vocab, 0, integer=True)
    check_range("init_std", init_std, 0, lo_open=True)
    if hidden % 2:
        raise ValueError(f"hidden={hidden} must be even (2 attention heads)")
    tok = _tokenizer(arch)
    # transformers initialises through the global RNG: fork it so callers' RNG state is untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = _model(arch, len(tok) + pad_vocab, tok, hidden, layers, init_std)
    model.eval()
    return LoadedMLM(name=f"tiny-{arch}", model=model, tokenizer=tok,
                     info={"source": "built in code (random weights)",
                           "architecture": type(model).__name__, "n_params": n_params(model),
                           "seed": seed})


def save_tiny(arch: str, out_dir: str | Path, **kw: Any) -> Path:
    """Build a tiny model (:func:`build_tiny` keywords) and ``save_pretrained`` it (safetensors)
    with its tokenizer into ``out_dir``; return the directory."""
    out = Path(out_dir)
    loaded = build_tiny(arch, **kw)
    out.mkdir(parents=True, exist_ok=True)
    loaded.model.save_pretrained(out, safe_serialization=True)
    loaded.tokenizer.save_pretrained(out)
    return out


def save_tiny_mpnet(out_dir: str | Path, *, seed: int = 0, hidden: int = 16, layers: int = 12,
                    init_std: float = 0.3) -> Path:
    """Write a tiny random MPNet encoder into ``out_dir`` shaped like the all-mpnet-base-v2 asset
    (:mod:`tokendyn.models.mpnet`), so that its loader and the head recipe can be tested without
    the 438 MB download; return the directory.

    The folder holds ``config.json`` (MPNet, ``layers`` layers of width ``hidden``, 2 heads, 514
    positions), ``model.safetensors`` (``MPNetModel`` weights with its pooler, keys without the
    ``mpnet.`` prefix, no MLM head), ``tokenizer.json`` (lowercasing WordPiece over the word list
    with RoBERTa-style specials ``<s>``=0 ``<pad>``=1 ``</s>``=2 ``<unk>``=3, ``[UNK]``, and
    ``<mask>`` as the last id; like the asset's, with fixed 128-token padding and truncation
    switched on) and ``vocab.txt``. Weights are seeded by ``seed`` (global RNG restored).
    """
    from safetensors.torch import save_file
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import MPNetConfig, MPNetModel

    check_range("hidden", hidden, 2, integer=True)
    check_range("layers", layers, 1, integer=True)
    if hidden % 2:
        raise ValueError(f"hidden={hidden} must be even (2 attention heads)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pieces = list(_wordpiece_vocab())[5:]  # the word list, characters and suffixes, no BERT specials
    vocab = {p: i for i, p in enumerate(["<s>", "<pad>", "</s>", "<unk>", "[UNK]", *pieces, "<mask>"])}
    tk = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", continuing_subword_prefix="##"))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    tk.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>", "[UNK]",
                           AddedToken("<mask>", lstrip=True, special=True)])
    tk.enable_padding(pad_id=1, pad_token="<pad>", length=128)
    tk.enable_truncation(128)
    write_atomic(out / "tokenizer.json", lambda p: tk.save(str(p)))
    write_text(out / "vocab.txt", "".join(f"{p}\n" for p in vocab))
    config = MPNetConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers,
                         num_attention_heads=2, intermediate_size=2 * hidden,
                         max_position_embeddings=514, initializer_range=init_std, pad_token_id=1,
                         bos_token_id=0, eos_token_id=2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = MPNetModel(config)  # with its pooler, as sentence-transformers saved it
    write_atomic(out / "config.json", lambda p: config.to_json_file(str(p)))
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    write_atomic(out / "model.safetensors", lambda p: save_file(state, str(p)))
    return out
