#!/usr/bin/env python
"""Train, export and evaluate a head model: a frozen encoder and a trained MLM head (and top layers).

    nice -n 10 .venv/bin/python scripts/train_head.py --model ladder-mpnet-l12 --threads 2 --export
    nice -n 10 .venv/bin/python scripts/train_head.py --model mpnet-base-mlm --lr 0.0005 --top-layers 1 --threads 2 --export

The command line of :mod:`tokendyn.training.head`. ``--model`` is a key of
``tokendyn.models.shipped.HEAD_MODELS``: the size ladder's ``ladder-minilm-l1/l2/l3/l4/l6`` (all-MiniLM-L6-v2
cut to 1, 2, 3, 4, 6 layers) and ``ladder-mpnet-l2/l4/l6/l10/l12`` (all-mpnet-base-v2 cut to 2, 4, 6, 10, all
12), all head-only, and the base-size ``mpnet-base-mlm`` (all 12 layers, layer 12 trained too); run
``bash scripts/fetch_mpnet.sh`` first for MPNet. The corpus is masked and run through the frozen encoder
once; its hidden states go to ``checkpoints/<model>/cache_train/`` (safetensors shards and a
manifest), and then only the head (``--top-layers K``: and the top K layers) trains on them. For
MiniLM rungs a stage 0 first trains the ``[MASK]`` embedding row through the frozen encoder
(``--mask-row-steps``; all-MiniLM-L6-v2 never saw a mask token), and the row ships with the head.
Rerunning the same command resumes: a killed cache keeps every finished shard, a killed training
run resumes from ``checkpoints/<model>/head.pt`` (written every ``--ckpt-minutes``). ``--export``
writes ``data/models/<model>/`` (fp16 head, model.json, tokenizer, README, SHA256SUMS) and
``eval.json`` (cloze probe, copy rate, pseudo-perplexity on held-out passages), as
``scripts/train_mlm.py`` does for the other shipped MLMs. On a machine with CUDA it runs there
(``--device auto``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from tokendyn.core.checks import check_choice, check_range  # noqa: E402
from tokendyn.models import shipped  # noqa: E402
from tokendyn.training.head import MASK_ROW_STEPS, HeadSettings, cache_family, export_head, train_head  # noqa: E402
from tokendyn.training.loop import start_run  # noqa: E402
from tokendyn.training.mlm import IncompatibleCheckpoint  # noqa: E402

DEFAULTS = HeadSettings(model="")


def hardware(device: torch.device) -> str:
    """The device, in words, for model.json."""
    import platform

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()}), {torch.get_num_threads()} threads"


def command(args: argparse.Namespace, step: int) -> str:
    """The command line that rebuilds this run's export (defaults left out)."""
    opts = [f"--model {args.model}"]
    for k in ("steps", "batch", "lr", "warmup", "decay_frac", "top_layers", "seq_len", "mask_rate", "views",
              "sotu_share", "seed", "max_windows", "val_windows", "shard_items"):
        if getattr(args, k) != getattr(DEFAULTS, k):
            opts.append(f"--{k.replace('_', '-')} {getattr(args, k)}")
    if args.mask_row_steps != MASK_ROW_STEPS[shipped.HEAD_MODELS[args.model][0]]:
        opts.append(f"--mask-row-steps {args.mask_row_steps}")
    if step < args.steps:
        opts.append(f"--stop-at {step}")
    if args.threads != 1:  # float sums depend on the thread count: a bit-identical rerun needs it
        opts.append(f"--threads {args.threads}")
    return "nice -n 10 .venv/bin/python scripts/train_head.py " + " ".join(opts) + " --export"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, choices=tuple(shipped.HEAD_MODELS))
    ap.add_argument("--steps", type=int, default=DEFAULTS.steps, help="total optimiser steps")
    ap.add_argument("--batch", type=int, default=DEFAULTS.batch, help="masked windows per step")
    ap.add_argument("--lr", type=float, default=DEFAULTS.lr)
    ap.add_argument("--warmup", type=int, default=DEFAULTS.warmup)
    ap.add_argument("--decay-frac", type=float, default=DEFAULTS.decay_frac,
                    help="share of steps in the final decay")
    ap.add_argument("--top-layers", type=int, default=DEFAULTS.top_layers,
                    help="encoder layers trained with the head (the cache then holds whole windows)")
    ap.add_argument("--seq-len", type=int, default=DEFAULTS.seq_len)
    ap.add_argument("--mask-rate", type=float, default=DEFAULTS.mask_rate)
    ap.add_argument("--views", type=int, default=DEFAULTS.views, help="maskings of each window in the cache")
    ap.add_argument("--sotu-share", type=float, default=DEFAULTS.sotu_share)
    ap.add_argument("--seed", type=int, default=DEFAULTS.seed)
    ap.add_argument("--max-windows", type=int, default=DEFAULTS.max_windows,
                    help="a seeded subset of the training windows (default: all)")
    ap.add_argument("--val-windows", type=int, default=DEFAULTS.val_windows)
    ap.add_argument("--shard-items", type=int, default=DEFAULTS.shard_items,
                    help="masked windows per cache shard (what a killed cache can lose at most)")
    ap.add_argument("--encode-batch", type=int, default=DEFAULTS.encode_batch,
                    help="windows per encoder pass while caching (changes no result)")
    ap.add_argument("--mask-row-steps", type=int, default=None,
                    help="stage 0: steps that train the mask token's embedding row through the frozen encoder "
                         "before caching (default: the family's, tokendyn.training.head.MASK_ROW_STEPS)")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda")
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads (1 is fastest when the 2 cores are shared)")
    ap.add_argument("--ckpt-minutes", type=float, default=4.0)
    ap.add_argument("--ckpt-dir", default=str(ROOT / "checkpoints"))
    ap.add_argument("--stop-at", type=int, default=None, help="stop (and export) at this step of --steps")
    ap.add_argument("--cache-only", action="store_true", help="build the caches and stop")
    ap.add_argument("--family", action="store_true",
                    help="first fill the caches of every rung of this encoder from one pass (head-only runs)")
    ap.add_argument("--export", action="store_true", help="export + evaluate when training ends")
    ap.add_argument("--export-only", action="store_true", help="export the latest checkpoint now")
    ap.add_argument("--eval-passages", type=int, default=24)
    args = ap.parse_args(argv)
    check_range("steps", args.steps, 1, None, integer=True)
    check_range("batch", args.batch, 1, None, integer=True)
    check_range("lr", args.lr, 0, None, lo_open=True)
    check_range("top_layers", args.top_layers, 0, shipped.HEAD_MODELS[args.model][1], integer=True)
    check_range("seq_len", args.seq_len, 16, 128, integer=True)
    check_range("mask_rate", args.mask_rate, 0, 0.5, lo_open=True)
    check_range("views", args.views, 1, None, integer=True)
    check_range("sotu_share", args.sotu_share, 0, 0.9)
    check_choice("device", args.device, ("auto", "cpu", "cuda"))
    if args.mask_row_steps is None:
        args.mask_row_steps = MASK_ROW_STEPS[shipped.HEAD_MODELS[args.model][0]]
    check_range("mask_row_steps", args.mask_row_steps, 0, None, integer=True)
    if args.max_windows is not None:
        check_range("max_windows", args.max_windows, 1, None, integer=True)

    ck = Path(args.ckpt_dir) / args.model
    device, log = start_run(ck, device=args.device, threads=args.threads, args=vars(args))
    settings = HeadSettings(**{k: getattr(args, k) for k in HeadSettings.__dataclass_fields__})
    try:
        if args.family:
            cache_family(settings, Path(args.ckpt_dir), device=device, log=log)
        run = train_head(settings, ck, device=device, stop=args.stop_at, ckpt_minutes=args.ckpt_minutes,
                         train=not args.export_only, cache_only=args.cache_only, log=log)
    except (IncompatibleCheckpoint, FileNotFoundError) as e:
        raise SystemExit(str(e)) from None
    if run is not None and (args.export or args.export_only):
        export_head(run, settings, command=command(args, run.step), hardware=hardware(device),
                    eval_passages=args.eval_passages, log=log)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
