"""Distilling the causal teacher (SmolLM2-135M) into a masked LM: soft targets and the loss.

The teacher writes everyday passages from fixed prompts (:func:`generate`) and reads single
sentences once each (:func:`score_shard`). At each word that is one teacher token and one BERT
(uncased) token, either its left-context next-word distribution folded onto whole BERT words
(``target="left"``) or its whole-sentence conditional over a few candidate words
(``target="whole"``, :func:`whole_sentence_targets`) is kept as the top-32 (ids, probs).
:func:`load_targets` joins the shards ``scripts/teacher_targets.py`` writes, and
:func:`distill_loss` mixes those targets with the true token.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..core.atomic import write_text
from ..core.checks import check_choice
from ..evaluation import is_word_token, right_pad, sequence_log_likelihoods
from .corpus import sentences

TOPK = 32  # soft targets kept per site
_ASCII = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2014": "-"})
_LIST = re.compile(r"(?:^|\s)(?:\d+[.)]|[-*])\s+")  # list markers in generated passages
# Prompts for the generated sentences: topics, never the probe's sentences.
TOPICS = {
    "everyday": ["a morning routine at home", "cleaning the house", "a rainy day", "shopping for groceries",
                 "a family dinner", "getting ready for school", "a day at the office", "taking the bus",
                 "a visit to the doctor", "a birthday party", "looking after a pet", "doing the laundry",
                 "a walk in the neighbourhood", "a winter evening at home", "fixing something broken",
                 "using a phone and a computer", "a trip to the library", "a summer holiday"],
    "science": ["the solar system", "the human body", "electricity", "plants and photosynthesis",
                "chemical elements", "weather and climate", "animals and evolution", "light and sound",
                "the water cycle", "famous scientists"],
    "sports": ["football", "tennis", "the Olympic Games", "basketball", "running and athletics",
               "swimming", "cricket and baseball", "a sports match on television"],
    "food": ["baking bread", "cooking dinner", "fruit and vegetables", "a restaurant meal",
             "breakfast foods", "food from different countries"],
    "politics": ["elections and voting", "how a parliament works", "taxes and public spending",
                 "courts and laws", "international treaties", "local government"],
    "places": ["famous cities", "rivers and mountains", "countries of Europe", "countries of Asia",
               "oceans and continents"],
}


def strip_list_markers(text: str) -> str:
    """``text`` with list markers (``1.``, ``2)``, ``-``, ``*``) replaced by a space."""
    return _LIST.sub(" ", text)


def prompts(n: int) -> list[str]:
    """``n`` chat prompts, cycling through every topic of :data:`TOPICS`."""
    flat = [t for ts in TOPICS.values() for t in ts]
    return [f"Write five simple, true sentences about {flat[i % len(flat)]}. Use plain English."
            for i in range(n)]


@torch.no_grad()
def generate(ar: Any, n: int, seed: int, batch: int, out: Path, log: Callable[[str], None]) -> list[str]:
    """``n`` passages from the instruct teacher ``ar`` (a :class:`~tokendyn.models.LoadedAR`), cached
    in ``out`` (one passage per line), seeded by ``seed``; returns their sentences."""
    done = out.read_text().splitlines() if out.is_file() else []
    tok, model = ar.tokenizer, ar.model
    tok.padding_side = "left"
    ps = prompts(n)
    while len(done) < n:
        chunk = ps[len(done):len(done) + batch]
        chat = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                        add_generation_prompt=True) for p in chunk]
        enc = tok(chat, return_tensors="pt", padding=True)
        torch.manual_seed(seed * 100_003 + len(done))  # generate() samples from the global RNG
        gen = model.generate(**enc, max_new_tokens=120, do_sample=True, temperature=0.7, top_p=0.95,
                             pad_token_id=tok.pad_token_id)
        texts = [" ".join(tok.decode(g[enc.input_ids.shape[1]:], skip_special_tokens=True)
                          .translate(_ASCII).split()) for g in gen]
        done += texts
        write_text(out, "\n".join(done) + "\n")
        log(f"generated {len(done)}/{n} passages")
    return [s for p in done[:n] for s in sentences(strip_list_markers(p))]



def vocab_map(ar_tok: Any, bert_tok: Any) -> torch.Tensor:
    """``(V_teacher,)`` long: the BERT id of each teacher token that is a space-led whole word
    (lower-cased, :func:`tokendyn.evaluation.is_word_token`), else -1. The teacher is byte-level BPE."""
    bv = bert_tok.get_vocab()
    m = torch.full((len(ar_tok),), -1, dtype=torch.long)
    for t, i in ar_tok.get_vocab().items():
        if is_word_token(t):
            j = bv.get(t[1:].lower())
            if j is not None and i < m.shape[0]:
                m[i] = j
    return m


def candidates(p: torch.Tensor, vmap: torch.Tensor, true_tok: int, k: int) -> list[int]:
    """The ``k`` likeliest teacher tokens under ``p (V,)`` that are whole BERT words, one per BERT
    word, with ``true_tok`` always among them (it replaces the last if the teacher ranked it lower)."""
    ok = vmap[:p.shape[0]] >= 0
    order = torch.where(ok, p[:ok.shape[0]], -1.0).topk(min(8 * k, int(ok.sum()))).indices.tolist()
    out, seen = [], set()
    for t in order:
        if int(vmap[t]) not in seen:
            seen.add(int(vmap[t]))
            out.append(t)
            if len(out) == k:
                break
    if int(vmap[true_tok]) not in seen:
        out[-1] = true_tok
    return out


@torch.no_grad()
def whole_sentence_targets(model: Any, x: torch.Tensor, att: torch.Tensor, sites: list[tuple[int, int]],
                           p: torch.Tensor, vmap: torch.Tensor, k: int, batch: int = 64
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The teacher's whole-sentence conditional at each site, over ``k`` candidate words.

    ``x, att (B, L)``: teacher rows (start token first); ``sites``: (row, t) pairs whose token
    ``x[row, t]`` is the target; ``p (P, V)``: the left-context next-token distribution there. Each
    candidate is put in place of ``x[row, t]`` and the whole row scored; a softmax of those
    log-likelihoods is p(x_t | x_-t) restricted to the candidates (the shared prefix cancels).
    Returns ``tid (P, TOPK)`` int32 BERT ids and ``tp (P, TOPK)`` fp16, best first, zero-padded,
    and ``cover (P,)``: the left-context probability of the candidate set.
    """
    cand = torch.tensor([candidates(p[s], vmap, int(x[r, t]), k) for s, (r, t) in enumerate(sites)])
    rows = torch.tensor([r for r, _ in sites]).repeat_interleave(k)
    cols = torch.tensor([t for _, t in sites]).repeat_interleave(k)
    xs = x[rows].clone()
    xs[torch.arange(xs.shape[0]), cols] = cand.reshape(-1)
    ll = torch.cat([sequence_log_likelihoods(model, xs[i:i + batch], att[rows[i:i + batch]])
                    for i in range(0, xs.shape[0], batch)]).reshape(-1, k)
    q = ll.softmax(-1)
    top = q.sort(dim=1, descending=True)
    tid = torch.zeros(len(sites), TOPK, dtype=torch.int32)
    tp = torch.zeros(len(sites), TOPK, dtype=torch.float16)
    tid[:, :k] = vmap[cand.gather(1, top.indices)].to(torch.int32)
    tp[:, :k] = top.values.half()
    return tid, tp, p.gather(1, cand).sum(1)


