#!/usr/bin/env python
"""Record chapter 5's generator-quality ladder.

    nice -n 10 .venv/bin/python scripts/record_flow_ladder.py --windows 512 --steps 2,4,8,16 --seed 0

For each generator, the shipped contextual flow (3,000 steps, its own full schedule) and every
snapshot that ``scripts/train_context_latent.py export-ladder`` wrote under
checkpoints/context-latent-ladder/model-stepNNNNN/ (the same recipe trained for 10,000 steps,
snapshots at 1k, 3k and 10k), this measures on the same held-out windows, with the same seeds:

- ``flow_loss``: the rectified-flow loss on one fixed draw of held-out latents
  (:func:`tokendyn.latent.flow.fixed_flow_loss`, the ladder's own evaluation: 1,024 windows x 2
  draws, seed 28), computed here for every generator on the shipped model's encoding, so the rungs
  and the shipped flow are compared on identical inputs;
- per K, the terminal flips of the oracle roll-in (:func:`tokendyn.latent.tube.terminal_flips`:
  structured, norm-matched isotropic, their ratio, bootstrap over windows);
- per K, the residual's aim at the readout's nearest boundary (:func:`tokendyn.latent.geometry.alignment`)
  and the aligned counterfactual (:func:`tokendyn.latent.geometry.aligned_counterfactual`), on the
  terminal residual of the same roll-in chapter 5 uses (generator seeded ``seed + 300 + K``);
- per K, the DABI of that terminal residual (:func:`tokendyn.latent.dabi.residual_dabi`, cross-entropy against
  the clean decode, on the first 128 windows, as chapter 5 and 6 measure the shipped flow's).

Only the flow differs between rungs: every exported rung carries the shipped standardisation and
readout. Writes ``data/runs/05_tube_law-ladder.json`` (rows, this command, provenance, and the wall
time per generator). Resumable: each finished generator is kept in checkpoints/flow-ladder-geometry/.
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

from tokendyn.core.checkpoint import kept_or_computed  # noqa: E402
from tokendyn.core.checks import check_range  # noqa: E402
from tokendyn.latent import geometry, tube  # noqa: E402
from tokendyn.latent.contextual import LADDER_EVAL, SHIPPED_FLOW, ladder_models, load_context_latent  # noqa: E402
from tokendyn.latent.dabi import residual_dabi  # noqa: E402
from tokendyn.latent.flow import fixed_flow_loss  # noqa: E402

LADDER = ROOT / "checkpoints" / "context-latent-ladder"
OUT = "runs/05_tube_law-ladder.json"
DABI_WINDOWS = 128  # windows whose [128 x 32, 30,522] logits give each DABI (memory, not time, bounds it)


def generators() -> dict[str, tuple[Path | None, int]]:
    """name -> (model folder, None for the shipped model; training steps)."""
    return {SHIPPED_FLOW: (None, 3000), **ladder_models(LADDER)}


def measure(name: str, ctx, steps: list[int], train_steps: int, x1: torch.Tensor, ref: torch.Tensor,
            z_eval: torch.Tensor, seed: int) -> list[dict]:
    """Rows of one generator: one per K."""
    ae, flow = ctx.autoencoder, ctx.flow
    loss = fixed_flow_loss(flow, z_eval, **LADDER_EVAL)
    readout = (ae.readout.weight, ae.readout.bias)
    n_dabi = min(DABI_WINDOWS, len(x1))
    ce = tube.cross_entropy_loss(ae.logits, ref[:n_dabi])
    rows = []
    for tf in tube.terminal_flips(ae.decode, flow, x1, ref, steps, seed=seed):
        k = tf.K
        x_hat, _ = tube.oracle_terminal(flow, x1, k, torch.Generator().manual_seed(seed + 300 + k))
        al = geometry.alignment(x1, x_hat, readout, seed=seed)
        cf = geometry.aligned_counterfactual(x1, x_hat, readout, seed=seed + k)
        dabi = residual_dabi(ce, x1[:n_dabi], (x_hat - x1)[:n_dabi], torch.Generator().manual_seed(seed + 100 + k))
        rows.append({
            "generator": name, "train_steps": train_steps, "K": k, "s": tf.s, "flow_loss": loss,
            "flips": tf.structured.value, "flips_lo": tf.structured.lo, "flips_hi": tf.structured.hi,
            "isotropic_flips": tf.isotropic.value, "ratio": tf.ratio.value, "ratio_lo": tf.ratio.lo,
            "ratio_hi": tf.ratio.hi, "ratio_is_bound": tf.ratio_is_bound, "residual_rms": tf.residual_rms,
            "n_tokens": tf.n_tokens,
            "mean_abs_cos": al.mean_abs_cos.value, "abs_lo": al.mean_abs_cos.lo, "abs_hi": al.mean_abs_cos.hi,
            "mean_cos": al.mean_cos.value, "mean_cos_lo": al.mean_cos.lo, "mean_cos_hi": al.mean_cos.hi,
            "unaimed_abs_cos": al.isotropic_abs_cos,
            "aligned_flips": cf.aligned.value, "aligned_ratio": cf.ratio.value, "aligned_ratio_lo": cf.ratio.lo,
            "aligned_ratio_hi": cf.ratio.hi, "predicted_ratio": cf.predicted_ratio, "dabi": dabi,
            "dabi_tokens": n_dabi * x1.shape[1]})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=512, help="held-out windows of 32 tokens (0: all 1,345)")
    ap.add_argument("--steps", default="2,4,8,16", help="K values, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=OUT, help="under data/")
    args = ap.parse_args(argv)
    check_range("windows", args.windows, 0, 1345, integer=True)
    if args.windows == 1:
        raise ValueError("windows=1 is out of range: allowed 0 (all) or [2, 1345]")
    check_range("seed", args.seed, 0, None, integer=True)
    check_range("threads", args.threads, 1, 256, integer=True)
    steps = [int(k) for k in args.steps.split(",")]
    for k in steps:
        check_range("steps", k, 2, 1024, integer=True)
    from tokendyn.core import paths
    from tokendyn.publish import results

    results.check_recordable(paths.data_dir() / args.out)  # before any compute: a dirty tree records nothing
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    cache = ROOT / "checkpoints" / "flow-ladder-geometry"
    shipped = load_context_latent()
    ae = shipped.autoencoder
    x1 = ae.encode(shipped.heldout(args.windows or 1345, seed=args.seed))   # [N, 32, 381]
    ref = ae.decode(x1)
    z_eval = ae.encode(shipped.heldout(1345, seed=0))                       # every held-out window
    rows, seconds = [], {}
    for name, (folder, train_steps) in generators().items():
        tag = "".join(c if c.isalnum() else "-" for c in name)
        f = cache / f"{tag}-{args.windows}-{args.steps.replace(',', '_')}-{args.seed}.json"
        t0 = time.time()
        got, _ = kept_or_computed(f, lambda: {
            "rows": measure(name, shipped if folder is None else load_context_latent(folder), steps, train_steps,
                            x1, ref, z_eval, args.seed),
            "seconds": round(time.time() - t0)})
        rows += got["rows"]
        seconds[name] = got["seconds"]
        print(f"{name}: flow loss {got['rows'][0]['flow_loss']:.4f} ({got['seconds']} s)", flush=True)

    cmd = (f"nice -n 10 .venv/bin/python scripts/record_flow_ladder.py --windows {args.windows} "
           f"--steps {args.steps} --seed {args.seed}")
    out = results.save_rows(paths.data_dir() / args.out, rows, kind="flow ladder geometry", command=cmd,
                            params={**{k: v for k, v in vars(args).items() if k != "out"},
                                    "eval": LADDER_EVAL, "seconds_per_generator": seconds},
                            seed=args.seed, models=["context-latent", *[n for n in seconds if n != SHIPPED_FLOW]])
    print(json.dumps({"written": str(out), "rows": len(rows), "seconds": seconds}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
