"""How the Glauber step runs on this machine, chosen by measurement: the attention implementation
(eager or SDPA), compiled or not, and the rows per forward pass (``chunk``).

Which is fastest depends on the CPU, the dtype and the model (in bf16, SDPA beat eager on an AMX
Xeon and lost to it on an AVX-512 BF16 EPYC), so no fixed rule holds. :func:`settings_for` times
a few steps of each candidate on a model's first use (:func:`calibrate`), keeps the fastest and
caches it per CPU model (or GPU), torch version, thread count, model and dtype in
``$TOKENDYN_CACHE/step-settings.json`` (default ``~/.cache/tokendyn``), so later processes reuse
it without timing. ``TOKENDYN_STEP`` overrides:

- ``TOKENDYN_STEP=attn=sdpa,chunk=128,compile=0``: fixed settings (omitted keys are measured);
- ``TOKENDYN_STEP=model``: the model as loaded, no calibration;
- ``TOKENDYN_STEP=recalibrate``: measure again and replace the cached choice;
- ``compile=auto`` among the keys also times compiled candidates. They are left out by default:
  every new input shape recompiles (5-20 s on 2 cores) and chapters change shapes often, so at
  their CPU defaults the compile time is not won back (``make bench`` times both).

Determinism: the settings change the logits' float rounding, so the cache is what keeps one
machine's seeded chains the same from run to run; every chapter records the settings it ran
with (:func:`tokendyn.mcmc.conditional.settings_chosen`, in its results' provenance), and
``TOKENDYN_STEP`` pins them elsewhere.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..core.atomic import MissingRecordError, RecordError, read_record, write_json
from ..core.checks import check_choice, check_range
from . import glauber
from .conditional import MLMConditional, record_settings

__all__ = ["StepSettings", "ATTNS", "CHUNKS", "machine_key", "parse_override", "calibrate",
           "settings_for", "conditional", "cache_path"]

ATTNS = ("eager", "sdpa")
CHUNKS = (32, 64)
"""Chunk candidates at the calibration batch of 64: one pass of 64 rows or two of 32."""
CACHE_KIND = "step-settings"


@dataclass(frozen=True)
class StepSettings:
    """How a model's step runs: ``attn`` (``"eager"``/``"sdpa"``), ``compile``, ``chunk`` rows per
    forward pass; ``source`` says where they came from (``measured``, ``cached``, ``env``, ``model``)
    and ``rates`` the chain-steps/s each candidate ran at when measured (``"attn/chunk/compiled"``)."""

    attn: str
    compile: bool
    chunk: int
    source: str
    rates: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cache_path() -> Path:
    """``$TOKENDYN_CACHE/step-settings.json`` (default ``~/.cache/tokendyn``)."""
    base = os.environ.get("TOKENDYN_CACHE") or str(Path.home() / ".cache" / "tokendyn")
    return Path(base) / "step-settings.json"


def machine_key(model_name: str, dtype: torch.dtype, device: torch.device) -> str:
    """The cache key: processor (or GPU) model, torch version, threads, model and dtype."""
    if device.type == "cuda":
        proc = torch.cuda.get_device_name(device)
    else:
        proc = platform.processor() or platform.machine()
        try:
            proc = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
        except (OSError, StopIteration):
            pass
    return (f"{proc} | torch {torch.__version__} | threads {torch.get_num_threads()} | {model_name} | "
            f"{str(dtype).removeprefix('torch.')}")


def parse_override(text: str) -> dict[str, Any]:
    """``TOKENDYN_STEP``'s ``key=value`` list -> ``{"attn", "chunk", "compile"}`` (a subset);
    ``compile`` may be ``"auto"``. Raises ``ValueError`` naming the bad key or value."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            raise ValueError(f"TOKENDYN_STEP: {part!r} is not key=value (keys: attn, chunk, compile), "
                             "nor one of 'model', 'recalibrate'")
        if key == "attn":
            check_choice("TOKENDYN_STEP attn", value, ATTNS)
            out["attn"] = value
        elif key == "chunk":
            if not value.isdigit():
                raise ValueError(f"TOKENDYN_STEP chunk must be an integer >= 1, got {value!r}")
            check_range("TOKENDYN_STEP chunk", int(value), 1, integer=True)
            out["chunk"] = int(value)
        elif key == "compile":
            check_choice("TOKENDYN_STEP compile", value, ("0", "1", "auto"))
            out["compile"] = "auto" if value == "auto" else value == "1"
        else:
            raise ValueError(f"TOKENDYN_STEP: unknown key {key!r} (keys: attn, chunk, compile)")
    return out


def _attn(model: Any) -> str:
    return str(getattr(model.config, "_attn_implementation", None) or "eager")


def _supported_attns(model: Any) -> list[str]:
    """The attention implementations this model can switch to (MPNet has eager only)."""
    current, ok = _attn(model), []
    for a in ATTNS:
        try:
            model.set_attn_implementation(a)
        except (ValueError, ImportError, AttributeError, NotImplementedError):
            continue
        if _attn(model) == a:  # MPNet only warns and stays eager when asked for sdpa
            ok.append(a)
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(current)
    return ok or [current]


