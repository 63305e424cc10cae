"""The MLM training corpus: documents, a model's own tokenizer, token windows, sentences, batches.

Training data (:mod:`tokendyn.core.data`): Wikipedia lead paragraphs minus the held-out 5%
(:func:`tokendyn.evaluation.is_heldout`), Wikibooks recipes, Moby-Dick, and State of the Union
addresses capped so that political prose stays a minority of the mix.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from ..core import data as tdata
from ..evaluation import is_heldout, load_probe

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")


def training_texts(sotu_share: float, drop_politics: bool = False) -> list[str]:
    """Training documents: wiki (minus held-out), recipes, Moby-Dick paragraphs, capped SOTU.
    ``drop_politics`` also removes every Wikipedia lead in the politics topic pool (the corpus
    ablation; SOTU is then left out by ``sotu_share=0``)."""
    wiki = [t for t in tdata.corpus("wiki") if not is_heldout(t)]
    if drop_politics:
        political = set(tdata.topic_pool("politics"))
        wiki = [t for t in wiki if t not in political]
    recipes = tdata.corpus("recipes")
    moby = [p for doc in tdata.corpus("moby-dick") for p in tdata.paragraphs(doc, 40, 200)]
    sotu = [p for doc in tdata.corpus("sotu") for p in tdata.paragraphs(doc, 40, 200)]
    # Cap SOTU by word count: left uncapped it would be ~55% of all words, and a politics-heavy
    # MLM would manufacture Paper 1's "political attractor" by itself.
    others = sum(len(t.split()) for t in wiki + recipes + moby)
    budget = sotu_share / (1 - sotu_share) * others
    g = torch.Generator().manual_seed(1234)
    kept, words = [], 0
    for i in torch.randperm(len(sotu), generator=g).tolist():
        if words >= budget:
            break
        kept.append(sotu[i])
        words += len(sotu[i].split())
    return wiki + recipes + moby + kept


def train_tokenizer(name: str, texts: list[str], out: Path, vocab: int) -> None:
    """Train a scratch model's own byte-level BPE tokenizer (``vocab`` entries) on ``texts`` and
    save it to ``out``. ``roberta-mini`` gets RoBERTa's special tokens, other models BERT's."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if name == "roberta-mini":
        sp = dict(cls="<s>", sep="</s>", pad="<pad>", unk="<unk>", mask="<mask>")
    else:
        sp = dict(cls="[CLS]", sep="[SEP]", pad="[PAD]", unk="[UNK]", mask="[MASK]")
    tk = Tokenizer(models.BPE(unk_token=sp["unk"]))
    # As in RoBERTa: no prefix space, and the mask token swallows the space before it, so that
    # "is <mask>." puts a word-initial token ("ĠParis") at the mask and keeps "." unchanged.
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2,
                                  special_tokens=[sp["cls"], sp["pad"], sp["sep"], sp["unk"], sp["mask"]],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(texts, trainer=trainer)
    mask = AddedToken(sp["mask"], lstrip=True, special=True)
    tk.add_special_tokens([mask])
    tk.post_processor = processors.TemplateProcessing(
        single=f"{sp['cls']} $A {sp['sep']}", pair=f"{sp['cls']} $A {sp['sep']} $B {sp['sep']}",
        special_tokens=[(sp[k], tk.token_to_id(sp[k])) for k in ("cls", "sep")])
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, cls_token=sp["cls"], sep_token=sp["sep"],
                                   pad_token=sp["pad"], unk_token=sp["unk"], mask_token=mask,
                                   bos_token=sp["cls"], eos_token=sp["sep"], model_max_length=128)
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out))


def make_chunks(tok: Any, texts: list[str], seq_len: int) -> torch.Tensor:
    """Token windows ``(N, seq_len)`` int32: [CLS] up to seq_len-2 tokens [SEP], then padding."""
    body = seq_len - 2
    rows = []
    ids = tok(texts, add_special_tokens=False)["input_ids"]
    for doc in ids:
        for s in range(0, len(doc), body):
            piece = doc[s:s + body]
            if len(piece) < 8:
                continue
            row = [tok.cls_token_id] + piece + [tok.sep_token_id]
            rows.append(row + [tok.pad_token_id] * (seq_len - len(row)))
    return torch.tensor(rows, dtype=torch.int32)


def length_batches(lengths: torch.Tensor, batch: int, g: torch.Generator, pool: int = 16) -> list[torch.Tensor]:
    """One epoch of batches ``(batch,)`` of row indices: shuffle, sort each run of ``pool`` batches
    by length, cut, shuffle the batches. Rows of a batch then have similar ``lengths (N,)``, so
    little of it is padding."""
    perm = torch.randperm(len(lengths), generator=g)
    out = []
    step = batch * pool
    for s in range(0, len(perm) - batch + 1, step):
        block = perm[s:s + step]
        block = block[lengths[block].argsort(stable=True)]
        out += [block[i:i + batch] for i in range(0, len(block) - batch + 1, batch)]
    return [out[i] for i in torch.randperm(len(out), generator=g).tolist()]


def sentences(text: str, lo: int = 6, hi: int = 40) -> list[str]:
    """Split ``text`` into sentences of ``lo``-``hi`` words (plain ASCII only)."""
    out = []
    for s in _SENT.split(" ".join(text.split())):
        if lo <= len(s.split()) <= hi and s.isascii():
            out.append(s)
    return out


def corpus_sentences(n: int, seed: int) -> list[str]:
    """``n`` sentences of the MLM training corpus (SOTU share 0.15, held-out passages excluded),
    shuffled with ``seed``."""
    pool = [s for t in training_texts(0.15) for s in sentences(t)]
    perm = torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed)).tolist()
    return [pool[i] for i in perm[:n]]


def probe_overlap(sents: list[str], n: int = 6) -> dict[str, int]:
    """How much of the cloze probe the training sentences contain: probe sentences that occur
    whole (answer filled in, case and spacing ignored), and probe sentences sharing any ``n``-word
    run (answer filled in) with a training sentence."""

    def words(t: str) -> list[str]:
        return re.findall(r"[a-z0-9']+", t.lower())

    have = {" ".join(words(s)) for s in sents}
    grams = set()
    for s in sents:
        w = words(s)
        grams.update(" ".join(w[i:i + n]) for i in range(len(w) - n + 1))
    whole, shared = 0, 0
    for it in load_probe():
        filled = [words(it.text.replace("[MASK]", a)) for a in it.answers]
        whole += any(" ".join(w) in have for w in filled)
        shared += any(" ".join(w[i:i + n]) in grams for w in filled for i in range(len(w) - n + 1))
    return {"probe_sentences_whole": whole, f"probe_sentences_sharing_{n}_words": shared}
