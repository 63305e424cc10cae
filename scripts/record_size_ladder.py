#!/usr/bin/env python
"""Record chapter 2's rectangle test on the size ladder: delta per rung, for the slope on size.

    TOKENDYN_THREADS=2 nice -n 5 .venv/bin/python scripts/record_size_ladder.py --n-rect 512

For each rung of ``tokendyn.models.shipped.HEAD_LADDER`` (all-MiniLM-L6-v2 cut to 1, 2, 3, 4, 6 layers,
all-mpnet-base-v2 cut to 2, 4, 6, 10 and all 12; one head recipe, ``scripts/train_head.py``), and the
base-size ``mpnet-base-mlm`` beside it (``rung: false``): ``--n-rect``
rectangles with model-drawn alternatives at tau = 1 on chapter 2's own states (``--n-tokens`` content
tokens of real passages, the topics interleaved, ``tokendyn.core.data.interleaved_passages``), each
rectangle's raw delta ``|I_i - I_j|`` and normalized delta (``tokendyn.analysis.rectangle``), the rung's
cloze-probe items from its ``eval.json``, and, for the ``--paired`` rungs, its summed
pseudo-log-likelihood on each held-out passage of that evaluation (``tokendyn.evaluation.pseudo_ppl``). ``--reference`` (``minilm-mlm``) is
recorded the same way, so that ``mpnet-base-mlm``'s quality is compared with it item by item. Chapter 2 bootstraps each rung's
mean and the slope of delta on ln(parameters) (``tokendyn.core.stats.size_slope``) from these values.

Writes ``data/runs/02_rectangle_test-size-ladder.json`` (``tokendyn.publish.results.save_rows``: one row
per rung, the command, provenance with the git commit). Resumable: each finished rung is kept
under ``checkpoints/size-ladder/`` and a rerun of the same command skips it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from tokendyn.core.checkpoint import params_key  # noqa: E402
from tokendyn.core.checks import check_choice, check_range  # noqa: E402
from tokendyn.core.data import TOPICS  # noqa: E402

OUT = "runs/02_rectangle_test-size-ladder.json"
TOPIC_LIST = ["health", "sports", "food", "science", "politics"]  # chapter 2's


def rung_row(name: str, args: argparse.Namespace) -> dict:
    """One rung's row: sizes, probe scores and the per-rectangle deltas (every number from tokendyn)."""
    from tokendyn.publish import book
    from tokendyn.analysis import rectangle
    from tokendyn.mcmc.conditional import content_ids
    from tokendyn.core.data import interleaved_passages
    from tokendyn.evaluation import heldout_passages
    from tokendyn.evaluation.pseudo_ppl import pseudo_log_likelihoods
    from tokendyn.models import n_nonembedding_params, n_params, shipped

    t_cpu, t_wall = time.process_time(), time.time()
    loaded, cond = book.load_mlms([name])[name]
    texts = interleaved_passages(TOPIC_LIST, 200, min_words=2 * args.n_tokens, seed=args.seed)
    states = content_ids(loaded, texts, args.n_tokens)
    x = states[torch.arange(args.n_rect) % len(texts)]
    r, I_i, I_j = rectangle.draw_interactions(cond, x, protocol="model", seed=args.seed)
    nd = rectangle.normalized_delta(I_i, I_j)
    ev = json.loads((shipped.models_dir() / name / "eval.json").read_text())
    nll, tokens = [], []
    if name in args.paired:  # the passages of its eval.json's pseudo-perplexity, for the paired comparison
        for text in heldout_passages(ev["heldout_passages"]):
            ll = pseudo_log_likelihoods(loaded, text)
            nll.append(float(-ll.double().sum()))
            tokens.append(len(ll))
    family, layers = shipped.HEAD_MODELS.get(name, ("reference", int(loaded.model.config.num_hidden_layers)))
    return {"model": name, "encoder": family, "layers": layers, "params": int(n_params(loaded.model)),
            "params_nonembedding": int(n_nonembedding_params(loaded.model)),
            "rung": name in shipped.HEAD_LADDER, "probe_items": ev["items"], "passage_nll": nll or None,
            "passage_tokens": tokens or None,
            "probe_top1": ev["top1"], "probe_top5": ev["top5"], "copy_rate": ev["copy_rate"],
            "pseudo_perplexity": ev["pseudo_perplexity"], "n_rect": args.n_rect,
            "delta": [float(v) for v in (I_i - I_j).abs().tolist()],
            "normalized": [None if math.isnan(v) else float(v) for v in nd.tolist()],
            "gap": [int(v) for v in (r.i - r.j).abs().tolist()],
            "cpu_seconds": round(time.process_time() - t_cpu, 1), "wall_seconds": round(time.time() - t_wall, 1)}


