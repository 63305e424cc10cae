"""Parameter sweeps over chapters: the unit of work a Ray (or any) scheduler runs.

A sweep is a list of runs; each run is one chapter notebook executed by papermill with one set of
parameters, writing its results JSON into a folder of its own named by a hash of (chapter,
parameters). A run whose results already exist is skipped, so a killed sweep resumes where it
stopped, and two machines never redo each other's work if they share the output folder.

With Ray, wrap :func:`run_one` as a task::

    import ray
    task = ray.remote(num_gpus=1)(sweep.run_one)
    refs = [task.remote("book/03_phase_transition.ipynb", p, "sweeps/03") for p in sweep.grid(...)]
    ray.get(refs)
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .results import _plain


def grid(**axes: Iterable[Any]) -> list[dict[str, Any]]:
    """The Cartesian product of parameter axes, in a fixed order.

    ``grid(tau=[0.5, 1], n=[8, 16])`` -> 4 dicts, ``tau`` varying slowest.
    """
    if not axes:
        raise ValueError("grid needs at least one parameter axis, e.g. grid(tau=[0.5, 1.0])")
    names = list(axes)
    values = [list(v) for v in axes.values()]
    for name, v in zip(names, values):
        if not v:
            raise ValueError(f"axis {name!r} is empty: give at least one value")
    return [dict(zip(names, combo)) for combo in itertools.product(*values)]


def run_key(notebook: str | Path, params: Mapping[str, Any]) -> str:
    """A stable 12-hex-digit name for one run: the chapter's file name and its parameters."""
    blob = json.dumps({"notebook": Path(notebook).name, "params": _plain(dict(params))}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def run_one(notebook: str | Path, params: Mapping[str, Any], out_root: str | Path, *,
            kernel_name: str = "python3", timeout_s: int | None = None) -> Path:
    """Execute one chapter with ``params`` into ``<out_root>/<stem>-<key>/``; return that folder.

    The folder holds the executed notebook, ``params.json`` and the chapter's results JSON
    (``TOKENDYN_RESULTS`` points there during the run). Skips the run if ``done`` exists.
    """
    import papermill

    nb = Path(notebook).resolve()
    if not nb.is_file():
        raise FileNotFoundError(f"notebook={str(notebook)!r} does not exist")
    out = Path(out_root) / f"{nb.stem}-{run_key(nb, params)}"
    if (out / "done").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    (out / "params.json").write_text(json.dumps(_plain(dict(params)), indent=2, sort_keys=True))
    old = os.environ.get("TOKENDYN_RESULTS")
    os.environ["TOKENDYN_RESULTS"] = str(out.resolve())
    try:
        papermill.execute_notebook(str(nb), str(out / nb.name), parameters=dict(params),
                                   kernel_name=kernel_name, cwd=str(nb.parent),
                                   progress_bar=False, execution_timeout=timeout_s)
    finally:
        if old is None:
            os.environ.pop("TOKENDYN_RESULTS", None)
        else:
            os.environ["TOKENDYN_RESULTS"] = old
    (out / "done").write_text("ok\n")
    return out


def chapter_parameters(notebook: str | Path) -> list[dict[str, str]]:
    """The ``parameters`` cell of a chapter: one dict per parameter with ``name``, ``default`` and
    ``help`` (its inline comment, where the chapters note GPU-scale values)."""
    import papermill

    found = papermill.inspect_notebook(str(notebook))
    return [{"name": v["name"], "default": v["default"], "help": v["help"]} for v in found.values()]


def collect(out_root: str | Path, chapter: str) -> list[dict[str, Any]]:
    """Every finished run's results record for ``chapter`` under ``out_root``, in folder order."""
    rows = []
    for d in sorted(Path(out_root).glob("*/")):
        f = d / f"{chapter}.json"
        if (d / "done").is_file() and f.is_file():
            rows.append(json.loads(f.read_text()))
    return rows
