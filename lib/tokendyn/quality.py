"""How good is a masked LM? Cloze probe, copy rate and pseudo-perplexity on held-out text.

- :func:`cloze_probe` fills the single mask of each sentence in ``data/probe/cloze.tsv`` (written
  for this project: everyday, science, geography, sports, food and politics registers, each with
  its accepted answers) and reports top-1 / top-5 accuracy and the **copy rate**: the share of
  sentences whose top-1 token is a word already present in the sentence. An MLM that copies would
  fake the repetition basins of Paper 1, so the copy rate is a gate, not a curiosity.
- :func:`causal_cloze_probe` scores a causal LM on the same probe, as a masked LM restricted to
  its likeliest next words: a reference point from a model pre-trained at scale.
- :func:`pseudo_perplexity` masks each token of a passage in turn (Salazar et al. 2020) on
  Wikipedia passages that no shipped model was trained on (:func:`is_heldout`).

The held-out split is deterministic: a Wikipedia lead paragraph is held out when the SHA-256 of
its text, read as a number, is 0 mod 20 (5% of passages, the same on every machine).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .checks import check_range
from .paths import data_dir

HELDOUT_MOD = 20


def is_heldout(text: str) -> bool:
    """True for the 5% of passages held out of training (SHA-256 of the text is 0 mod 20)."""
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16) % HELDOUT_MOD == 0


def heldout_passages(n: int = 50) -> list[str]:
    """The first ``n`` held-out Wikipedia lead paragraphs (ordered by title), 20-90 words each."""
    from .data import wiki_records

    check_range("n", n, 1, None, integer=True)
    pool = [r["extract"] for r in wiki_records()
            if is_heldout(r["extract"]) and 20 <= len(r["extract"].split()) <= 90]
    if n > len(pool):
        raise ValueError(f"n={n} is out of range: allowed [1, {len(pool)}]")
    return pool[:n]

PROBE_FILE = "probe/cloze.tsv"
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


@dataclass(frozen=True)
class ClozeItem:
    """One probe sentence: its register, the text with one ``[MASK]``, and the accepted answers."""

    register: str
    text: str
    answers: tuple[str, ...]


def load_probe(path: str | Path | None = None) -> list[ClozeItem]:
    """Read the cloze probe: tab-separated ``register``, ``sentence with [MASK]``, ``a|b|c``."""
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


def head_logits(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """Vocabulary logits ``(M, V)`` from final hidden states ``(M, H)`` of a ``*ForMaskedLM``.

    Applying the head only where it is needed (a masked site) is most of the saving in training
    and evaluation: the head is the largest matmul of a small MLM.
    """
    if hasattr(model, "cls"):  # BertForMaskedLM
        return model.cls(hidden)
    if hasattr(model, "lm_head"):  # RobertaForMaskedLM
        return model.lm_head(hidden)
    if hasattr(model, "head") and hasattr(model, "decoder"):  # ModernBertForMaskedLM
        return model.decoder(model.head(hidden))
    raise TypeError(f"unsupported masked LM {type(model).__name__}")


def _device(model: Any) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def masked_logits(model: Any, tokenizer: Any, texts: list[str]) -> torch.Tensor:
    """Logits ``(N, V)`` at the single mask token of each text (``[MASK]`` may stand for any mask).

    Texts are wrapped with the tokenizer's own special tokens ([CLS] ... [SEP] or <s> ... </s>).
    """
    texts = [t.replace("[MASK]", tokenizer.mask_token) for t in texts]
    enc = tokenizer(texts, return_tensors="pt", padding=True)
    is_mask = enc["input_ids"] == tokenizer.mask_token_id
    if not bool((is_mask.sum(1) == 1).all()):
        raise ValueError("each text must hold exactly one mask token")
    dev = _device(model)
    base = getattr(model, model.base_model_prefix)
    hidden = base(input_ids=enc["input_ids"].to(dev),
                  attention_mask=enc["attention_mask"].to(dev)).last_hidden_state
    return head_logits(model, hidden[is_mask.to(dev)]).float().cpu()


def token_word(tokenizer: Any, token_id: int) -> str:
    """The lower-cased text of one vocabulary entry (WordPiece ``##`` or BPE space marks removed)."""
    return tokenizer.decode([token_id]).strip().lower()


def cloze_probe(model: Any, tokenizer: Any, items: list[ClozeItem] | None = None, k: int = 5,
                batch: int = 64) -> dict[str, Any]:
    """Top-1 / top-``k`` accuracy and copy rate of ``model`` on the cloze probe.

    Special tokens are excluded from the predictions (as in the Glauber chains). The copy rate is
    the share of sentences whose top-1 word already occurs in the sentence. ``coverage`` is the
    share of sentences where some accepted answer is a single token of this tokenizer (only those
    can be filled by one mask). Returns ``{"n", "top1", "top5", "copy_rate", "coverage",
    "by_register": {reg: {"n", "top1", "top5"}}, "items": [{"text", "answers", "top"}]}``.
    """
    check_range("k", k, 1, 50, integer=True)
    items = load_probe() if items is None else items
    special = torch.tensor(sorted(set(tokenizer.all_special_ids)))
    rows = []
    for s in range(0, len(items), batch):
        chunk = items[s:s + batch]
        logits = masked_logits(model, tokenizer, [it.text for it in chunk])
        logits[:, special] = -torch.inf
        top = logits.topk(k, dim=-1).indices
        for it, ids in zip(chunk, top.tolist()):
            words = [token_word(tokenizer, i) for i in ids]
            context = set(_WORD.findall(it.text.replace("[MASK]", " ").lower()))
            single = any(len(tokenizer(" " + v, add_special_tokens=False)["input_ids"]) == 1
                         for a in it.answers for v in (a, a.capitalize()))
            rows.append(dict(register=it.register, text=it.text, answers=list(it.answers), top=words,
                             hit1=words[0] in it.answers, hitk=any(w in it.answers for w in words),
                             copy=words[0] in context, single=single))
    return {**_probe_scores(rows), "coverage": _share("single", rows)}


def _share(key: str, rows: list[dict]) -> float:
    return sum(r[key] for r in rows) / max(1, len(rows))


def _probe_scores(rows: list[dict]) -> dict[str, Any]:
    """Top-1, top-k, copy rate (overall and by register) and the items, from per-sentence rows
    with ``register, text, answers, top, hit1, hitk, copy``."""
    regs = sorted({r["register"] for r in rows})
    return {"n": len(rows), "top1": _share("hit1", rows), "top5": _share("hitk", rows),
            "copy_rate": _share("copy", rows),
            "by_register": {g: {"n": sum(r["register"] == g for r in rows),
                                "top1": _share("hit1", [r for r in rows if r["register"] == g]),
                                "top5": _share("hitk", [r for r in rows if r["register"] == g])}
                            for g in regs},
            "items": [{k2: r[k2] for k2 in ("register", "text", "answers", "top")} for r in rows]}


@torch.no_grad()
def masked_site_logits(model: Any, tokenizer: Any, text: str, max_len: int = 64,
                       batch: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask each content token of ``text`` in turn: ``(content ids (n,), logits (n, V))``.

    Row ``i`` of the logits is the model's distribution at content token ``i`` with that token
    masked, special tokens set to ``-inf`` (the support of the book's chains). The text is
    truncated to ``max_len`` tokens including the special tokens (the shipped models were trained
    on 64-token windows).
    """
    check_range("max_len", max_len, 3, 512, integer=True)
    ids = tokenizer(text, truncation=True, max_length=max_len, return_tensors="pt")["input_ids"][0]
    special_ids = set(tokenizer.all_special_ids)
    sites = torch.tensor([i not in special_ids for i in ids.tolist()]).nonzero().squeeze(1)
    dev = _device(model)
    base = getattr(model, model.base_model_prefix)
    no_special = torch.tensor(sorted(special_ids), device=dev)
    out = []
    for s in range(0, len(sites), batch):
        sub = sites[s:s + batch]
        x = ids.repeat(len(sub), 1)
        x[torch.arange(len(sub)), sub] = tokenizer.mask_token_id
        hidden = base(input_ids=x.to(dev)).last_hidden_state
        logits = head_logits(model, hidden[torch.arange(len(sub)), sub.to(dev)]).float()
        logits[:, no_special] = -torch.inf
        out.append(logits.cpu())
    return ids[sites], torch.cat(out)


def pseudo_log_likelihoods(model: Any, tokenizer: Any, text: str, max_len: int = 64,
                           batch: int = 64) -> torch.Tensor:
    """Log p(x_i | x_-i) ``(n,)`` for each of the ``n`` content tokens of ``text``, each masked in
    turn (:func:`masked_site_logits`)."""
    ids, logits = masked_site_logits(model, tokenizer, text, max_len, batch)
    return logits.log_softmax(-1)[torch.arange(len(ids)), ids]


def heldout_scores(model: Any, tokenizer: Any, texts: list[str], max_len: int = 64) -> dict[str, Any]:
    """Pseudo-perplexity and repetition rates of ``model`` on ``texts``, from one masked pass.

    ``pseudo_perplexity``: exp(- mean pseudo-log-likelihood) over all content tokens (Salazar et
    al. 2020). It depends on the tokenizer: compare it between models that share one
    (BERT-uncased WordPiece), not across tokenizers.

    ``repetition``: over the same masked tokens, ``data`` is the share whose true token occurs
    elsewhere in the window and ``model`` the share whose top-1 prediction does. A model that
    copies its context has ``model`` well above ``data``; one trained against copying too hard
    falls well below it. Paper 1's repetition basins are evidence about the dynamics only when
    the two are close.
    """
    if not texts:
        raise ValueError("texts is empty: give at least one passage")
    lls, rep_data, rep_model = [], 0, 0
    for t in texts:
        ids, logits = masked_site_logits(model, tokenizer, t, max_len)
        lls.append(logits.log_softmax(-1)[torch.arange(len(ids)), ids])
        top = logits.argmax(-1)
        same = ids[None, :] == ids[:, None]  # [i, j]: token j equals token i
        elsewhere = ~torch.eye(len(ids), dtype=torch.bool)
        rep_data += int((same & elsewhere).any(1).sum())
        rep_model += int(((ids[None, :] == top[:, None]) & elsewhere).any(1).sum())
    ll = torch.cat(lls)
    return {"pseudo_perplexity": float(torch.exp(-ll.mean())),
            "repetition": {"data": rep_data / len(ll), "model": rep_model / len(ll), "sites": len(ll)}}


def is_word_token(token: str) -> bool:
    """A byte-level BPE (``Ġ``) or SentencePiece (``▁``) token that is a whole space-led ASCII word."""
    return token[:1] in ("\u0120", "\u2581") and token[1:].isascii() and token[1:].isalpha()


def right_pad(seqs: list[list[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids (N, L), attention_mask (N, L))`` long tensors for token lists of unequal length."""
    width = max(map(len, seqs))
    x = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    att = torch.zeros(len(seqs), width, dtype=torch.long)
    for r, q in enumerate(seqs):
        x[r, :len(q)] = torch.tensor(q)
        att[r, :len(q)] = 1
    return x, att


@torch.no_grad()
def sequence_log_likelihoods(model: Any, x: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
    """``(N,)`` float32: sum of log p(x[:, t] | x[:, :t]) over t >= 1 under a causal LM, for
    right-padded ``x (N, L)`` with ``att (N, L)``; pad positions neither predict nor are predicted."""
    dev = _device(model)
    logp = model(input_ids=x.to(dev), attention_mask=att.to(dev)).logits[:, :-1].float().log_softmax(-1)
    tok_lp = logp.gather(2, x[:, 1:, None].to(dev))[..., 0] * att[:, 1:].to(dev)
    return tok_lp.sum(1).cpu()


def causal_log_likelihoods(model: Any, tokenizer: Any, texts: list[str], start_id: int) -> torch.Tensor:
    """``(N,)`` float32: log p(text) under a causal LM, each text read after the token ``start_id``
    (one right-padded batch, :func:`sequence_log_likelihoods`)."""
    x, att = right_pad([[start_id] + tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts])
    return sequence_log_likelihoods(model, x, att)


def _start_id(tokenizer: Any) -> int:
    """A document-start token for a causal LM: ``<|endoftext|>`` where it exists, else BOS."""
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
    as :func:`cloze_probe` (a word is a byte-level BPE token with a leading space).
    """
    check_range("k", k, 5, 200, integer=True)
    items = load_probe() if items is None else items
    start = _start_id(tokenizer)
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
        top = [cands[i].lower() for i in ll.argsort(descending=True)[:5].tolist()]
        context = set(_WORD.findall(it.text.replace("[MASK]", " ").lower()))
        rows.append(dict(register=it.register, text=it.text, answers=list(it.answers), top=top,
                         hit1=top[0] in it.answers, hitk=any(w in it.answers for w in top),
                         copy=top[0] in context))
    return {**_probe_scores(rows), "k": k}


def pseudo_perplexity(model: Any, tokenizer: Any, texts: list[str], max_len: int = 64) -> float:
    """exp(- mean pseudo-log-likelihood) over all content tokens of ``texts`` (:func:`heldout_scores`)."""
    return heldout_scores(model, tokenizer, texts, max_len)["pseudo_perplexity"]


def evaluate(model: Any, tokenizer: Any, n_passages: int = 40) -> dict[str, Any]:
    """Cloze probe (top-1, top-5, copy rate), pseudo-perplexity and repetition rates on
    ``n_passages`` held-out passages (:func:`heldout_scores`)."""
    check_range("n_passages", n_passages, 1, None, integer=True)
    probe = cloze_probe(model, tokenizer)
    scores = heldout_scores(model, tokenizer, heldout_passages(n_passages))
    return {**{k: probe[k] for k in ("n", "top1", "top5", "copy_rate", "coverage", "by_register")},
            **scores,
            "heldout_passages": n_passages, "items": probe["items"]}
