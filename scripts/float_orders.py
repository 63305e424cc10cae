"""The float-order matrix: nbval of every chapter under settings that change the bits of the logits.

A chapter's checked outputs must hold on any CPU (``tokendyn.publish.checked``). One machine can stand in
for several CPUs by changing the order in which its kernels add: another ISA for ATen's vector
kernels, MKL's conditional-reproducibility code path, another thread count. For each setting this
script first hashes a shipped MLM's site logits (``scripts/logits_hash.py``) and says whether the
setting changes them against the native run, then runs nbval of the chosen notebooks under it and
records, per notebook, the cells that passed and failed.

    .venv/bin/python scripts/float_orders.py                       # every setting, every notebook
    .venv/bin/python scripts/float_orders.py --settings aten-avx2 --notebooks book/07_escapes.ipynb
    make float-orders JOBS=2                                       # two (setting, notebook) pairs at a time, 1 thread each

The record (``data/runs/float-orders.json`` unless ``--out``) is rewritten after every finished
(setting, notebook) pair, so a killed run resumes where it stopped (``--resume``) and loses nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Lock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from tokendyn.core.atomic import write_json  # noqa: E402
from tokendyn.publish.results import provenance, read_record  # noqa: E402

SETTINGS: dict[str, dict[str, str]] = {
    "native": {},
    "one-thread": {"TOKENDYN_THREADS": "1"},
    "aten-default": {"ATEN_CPU_CAPABILITY": "default"},
    "aten-avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "mkl-compatible": {"MKL_CBWR": "COMPATIBLE"},
}
"""Each setting's environment on top of the Makefile's (threads as the machine gives them unless set)."""

BASE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
            "PYDEVD_DISABLE_FILE_VALIDATION": "1", "OMP_WAIT_POLICY": "PASSIVE", "TOKENDYN_PROGRESS": "0"}
FLOAT_VARS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR", "TOKENDYN_THREADS")
KIND = "float-order matrix"


def _env(setting: str, threads: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in FLOAT_VARS}
    env.update(BASE_ENV)
    if threads is not None:
        env["TOKENDYN_THREADS"] = str(threads)
    env.update(SETTINGS[setting])
    return env


def logits_hash(setting: str, threads: int | None) -> dict:
    """``scripts/logits_hash.py`` under ``setting``: its JSON line."""
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "logits_hash.py"), "--chains", "64"],
                         env={**_env(setting, threads), "PYTHONPATH": str(ROOT / "lib")},
                         capture_output=True, text=True, timeout=900, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"logits_hash.py under {setting} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def nbval(setting: str, notebook: str, threads: int | None) -> dict:
    """nbval of one notebook under ``setting``: ``{"passed", "failed", "failed_cells", "minutes"}``."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        cmd = [str(ROOT / ".venv" / "bin" / "pytest"), notebook, "--nbval-lax", "--nbval-current-env",
               "--nbval-cell-timeout=1200", "-p", "no:cacheprovider", "-q", f"--junitxml={xml}"]
        t0 = time.time()
        # this checkout's library first, whatever copy the venv has installed (a worktree runs its own)
        path = os.pathsep.join([str(ROOT / "tests"), str(ROOT / "lib")])
        run = subprocess.run(cmd, env={**_env(setting, threads), "PYTHONPATH": path},
                             capture_output=True, text=True, cwd=ROOT)
        minutes = (time.time() - t0) / 60
        passed, failed = 0, []
        if xml.is_file():
            for case in ET.parse(xml).getroot().iter("testcase"):
                if case.find("failure") is not None or case.find("error") is not None:
                    failed.append(case.get("name", "?"))
                elif case.find("skipped") is None:
                    passed += 1
        if run.returncode not in (0, 1) and not failed:
            failed.append(f"pytest exit {run.returncode}: {run.stdout[-300:]}")
        return {"passed": passed, "failed": len(failed), "failed_cells": failed, "minutes": round(minutes, 2),
                "tail": run.stdout[-1500:] if failed else ""}


