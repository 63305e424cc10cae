"""Checkpoint and resume for long runs: tensors as safetensors, everything else as JSON.

Writes are atomic (:mod:`tokendyn.core.atomic`: a temporary file in the same folder, flushed to disk,
then ``os.replace``), so a run killed mid-write leaves the previous checkpoint intact, never a
half-written one.

The usual pattern splits a long run into cells (one per model, tau and n, say) and lets
:class:`Store` compute each cell once::

    store = Store("checkpoints/ch03")            # None: no files, compute every time
    out = store.get_or_compute("coupling", params, lambda: {"T": times, "censored": cens},
                               model=model)

A cache must never hand back a number that the computation would not have produced:

- A cell's file name carries a fingerprint of its parameters and, when ``model=`` is given, of
  the model (:func:`model_fingerprint`: its configuration, a hash of its weights, its dtype and
  the library version), so changing a parameter, switching models or retraining weights under
  the same name can never resume from a stale cell.
- Every file carries a SHA-256 checksum of its tensors and metadata, and the full parameters and
  model fingerprint it was written for. :class:`Store` verifies all three on load. A file that
  fails (a flipped byte, a truncated copy, another model's cell) raises
  :class:`CheckpointError` naming the file and how to recompute it, or, with
  ``Store(folder, on_mismatch="recompute")``, is renamed to ``<name>.rejected`` and recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as _load_bytes
from safetensors.torch import save_file

from .atomic import read_record, write_atomic, write_json
from .checks import check_choice

__all__ = ["save_tensors", "load_tensors", "save_json", "load_json", "kept_or_computed", "params_key",
           "fingerprint", "model_fingerprint", "CheckpointError", "Store"]

_META_KEY = "tokendyn_meta"
_SUM_KEY = "tokendyn_sha256"
ON_MISMATCH = ("raise", "recompute")


class CheckpointError(ValueError):
    """A checkpoint that cannot be trusted: unreadable, failing its checksum, or written for other
    parameters or another model. The message names the file and how to recompute it."""


def _tensor_bytes(t: torch.Tensor) -> memoryview:
    """The raw bytes of a CPU tensor of any dtype (bf16 and bool included)."""
    flat = t.detach().cpu().contiguous().reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else memoryview(b"")


def _digest(tensors: Mapping[str, torch.Tensor], meta_json: str) -> str:
    """SHA-256 over the metadata JSON and every tensor's name, dtype, shape and bytes."""
    h = hashlib.sha256(meta_json.encode())
    for k in sorted(tensors):
        t = tensors[k]
        h.update(json.dumps([k, str(t.dtype), list(t.shape)]).encode())
        h.update(_tensor_bytes(t))
    return h.hexdigest()


def save_tensors(path: str | Path, tensors: Mapping[str, torch.Tensor],
                 meta: Mapping[str, Any] | None = None) -> Path:
    """Atomically write ``tensors`` (name -> tensor of any shape) and JSON ``meta`` to safetensors,
    with a SHA-256 checksum of both that :func:`load_tensors` verifies."""
    for k, v in tensors.items():
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"tensor {k!r} is a {type(v).__name__}, not a torch.Tensor")
    flat = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    meta_json = json.dumps(dict(meta or {}), sort_keys=True, default=_canon_default)
    md = {_META_KEY: meta_json, _SUM_KEY: _digest(flat, meta_json)}
    return write_atomic(path, lambda p: save_file(flat, str(p), metadata=md))


def _remedy(path: Path) -> str:
    return (f"Delete it to recompute it (rm '{path}'), or open the store with "
            "Store(folder, on_mismatch='recompute') to set such files aside and recompute them.")


