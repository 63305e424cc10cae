"""The command-line scripts in ``scripts/`` (and ``benchmarks/``) under test: imported as modules
(:func:`load_script`, to monkeypatch their heavy parts) or run as subprocesses, several at once
(:func:`run_scripts`, tests of their checks)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def load_script(path: str) -> ModuleType:
    """Import the script at ``path`` (relative to the checkout, e.g. ``scripts/record_traps.py``) as
    a fresh module named after its file, so a test can replace its functions before ``main``."""
    file = ROOT / path
    spec = importlib.util.spec_from_file_location(file.stem, file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_scripts(calls: list[tuple[str, list[str]]],
                timeout: float = 300) -> list[subprocess.CompletedProcess]:
    """Run ``scripts/<name> <args>`` for each ``(name, args)`` in parallel; return their results in
    order (stdout and stderr as text). Each pays for importing torch once, so they share the wait."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENDYN_PROGRESS": "0"}
    procs = [subprocess.Popen([sys.executable, str(ROOT / "scripts" / name), *args], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, args in calls]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def killed_then_resumed(mod: ModuleType, work: str, fake: Callable[..., Any], argv: list[str], out: Path,
                        tmp_path: Path, monkeypatch: Any, *, kill_at: int, kept: str, n_kept: int) -> tuple[list[Any], dict]:
    """A recording script killed mid-run, then run again with the same command: what both runs
    share in every ``record_*`` script's resume test.

    ``mod.<work>`` (the script's unit of work: a model, a batch) is replaced by ``fake`` and its
    ``ROOT`` by ``tmp_path``; the ``kill_at``-th call (1-based) raises ``KeyboardInterrupt``. Asserts
    that the killed run wrote no record and kept ``n_kept`` checkpoints matching ``kept`` (a glob
    under ``tmp_path/checkpoints``), and that the second run succeeds. Returns the arguments of
    every call (both runs, the killed one included) and the record, for the script's own checks."""
    calls: list[Any] = []

    def once(*args: Any) -> Any:
        calls.append(args)
        if len(calls) == kill_at:
            raise KeyboardInterrupt  # killed while this unit runs
        return fake(*args)

    monkeypatch.setattr(mod, "ROOT", tmp_path)
    monkeypatch.setattr(mod, work, once)
    try:
        mod.main(argv)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError(f"{mod.__name__}: the run was not killed at call {kill_at}")
    assert not out.exists(), f"{mod.__name__}: a killed run wrote its record"
    got = sorted((tmp_path / "checkpoints").glob(kept))
    assert len(got) == n_kept, f"{mod.__name__}: {len(got)} checkpoints {kept}, expected {n_kept}"
    assert mod.main(argv) == 0
    return calls, json.loads(out.read_text())
