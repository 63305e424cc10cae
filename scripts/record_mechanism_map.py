#!/usr/bin/env python
"""Record the Part II mechanism map: the exact posterior-mean generator over a grid of latent geometries.

    TOKENDYN_THREADS=1 nice -n 5 .venv/bin/python scripts/record_mechanism_map.py \
        --d 16,64,256 --M 256,2048 --sigma 0.02,0.05,0.1,0.2,0.5 --spacing 0.25,0.5,1,1.5,2,3,4,6,8 --K 1,2,4,8,16

For each token mixture of the grid (``tokendyn.latent.exact.token_mixture``: ``M`` Gaussian tokens
in ``d`` dimensions, means ``spacing`` apart in root mean square, spread ``sigma`` per coordinate)
and each step count ``K``, ``tokendyn.latent.mechanism.map_cell`` measures the exact generator's
terminal step on ``--windows`` sequences of ``--length`` tokens: the structured and isotropic flip
rates and their ratio, the residual's aim at the nearest boundary, the token posterior's top-2
mass and bimodal share at the terminal step, and the same rates on the bimodal tokens alone, each
with a 95% bootstrap interval over sequences. ``verdicts.exact_generator_regime`` reads the record.

Writes ``data/runs/05_tube_law-mechanism-map.json`` (``tokendyn.publish.results.save_rows``: one row per
cell, the command, provenance with the git commit and dirty flag). Resumable: each finished mixture
is kept under ``checkpoints/mechanism/`` and a rerun of the same command skips it.
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

import torch  # noqa: E402

from tokendyn.core.checkpoint import kept_or_computed, params_key  # noqa: E402
from tokendyn.core.checks import check_range  # noqa: E402

OUT = "runs/05_tube_law-mechanism-map.json"


def finite(row: dict) -> dict:
    """JSON without Infinity or NaN: a non-finite number becomes None (K = 1 has s = inf)."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}


def parse(text: str, kind: type, name: str) -> list:
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(f"--{name}={text!r}: give comma-separated {kind.__name__} values") from None
    if not values:
        raise SystemExit(f"--{name}: give at least one value")
    return values


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", default="16,64,256", help="latent dimensions")
    ap.add_argument("--M", default="256,2048", help="vocabulary sizes")
    ap.add_argument("--sigma", default="0.02,0.05,0.1,0.2,0.5", help="within-token spread per coordinate")
    ap.add_argument("--spacing", default="0.25,0.5,1,1.5,2,3,4,6,8", help="root-mean-square distance between token means")
    ap.add_argument("--K", default="1,2,4,8,16", help="generator steps")
    ap.add_argument("--windows", type=int, default=32, help="sequences per cell")
    ap.add_argument("--length", type=int, default=32, help="tokens per sequence")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TOKENDYN_THREADS", "1")))
    ap.add_argument("--out", default=OUT, help="under data/")
    args = ap.parse_args(argv)
    ds, Ms, Ks = parse(args.d, int, "d"), parse(args.M, int, "M"), parse(args.K, int, "K")
    sigmas, spacings = parse(args.sigma, float, "sigma"), parse(args.spacing, float, "spacing")
    for d in ds:
        check_range("d", d, 1, 4096, integer=True)
    for M in Ms:
        check_range("M", M, 2, 65536, integer=True)
    for K in Ks:
        check_range("K", K, 1, 1024, integer=True)
    for v in sigmas:
        check_range("sigma", v, 0, math.inf, lo_open=True, hi_open=True)
    for v in spacings:
        check_range("spacing", v, 0, math.inf, lo_open=True, hi_open=True)
    check_range("windows", args.windows, 2, 100000, integer=True)
    check_range("length", args.length, 1, 100000, integer=True)
    check_range("n_boot", args.n_boot, 100, 100000, integer=True)
    check_range("seed", args.seed, 0, None, integer=True)
    check_range("threads", args.threads, 1, 256, integer=True)
    from tokendyn.core import paths
    from tokendyn.publish import results

    results.check_recordable(paths.data_dir() / args.out)  # before any compute: a dirty tree records nothing
    torch.set_num_threads(args.threads)
    from tokendyn.latent import mechanism

    params = {"d": ds, "M": Ms, "sigma": sigmas, "spacing": spacings, "K": Ks, "windows": args.windows,
              "length": args.length, "n_boot": args.n_boot, "seed": args.seed, "threads": args.threads}
    key = params_key(params, ignore=("threads",))
    rows, t0 = [], time.time()
    mixtures = [(d, M, sg, sp) for d in ds for M in Ms for sg in sigmas for sp in spacings]
    for i, (d, M, sg, sp) in enumerate(mixtures):
        path = ROOT / "checkpoints" / "mechanism" / f"{key}-{i}.json"

        def compute(d=d, M=M, sg=sg, sp=sp, i=i) -> dict:
            # the i-th mixture of the grid, exactly as mechanism_map seeds it
            cells = mechanism.mechanism_map([d], [M], [sp], [sg], Ks, windows=args.windows, length=args.length,
                                            seed=args.seed, n_boot=args.n_boot, first_index=i)
            return {"cells": [finite(c.row()) for c in cells]}

        kept, resumed = kept_or_computed(path, compute)
        block = kept["cells"]
        rows += block
        print(f"[{i + 1}/{len(mixtures)}] d {d} M {M} sigma {sg:g} spacing {sp:g}: "
              + ("resumed" if resumed else ", ".join(f"K {r['K']} ratio {r['ratio']:.1f} flips {r['flips']:.3f}"
                                                  for r in block)), flush=True)
    cmd = (f"TOKENDYN_THREADS={args.threads} nice -n 5 .venv/bin/python scripts/record_mechanism_map.py --d {args.d} "
           f"--M {args.M} --sigma {args.sigma} --spacing {args.spacing} --K {args.K} --windows {args.windows} "
           f"--length {args.length} --n-boot {args.n_boot} --seed {args.seed}"
           + (f" --out {args.out}" if args.out != OUT else ""))
    out = results.save_rows(paths.data_dir() / args.out, rows, kind="mechanism map of the exact generator", command=cmd,
                            params=params, seed=args.seed, models=["token mixtures (tokendyn.latent.exact)"])
    print(json.dumps({"written": str(out), "cells": len(rows), "seconds": round(time.time() - t0)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
