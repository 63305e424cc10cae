#!/usr/bin/env python
"""Record chapter 7's ODE/SDE comparison at a size whose intervals carry a conclusion.

    nice -n 10 .venv/bin/python scripts/record_ode_sde.py --seeds 5 --per-seed 256 --steps 4,8
    nice -n 10 .venv/bin/python scripts/record_ode_sde.py --seeds 5 --per-seed 256 --steps 4 \
        --ladder-only --out runs/07_escapes-ode-sde-ladder.json    # the generator ladder, beside it

For each generator (the shipped contextual flow; with ``--ladder``, also every exported snapshot
of ``scripts/train_context_latent.py flow-ladder`` under checkpoints/context-latent-ladder/), each
K and each sampler (ODE, SDE), ``--seeds`` seeds of ``--per-seed`` 32-token windows are generated
from noise (``tokendyn.latent.samplers.generate``, float32), decoded by the readout's argmax and
read by the SmolLM2-135M judge (float32). Per cell it records the pooled judge perplexity
(bootstrap over texts), the unigram entropy, repetition and distinct-2 of the generated ids (mean
and t interval over seeds, as chapter 7 does), and per (generator, K) the perplexities *at equal
per-text entropy* (``tokendyn.evaluation.generation.entropy_matched_perplexity``: both samplers
scored on the pooled mix of entropy quartiles), which separates "better text" from "less diverse
text". Held-out real windows are scored the same way.

Writes ``data/runs/07_escapes-ode-sde.json`` (``tokendyn.publish.results.save_rows``: rows, this command,
provenance with the git commit). Resumable: every finished cell is kept under
``checkpoints/ode-sde/`` (per-text scores, ``.npz``) and a rerun of the same command skips it.
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

import numpy as np  # noqa: E402
import torch  # noqa: E402

from tokendyn.core.atomic import write_atomic  # noqa: E402
from tokendyn.core.checks import check_range  # noqa: E402
from tokendyn.evaluation.generation import (distinct_n, entropy_matched_perplexity, judge_nll,  # noqa: E402
                                            pooled_perplexity, repetition, text_entropies, unigram_entropy)
from tokendyn.latent import samplers  # noqa: E402
from tokendyn.latent.contextual import SHIPPED_FLOW, ladder_models, load_context_latent  # noqa: E402
from tokendyn.models import load_ar  # noqa: E402
from tokendyn.core.stats import seed_interval  # noqa: E402

LADDER = ROOT / "checkpoints" / "context-latent-ladder"
OUT = "runs/07_escapes-ode-sde.json"


def generators(ladder: bool, ladder_only: bool = False) -> dict[str, Path | None]:
    """name -> model folder (None: the shipped model); ``ladder_only``: the snapshots alone."""
    gens: dict[str, Path | None] = {} if ladder_only else {SHIPPED_FLOW: None}
    if ladder or ladder_only:
        gens |= {name: folder for name, (folder, _) in ladder_models(LADDER).items()}
    return gens


def score_cell(path: Path, make) -> dict[str, np.ndarray]:
    """Per-text scores of one cell, computed by ``make()`` once and kept in ``path`` (.npz)."""
    if path.is_file():
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    out = make()

    def save(p: Path) -> None:
        with open(p, "wb") as fh:  # a file, not a name: np.savez would add ".npz" to the temporary's
            np.savez(fh, **out)

    write_atomic(path, save)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--per-seed", type=int, default=256)
    ap.add_argument("--steps", default="4,8")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ladder", action="store_true", help="also every exported flow-ladder snapshot")
    ap.add_argument("--ladder-only", action="store_true",
                    help="only the exported flow-ladder snapshots, no shipped flow and no real text (a second file "
                         "beside the shipped run: use another --out)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=OUT, help="under data/")
    args = ap.parse_args(argv)
    check_range("seeds", args.seeds, 2, 64, integer=True)
    check_range("per_seed", args.per_seed, 2, 1345, integer=True)
    check_range("seed", args.seed, 0, None, integer=True)
    check_range("threads", args.threads, 1, 256, integer=True)
    steps = [int(k) for k in args.steps.split(",")]
    for k in steps:
        check_range("steps", k, 1, 1024, integer=True)
    from tokendyn.core import paths
    from tokendyn.publish import results

    results.check_recordable(paths.data_dir() / args.out)  # before any compute: a dirty tree records nothing
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    ckpt = ROOT / "checkpoints" / "ode-sde"
    ckpt.mkdir(parents=True, exist_ok=True)
    ar = load_ar()
    seeds = [args.seed + i for i in range(args.seeds)]
    rows, t0 = [], time.time()
    shipped = load_context_latent()

    def judge(texts, ids):
        nll, count = judge_nll(ar.model, ar.tokenizer, texts)
        return {"nll": nll, "count": count, "entropy": text_entropies(ids), "seed_of": np.repeat(seeds, args.per_seed),
                "ids": np.asarray(ids, dtype=np.int64)}

    def real():
        ids = [shipped.heldout(args.per_seed, seed=s) for s in seeds]
        return judge([shipped.decode_text(r) for x in ids for r in x], [r.tolist() for x in ids for r in x])

    cells = {} if args.ladder_only else {
        ("real text", 0, "real"): score_cell(ckpt / f"real-{args.seed}-{args.seeds}x{args.per_seed}.npz", real)}
    gens = generators(args.ladder, args.ladder_only)
    if not gens:
        raise FileNotFoundError(f"--ladder-only: no exported snapshot under {LADDER}: run "
                                "`python scripts/train_context_latent.py export-ladder` first")
    for name, folder in gens.items():
        ctx = shipped if folder is None else load_context_latent(folder)
        shape = (args.per_seed, ctx.autoencoder.seq_len, ctx.autoencoder.readout.in_features)
        for k in steps:
            for sampler in ("ode", "sde"):
                def make(ctx=ctx, k=k, sampler=sampler):
                    ids = [ctx.autoencoder.decode(samplers.generate(ctx.flow, shape, k, sampler, seed=s)) for s in seeds]
                    return judge([ctx.decode_text(r) for x in ids for r in x], [r.tolist() for x in ids for r in x])
                tag = "".join(c if c.isalnum() else "-" for c in name)
                cells[name, k, sampler] = score_cell(
                    ckpt / f"{tag}-K{k}-{sampler}-{args.seed}-{args.seeds}x{args.per_seed}.npz", make)
                print(f"{time.time() - t0:7.0f} s  {name} K={k} {sampler} done", flush=True)
    for (name, k, sampler), c in cells.items():
        per_seed = [c["ids"][c["seed_of"] == s].tolist() for s in seeds]
        ppl = pooled_perplexity(c["nll"], c["count"], seed=args.seed)
        ent = seed_interval([unigram_entropy(t) for t in per_seed], bounds=(0.0, float("inf")))
        rows.append({"generator": name, "K": k, "sampler": sampler.upper(), "ppl": ppl.value, "ppl_lo": ppl.lo,
                     "ppl_hi": ppl.hi, "entropy": ent.value, "entropy_lo": ent.lo, "entropy_hi": ent.hi,
                     "repetition": float(np.mean([repetition(t) for t in per_seed])),
                     "distinct2": float(np.mean([distinct_n(t, 2) for t in per_seed])),
                     "text_entropy_mean": float(c["entropy"].mean()), "n_texts": int(c["nll"].size),
                     "judge_tokens": int(c["count"].sum())})
    for name in gens:
        for k in steps:
            o, s = cells[name, k, "ode"], cells[name, k, "sde"]
            m = entropy_matched_perplexity(o["nll"], o["count"], o["entropy"], s["nll"], s["count"], s["entropy"],
                                           bins=4, seed=args.seed)
            rows.append({"generator": name, "K": k, "sampler": "matched", "ode_ppl": m.a.value, "ode_lo": m.a.lo,
                         "ode_hi": m.a.hi, "sde_ppl": m.b.value, "sde_lo": m.b.lo, "sde_hi": m.b.hi,
                         "ratio": m.ratio.value, "ratio_lo": m.ratio.lo, "ratio_hi": m.ratio.hi,
                         "entropy_edges": m.edges, "ode_shares": m.shares_a, "sde_shares": m.shares_b})

    cmd = (f"nice -n 10 .venv/bin/python scripts/record_ode_sde.py --seeds {args.seeds} --per-seed {args.per_seed} "
           f"--steps {args.steps} --seed {args.seed}" + (" --ladder" if args.ladder else "")
           + (f" --ladder-only --out {args.out}" if args.ladder_only else ""))
    out = results.save_rows(paths.data_dir() / args.out, rows, kind="ode/sde judge scores", command=cmd,
                            params={k: v for k, v in vars(args).items() if k != "out"}, seed=args.seed,
                            models=["context-latent", "smollm2-135m"])
    print(json.dumps({"written": str(out), "rows": len(rows), "seconds": round(time.time() - t0)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
