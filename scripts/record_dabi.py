#!/usr/bin/env python
"""Record chapter 6's DABI(s) curves at a size whose intervals carry a conclusion (claim 12).

    TOKENDYN_THREADS=1 nice -n 5 .venv/bin/python scripts/record_dabi.py --tokens 8192

Every shipped decoder (``tokendyn.latent.decoders.shipped_decoders``: the digits and faces
autoencoders, the 16-d word readout, the contextual readout, the minilm-mlm head, SmolLM2's head) is
measured along both kinds of structured direction where it has them: ``residual`` (the flow's own
oracle terminal residual at K = ``--terminal-k``; the two LM heads have no generator of latents)
and ``sharpest`` (the exact nearest-boundary normal of a linear readout, the margin gradient of the
MLM head, the top singular direction of an image decoder's Jacobian). At every norm of ``--norms``
(units of each decoder's latent RMS per coordinate) it records the DABI with its 95% paired
bootstrap interval over latents and, for the text readouts, the argmax flips along the direction and
along one isotropic direction (Wilson intervals): ``tokendyn.latent.decoders.curve_rows``.

The reference norm (``--reference``, default 1 latent RMS per coordinate) is fixed before
measuring, recorded in the params and must be one of ``--norms``. ``--tokens`` token latents per
text decoder (8,192 by default), every held-out digit (180) and face (10).

Writes ``data/runs/06_dabi_cci-curves.json`` (``tokendyn.publish.results.save_rows``: rows, this command,
provenance with the git commit). Resumable: each finished decoder's rows are kept under
``checkpoints/dabi/`` (JSON, named by the decoder and the parameters) and a rerun of the same command
skips it. Each row carries the CPU seconds its decoder took (``cpu_seconds``, building and measuring).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from tokendyn.core.atomic import write_json  # noqa: E402
from tokendyn.core.checks import check_range  # noqa: E402
from tokendyn.latent import decoders  # noqa: E402

OUT = "runs/06_dabi_cci-curves.json"
MODELS = {"digits AE": ("digits", "image-latent"), "faces AE": ("faces", "faces-latent"),
          "16-d word readout": ("word", "text-latent"), "contextual readout": ("context", "context-latent"),
          "minilm-mlm head": ("mlm", "minilm-mlm"), "SmolLM2 head": ("ar", "smollm2-135m")}


def load(key: str):
    """Load one shipped model by its key in :data:`MODELS`."""
    if key in ("digits", "faces"):
        from tokendyn.latent.image import load_faces_latent, load_image_latent
        return load_image_latent() if key == "digits" else load_faces_latent()
    if key == "word":
        from tokendyn.latent.text import load_text_latent
        return load_text_latent()
    if key == "context":
        from tokendyn.latent.contextual import load_context_latent
        return load_context_latent()
    from tokendyn.models import load_ar, load_mlm
    return load_mlm("minilm-mlm") if key == "mlm" else load_ar()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=8192, help="token latents per text decoder")
    ap.add_argument("--digits", type=int, default=180)
    ap.add_argument("--faces", type=int, default=10)
    ap.add_argument("--norms", default="0.03,0.1,0.3,1,3", help="in latent RMS units per coordinate")
    ap.add_argument("--reference", type=float, default=1.0, help="the reference norm, fixed before measuring")
    ap.add_argument("--n-iso", type=int, default=4)
    ap.add_argument("--terminal-k", type=int, default=8)
    ap.add_argument("--n-boot", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=OUT, help="under data/")
    args = ap.parse_args(argv)
    check_range("tokens", args.tokens, 64, 16384, integer=True)
    check_range("digits", args.digits, 2, 180, integer=True)
    check_range("faces", args.faces, 2, 10, integer=True)
    check_range("n_iso", args.n_iso, 1, 64, integer=True)
    check_range("terminal_k", args.terminal_k, 2, 1024, integer=True)
    check_range("seed", args.seed, 0, None, integer=True)
    check_range("threads", args.threads, 1, 256, integer=True)
    norms = [float(s) for s in args.norms.split(",")]
    for s in norms:
        check_range("norms", s, 0.0, None, lo_open=True)
    if args.reference not in norms:
        raise ValueError(f"--reference {args.reference} must be one of --norms {norms}")
    from tokendyn.core import paths
    from tokendyn.publish import results

    results.check_recordable(paths.data_dir() / args.out)  # before any compute: a dirty tree records nothing
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    from tokendyn.evaluation.heldout import heldout_passages

    params = {k: v for k, v in vars(args).items() if k not in ("out", "threads")}
    tag = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:10]
    ckpt = ROOT / "checkpoints" / "dabi"
    ckpt.mkdir(parents=True, exist_ok=True)
    passages = None
    rows, t0 = [], time.time()
    for name, (key, _) in MODELS.items():
        path = ckpt / f"{''.join(c if c.isalnum() else '-' for c in name)}-{tag}.json"
        if path.is_file():
            rows += json.loads(path.read_text())
            print(f"{time.time() - t0:7.0f} s  {name}: kept from {path.name}", flush=True)
            continue
        c0 = time.process_time()
        if key in ("mlm", "ar") and passages is None:
            passages = heldout_passages(332)   # every held-out passage: enough content tokens for 16,384
        dut = decoders.shipped_decoders({key: load(key)}, n_tokens=args.tokens, n_digits=args.digits,
                                        n_faces=args.faces, terminal_k=args.terminal_k, seed=args.seed,
                                        passages=passages or [], names=[name])[name]
        got = decoders.curve_rows(dut, norms, seed=args.seed, n_iso=args.n_iso, n_boot=args.n_boot)
        cpu = time.process_time() - c0
        for r in got:
            r["cpu_seconds"] = round(cpu, 1)
        write_json(path, got, end="")
        rows += got
        print(f"{time.time() - t0:7.0f} s  {name}: {len(dut.z)} latents, {sorted(dut.directions)}, "
              f"{cpu:.0f} CPU s", flush=True)

    cmd = (f"TOKENDYN_THREADS={args.threads} nice -n 5 .venv/bin/python scripts/record_dabi.py --tokens {args.tokens} "
           f"--digits {args.digits} --faces {args.faces} --norms {args.norms} --reference {args.reference:g} "
           f"--n-iso {args.n_iso} --terminal-k {args.terminal_k} --n-boot {args.n_boot} --seed {args.seed}")
    out = results.save_rows(paths.data_dir() / args.out, rows, kind="DABI(s) curves by decoder and direction",
                            command=cmd, params={**params, "threads": args.threads}, seed=args.seed,
                            models=[m for _, m in MODELS.values()])
    cpu_total = sum({r["decoder"]: r["cpu_seconds"] for r in rows}.values())
    print(json.dumps({"written": str(out), "rows": len(rows), "seconds": round(time.time() - t0),
                      "cpu_seconds": round(cpu_total)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
