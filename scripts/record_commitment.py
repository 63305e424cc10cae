#!/usr/bin/env python
"""Record the commitment ablation on long texts: claim 13's pre-registered sample.

    TOKENDYN_THREADS=2 nice -n 5 .venv/bin/python scripts/record_commitment.py \
        --seeds 2 --per-seed 64 --tokens 128 --diffusion-steps 64

Chapter 7's ablation (``tokendyn.latent.discrete``) at the size the rule ``tokendyn.publish.verdicts.claim_13``
fixed before this run: each generator decodes ``--seeds`` batches of ``--per-seed`` texts of
``--tokens`` new tokens, committed (the drawn token fed back) and ablated (the expected embedding
fed back) from the same uniforms. The generators and their judges, each a model that did not
generate the text it reads:

- SmolLM2-135M, autoregressive after the document-start token (end-of-text banned, so every text
  has ``--tokens`` tokens), judged by ``--ar-judge``'s pseudo-perplexity (a masked LM: each token
  masked in turn, ``tokendyn.evaluation.pseudo_ppl``); SmolLM2's own perplexity of its texts is
  recorded beside it, not judged;
- masked diffusion with ``--md-model`` (``--diffusion-steps`` steps, unmask and commit), judged by
  SmolLM2's perplexity.

Writes ``data/runs/07_escapes-commitment.json`` (``tokendyn.publish.results.save_rows``): one row per
(generator, variant) with its texts, the generator's token ids, the CCI of each seed's batch and
each judge's per-text negative log-likelihoods, so that every statistic the rule reads
(``tokendyn.evaluation.ablation.commitment_effects``) is computed from the record. Resumable: each
(generator, variant, seed) batch is kept under ``checkpoints/commitment/`` once decoded and judged.
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

from tokendyn.core.checkpoint import kept_or_computed, params_key  # noqa: E402
from tokendyn.core.checks import check_range  # noqa: E402

OUT = "runs/07_escapes-commitment.json"
AR, MD = "autoregressive", "masked diffusion"
VARIANTS = {"committed": "token", "ablated": "expected"}


class Models:
    """The generators and judges, loaded once."""

    def __init__(self, args):
        from tokendyn import models

        self.ar = models.load_ar()
        self.md = models.load_mlm(args.md_model)
        self.ar_judge = models.load_mlm(args.ar_judge)


def judged(m: Models, name: str, texts: list[str], max_len: int) -> dict:
    """One judge's per-text summed negative log-likelihood and scored-token count."""
    from tokendyn.evaluation.generation import judge_nll
    from tokendyn.evaluation.pseudo_ppl import pseudo_log_likelihoods

    if name == "smollm2-135m":
        nll, count = judge_nll(m.ar.model, m.ar.tokenizer, texts, max_len=max_len)
        return {"nll": nll.tolist(), "count": count.tolist()}
    lls = [pseudo_log_likelihoods(m.ar_judge, t, max_len=max_len) for t in texts]
    return {"nll": [float(-x.double().sum()) for x in lls], "count": [int(x.numel()) for x in lls]}


