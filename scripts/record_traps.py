#!/usr/bin/env python
"""Record chapter 4's trap census at a size whose intervals carry claim 6.

    TOKENDYN_THREADS=1 nice -n 5 .venv/bin/python scripts/record_traps.py \
        --models minilm-mlm,splade-tiny-mlm --starts 96 --taus 0.3,0.5,1.0

For each model: the chapter's own trap search (``tokendyn.analysis.traps.census_starts`` and
``tokendyn.analysis.traps.trap_census``: argmax sweeps from ``--starts`` real passages, a third each from
health, sports and food, then the exact margins of every end state), the exact leave probability
``q`` of every distinct perfect trap at each temperature of ``--taus`` (``traps.leave_curve``, from the
logits, no sampling), the temperature at which its exact dwell ``1/q`` reaches 1,000 steps
(``traps.tau_for_dwell``), and the **dwell law** there: ``--chains`` plain random-scan chains
started in every trap at each temperature (none with ``--chains 0``: the size ladder's census,
``--out runs/04_basins-trap-ladder.json``), watched ``--steps`` steps, their first exit times
against Geometric of their trap's exact ``q`` (``traps.dwell_law``: pooled observed over predicted
restricted mean dwell with a bootstrap interval, and the largest survival gap against the 95%
Kolmogorov band). Medians over traps come with 95% bootstrap intervals (``tokendyn.core.stats``).

Writes ``data/runs/04_basins-traps.json`` (``tokendyn.publish.results.save_rows``: one row per model, the
command that remakes it, provenance with the git commit and dirty flag). Resumable: each finished
model is kept under ``checkpoints/traps/`` and a rerun of the same command skips it. A model with
fewer than ``--min-traps`` distinct perfect traps fails the run (give more ``--starts``).
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

from tokendyn.core.checkpoint import params_key  # noqa: E402
from tokendyn.core.checks import check_range  # noqa: E402
from tokendyn.mcmc.glauber import check_tau  # noqa: E402

OUT = "runs/04_basins-traps.json"
START_TOPICS = ["health", "sports", "food"]
DWELL_MARK = 1000.0


def census_model(name: str, args, taus: list[float]) -> dict:
    """One model's row of the record (every number from a tokendyn function)."""
    from tokendyn.publish import book
    from tokendyn.analysis import traps
    from tokendyn.mcmc.conditional import decode
    from tokendyn.models import n_nonembedding_params, n_params, shipped
    from tokendyn.core.stats import bootstrap

    t_cpu, t_wall = time.process_time(), time.time()
    loaded, cond = book.load_mlms([name])[name]
    x0 = traps.census_starts(loaded, START_TOPICS, n_tokens=args.n_tokens, n_starts=args.starts, seed=args.seed)
    c = traps.trap_census(cond, x0, max_sweeps=args.max_sweeps)
    K = len(c.tokens)
    print(f"{name}: {int(c.perfect.sum())} of {len(x0)} starts end in a perfect trap, {K} distinct "
          f"({time.process_time() - t_cpu:.0f} s CPU)", flush=True)
    if K < args.min_traps:
        raise SystemExit(f"{name}: {K} distinct perfect traps from {args.starts} starts, fewer than "
                         f"--min-traps {args.min_traps}: give more --starts")
    log_q = traps.leave_curve(c.logits, c.tokens, taus).cpu()                    # [T, K]
    t1000 = traps.tau_for_dwell(c.logits, c.tokens, DWELL_MARK)
    laws = (traps.dwell_law(cond, c.tokens, c.logits, taus, chains=args.chains, steps=args.steps, seed=args.seed)
            if args.chains else {})
    mm = c.min_margin.numpy()
    texts = decode(loaded, c.tokens.cpu())
    row = {
        "model": name, "params": int(n_params(loaded.model)),
        "params_nonembedding": int(n_nonembedding_params(loaded.model)), "n_tokens": args.n_tokens, "starts": len(x0),
        "encoder": shipped.HEAD_MODELS.get(name, ("other", 0))[0], "layers": int(loaded.model.config.num_hidden_layers),
        "converged": int(c.greedy.converged.sum()), "perfect": int(c.perfect.sum()), "n_traps": K,
        "median_margin": bootstrap(mm, np.median, seed=args.seed).to_dict(),
        "tau_1000": bootstrap(t1000.numpy(), np.median, seed=args.seed).to_dict(),
        "exact_dwell": {f"{t:g}": bootstrap(torch.exp(-log_q[j]).numpy(), np.median, seed=args.seed).to_dict()
                        for j, t in enumerate(taus)},
        "dwell_law": {f"{t:g}": {"chains_per_trap": law.chains, "steps": law.steps, "q_mean": law.check.q,
                                 "observed": law.check.observed.to_dict(), "predicted": law.check.predicted,
                                 "ratio": law.ratio.to_dict(), "max_gap": law.check.max_gap, "band": law.check.band,
                                 "censored": law.check.censored, "consistent": law.check.consistent}
                      for t, law in laws.items()},
        "traps": [{"start": int(c.keep[k]), "ids": [int(v) for v in c.tokens[k].tolist()], "text": texts[k],
                   "min_margin": float(mm[k]), "tau_1000": float(t1000[k]),
                   "exact_dwell": {f"{t:g}": float(torch.exp(-log_q[j, k])) for j, t in enumerate(taus)},
                   "observed_mean_dwell": {f"{t:g}": float(law.times[k].double().mean()) for t, law in laws.items()}}
                  for k in range(K)],
        "cpu_seconds": round(time.process_time() - t_cpu, 1), "wall_seconds": round(time.time() - t_wall, 1),
    }
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="minilm-mlm,splade-tiny-mlm")
    ap.add_argument("--starts", type=int, default=96, help="real starts per model")
    ap.add_argument("--taus", default="0.3,0.5,1.0", help="the dwell law's temperatures")
    ap.add_argument("--chains", type=int, default=8,
                    help="chains started in each trap per temperature (0: census and exact dwell only, no dwell law)")
    ap.add_argument("--steps", type=int, default=100, help="steps each dwell chain is watched")
    ap.add_argument("--n-tokens", type=int, default=16)
    ap.add_argument("--max-sweeps", type=int, default=12)
    ap.add_argument("--min-traps", type=int, default=64, help="fail when a model has fewer distinct perfect traps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TOKENDYN_THREADS", "1")))
    ap.add_argument("--out", default=OUT, help="under data/")
    ap.add_argument("--resume-from", default=None,
                    help="a recorded run under data/ whose rows to keep for models whose weights are unchanged "
                         "since its commit and whose parameters match (tokendyn.publish.results.recorded_rows_to_keep)")
    args = ap.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not models:
        ap.error("--models: give at least one model")
    taus = [float(t) for t in args.taus.split(",")]
    for t in taus:
        check_tau(t)
    check_range("starts", args.starts, len(START_TOPICS), 100000, integer=True)
    check_range("chains", args.chains, 0, 100000, integer=True)
    check_range("steps", args.steps, 1, 10**6, integer=True)
    check_range("n_tokens", args.n_tokens, 4, 510, integer=True)
    check_range("max_sweeps", args.max_sweeps, 1, None, integer=True)
    check_range("min_traps", args.min_traps, 2, None, integer=True)
    check_range("seed", args.seed, 0, None, integer=True)
    check_range("threads", args.threads, 1, 256, integer=True)
    from tokendyn.core import paths
    from tokendyn.publish import results

    results.check_recordable(paths.data_dir() / args.out)  # before any compute: a dirty tree records nothing
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    params = {k: v for k, v in vars(args).items() if k not in ("out", "models", "taus", "resume_from")}
    params.update(models=models, taus=taus, start_topics=START_TOPICS, dwell_mark=DWELL_MARK)
    key = params_key(params, ignore=("models", "threads"))
    from tokendyn.publish import results

    t0 = time.time()
    rows = results.rows_per_model(models, ROOT / "checkpoints" / "traps", key, lambda name: census_model(name, args, taus),
                                  resume_from=ROOT / "data" / args.resume_from if args.resume_from else None,
                                  ignore=("models", "threads"))
    from tokendyn.core import paths

    cmd = (f"TOKENDYN_THREADS={args.threads} nice -n 5 .venv/bin/python scripts/record_traps.py --models {','.join(models)} "
           f"--starts {args.starts} --taus {args.taus} --chains {args.chains} --steps {args.steps} "
           f"--n-tokens {args.n_tokens} --max-sweeps {args.max_sweeps} --min-traps {args.min_traps} --seed {args.seed}"
           + (f" --out {args.out}" if args.out != OUT else "")
           + (f" --resume-from {args.resume_from}" if args.resume_from else ""))
    out = results.save_rows(paths.data_dir() / args.out, rows, kind="trap census and dwell law", command=cmd,
                            params=params, seed=args.seed, models=models)
    print(json.dumps({"written": str(out), "models": len(rows), "seconds": round(time.time() - t0),
                      "cpu_seconds": round(sum(r["cpu_seconds"] for r in rows), 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
