"""Where chapters run: one switch for the whole book.

Chapters run on the CPU in fp32 by default (what CI runs). ``TOKENDYN_DEVICE=cuda`` (or ``auto``:
CUDA when present) moves every model the registry loads, and the chains a chapter starts, to the
GPU; ``TOKENDYN_DTYPE=bf16`` runs the models in bfloat16 there (categorical draws stay float32 or
better: see :mod:`tokendyn.glauber`). So a researcher reruns any chapter at GPU scale with

    TOKENDYN_DEVICE=cuda papermill book/03_phase_transition.ipynb out.ipynb -p n_chains 4096
"""

from __future__ import annotations

import os

import torch

from .checks import check_choice

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def default_device() -> torch.device:
    """``TOKENDYN_DEVICE``: ``cpu`` (default), ``cuda``, ``cuda:N`` or ``auto``."""
    want = os.environ.get("TOKENDYN_DEVICE", "cpu").strip() or "cpu"
    if want == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(want)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"TOKENDYN_DEVICE={want!r} but CUDA is not available here: use cpu or auto")
    return dev


def default_dtype(device: torch.device | None = None) -> torch.dtype:
    """``TOKENDYN_DTYPE`` (fp32, bf16, fp16) for models on CUDA; always fp32 on the CPU."""
    device = device or default_device()
    if device.type != "cuda":
        return torch.float32
    name = os.environ.get("TOKENDYN_DTYPE", "fp32")
    check_choice("TOKENDYN_DTYPE", name, DTYPES)
    return DTYPES[name]
