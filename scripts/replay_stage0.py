#!/usr/bin/env python
"""Replay stage 0 (the mask token's embedding row) of the shipped MiniLM rungs: time it, and check
that it gives the row each rung ships.

    nice -n 5 .venv/bin/python scripts/replay_stage0.py --write-model-json

The MiniLM rungs were exported before ``scripts/train_head.py`` timed stage 0, so their
``train_minutes`` counted the head only. For each rung this re-runs stage 0 with the settings its
``model.json`` records (``tokendyn.training.head.replay_mask_row``, 1 thread as the exports ran),
and compares the row with the shipped fp16 one. The comparison is read against how far stage 0 moved
the row from its pretrained value. Writes ``data/runs/models-stage0-replay.json`` (one row per
rung, each stamped with the weights' SHA-256, and the command). ``--write-model-json`` then adds
``mask_row_minutes`` (with how it was measured) to each ``model.json``, makes ``train_minutes`` the
head's minutes plus these, and updates the README line. It refuses a rung whose replay does not
reproduce the row (relative difference over 1e-3). Resumable: stage 0 checkpoints under
``checkpoints/stage0-replay/<rung>/``, and a rerun continues it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from tokendyn.core import paths  # noqa: E402
from tokendyn.publish import results
from tokendyn.core.atomic import write_json, write_text  # noqa: E402
from tokendyn.models import shipped  # noqa: E402
from tokendyn.training.head import recipe_text, replay_mask_row  # noqa: E402

OUT = "runs/models-stage0-replay.json"
REPRODUCED = 1e-3  # relative row difference: fp16 rounding of the shipped row gives ~2e-4


def stage0_rungs() -> list[str]:
    """The shipped ladder rungs whose model.json records a stage 0."""
    out = []
    for name in shipped.HEAD_LADDER:
        f = shipped.models_dir() / name / "model.json"
        if f.is_file() and json.loads(f.read_text())["training"].get("mask_row_steps"):
            out.append(name)
    return out


def write_model_json(name: str, row: dict, commit: str) -> None:
    """Add the replayed stage 0's minutes to ``name``'s model.json and README (weights untouched)."""
    d = shipped.models_dir() / name
    meta = json.loads((d / "model.json").read_text())
    tr = meta["training"]
    head_min = tr.get("head_minutes", tr["train_minutes"])
    stage0 = round(row["minutes"], 1)
    new = {}
    for k, v in tr.items():
        if k in ("head_minutes", "mask_row_minutes", "mask_row_timing"):
            continue
        new[k] = v
        if k == "mask_row_lr":
            new["mask_row_minutes"] = stage0
            new["mask_row_timing"] = (f"replayed at {commit[:7]} by scripts/replay_stage0.py (1 thread); the export "
                                      f"timed the head only. The replayed row matches the shipped one to "
                                      f"{row['rel_diff']:.1e} relative (stage 0 moved it {row['moved_rel']:.2f})")
        if k == "train_minutes":
            new[k] = round(head_min + stage0, 1)
            new["head_minutes"] = head_min
    new["recipe"] = recipe_text(tr["mask_row_steps"], tr["top_layers"])
    meta["training"] = new
    write_json(d / "model.json", meta, indent=2)
    readme = (d / "README.md").read_text()
    lines = readme.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("- Training:") and " min " in line:
            line = re.sub(r" \([\d.]+ of them stage 0, replayed\)", "", line)  # a rerun replaces it
            head, _, rest = line.rpartition(" min ")
            prefix = head.rsplit("; ", 1)[0]
            lines[i] = f"{prefix}; {new['train_minutes']} min ({stage0} of them stage 0, replayed) {rest}"
    write_text(d / "README.md", "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=None, help="comma-separated rungs (default: every rung with a stage 0)")
    ap.add_argument("--write-model-json", action="store_true", help="record the minutes in each model.json")
    args = ap.parse_args(argv)
    names = args.models.split(",") if args.models else stage0_rungs()
    unknown = [n for n in names if n not in shipped.HEAD_LADDER]
    if unknown:
        ap.error(f"--models {unknown} are not ladder rungs: {list(shipped.HEAD_LADDER)}")
    from tokendyn.core import paths
    from tokendyn.publish import results

    results.check_recordable(paths.data_dir() / OUT)  # before any compute: a dirty tree records nothing
    torch.set_num_threads(1)
    rows = []
    for name in names:
        r = replay_mask_row(name, ROOT / "checkpoints" / "stage0-replay" / name, log=print)
        rows.append({"model": name, **r, "reproduced": r["rel_diff"] < REPRODUCED, **results.row_stamp(name)})
        print(f"{name}: stage 0 {r['minutes']:.1f} min; row vs shipped {r['rel_diff']:.1e} relative "
              f"(max {r['max_abs_diff']:.1e}); stage 0 moved it {r['moved_rel']:.2f}", flush=True)
    cmd = "nice -n 5 .venv/bin/python scripts/replay_stage0.py" + (f" --models {args.models}" if args.models else "")
    out = results.save_rows(paths.data_dir() / OUT, rows, kind="stage 0 replay", command=cmd,
                            params={"models": names, "threads": 1}, seed=None, models=names)
    print(f"wrote {out}")
    bad = [r["model"] for r in rows if not r["reproduced"]]
    if args.write_model_json:
        if bad:
            print(f"not writing model.json: {bad} did not reproduce their row", file=sys.stderr)
            return 1
        for r in rows:
            write_model_json(r["model"], r, r["git_commit"] or "unknown")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
