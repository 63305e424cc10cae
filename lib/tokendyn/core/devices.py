"""Where chapters run: one switch for the whole book.

Chapters run on CUDA when it is present and on the CPU otherwise (what CI runs), in fp32.
``TOKENDYN_DEVICE`` (``cpu``, ``cuda``, ``cuda:N``, ``auto``) overrides the choice for every model
the registry loads and the chains a chapter starts. ``TOKENDYN_DTYPE=bf16`` runs the models in
bfloat16, on the GPU or the CPU; logits come back as float32 and categorical draws add them up in float64 (see
:mod:`tokendyn.mcmc.glauber`). The chapters' CPU defaults stay fp32: the Performance appendix measures
what bf16 changes. So a researcher reruns any chapter at GPU scale with

    TOKENDYN_DEVICE=cuda TOKENDYN_DTYPE=bf16 papermill book/03_phase_transition.ipynb out.ipynb -p n_pairs 256
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from .checks import check_choice

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def default_device() -> torch.device:
    """``TOKENDYN_DEVICE``: ``auto`` (default: CUDA when present), ``cpu``, ``cuda`` or ``cuda:N``."""
    want = os.environ.get("TOKENDYN_DEVICE", "auto").strip() or "auto"
    if want == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(want)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"TOKENDYN_DEVICE={want!r} but CUDA is not available here: use cpu or auto")
    return dev


def default_dtype(device: torch.device | None = None) -> torch.dtype:
    """``TOKENDYN_DTYPE`` for the models: fp32 (default), bf16 anywhere, fp16 on CUDA only.

    bf16 runs the model's matmuls in bfloat16 (on the CPU too: AVX-512 BF16 about doubles the
    step rate); logits are cast back to float32 and categorical draws add them up in float64.
    """
    device = device or default_device()
    name = os.environ.get("TOKENDYN_DTYPE", "fp32").strip() or "fp32"
    allowed = DTYPES if device.type == "cuda" else {k: v for k, v in DTYPES.items() if k != "fp16"}
    check_choice("TOKENDYN_DTYPE", name, allowed)
    return DTYPES[name]


def cpu_bf16(size: int = 512) -> dict[str, Any]:
    """Does this CPU run bf16 matmuls natively? Its flags, and a quick probe of both matmul rates.

    Without AVX-512 BF16 or AMX the bf16 kernels fall back to converting every element, which is
    far slower than fp32: a bf16 chain would then be a regression, not a speed-up.
    """
    flags: set[str] = set()
    try:
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("flags"):
                flags = set(ln.split(":", 1)[1].split())
                break
    except OSError:
        pass
    rates = {}
    for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        g = torch.Generator().manual_seed(0)
        a = torch.randn(size, size, generator=g).to(dt)
        b = torch.randn(size, size, generator=g).to(dt)
        torch.matmul(a, b)
        reps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 0.5:
            torch.matmul(a, b)
            reps += 1
        rates[name] = 2.0 * size ** 3 * reps / (time.perf_counter() - t0) / 1e9
    native = sorted(f for f in flags if f in ("avx512_bf16", "amx_bf16", "avx_ne_convert"))
    return {"native_flags": native, "avx512f": "avx512f" in flags, "avx2": "avx2" in flags,
            "probe_matmul_size": size, "probe_gflops": rates,
            "native": bool(native) and rates["bf16"] > 1.2 * rates["fp32"]}
