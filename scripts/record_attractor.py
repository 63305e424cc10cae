#!/usr/bin/env python
"""Record long Glauber chains through topic regions: claim 8's pre-registered sample.

    TOKENDYN_THREADS=2 nice -n 5 .venv/bin/python scripts/record_attractor.py \
        --models minilm-mlm,splade-tiny-mlm --ablation splade-tiny-nopolitics --bf16 minilm-mlm \
        --taus 0.7,1.0 --chains 34 --steps 10000 --embed-every 100

Chapter 4's measurement of the political attractor (``tokendyn.analysis.topics``), at the size the rule
``tokendyn.publish.verdicts.claim_8`` fixed before this run: ``--chains`` chains per start topic (health,
sports, food) and temperature, each from its own real passage (the first ``--tokens`` content
tokens), ``--steps`` random-scan steps, every ``--embed-every`` steps decoded, embedded
(all-MiniLM-L6-v2) and labelled by a nearest-centroid classifier over health, sports, food,
science and politics, with and without its "none of these" gate (calibrated to keep
``--keep-real`` of real training snippets; ``topics.label_frames``). The same chains (same
starts, seeds and tau) run on each model of ``--models`` and on ``--ablation``, the
``--ablation-with`` recipe retrained with no political prose, so the corpus ablation is paired
chain by chain.

The fluency gate: ``--n-fluency`` states labelled politics behind the gate (a seeded sample, both
temperatures pooled) of each model are scored by SmolLM2-135M against real held-out snippets
(``topics.fluency_gates``). Models in ``--bf16`` run their chains in bfloat16 (the step
at about 2.8x the float32 rate on an AVX-512 BF16 CPU); the row records the KL between their
float32 and bfloat16 conditionals at the starts, so a reader sees what that changes.

Writes ``data/runs/04_basins-attractor.json`` (``tokendyn.publish.results.save_rows``): a reference row
(classifier accuracy, null text's labels, the real snippets' fluency) and one row per model with
its label matrices ``[frames][chains]`` (region index, -1 none of these), so that every statistic
the rule reads (``topics.attractor_test``, the paired ablation) is computed from the record.
Resumable: chains run in checkpointed segments of ``--segment`` steps under ``--checkpoints``
(``checkpoints/attractor/``), and each finished model's row is kept there too.
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

OUT = "runs/04_basins-attractor.json"
REGIONS = ["health", "sports", "food", "science", "politics"]
STARTS = ["health", "sports", "food"]


def checkpoint_dir(args) -> Path:
    """Where the chains' segments and each finished model's row are kept: ``--checkpoints``, else
    ``checkpoints/attractor/`` of this checkout."""
    return Path(args.checkpoints) if args.checkpoints else ROOT / "checkpoints" / "attractor"


class Reference:
    """What every model's chains are measured against: the split, the classifier and its gate,
    and the fluency judge with the real held-out snippets' scores."""

    def __init__(self, args):
        from tokendyn import models
        from tokendyn.core import stats
        from tokendyn.analysis import topics, traps
        from tokendyn.models.embedding import embed

        self.loaded = models.load_mlm(args.split_model)
        self.split = topics.topic_split(self.loaded, REGIONS, n_tokens=args.tokens, n_start=args.chains,
                                        n_train=args.n_train, n_val=args.n_val, seed=args.seed)
        self.embedder = models.load_embedder()
        e_train, e_val = embed(self.embedder, self.split.train_texts), embed(self.embedder, self.split.val_texts)
        self.clf = topics.fit_centroids(e_train, self.split.train_labels, order=REGIONS)
        self.gclf = topics.with_reject(self.clf, e_train, keep=args.keep_real)
        self.ar = models.load_ar()
        tok = self.loaded.tokenizer
        real_dom = torch.stack([traps.dominance(torch.tensor(tok(t, add_special_tokens=False)["input_ids"] or [0]))
                                for t in self.split.val_texts])
        ok = topics.fluency_gates(self.ar, {"real": self.split.val_texts}, {"real": real_dom},   # the real snippets
                                  {"real": self.split.val_texts}, keep=args.keep_real,           # against themselves
                                  repeat_share=args.repeat_share)["real"].fluent
        self.row = {"model": "reference", "role": "reference", "split_model": args.split_model,
                    "accuracy": topics.accuracy(self.clf, e_val, self.split.val_labels).to_dict(),
                    "accuracy_gated": topics.accuracy(self.gclf, e_val, self.split.val_labels, gated=True).to_dict(),
                    "real_fluent": {"fluent": int(ok.sum()), "n": int(ok.numel()),
                                    "wilson": stats.wilson(int(ok.sum()), int(ok.numel())).to_dict()},
                    "regions": REGIONS, "start_topics": STARTS}


