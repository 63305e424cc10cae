"""Run the command-line scripts in ``scripts/`` as subprocesses, several at once (tests of their checks)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