def aligned_sites(tok: Any, vmap: torch.Tensor, ids: list[int], offs: list[tuple[int, int]], b_ids: list[int],
                  b_offs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(teacher index j, BERT position) of each word of one sentence that is a single teacher token
    and the same single BERT token, the first word excluded (no left context predicts it)."""
    bstart = {o[0]: (q, o[1]) for q, o in enumerate(b_offs) if o[1] > o[0]}
    out = []
    for j, t in enumerate(ids):
        if j == 0 or vmap[t] < 0:
            continue
        nxt = tok.convert_ids_to_tokens(ids[j + 1]) if j + 1 < len(ids) else "\u0120"
        if nxt[:1] != "\u0120" and nxt[:1].isalpha():  # the word goes on in the next token
            continue
        hit = bstart.get(offs[j][0] + 1)
        if hit is None or hit[1] != offs[j][1] or b_ids[hit[0]] != vmap[t]:
            continue
        out.append((j, hit[0]))
    return out


@torch.no_grad()
def score_shard(ar: Any, bert_tok: Any, vmap: torch.Tensor, sents: list[str], max_len: int = 64,
                target: str = "left", k: int = 16, sites: int = 0, seed: int = 0,
                ll_batch: int = 64) -> dict[str, torch.Tensor]:
    """Teacher targets for ``sents``: ``ids (N, L)`` BERT rows, ``tpos (P, 2)`` (row, position),
    ``tid (P, 32)`` int32, ``tp (P, 32)`` fp16, ``mass (P,)``.

    ``target="left"``: the next-token distribution after the left context, folded onto whole BERT
    words (``mass``: its share on whole words). ``target="whole"``: the whole-sentence conditional
    over ``k`` candidates (:func:`whole_sentence_targets`; ``mass``: the candidates' left-context
    share). ``sites > 0`` keeps that many randomly chosen sites per sentence (seeded by ``seed``);
    ``ll_batch`` candidate rows are scored per forward pass (larger on a GPU).
    """
    check_choice("target", target, ("left", "whole"))
    tok, model = ar.tokenizer, ar.model
    dev = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    texts = [" " + s for s in sents]
    enc = tok(texts, return_offsets_mapping=True, add_special_tokens=False)
    benc = bert_tok(texts, return_offsets_mapping=True, truncation=True, max_length=max_len)
    tpos, tid, tp, mass = [], [], [], []
    # sort by length so that a batch pads little
    order = sorted(range(len(texts)), key=lambda i: len(enc.input_ids[i]))
    for s in range(0, len(order), 32):
        idx = order[s:s + 32]
        # <|endoftext|> (id 0) as the document start
        x, att = right_pad([[0] + enc.input_ids[i] for i in idx], tok.pad_token_id)
        hidden = model.model(input_ids=x.to(dev), attention_mask=att.to(dev)).last_hidden_state
        want = []  # (batch row, teacher position j, bert row, bert position)
        for r, i in enumerate(idx):
            al = aligned_sites(tok, vmap, enc.input_ids[i], enc.offset_mapping[i],
                               benc.input_ids[i], benc.offset_mapping[i])
            if sites and len(al) > sites:
                al = [al[q] for q in sorted(torch.randperm(len(al), generator=g)[:sites].tolist())]
            want += [(r, j, i, pos) for j, pos in al]
        if not want:
            continue
        w = torch.tensor([(a, b) for a, b, _, _ in want])
        # hidden[r, j] predicts x[r, j + 1], the teacher token ids[j]
        p = model.lm_head(hidden[w[:, 0], w[:, 1]]).float().softmax(-1).cpu()
        if target == "whole":
            t_id, t_p, m = whole_sentence_targets(model, x, att, [(a, b + 1) for a, b, _, _ in want],
                                                  p, vmap, k, ll_batch)
        else:
            ok = vmap >= 0
            q = torch.zeros(len(want), len(bert_tok)).index_add_(1, vmap[ok], p[:, ok])
            m = q.sum(1)
            top = (q / m[:, None]).topk(TOPK, dim=1)
            t_id, t_p = top.indices.to(torch.int32), top.values.half()
        tpos += [(i, pos) for _, _, i, pos in want]
        tid.append(t_id)
        tp.append(t_p)
        mass.append(m.half())
    ids = torch.full((len(texts), max_len), bert_tok.pad_token_id, dtype=torch.int32)
    for i, r in enumerate(benc.input_ids):
        ids[i, :len(r)] = torch.tensor(r, dtype=torch.int32)
    return {"ids": ids, "tpos": torch.tensor(tpos, dtype=torch.int32).reshape(-1, 2),
            "tid": torch.cat(tid) if tid else torch.zeros(0, TOPK, dtype=torch.int32),
            "tp": torch.cat(tp) if tp else torch.zeros(0, TOPK, dtype=torch.float16),
            "mass": torch.cat(mass) if mass else torch.zeros(0, dtype=torch.float16)}


def load_targets(folder: str | Path) -> dict[str, torch.Tensor]:
    """All shards of ``folder`` as one dict: ``ids (N, 64)``, ``tidx (N, 64)`` (row into
    ``tid``/``tp``, -1 where the teacher gave nothing), ``tid (P, 32)``, ``tp (P, 32)``."""
    files = sorted(Path(folder).glob("shard_*.pt"))
    if not files:
        raise FileNotFoundError(f"no teacher shards in {folder}: run scripts/teacher_targets.py")
    ids, tidx, tid, tp, base = [], [], [], [], 0
    for f in files:
        d = torch.load(f, weights_only=True)
        ix = torch.full(d["ids"].shape, -1, dtype=torch.int32)
        if d["tpos"].shape[0]:
            ix[d["tpos"][:, 0].long(), d["tpos"][:, 1].long()] = torch.arange(
                base, base + d["tpos"].shape[0], dtype=torch.int32)
        ids.append(d["ids"])
        tidx.append(ix)
        tid.append(d["tid"])
        tp.append(d["tp"])
        base += d["tpos"].shape[0]
    return {"ids": torch.cat(ids), "tidx": torch.cat(tidx), "tid": torch.cat(tid), "tp": torch.cat(tp)}


def distill_loss(logits: torch.Tensor, targets: torch.Tensor, tix: torch.Tensor,
                 teacher: dict[str, torch.Tensor], weight: float) -> torch.Tensor:
    """Mean over masked sites of ``(1 - weight) * CE(true token) + weight * CE(teacher's top-32)``
    where the teacher gave a target (``tix (M,) >= 0``, a row of ``teacher["tid"]``/``["tp"]``),
    plain CE elsewhere. ``logits (M, V)``, ``targets (M,)``."""
    logp = logits.log_softmax(-1)
    hard = -logp.gather(1, targets[:, None])[:, 0]
    has = tix >= 0
    if not bool(has.any()):
        return hard.mean()
    q = teacher["tp"][tix[has]].float().to(logits.device)
    q = q / q.sum(1, keepdim=True)
    soft = -(q * logp[has].gather(1, teacher["tid"][tix[has]].long().to(logits.device))).sum(1)
    mix = hard.clone()
    mix[has] = (1 - weight) * hard[has] + weight * soft
    return mix.mean()
