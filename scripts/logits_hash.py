"""Print the SHA-256 of a shipped MLM's site logits on real passages, under this process's float order.

Run by ``scripts/float_orders.py`` once per setting (environment variables such as
``ATEN_CPU_CAPABILITY``, ``MKL_CBWR`` or ``TOKENDYN_THREADS``), to show that the setting changes the
bits the chapters' chains are drawn from before its notebooks are checked under it. One JSON line:
``{"model", "logits_sha256", "threads", "cpu_capability", "mkl_cbwr", "first_logit"}``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os

import torch

from tokendyn.publish import book
from tokendyn.analysis import experiments


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm-mlm", help="a shipped MLM (tokendyn.models.available())")
    ap.add_argument("--n", type=int, default=32, help="tokens a passage (default 32)")
    ap.add_argument("--chains", type=int, default=16, help="passages, one site each (default 16)")
    args = ap.parse_args()
    setup = book.setup("hash")  # TOKENDYN_THREADS, as a chapter would
    loaded, cond = book.load_mlms([args.model])[args.model]
    x = experiments.start_states(loaded, args.n, args.chains, topics=("health", "sports"), seed=0)
    with torch.no_grad():
        logits = cond.site_logits(x, torch.arange(args.chains) % args.n)
    digest = hashlib.sha256(logits.detach().float().contiguous().numpy().tobytes()).hexdigest()
    print(json.dumps({"model": args.model, "logits_sha256": digest, "threads": setup.threads,
                      "torch_threads": torch.get_num_threads(),
                      "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                      "mkl_cbwr": os.environ.get("MKL_CBWR"), "first_logit": float(logits[0, 1000])}))


if __name__ == "__main__":
    main()
