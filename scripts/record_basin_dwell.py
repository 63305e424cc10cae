#!/usr/bin/env python
"""Record how long chains stay in the basin of each recorded trap: claim 6's pre-registered sample.

    TOKENDYN_THREADS=1 nice -n 5 .venv/bin/python scripts/record_basin_dwell.py \
        --models minilm-mlm,splade-tiny-mlm,mpnet-base-mlm --taus 0.5,1.0 --radii 2,4 --chains 16 --steps 10000

Every distinct perfect trap of the recorded censuses (``--censuses``, the first file that has the
model: ``runs/04_basins-traps.json`` for the two shipped MLMs, 76 and 85 traps, and the size
ladder's ``runs/04_basins-trap-ladder.json`` for the base-size ``mpnet-base-mlm``, 34) starts
``--chains`` plain random-scan chains at each temperature of ``--taus``; each is watched until it
differs from its trap at more than ``h`` sites, for each radius ``h`` of ``--radii``, at most
``--steps`` steps (``tokendyn.analysis.traps.basin_dwell``). A trap's dwell is its chains' median exit time;
each model's median over traps comes with a 95% bootstrap interval over traps. The exact dwell
1/q of the census is copied beside it. The census's weights must be the model's weights now.

Writes ``data/runs/04_basins-basin-dwell.json`` (``tokendyn.publish.results.save_rows``: one row per
model, the command, provenance with the git commit and dirty flag). Resumable: each finished model
is kept under ``checkpoints/basin/`` and a rerun of the same command skips it.
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

from tokendyn.core.checkpoint import params_key  # noqa: E402
from tokendyn.core.checks import check_range  # noqa: E402
from tokendyn.mcmc.glauber import check_tau  # noqa: E402

OUT = "runs/04_basins-basin-dwell.json"
CENSUSES = "runs/04_basins-traps.json,runs/04_basins-trap-ladder.json"


def census_row(name: str, censuses: list[str]) -> tuple[dict, str]:
    """The recorded census row of ``name`` and the file it came from (the first that has it)."""
    from tokendyn.core import paths
    from tokendyn.publish import results

    for rel in censuses:
        rows, _ = results.load_rows(paths.data_dir() / rel)
        for row in rows:
            if row["model"] == name:
                return row, rel
    raise SystemExit(f"{name}: no row in --censuses {','.join(censuses)} (record its census with scripts/record_traps.py)")


def basin_model(name: str, args, taus: list[float], radii: list[int], censuses: list[str]) -> dict:
    """One model's row of the record (every number from a tokendyn function)."""
    from tokendyn.publish import book, results
    from tokendyn.analysis import traps

    t_cpu, t_wall = time.process_time(), time.time()
    census, source = census_row(name, censuses)
    if "weights_sha256" in census and not results.same_weights(census, name):
        raise SystemExit(f"{name}: its weights changed since the census in {source}; re-record the census first")
    _, cond = book.load_mlms([name])[name]
    tokens = torch.tensor([t["ids"] for t in census["traps"]])
    basins = {}
    for h in radii:
        d = traps.basin_dwell(cond, tokens, taus, h=h, chains=args.chains, steps=args.steps, seed=args.seed)
        basins[str(h)] = {f"{t:g}": {"median": b.median.to_dict(), "per_trap": b.per_trap.tolist(),
                                     "censored": int((~b.exited).sum()), "chains": int(b.times.numel()),
                                     "mean_watched": float(b.times.double().clamp_max(args.steps).mean())}
                          for t, b in d.items()}
        print(f"{name}, h = {h}: " + ", ".join(f"tau {t:g} median {b.median.value:g} [{b.median.lo:g}, "
                                                  f"{b.median.hi:g}], censored {int((~b.exited).sum())}"
                                                  for t, b in d.items()), flush=True)
    return {"model": name, "census": source, "n_traps": len(tokens), "n_tokens": int(tokens.shape[1]),
            "exact_dwell": {f"{t:g}": census["exact_dwell"][f"{t:g}"] for t in taus if f"{t:g}" in census["exact_dwell"]},
            "basin_dwell": basins, "cpu_seconds": round(time.process_time() - t_cpu, 1),
            "wall_seconds": round(time.time() - t_wall, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="minilm-mlm,splade-tiny-mlm,mpnet-base-mlm")
    ap.add_argument("--censuses", default=CENSUSES, help="recorded trap censuses under data/, searched in order")
    ap.add_argument("--taus", default="0.5,1.0")
    ap.add_argument("--radii", default="2,4", help="Hamming radii of the basin (the rule reads 2)")
    ap.add_argument("--chains", type=int, default=16, help="chains started in each trap per temperature")
    ap.add_argument("--steps", type=int, default=10_000, help="most steps a chain is watched")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TOKENDYN_THREADS", "1")))
    ap.add_argument("--out", default=OUT, help="under data/")
    args = ap.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    censuses = [c.strip() for c in args.censuses.split(",") if c.strip()]
    if not models:
        ap.error("--models: give at least one model")
    if not censuses:
        ap.error("--censuses: give at least one recorded census under data/")
    taus = [float(t) for t in args.taus.split(",")]
    for t in taus:
        check_tau(t)
    radii = [int(h) for h in args.radii.split(",")]
    for h in radii:
        check_range("radii", h, 0, 64, integer=True)
    check_range("chains", args.chains, 1, 100000, integer=True)
    check_range("steps", args.steps, 1, 10**7, integer=True)
    check_range("seed", args.seed, 0, None, integer=True)
    check_range("threads", args.threads, 1, 256, integer=True)

    from tokendyn.core import paths
    from tokendyn.publish import results

    results.check_recordable(paths.data_dir() / args.out)  # before any compute: a dirty tree records nothing
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    params = {"models": models, "censuses": censuses, "taus": taus, "radii": radii, "chains": args.chains,
              "steps": args.steps, "seed": args.seed, "threads": args.threads}
    key = params_key(params, ignore=("models", "threads"))

    t0 = time.time()
    rows = results.rows_per_model(models, ROOT / "checkpoints" / "basin", key,
                                  lambda name: basin_model(name, args, taus, radii, censuses))
    cmd = (f"TOKENDYN_THREADS={args.threads} nice -n 5 .venv/bin/python scripts/record_basin_dwell.py "
           f"--models {','.join(models)} --censuses {','.join(censuses)} --taus {args.taus} --radii {args.radii} "
           f"--chains {args.chains} --steps {args.steps} --seed {args.seed}"
           + (f" --out {args.out}" if args.out != OUT else ""))
    out = results.save_rows(paths.data_dir() / args.out, rows, kind="basin dwell of recorded traps", command=cmd,
                            params=params, seed=args.seed, models=models)
    print(json.dumps({"written": str(out), "models": len(rows), "seconds": round(time.time() - t0),
                      "cpu_seconds": round(sum(r["cpu_seconds"] for r in rows), 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