def chain_row(name: str, role: str, args, ref: Reference, taus: list[float], bf16: bool) -> dict:
    """One model's chains, labelled and judged for fluency (every number from a tokendyn function)."""
    import numpy as np

    from tokendyn.analysis import fidelity, influence, topics, traps
    from tokendyn import models
    from tokendyn.mcmc import step_settings
    from tokendyn.core.checkpoint import Store
    from tokendyn.mcmc.conditional import content_ids

    t_cpu, t_wall = time.process_time(), time.time()
    loaded = models.load_mlm(name, dtype=torch.bfloat16 if bf16 else None)
    cond = step_settings.conditional(loaded)
    topic, tau = [], []
    for t in taus:
        for s in STARTS:
            topic += [s] * args.chains
            tau += [t] * args.chains
    starts = [p for _ in taus for s in STARTS for p in ref.split.starts[s]]
    x0 = content_ids(loaded, starts, args.tokens)
    kl = None
    if bf16:  # what running in bfloat16 changes: KL(fp32 || bf16) of the site conditionals at the starts
        ref32 = step_settings.conditional(models.load_mlm(name))
        sites = x0[:8]   # 8 starts x every site: enough rows for a median and a tail
        l32 = influence.all_site_logits(ref32, sites).double().flatten(0, 1)
        l16 = influence.all_site_logits(cond, sites).double().flatten(0, 1)
        k = fidelity.logits_kl(l32, l16, taus)
        kl = {f"{t:g}": {"median": float(k[i].median()), "p99": float(k[i].quantile(0.99))} for i, t in enumerate(taus)}
    store = Store(checkpoint_dir(args) / "segments")
    ch = traps.long_chains(cond, x0, steps=args.steps, tau=torch.tensor(tau, dtype=torch.float64), seed=args.seed,
                           record_every=args.embed_every, segment=args.segment, store=store,
                           key="attractor-" + name.replace("/", "_"),
                           tag={"model": name, "dtype": "bfloat16" if bf16 else "float32"})
    frames = topics.label_frames(loaded, ref.embedder, ch.trajectory, ch.steps, every=args.embed_every,
                                 clf=ref.clf, gated_clf=ref.gclf)                # every record: [F, B] labels
    texts, gated = frames.texts, frames.gated
    f_, b = gated.shape
    pol = REGIONS.index("politics")
    flat = gated.flatten()
    where = [i for i in (flat == pol).nonzero().flatten().tolist() if i >= b]   # frames after the start
    rng = np.random.default_rng(args.seed)
    pick = sorted(rng.choice(len(where), min(args.n_fluency, len(where)), replace=False).tolist()) if where else []
    chosen = [where[i] for i in pick]
    fl = None
    if chosen:
        sample = [texts[i] for i in chosen]
        ids = frames.states.reshape(-1, frames.states.shape[-1])[chosen]
        gate = topics.fluency_gates(ref.ar, {name: sample}, {name: traps.dominance(ids)}, {name: ref.split.val_texts},
                                    keep=args.keep_real, repeat_share=args.repeat_share)[name]
        ok = gate.fluent
        fl = {"fluent": int(ok.sum()), "n": int(ok.numel()), "median_nll": float(gate.nll.median()),
              "examples": [{"text": t, "fluent": bool(o)} for t, o in list(zip(sample, ok.tolist()))[:12]]}
    print(f"{name}: {b} chains x {args.steps} steps, gated politics share {float((gated[1:] == pol).double().mean()):.3f}"
          + (f", fluent {fl['fluent']}/{fl['n']}" if fl else ", no politics states"), flush=True)
    return {"model": name, "role": role, "dtype": "bfloat16" if bf16 else "float32", "bf16_kl": kl,
            "chains": b, "steps": args.steps, "record_steps": frames.steps.tolist(), "start_topic": topic, "tau": tau,
            "labels_gated": gated.tolist(), "labels_argmax": frames.argmax.tolist(), "politics_fluency": fl,
            "final_texts": texts[(f_ - 1) * b: f_ * b],
            "cpu_seconds": round(time.process_time() - t_cpu, 1), "wall_seconds": round(time.time() - t_wall, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="minilm-mlm,splade-tiny-mlm", help="the models the claim is judged on")
    ap.add_argument("--ablation", default="splade-tiny-nopolitics", help="the recipe without political prose")
    ap.add_argument("--ablation-with", default="splade-tiny-mlm", help="the same recipe with it (one of --models)")
    ap.add_argument("--bf16", default="", help="models whose chains run in bfloat16 (comma-separated)")
    ap.add_argument("--split-model", default="minilm-mlm", help="the tokenizer that cuts the classifier's snippets")
    ap.add_argument("--taus", default="0.7,1.0")
    ap.add_argument("--chains", type=int, default=34, help="chains per start topic and temperature")
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--embed-every", type=int, default=100)
    ap.add_argument("--segment", type=int, default=1000, help="steps per checkpointed segment")
    ap.add_argument("--tokens", type=int, default=24, help="content tokens of a chain's state")
    ap.add_argument("--n-train", type=int, default=40)
    ap.add_argument("--n-val", type=int, default=40)
    ap.add_argument("--keep-real", type=float, default=0.95)
    ap.add_argument("--repeat-share", type=float, default=0.5)
    ap.add_argument("--n-fluency", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TOKENDYN_THREADS", "1")))
    ap.add_argument("--out", default=OUT, help="under data/")
    ap.add_argument("--checkpoints", default="", help="segments and finished rows (default: checkpoints/attractor/)")
    args = ap.parse_args(argv)
    models_ = [m.strip() for m in args.models.split(",") if m.strip()]
    bf16 = {m.strip() for m in args.bf16.split(",") if m.strip()}
    if not models_:
        raise SystemExit("--models: give at least one model")
    if args.ablation and args.ablation_with not in models_:
        raise SystemExit(f"--ablation-with={args.ablation_with!r} must be one of --models {models_}")
    if not bf16 <= set(models_) | {args.ablation}:
        raise SystemExit(f"--bf16 {sorted(bf16)}: each must be one of --models or --ablation")
    taus = [float(t) for t in args.taus.split(",")]
    for t in taus:
        check_tau(t)
    check_range("chains", args.chains, 2, 10_000, integer=True)
    check_range("steps", args.steps, 1, 10**7, integer=True)
    check_range("embed_every", args.embed_every, 1, args.steps, integer=True)
    check_range("segment", args.segment, args.embed_every, None, integer=True)
    if args.steps % args.embed_every or args.segment % args.embed_every:
        raise SystemExit(f"--embed-every={args.embed_every} must divide --steps={args.steps} and --segment={args.segment}")
    check_range("tokens", args.tokens, 4, 510, integer=True)
    check_range("n_train", args.n_train, 2, 10_000, integer=True)
    check_range("n_val", args.n_val, 2, 10_000, integer=True)
    check_range("keep_real", args.keep_real, 0.0, 1.0, lo_open=True, hi_open=True)
    check_range("repeat_share", args.repeat_share, 0.0, 1.0, lo_open=True)
    check_range("n_fluency", args.n_fluency, 1, 100_000, integer=True)
    check_range("seed", args.seed, 0, None, integer=True)
    check_range("threads", args.threads, 1, 256, integer=True)
    from tokendyn.core import paths
    from tokendyn.publish import results

    results.check_recordable(paths.data_dir() / args.out)  # before any compute: a dirty tree records nothing
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    params = {k: getattr(args, k) for k in ("models", "ablation", "ablation_with", "bf16", "split_model", "taus",
                                           "chains", "steps", "embed_every", "segment", "tokens", "n_train", "n_val",
                                           "keep_real", "repeat_share", "n_fluency", "seed", "threads")}
    key = params_key(params, ignore=("threads", "segment"))

    t0 = time.time()
    ref = Reference(args)
    role = {m: "claim" for m in models_} | ({args.ablation: "ablation"} if args.ablation else {})
    rows = [ref.row] + results.rows_per_model(list(role), checkpoint_dir(args), key,
                                              lambda name: chain_row(name, role[name], args, ref, taus, name in bf16))
    cmd = (f"TOKENDYN_THREADS={args.threads} nice -n 5 .venv/bin/python scripts/record_attractor.py "
           f"--models {args.models} --ablation {args.ablation} --ablation-with {args.ablation_with}"
           + (f" --bf16 {args.bf16}" if args.bf16 else "") +
           f" --split-model {args.split_model} --taus {args.taus} --chains {args.chains} --steps {args.steps} "
           f"--embed-every {args.embed_every} --segment {args.segment} --tokens {args.tokens} --n-train {args.n_train} "
           f"--n-val {args.n_val} --keep-real {args.keep_real:g} --repeat-share {args.repeat_share:g} "
           f"--n-fluency {args.n_fluency} --seed {args.seed}" + (f" --out {args.out}" if args.out != OUT else "")
           + (f" --checkpoints {args.checkpoints}" if args.checkpoints else ""))
    out = results.save_rows(paths.data_dir() / args.out, rows, kind="long chains through topic regions", command=cmd,
                            params=params, seed=args.seed, models=list(role))
    print(json.dumps({"written": str(out), "models": len(role), "seconds": round(time.time() - t0)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