def batch(m: Models, kind: str, variant: str, seed: int, args) -> dict:
    """One seeded batch of one generator and variant: texts, ids, CCI and every judge's scores."""
    from tokendyn.latent.discrete import ar_decode, mask_diffusion_decode
    from tokendyn.evaluation.causal import start_id

    t0 = time.time()
    if kind == AR:
        prompt = torch.full((args.per_seed, 1), start_id(m.ar.tokenizer))
        out = ar_decode(m.ar.model, prompt, args.tokens, seed=seed, tau=args.tau, feedback=VARIANTS[variant],
                        banned=torch.tensor([m.ar.tokenizer.eos_token_id]))
        texts = [m.ar.tokenizer.decode(r) for r in out.tokens]
        judges = {"smollm2-135m": judged(m, "smollm2-135m", texts, args.judge_len),
                  args.ar_judge: judged(m, args.ar_judge, texts, args.judge_len)}
    else:
        out = mask_diffusion_decode(m.md, args.tokens, args.per_seed, args.diffusion_steps, seed=seed, tau=args.tau,
                                    feedback=VARIANTS[variant])
        texts = [m.md.tokenizer.decode(r) for r in out.tokens]
        judges = {"smollm2-135m": judged(m, "smollm2-135m", texts, args.judge_len)}
    print(f"{kind} {variant} seed {seed}: {len(texts)} texts in {time.time() - t0:.0f} s", flush=True)
    return {"texts": texts, "tokens": out.tokens.tolist(), "cci": float(out.cci.value), "precision": out.precision,
            "judges": judges, "seconds": round(time.time() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--md-model", default="minilm-mlm", help="the masked-diffusion generator")
    ap.add_argument("--ar-judge", default="mpnet-base-mlm", help="the masked LM that judges SmolLM2's texts")
    ap.add_argument("--seeds", type=int, default=2, help="seeded batches per generator and variant")
    ap.add_argument("--per-seed", type=int, default=64, help="texts per batch")
    ap.add_argument("--tokens", type=int, default=128, help="new tokens per text")
    ap.add_argument("--diffusion-steps", type=int, default=64)
    ap.add_argument("--tau", type=float, default=1.0)
    ap.add_argument("--judge-len", type=int, default=256, help="tokens a judge reads per text, at most")
    ap.add_argument("--seed", type=int, default=0, help="batch s uses seed + s")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TOKENDYN_THREADS", "1")))
    ap.add_argument("--out", default=OUT, help="under data/")
    args = ap.parse_args(argv)
    check_range("seeds", args.seeds, 1, 1000, integer=True)
    check_range("per_seed", args.per_seed, 2, 4096, integer=True)
    check_range("tokens", args.tokens, 4, 510, integer=True)
    check_range("diffusion_steps", args.diffusion_steps, 1, args.tokens, integer=True)
    check_range("tau", args.tau, 0.0, None, lo_open=True)
    check_range("judge_len", args.judge_len, 8, 512, integer=True)
    check_range("seed", args.seed, 0, None, integer=True)
    check_range("threads", args.threads, 1, 256, integer=True)
    if args.ar_judge == args.md_model:
        raise SystemExit(f"--ar-judge={args.ar_judge!r}: give a judge other than the masked-diffusion generator")
    from tokendyn.core import paths
    from tokendyn.publish import results

    results.check_recordable(paths.data_dir() / args.out)  # before any compute: a dirty tree records nothing
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    params = {k: getattr(args, k) for k in ("md_model", "ar_judge", "seeds", "per_seed", "tokens", "diffusion_steps",
                                           "tau", "judge_len", "seed", "threads")}
    key = params_key(params, ignore=("threads",))

    t0 = time.time()
    m = Models(args)
    gens = {AR: ("smollm2-135m", args.ar_judge), MD: (args.md_model, "smollm2-135m")}
    rows = []
    for kind, (gen, judge) in gens.items():
        for variant in VARIANTS:
            parts = []
            for s in range(args.seeds):
                path = ROOT / "checkpoints" / "commitment" / f"{kind.replace(' ', '_')}-{variant}-{s}-{key}.json"
                part, resumed = kept_or_computed(
                    path, lambda: {**batch(m, kind, variant, args.seed + s, args),
                                   "stamps": {n: results.row_stamp(n) for n in (gen, judge)}},
                    accept=lambda kept: all(results.same_weights(kept["stamps"].get(n, {}), n) for n in (gen, judge)))
                if resumed:
                    print(f"{kind} {variant} seed {args.seed + s}: resumed from {path.relative_to(ROOT)}", flush=True)
                parts.append(part)
            rows.append({"generator": gen, "kind": kind, "variant": variant, "judge": judge,
                         "feedback": VARIANTS[variant], "seeds": [args.seed + s for s in range(args.seeds)],
                         "texts": [t for p in parts for t in p["texts"]],
                         "tokens": [t for p in parts for t in p["tokens"]],
                         "cci": [p["cci"] for p in parts], "precision": parts[0]["precision"],
                         "judges": {j: {k: [x for p in parts for x in p["judges"][j][k]] for k in ("nll", "count")}
                                    for j in parts[0]["judges"]},
                         "seconds": sum(p["seconds"] for p in parts)})
    cmd = (f"TOKENDYN_THREADS={args.threads} nice -n 5 .venv/bin/python scripts/record_commitment.py "
           f"--md-model {args.md_model} --ar-judge {args.ar_judge} --seeds {args.seeds} --per-seed {args.per_seed} "
           f"--tokens {args.tokens} --diffusion-steps {args.diffusion_steps} --tau {args.tau:g} "
           f"--judge-len {args.judge_len} --seed {args.seed}" + (f" --out {args.out}" if args.out != OUT else ""))
    out = results.save_rows(paths.data_dir() / args.out, rows, kind="commitment ablation on long texts", command=cmd,
                            params=params, seed=args.seed, models=["smollm2-135m", args.md_model, args.ar_judge])
    print(json.dumps({"written": str(out), "rows": len(rows), "seconds": round(time.time() - t0)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
