#!/usr/bin/env python
"""Which parameters limit the default MLM? Equal-step runs from the shipped weights, per arm.

    nice -n 10 .venv/bin/python scripts/ablate_minilm.py --steps 300

Every arm starts from ``data/models/minilm-mlm``, sees the same batches and masks (the teacher
sentences of ``scripts/teacher_targets.py``, loss as in ``train_mlm.py --teacher``), and differs
only in what it may change:

- ``shipped``: what the shipped delta holds (top 4 layers, head transform and bias, [MASK] row);
- ``embeddings``: that plus the whole word-embedding matrix, which is also the tied output
  decoder (30,522 x 384; shipping it would cost 23 MB in fp16);
- ``all-layers``: all 6 layers, head and [MASK] row (about 3.5 MB more in fp16).

It prints, per arm, the mean true-token cross-entropy of the last 100 steps (measured on each batch
before its update), the cloze probe and held-out pseudo-perplexity, and writes them to
``checkpoints/minilm-mlm/ablation.json``. Nothing is exported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tokendyn.core.atomic import write_json  # noqa: E402
from tokendyn.core.checks import check_range  # noqa: E402
from tokendyn.evaluation import cloze_probe, heldout_passages, heldout_scores  # noqa: E402
from tokendyn.models import shipped  # noqa: E402
from tokendyn.training.corpus import length_batches  # noqa: E402
from tokendyn.training.distill import load_targets  # noqa: E402
from tokendyn.training.loop import run_steps, timestamped_log  # noqa: E402
from tokendyn.training.masking import masked_step_logits, special_token_mask  # noqa: E402
from tokendyn.training.mlm import masked_lm_loss, set_trainable  # noqa: E402
from tokendyn.training.schedule import lr_at  # noqa: E402

ARMS = ("shipped", "embeddings", "all-layers")


def arm_model(arm: str) -> tuple[Any, Any, list[str]]:
    """The shipped default, its tokenizer, and the names of the parameters this arm trains."""
    g = torch.Generator().manual_seed(0)
    layers = 6 if arm == "all-layers" else 4
    model, tok, names = shipped.build_minilm(g, n_trained_layers=layers)
    shipped.apply_weights(model, shipped.models_dir() / "minilm-mlm" / shipped.WEIGHTS)
    emb = "bert.embeddings.word_embeddings.weight"
    if arm == "embeddings":
        names = [n for n in names if not n.startswith(emb + "[")] + [emb]
    return model, tok, names


def run_arm(arm: str, args: argparse.Namespace, teacher: dict[str, torch.Tensor],
            log: Callable[[str], None]) -> dict[str, Any]:
    """Train one arm ``args.steps`` steps on the teacher sentences; its losses, probe and held-out scores."""
    model, tok, trainable = arm_model(arm)
    names, rows = set_trainable(model, trainable)
    params = [p for n, p in model.named_parameters() if n in names]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.0)
    special = special_token_mask(tok)
    chunks = teacher["ids"]
    lengths = (chunks != tok.pad_token_id).sum(1)
    batches = length_batches(lengths, args.batch, torch.Generator().manual_seed(args.seed))
    hard_losses: list[float] = []

    def loss_at(step: int) -> torch.Tensor:
        idx = batches[step % len(batches)]
        ids, pos, targets, logits = masked_step_logits(
            model, tok, chunks[idx].long(), special, 0.25,
            torch.Generator().manual_seed(args.seed * 1_000_003 + step), torch.device("cpu"))
        # the true-token cross-entropy of this batch before its update, the arms' yardstick
        hard_losses.append(float(torch.nn.functional.cross_entropy(logits.detach().float(), targets)))
        tix = teacher["tidx"][idx][pos[:, 0], pos[:, 1]].long()
        return masked_lm_loss(logits, targets, ids, pos[:, 0], special, teacher=teacher, tix=tix,
                              teacher_weight=0.5, unlikelihood=1.0)

    t0 = time.time()
    model.train()
    run_steps(opt, loss_at, params=params, lr_at_step=lambda step: lr_at(step, args.lr, args.steps, 30, 1),
              stop=args.steps, log_every=50, log=log, label=arm)
    model.eval()
    pr = cloze_probe(model, tok)
    held = heldout_scores((model, tok), heldout_passages(args.passages))
    n_trained = sum(p.numel() if n not in rows else len(rows[n]) * p.shape[1]
                    for n, p in model.named_parameters() if n in names)
    return {"arm": arm, "trained_params": n_trained, "steps": args.steps,
            "ce_last100": sum(hard_losses[-100:]) / len(hard_losses[-100:]),
            "ce_first50": sum(hard_losses[:50]) / len(hard_losses[:50]),
            "top1": pr["top1"], "top5": pr["top5"], "copy_rate": pr["copy_rate"],
            "pseudo_perplexity": held["pseudo_perplexity"], "minutes": round((time.time() - t0) / 60, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--passages", type=int, default=24)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--teacher", default=str(ROOT / "checkpoints" / "minilm-mlm" / "teacher"))
    args = ap.parse_args(argv)
    check_range("steps", args.steps, 100, None, integer=True)
    arms = args.arms.split(",")
    for a in arms:
        if a not in ARMS:
            raise SystemExit(f"--arms: {a!r} is not one of {ARMS}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)  # nothing random is drawn from it; the runs use explicit generators
    teacher = load_targets(args.teacher)
    out = ROOT / "checkpoints" / "minilm-mlm" / "ablation.json"
    done = {r["arm"]: r for r in json.loads(out.read_text())} if out.is_file() else {}

    log = timestamped_log()
    for a in arms:
        if a in done and done[a]["steps"] == args.steps:
            continue
        done[a] = run_arm(a, args, teacher, log)
        log(json.dumps(done[a]))
        write_json(out, list(done.values()), indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
