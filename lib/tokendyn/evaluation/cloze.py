"""The cloze probe: does a masked LM fill a blank with the right word, and does it copy?

``data/probe/cloze.tsv`` (written for this project: everyday, science, geography, sports, food and
politics registers, each sentence with its accepted answers) holds sentences with one ``[MASK]``.
:func:`cloze_probe` reports top-1 / top-5 accuracy and the **copy rate**: the share of sentences
whose top-1 word is already present in the sentence. An MLM that copies would fake the repetition
basins of Paper 1, so the copy rate is a gate, not a curiosity. :func:`probe_row` and
:func:`probe_scores` score any model's ranked guesses the same way (the causal LM's too,
:func:`tokendyn.evaluation.causal.causal_cloze_probe`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..core.checks import check_range
from ..core.paths import data_dir
from .masked import as_mlm, masked_logits

PROBE_FILE = "probe/cloze.tsv"
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


@dataclass(frozen=True)
class ClozeItem:
    """One probe sentence: its register, the text with one ``[MASK]``, and the accepted answers."""

    register: str
    text: str
    answers: tuple[str, ...]


def load_probe(path: str | Path | None = None) -> list[ClozeItem]:
    """Read the cloze probe: tab-separated ``register``, ``sentence with [MASK]``, ``a|b|c``
    (lines that are blank or start with ``#`` are skipped). Raises ``ValueError`` naming the line."""
    p = Path(path) if path is not None else data_dir() / PROBE_FILE
    items = []
    for ln, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3 or parts[1].count("[MASK]") != 1:
            raise ValueError(f"{p}:{ln}: want 'register<TAB>text with one [MASK]<TAB>answers'")
        answers = tuple(a.strip().lower() for a in parts[2].split("|") if a.strip())
        items.append(ClozeItem(parts[0].strip(), parts[1].strip(), answers))
    return items


def token_word(tokenizer: Any, token_id: int) -> str:
    """The lower-cased text of one vocabulary entry (WordPiece ``##`` or BPE space marks removed)."""
    return tokenizer.decode([token_id]).strip().lower()


def context_words(text: str) -> set[str]:
    """The lower-cased words of a probe sentence, its ``[MASK]`` left out: what a copy copies."""
    return set(_WORD.findall(text.replace("[MASK]", " ").lower()))


def probe_row(item: ClozeItem, top: list[str]) -> dict[str, Any]:
    """Score one sentence from a model's ranked guesses ``top`` (lower-cased words, best first):
    ``{register, text, answers, top, hit1, hitk, copy}`` for :func:`probe_scores`."""
    return dict(register=item.register, text=item.text, answers=list(item.answers), top=top,
                hit1=top[0] in item.answers, hitk=any(w in item.answers for w in top),
                copy=top[0] in context_words(item.text))


def _share(key: str, rows: list[dict[str, Any]]) -> float:
    return sum(r[key] for r in rows) / max(1, len(rows))


def probe_scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Top-1, top-k, copy rate (overall and by register) and the items, from per-sentence rows
    (:func:`probe_row`): ``{"n", "top1", "top5", "copy_rate", "by_register": {reg: {"n", "top1",
    "top5"}}, "items": [{"register", "text", "answers", "top"}]}``."""
    regs = sorted({r["register"] for r in rows})
    return {"n": len(rows), "top1": _share("hit1", rows), "top5": _share("hitk", rows),
            "copy_rate": _share("copy", rows),
            "by_register": {g: {"n": sum(r["register"] == g for r in rows),
                                "top1": _share("hit1", [r for r in rows if r["register"] == g]),
                                "top5": _share("hitk", [r for r in rows if r["register"] == g])}
                            for g in regs},
            "items": [{k2: r[k2] for k2 in ("register", "text", "answers", "top")} for r in rows]}


def cloze_probe(mlm: Any, tokenizer: Any = None, items: list[ClozeItem] | None = None, k: int = 5,
                batch: int = 64) -> dict[str, Any]:
    """Top-1 / top-``k`` accuracy and copy rate of a masked LM on the cloze probe.

    ``mlm`` is an :class:`~tokendyn.mcmc.conditional.MLMConditional`, a loaded MLM, or a transformers
    ``*ForMaskedLM`` with its ``tokenizer``. ``items`` default to :func:`load_probe`; ``batch``
    sentences share one padded forward pass (:func:`~tokendyn.evaluation.masked.masked_logits`).
    Tokens outside the model's support (special tokens, as in the Glauber chains) are never
    predicted. The copy rate is the share of sentences whose top-1 word already occurs in the
    sentence. ``coverage`` is the share of sentences where some accepted answer is a single token of
    this tokenizer (only those can be filled by one mask). Returns ``{"n", "top1", "top5",
    "copy_rate", "coverage", "by_register": {reg: {"n", "top1", "top5"}}, "items": [{"register",
    "text", "answers", "top"}]}`` (``top``: the ``k`` best words).
    """
    check_range("k", k, 1, 50, integer=True)
    mlm = as_mlm(mlm, tokenizer)
    tok = mlm.tokenizer
    items = load_probe() if items is None else items
    unsupported = mlm.unsupported.cpu()
    rows = []
    for s in range(0, len(items), batch):
        chunk = items[s:s + batch]
        logits = masked_logits(mlm, [it.text for it in chunk]).masked_fill_(unsupported, -torch.inf)
        for it, ids in zip(chunk, logits.topk(k, dim=-1).indices.tolist()):
            single = any(len(tok(" " + v, add_special_tokens=False)["input_ids"]) == 1
                         for a in it.answers for v in (a, a.capitalize()))
            rows.append({**probe_row(it, [token_word(tok, i) for i in ids]), "single": single})
    return {**probe_scores(rows), "coverage": _share("single", rows)}