def main(argv: list[str] | None = None) -> int:
    from tokendyn.models import shipped

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(shipped.HEAD_MODELS),
                    help="head models: the ladder's rungs and the base-size model")
    ap.add_argument("--reference", default="minilm-mlm",
                    help="a shipped model recorded beside the ladder, for the paired quality comparison")
    ap.add_argument("--paired", default="mpnet-base-mlm",
                    help="rungs whose per-passage pseudo-log-likelihoods are recorded (with --reference's)")
    ap.add_argument("--n-rect", type=int, default=512, help="rectangles per rung (model protocol)")
    ap.add_argument("--n-tokens", type=int, default=16, help="content tokens per state (chapter 2's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TOKENDYN_THREADS", "1")))
    ap.add_argument("--out", default=OUT, help="under data/")
    ap.add_argument("--resume-from", default=None,
                    help="a recorded run under data/ whose rows to keep for models whose weights are unchanged "
                         "since its commit and whose parameters match (tokendyn.publish.results.recorded_rows_to_keep)")
    args = ap.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    args.paired = [m.strip() for m in args.paired.split(",") if m.strip()] + [args.reference]
    if not models:
        ap.error("--models: give at least one rung")
    for m in models:
        check_choice("models", m, tuple(shipped.HEAD_MODELS))
    check_choice("reference", args.reference, tuple(r.name for r in shipped.trained()))
    for t in TOPIC_LIST:
        check_choice("topics", t, TOPICS)
    check_range("n_rect", args.n_rect, 2, 100000, integer=True)
    check_range("n_tokens", args.n_tokens, 4, 510, integer=True)
    check_range("seed", args.seed, 0, None, integer=True)
    check_range("threads", args.threads, 1, 256, integer=True)
    from tokendyn.core import paths
    from tokendyn.publish import results

    results.check_recordable(paths.data_dir() / args.out)  # before any compute: a dirty tree records nothing
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    params = {"n_rect": args.n_rect, "n_tokens": args.n_tokens, "seed": args.seed, "topics": TOPIC_LIST,
              "protocol": "model", "tau": 1.0, "paired": args.paired}
    # a rung's row does not depend on --paired, except that a paired rung needs its passages
    key = params_key(params, ignore=("paired",))
    from tokendyn.publish import results

    t0 = time.time()
    rows = results.rows_per_model(
        models + [args.reference], ROOT / "checkpoints" / "size-ladder", key, lambda name: rung_row(name, args),
        accept=lambda name, kept: name not in args.paired or bool(kept["passage_nll"]),
        done=lambda name, row: f"{name}: {row['params'] / 1e6:.1f}M, mean delta {sum(row['delta']) / len(row['delta']):.3f}, "
                               f"{row['cpu_seconds']:.0f} s CPU",
        resume_from=ROOT / "data" / args.resume_from if args.resume_from else None, ignore=("paired", "models", "reference"))
    from tokendyn.core import paths

    cmd = (f"TOKENDYN_THREADS={args.threads} nice -n 5 .venv/bin/python scripts/record_size_ladder.py "
           f"--models {','.join(models)} --reference {args.reference} --paired {','.join(args.paired[:-1])} --n-rect {args.n_rect} --n-tokens {args.n_tokens} --seed {args.seed}"
           + (f" --out {args.out}" if args.out != OUT else "")
           + (f" --resume-from {args.resume_from}" if args.resume_from else ""))
    out = results.save_rows(paths.data_dir() / args.out, rows, kind="rectangle delta on the size ladder", command=cmd,
                            params={**params, "models": models, "reference": args.reference}, seed=args.seed,
                            models=models + [args.reference])
    print(json.dumps({"written": str(out), "models": len(rows), "seconds": round(time.time() - t0)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