def load_tensors(path: str | Path, *, require_checksum: bool = False
                 ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read back ``(tensors, meta)`` written by :func:`save_tensors` (CPU tensors).

    Verifies the checksum. Raises :class:`CheckpointError`, naming the file, when the file is not
    a readable safetensors file or fails its checksum; a file written before checksums existed
    loads unverified unless ``require_checksum``.
    """
    path = Path(path)
    raw = path.read_bytes()  # FileNotFoundError passes through: a missing file is not a corrupt one
    try:
        n = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + n])
        md = header.get("__metadata__") or {}
        tensors = _load_bytes(raw)
        meta_json = md.get(_META_KEY, "{}")
        meta = json.loads(meta_json)
    except Exception as e:  # safetensors, JSON and struct errors all mean the same: unreadable
        raise CheckpointError(f"checkpoint {path} is not a readable safetensors file "
                              f"({type(e).__name__}: {str(e)[:200]}). {_remedy(path)}") from None
    stored = md.get(_SUM_KEY)
    if stored is None:
        if require_checksum:
            raise CheckpointError(f"checkpoint {path} has no checksum (written by an older "
                                  f"tokendyn), so it cannot be verified. {_remedy(path)}")
    elif _digest(tensors, meta_json) != stored:
        raise CheckpointError(f"checkpoint {path} failed its checksum: its bytes changed after it "
                              f"was written (disk or copy corruption). {_remedy(path)}")
    return tensors, meta


def save_json(path: str | Path, obj: Any) -> Path:
    """Atomically write a JSON document (sorted keys, indented)."""
    return write_json(path, obj, indent=2, sort_keys=True)


def load_json(path: str | Path) -> dict[str, Any]:
    """Read a JSON object (:func:`tokendyn.core.atomic.read_record`: a missing, damaged or non-object
    file raises :class:`~tokendyn.core.atomic.RecordError` naming it and saying to delete it to
    recompute it)."""
    return read_record(path, remake=f"delete it (rm '{path}') and rerun: what it kept is recomputed")


def kept_or_computed(path: str | Path, compute: Callable[[], Any], *,
                     accept: Callable[[Any], bool] | None = None) -> tuple[Any, bool]:
    """One unit of a resumable recorded run (a model's row): the JSON kept at ``path`` when it is
    there and ``accept`` takes it, else ``compute()``, written atomically before it is returned,
    so a killed run loses only the unit it was in. Returns ``(value, resumed)``."""
    path = Path(path)
    if path.is_file():
        kept = load_json(path)
        if accept is None or accept(kept):
            return kept, True
    value = compute()
    write_json(path, value, end="")
    return value, False


def params_key(params: Mapping[str, Any], *, ignore: tuple[str, ...] = ()) -> str:
    """12 hex digits naming a run's parameters (less ``ignore``): units kept under another key
    belong to another run and are never resumed into this one."""
    kept = {k: v for k, v in params.items() if k not in ignore}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:12]


def _canon_default(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return {"tensor": x.detach().cpu().tolist(), "dtype": str(x.dtype)}
    if hasattr(x, "tolist"):  # numpy arrays and scalars: every element, never a truncated repr
        return x.tolist()
    if isinstance(x, (set, frozenset)):
        return sorted(x, key=repr)
    return str(x)


def _canon(params: Any) -> str:
    return json.dumps(params, sort_keys=True, default=_canon_default, separators=(",", ":"))


def fingerprint(params: Mapping[str, Any]) -> str:
    """A 12-hex-digit hash of the parameters' canonical JSON (keys sorted; tuples as lists;
    tensors and arrays by every element, never by a truncated ``repr``)."""
    return hashlib.sha256(_canon(params).encode()).hexdigest()[:12]


def _weights_hash(module: torch.nn.Module) -> str:
    """SHA-256 of every parameter and buffer (name, dtype, shape, bytes), 16 hex digits.

    Recomputed on every call (about 0.1 s per 100 MB): a cache keyed on version counters would
    miss weights edited through ``.data``, and a stale weight hash is exactly the lie to avoid.
    """
    h = hashlib.sha256()
    for k, v in sorted(module.state_dict().items()):
        h.update(json.dumps([k, str(v.dtype), list(v.shape)]).encode())
        h.update(_tensor_bytes(v))
    return h.hexdigest()[:16]


def _config_hash(cfg: Any) -> str | None:
    to_dict = getattr(cfg, "to_dict", None)
    if not callable(to_dict):
        return None
    d = dict(to_dict())
    d.pop("_name_or_path", None)  # where it was loaded from, not what it is
    return hashlib.sha256(_canon(d).encode()).hexdigest()[:16]


def model_fingerprint(model: Any) -> dict[str, Any]:
    """What identifies a model's conditionals, for checkpoint keys.

    A dict with the model's class, ``config`` (a hash of a transformers configuration, its load
    path left out), ``weights`` (SHA-256 of every parameter and buffer: retrained weights under
    the same name differ here), ``dtype``, ``tokendyn`` (the library version) and ``attributes``
    (a hash of the adapter's own settings and tensors: the wrapping scheme, special ids, support
    mask, or a toy model's fields and couplings). A model may define ``fingerprint()`` returning
    a JSON-able dict to replace all of this. ``model`` is a
    :class:`~tokendyn.mcmc.conditional.ConditionalModel`, a ``torch.nn.Module`` or a loaded model with
    a ``.model`` module.
    """
    from .. import __version__

    custom = getattr(model, "fingerprint", None)
    if callable(custom):
        return {"custom": custom(), "tokendyn": __version__}
    ident: dict[str, Any] = {"class": f"{type(model).__module__}.{type(model).__qualname__}",
                             "tokendyn": __version__}
    module = model if isinstance(model, torch.nn.Module) else getattr(model, "model", None)
    if isinstance(module, torch.nn.Module):
        ident["module"] = type(module).__name__
        ident["config"] = _config_hash(getattr(module, "config", None))
        ident["weights"] = _weights_hash(module)
        floats = [p.dtype for p in module.parameters() if p.is_floating_point()]
        ident["dtype"] = str(floats[0]) if floats else None
    if not isinstance(model, torch.nn.Module):
        h = hashlib.sha256()
        dtypes = set()
        for name in sorted(vars(model)):
            v = vars(model)[name]
            if (name.startswith("_") or name == "name" or isinstance(v, torch.nn.Module)
                    or v is module):  # a display name is a label: the weights say what it is
                continue
            if isinstance(v, torch.Tensor):
                dtypes.add(str(v.dtype))
                h.update(json.dumps([name, str(v.dtype), list(v.shape)]).encode())
                h.update(_tensor_bytes(v))
            elif v is None or isinstance(v, (bool, int, float, str)):
                h.update(json.dumps([name, v]).encode())
            elif isinstance(v, (list, tuple)) and all(isinstance(e, (bool, int, float, str)) for e in v):
                h.update(json.dumps([name, list(v)]).encode())
        ident["attributes"] = h.hexdigest()[:16]
        if "dtype" not in ident:
            ident["dtype"] = ",".join(sorted(dtypes)) or None
    return ident


class Store:
    """A folder of checkpointed cells, each keyed by a name, its parameters and its model.

    ``folder=None`` turns checkpointing off (every call computes), so library code can take a
    store unconditionally. ``on_mismatch`` says what happens to a file that fails verification
    (unreadable, checksum, parameters or model differ): ``"raise"`` (default) raises
    :class:`CheckpointError` naming the file; ``"recompute"`` renames it to ``<name>.rejected``
    and computes the cell again.
    """

    def __init__(self, folder: str | Path | None, *, on_mismatch: str = "raise"):
        check_choice("on_mismatch", on_mismatch, ON_MISMATCH)
        self.folder = Path(folder) if folder is not None else None
        self.on_mismatch = on_mismatch

    def _identity(self, params: Mapping[str, Any], model: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
        if not isinstance(params, Mapping):
            raise TypeError(f"params must be a mapping, got {type(params).__name__}")
        fp = model_fingerprint(model) if model is not None and self.folder is not None else None
        return dict(params), fp

    def _path(self, key: str, params: dict[str, Any], ident: dict[str, Any] | None) -> Path | None:
        if not isinstance(key, str) or not key or "/" in key or "\\" in key or key.startswith("."):
            raise ValueError(f"key={key!r} must be a plain, non-empty file-name stem")
        if self.folder is None:
            return None
        fp = fingerprint(params) if ident is None else fingerprint({"params": params, "model": ident})
        return self.folder / f"{key}-{fp}.safetensors"

    def path(self, key: str, params: Mapping[str, Any], model: Any = None) -> Path | None:
        """Where the cell ``key`` with these ``params`` (and ``model``) lives (``None`` when off)."""
        return self._path(key, *self._identity(params, model))

    def has(self, key: str, params: Mapping[str, Any], model: Any = None) -> bool:
        """True when the cell was computed and saved before (not verified: see :meth:`load`)."""
        p = self.path(key, params, model)
        return p is not None and p.is_file()

    def _reject(self, path: Path, why: str) -> None:
        if self.on_mismatch == "raise":
            raise CheckpointError(f"{why} {_remedy(path)}")
        aside = path.with_name(path.name + ".rejected")
        k = 1
        while aside.exists():
            aside = path.with_name(f"{path.name}.rejected-{k}")
            k += 1
        os.replace(path, aside)

    def _verified(self, path: Path, key: str, params: dict[str, Any],
                  ident: dict[str, Any] | None) -> dict[str, torch.Tensor] | None:
        """The cell's tensors if the file passes every check; ``None`` if it was set aside."""
        try:
            tensors, meta = load_tensors(path, require_checksum=True)
        except CheckpointError as e:
            if self.on_mismatch == "raise":
                raise
            self._reject(path, str(e))
            return None
        why = None
        if meta.get("key") != key:
            why = f"was written for key {meta.get('key')!r}, not {key!r}"
        elif _canon(meta.get("params")) != _canon(params):
            why = "was written for other parameters (a fingerprint collision or a renamed file)"
        elif meta.get("model") != ident:
            why = (f"was written for another model: stored {meta.get('model')}, "
                   f"this one is {ident}")
        if why is not None:
            self._reject(path, f"checkpoint {path} {why}.")
            return None
        return tensors

    def load(self, key: str, params: Mapping[str, Any], model: Any = None) -> dict[str, torch.Tensor] | None:
        """The verified cell, or ``None`` if it was never saved (or was set aside)."""
        params, ident = self._identity(params, model)
        p = self._path(key, params, ident)
        if p is None or not p.is_file():
            return None
        return self._verified(p, key, params, ident)

    def get_or_compute(self, key: str, params: Mapping[str, Any],
                       compute: Callable[[], Mapping[str, torch.Tensor]], *,
                       model: Any = None) -> dict[str, torch.Tensor]:
        """Load the cell if it was saved and verifies; otherwise call ``compute()``, save its
        tensors, return them. ``model``: the model the cell was computed with (fingerprinted with
        :func:`model_fingerprint`, so another model or changed weights never share a cell)."""
        params, ident = self._identity(params, model)
        p = self._path(key, params, ident)
        if p is not None and p.is_file():
            got = self._verified(p, key, params, ident)
            if got is not None:
                return got
        out = dict(compute())
        if p is not None:
            save_tensors(p, out, {"key": key, "params": params, "model": ident})
        return out
