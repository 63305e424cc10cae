"""The command-line scripts in ``scripts/`` (and ``benchmarks/``) under test: imported as modules
(:func:`load_script`, to monkeypatch their heavy parts) or run as subprocesses, several at once
(:func:`run_scripts`, tests of their checks)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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
