"""Checkpoint and resume for long runs: tensors as safetensors, everything else as JSON.

Writes are atomic (write a temporary file in the same folder, then ``os.replace``), so a run killed
mid-write leaves the previous checkpoint intact, never a half-written one.

The usual pattern splits a long run into cells (one per model, tau and n, say) and lets
:class:`Store` compute each cell once::

    store = Store("checkpoints/ch03")            # None: no files, compute every time
    out = store.get_or_compute("coupling", params, lambda: {"T": times, "censored": cens})

A cell's file name carries a fingerprint of its parameters, so changing a parameter can never
resume from a stale cell.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

__all__ = ["save_tensors", "load_tensors", "save_json", "load_json", "fingerprint", "Store"]

_META_KEY = "tokendyn_meta"


def _atomic_write(path: Path, write: Callable[[Path], None]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a checkpoint is an ordinary readable file
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def save_tensors(path: str | Path, tensors: Mapping[str, torch.Tensor],
                 meta: Mapping[str, Any] | None = None) -> Path:
    """Atomically write ``tensors`` (name -> tensor of any shape) and JSON ``meta`` to safetensors."""
    for k, v in tensors.items():
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"tensor {k!r} is a {type(v).__name__}, not a torch.Tensor")
    flat = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    md = {_META_KEY: json.dumps(dict(meta or {}), sort_keys=True)}
    return _atomic_write(Path(path), lambda p: save_file(flat, str(p), metadata=md))


def load_tensors(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read back ``(tensors, meta)`` written by :func:`save_tensors` (CPU tensors)."""
    from safetensors import safe_open

    path = Path(path)
    with safe_open(str(path), framework="pt") as f:
        md = f.metadata() or {}
    return load_file(str(path)), json.loads(md.get(_META_KEY, "{}"))


def save_json(path: str | Path, obj: Any) -> Path:
    """Atomically write a JSON document (sorted keys, indented)."""
    text = json.dumps(obj, indent=2, sort_keys=True) + "\n"
    return _atomic_write(Path(path), lambda p: p.write_text(text))


def load_json(path: str | Path) -> Any:
    """Read a JSON document."""
    return json.loads(Path(path).read_text())


def fingerprint(params: Mapping[str, Any]) -> str:
    """A 12-hex-digit hash of the parameters' canonical JSON (keys sorted; tuples as lists)."""
    canon = json.dumps(params, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:12]


class Store:
    """A folder of checkpointed cells, each keyed by a name and its parameters.

    ``folder=None`` turns checkpointing off (every call computes), so library code can take a
    store unconditionally.
    """

    def __init__(self, folder: str | Path | None):
        self.folder = Path(folder) if folder is not None else None

    def path(self, key: str, params: Mapping[str, Any]) -> Path | None:
        """Where the cell ``key`` with these ``params`` lives (``None`` when off)."""
        if self.folder is None:
            return None
        if not key or "/" in key or key.startswith("."):
            raise ValueError(f"key={key!r} must be a plain, non-empty file-name stem")
        return self.folder / f"{key}-{fingerprint(params)}.safetensors"

    def has(self, key: str, params: Mapping[str, Any]) -> bool:
        """True when the cell was computed and saved before."""
        p = self.path(key, params)
        return p is not None and p.is_file()

    def get_or_compute(self, key: str, params: Mapping[str, Any],
                       compute: Callable[[], Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """Load the cell if it was saved; otherwise call ``compute()``, save its tensors, return them."""
        p = self.path(key, params)
        if p is not None and p.is_file():
            tensors, _ = load_tensors(p)
            return tensors
        out = dict(compute())
        if p is not None:
            save_tensors(p, out, {"key": key, "params": dict(params)})
        return out
