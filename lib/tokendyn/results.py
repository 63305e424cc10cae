"""The results convention: each chapter writes its key numbers to ``<results_dir>/<chapter>.json``.

A record carries the numbers and everything needed to remake them: parameters, seed, model names,
library and torch versions, device, and the time it was written.
"""

from __future__ import annotations

import json
import math
import platform
import time
from pathlib import Path
from typing import Any

import torch

from . import __version__
from .paths import results_dir


def _plain(x: Any) -> Any:
    """Turn tensors, numpy scalars and paths into JSON-safe values (NaN/inf become strings)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().tolist()
    if hasattr(x, "tolist") and not isinstance(x, (list, tuple, dict, str)):
        x = x.tolist()
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, Path):
        return str(x)
    return x


def provenance(params: dict[str, Any], seed: int | None, models: list[str]) -> dict[str, Any]:
    """The block that says what made a result: parameters, seed, models and versions."""
    return {
        "params": _plain(params),
        "seed": seed,
        "models": list(models),
        "tokendyn_version": __version__,
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def save(chapter: str, metrics: dict[str, Any], *, params: dict[str, Any], seed: int | None,
         models: list[str], out_dir: str | Path | None = None) -> Path:
    """Write ``{"chapter", "metrics", "provenance"}`` to ``<out_dir>/<chapter>.json``; return the path."""
    out = Path(out_dir) if out_dir is not None else results_dir()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{chapter}.json"
    record = {"chapter": chapter, "metrics": _plain(metrics),
              "provenance": provenance(params, seed, models)}
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


def load(chapter: str, out_dir: str | Path | None = None) -> dict[str, Any]:
    """Read back a chapter's record written by :func:`save`."""
    out = Path(out_dir) if out_dir is not None else results_dir()
    return json.loads((out / f"{chapter}.json").read_text())