def calibrate(loaded: Any, *, batch: int = 64, n: int = 32, compile: bool = False, rounds: int = 2,
              seed: int = 0) -> StepSettings:
    """Time ``rounds`` Glauber steps (after one warm-up) of every candidate on random support
    tokens ``[batch, n]``, candidates interleaved within each round -> the fastest
    (``source="measured"``, every candidate's median chain-steps/s in ``rates``). Leaves the
    model with its attention implementation as it was."""
    check_range("batch", batch, 1, integer=True)
    check_range("n", n, 2, integer=True)
    check_range("rounds", rounds, 1, integer=True)
    model = loaded.model
    before = _attn(model)
    chunks = sorted({min(c, batch) for c in CHUNKS})
    cands = [(a, c, comp) for a in _supported_attns(model) for c in chunks
             for comp in ((False, True) if compile else (False,))]
    probe = MLMConditional(loaded)
    n = min(n, probe.max_sites or n)
    g = torch.Generator().manual_seed(seed)
    support = (~probe.unsupported).nonzero().flatten()
    x0 = support[torch.randint(len(support), (batch, n), generator=g)].to(probe.device)
    conds = {(a, c, comp): MLMConditional(loaded, chunk=c, compile=comp) for a, c, comp in cands}
    rates: dict[tuple, list[float]] = {k: [] for k in cands}
    for r in range(rounds + 1):
        for key, cond in conds.items():
            if hasattr(model, "set_attn_implementation"):
                model.set_attn_implementation(key[0])
            gen = torch.Generator(device=probe.device).manual_seed(seed + 1)
            t0 = time.perf_counter()
            glauber.step(cond, glauber.init(x0), gen, tau=1.0, check=False)
            if probe.device.type == "cuda":
                torch.cuda.synchronize()
            if r:  # round 0 warms up (and compiles)
                rates[key].append(batch / (time.perf_counter() - t0))
    med = {k: statistics.median(v) for k, v in rates.items()}
    best = max(med, key=med.__getitem__)
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(before)
    return StepSettings(attn=best[0], chunk=best[1], compile=best[2], source="measured",
                        rates={f"{a}/{c}/{'compiled' if comp else 'eager-mode'}": round(v, 2)
                               for (a, c, comp), v in med.items()})


def _read_cache() -> dict[str, Any]:
    try:
        return read_record(cache_path(), kind=CACHE_KIND, keys=("entries",))["entries"]
    except MissingRecordError:
        return {}
    except RecordError as e:  # damaged: say which file, then measure again and rewrite it
        warnings.warn(f"{e} (the step-settings cache: measuring again)", stacklevel=3)
        return {}


def settings_for(loaded: Any) -> StepSettings:
    """The step settings of ``loaded`` (a :class:`~tokendyn.models.LoadedMLM`) on this machine:
    ``TOKENDYN_STEP``'s, else the cached measurement, else a new :func:`calibrate` (cached)."""
    model = loaded.model
    env = os.environ.get("TOKENDYN_STEP", "").strip()
    if env == "model":
        return StepSettings(attn=_attn(model), compile=False, chunk=256, source="model")
    fixed = parse_override(env) if env not in ("", "recalibrate") else {}
    if {"attn", "chunk"} <= fixed.keys() and fixed.get("compile", False) != "auto":
        return StepSettings(attn=fixed["attn"], chunk=fixed["chunk"], compile=bool(fixed.get("compile", False)),
                            source="env")
    param = next(model.parameters())
    key = machine_key(getattr(loaded, "name", type(model).__name__), param.dtype, param.device)
    entries = _read_cache()
    if env != "recalibrate" and key in entries and not fixed:
        e = entries[key]
        return StepSettings(attn=e["attn"], compile=e["compile"], chunk=e["chunk"], source="cached",
                            rates=e.get("rates", {}))
    s = calibrate(loaded, compile=fixed.get("compile") == "auto")
    s = StepSettings(**{**s.to_dict(), **{k: v for k, v in fixed.items() if k != "compile" or v != "auto"}})
    if not fixed:
        entries = {**_read_cache(), key: {k: v for k, v in s.to_dict().items() if k != "source"}}
        write_json(cache_path(), {"kind": CACHE_KIND, "entries": entries}, indent=1, sort_keys=True)
    return s


def conditional(loaded: Any, *, wrap: str = "special") -> Any:
    """An :class:`~tokendyn.mcmc.conditional.MLMConditional` over ``loaded`` run with
    :func:`settings_for`'s settings (the model's attention implementation is switched in place),
    recorded for :func:`tokendyn.mcmc.conditional.settings_chosen`."""
    s = settings_for(loaded)
    model = loaded.model
    if _attn(model) != s.attn and hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(s.attn)
    cond = MLMConditional(loaded, wrap=wrap, chunk=s.chunk, compile=s.compile)
    record_settings(cond.name, {**s.to_dict(), "last_layer": cond.last_layer})
    return cond