def table(record: dict) -> str:
    """The matrix as a Markdown table: a row per notebook, a column per setting."""
    settings = list(record["settings"])
    nbs = sorted({nb for s in settings for nb in record["settings"][s].get("notebooks", {})})
    head = "| notebook | " + " | ".join(settings) + " |\n|---|" + "---|" * len(settings) + "\n"
    rows = []
    for nb in nbs:
        cells = []
        for s in settings:
            r = record["settings"][s].get("notebooks", {}).get(nb)
            cells.append("-" if r is None else (f"passed ({r['passed']})" if r["failed"] == 0 else
                                                f"**failed** {r['failed']} of {r['passed'] + r['failed']}"))
        rows.append(f"| {Path(nb).stem} | " + " | ".join(cells) + " |")
    bits = "| logits' bits | " + " | ".join(
        ("native" if s == "native" else ("changed" if record["settings"][s].get("changes_bits") else "same as native"))
        for s in settings) + " |"
    return head + bits + "\n" + "\n".join(rows) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated, from {list(SETTINGS)}")
    ap.add_argument("--notebooks", nargs="*", default=None, help="default: every book/*.ipynb")
    ap.add_argument("--jobs", type=int, default=1, help="(setting, notebook) pairs run at once, longest first (each then gets --threads)")
    ap.add_argument("--threads", type=int, default=None,
                    help="TOKENDYN_THREADS for every setting that does not set it (default: the machine's, or 1 with --jobs > 1)")
    ap.add_argument("--out", default=str(ROOT / "data" / "runs" / "float-orders.json"))
    ap.add_argument("--resume", action="store_true", help="keep the (setting, notebook) pairs already in --out")
    args = ap.parse_args()
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    bad = [s for s in settings if s not in SETTINGS]
    if bad:
        ap.error(f"--settings: {bad} not allowed; choose from {list(SETTINGS)}")
    if args.jobs < 1:
        ap.error(f"--jobs: {args.jobs} not allowed; at least 1")
    if args.threads is not None and args.threads < 1:
        ap.error(f"--threads: {args.threads} not allowed; at least 1")
    notebooks = args.notebooks or sorted(str(p.relative_to(ROOT)) for p in (ROOT / "book").glob("*.ipynb"))
    missing = [nb for nb in notebooks if not (ROOT / nb).is_file()]
    if missing:
        ap.error(f"--notebooks: {missing} not found")
    threads = args.threads if args.threads is not None else (1 if args.jobs > 1 else None)
    out = Path(args.out)
    command = "python scripts/float_orders.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    record = {"kind": KIND, "command": command, "settings": {}, "cpu": _cpu(),
              "provenance": provenance({"settings": settings, "notebooks": notebooks, "threads": threads},
                                       None, ["minilm-mlm"])}
    if args.resume and out.is_file():
        old = read_record(out, kind=KIND, keys=("settings",))
        record["settings"] = old["settings"]
    before = _minutes(ROOT / "data" / "runs" / "float-orders.json")  # read before this run rewrites it
    lock = Lock()

    def save() -> None:
        with lock:
            write_json(out, record, indent=1, sort_keys=True)

    native = logits_hash("native", threads)["logits_sha256"]
    for s in settings:
        h = logits_hash(s, threads)
        entry = record["settings"].setdefault(s, {"notebooks": {}})
        entry.update({"env": SETTINGS[s], "threads": threads, "logits_sha256": h["logits_sha256"],
                      "cpu_capability": h["cpu_capability"], "changes_bits": h["logits_sha256"] != native})
        print(f"{s}: logits {h['logits_sha256'][:16]} ({'changed' if entry['changes_bits'] else 'same as native'}; "
              f"ATen {h['cpu_capability']}, {h['torch_threads']} threads)", flush=True)
    save()

    def run_pair(pair: tuple[str, str]) -> None:
        s, nb = pair
        r = nbval(s, nb, threads)
        with lock:
            record["settings"][s]["notebooks"][nb] = r
        save()
        print(f"{s} {nb}: {r['passed']} passed, {r['failed']} failed ({r['minutes']:.1f} min)"
              + (f" {r['failed_cells']}" if r["failed"] else ""), flush=True)

    # One task per (setting, notebook), longest first by the minutes a committed record gives
    # (MKL_CBWR=COMPATIBLE runs at half speed): the jobs then finish within one notebook of each other.
    pairs = [(s, nb) for s in settings for nb in notebooks if nb not in record["settings"][s]["notebooks"]]
    pairs.sort(key=lambda p: -before.get(p, 1.0))
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(run_pair, pairs))
    print(table(record))
    failed = sum(r["failed"] for s in record["settings"].values() for r in s["notebooks"].values())
    sys.exit(1 if failed else 0)


def _minutes(path: Path) -> dict[tuple[str, str], float]:
    """``(setting, notebook) -> minutes`` from an earlier matrix record (empty if there is none)."""
    try:
        rec = read_record(path, kind=KIND, keys=("settings",))
    except (OSError, ValueError):
        return {}
    return {(s, nb): r.get("minutes", 1.0) for s, v in rec["settings"].items()
            for nb, r in v.get("notebooks", {}).items()}


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown"


if __name__ == "__main__":
    main()
