"""The results convention: each chapter writes its key numbers to ``<results_dir>/<chapter>.json``.

A record carries the numbers and everything needed to remake them: parameters, seed, model names,
library and torch versions, the git commit of the checkout and whether its tracked files had
uncommitted changes, device, dtype and threads, a hash of the passage pools (two machines with the
same hash draw the same passages), and the time it was written. It also holds
the chapter's findings on the papers' claims (:mod:`tokendyn.publish.claims`), which the scoreboard reads.
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from .. import __version__
from ..core.atomic import MissingRecordError, RecordError, read_record, write_json, write_text  # noqa: F401 (the errors: re-exported)
from ..core.jsonable import plain as _plain
from ..core.paths import data_dir, results_dir
from ..mcmc.censored import CensoredTimes

RECORD_DIRTY = "TOKENDYN_RECORD_DIRTY"
"""Set to ``1`` to let a dirty checkout write under ``data/`` (a scratch run; it says so in its provenance)."""


def git_state(root: Path | None = None) -> dict[str, Any]:
    """``{"git_commit": sha or None, "git_dirty": bool or None}`` of the checkout holding the library
    (:func:`tokendyn.core.paths.library_root`: the code that runs, wherever the cwd is).

    Dirty means a tracked file differs from the commit (untracked files do not count), other than
    the chapter notebooks ``book/*.ipynb``: re-executing a chapter in place rewrites its own file,
    so counting it would mark every re-execution dirty. Outside a checkout, or without git, both
    are None: an installed copy cannot say which code made it.
    """
    from ..core.paths import library_root

    root = root if root is not None else library_root()
    if root is None:
        return {"git_commit": None, "git_dirty": None}
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=20, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--",
                                 ".", ":(exclude)book/*.ipynb"],
                                capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}
    return {"git_commit": sha or None, "git_dirty": bool(status.strip())}


def provenance(params: dict[str, Any], seed: int | None, models: list[str],
               setup: Any = None) -> dict[str, Any]:
    """The block that says what made a result: parameters, seed, models, versions and where it ran.

    ``setup`` is the :class:`tokendyn.publish.book.Setup` the chapter ran with (device, threads, dtype).
    """
    where = {"device": str(setup.device), "dtype": str(setup.dtype).removeprefix("torch."),
             "threads": setup.threads} if setup is not None else {
        "device": "cuda" if torch.cuda.is_available() else "cpu", "dtype": "float32",
        "threads": torch.get_num_threads()}
    from ..core import data
    from ..mcmc.conditional import settings_chosen

    try:  # which passages a seed draws depends on the pools: record them
        pools = data.pool_hash()
    except (FileNotFoundError, OSError) as e:
        pools = f"unavailable: {e}"
    return {
        "params": _plain(params),
        "passage_pool_hash": pools,
        "seed": seed,
        "models": list(models),
        "tokendyn_version": __version__,
        **git_state(),
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        **where,
        "step_settings": settings_chosen(),
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


MIME = "application/vnd.tokendyn.results+json"
"""The output type under which a chapter's record is also stored in its own notebook."""


def save(chapter: str, metrics: dict[str, Any], *, params: dict[str, Any], seed: int | None,
         models: list[str], claims: list[Any] | None = None, setup: Any = None,
         out_dir: str | Path | None = None) -> Path:
    """Write ``{"chapter", "metrics", "claims", "provenance"}`` to ``<out_dir>/<chapter>.json``.

    ``claims`` are :class:`tokendyn.publish.claims.Finding` objects; returns the path written. In a
    notebook the same record is also put in the cell's outputs (:data:`MIME`, drawn as nothing),
    so the executed notebook a page shows carries the very numbers the scoreboard reads
    (:func:`notebook_records`).
    """
    path = (Path(out_dir) if out_dir is not None else results_dir()) / f"{chapter}.json"
    record = {"chapter": chapter, "metrics": _plain(metrics),
              "claims": [c.to_dict() if hasattr(c, "to_dict") else dict(c) for c in (claims or [])],
              "provenance": provenance(params, seed, models, setup)}
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    write_text(path, text)
    _show_in_notebook(json.loads(text))
    return path


def _show_in_notebook(record: dict[str, Any]) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and type(shell).__name__ == "ZMQInteractiveShell":  # a kernel, not a terminal
        display({MIME: record}, raw=True)


@functools.lru_cache(maxsize=32)
def _parsed(path: Path, mtime_ns: int, size: int) -> dict[str, Any]:
    return json.loads(path.read_text())


def read_notebook(notebook: str | Path) -> dict[str, Any]:
    """``notebook`` parsed, once per version of the file: a book build asks each notebook for its
    records, run time and threads from several directives, and a chapter's JSON is megabytes. The
    cache key is the path with its size and modification time, so an edited file is read again.
    Callers must not mutate the returned dict."""
    path = Path(notebook).resolve()
    st = path.stat()
    return _parsed(path, st.st_mtime_ns, st.st_size)


def notebook_records(notebook: str | Path) -> list[dict[str, Any]]:
    """Every results record that :func:`save` stored in ``notebook``'s outputs, in order."""
    nb = read_notebook(notebook)
    found = []
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if MIME in data:
                found.append(data[MIME] if isinstance(data[MIME], dict) else json.loads("".join(data[MIME])))
    return found


CHAPTER_KEYS = ("chapter", "metrics", "claims", "provenance")
"""The keys of every record :func:`save` writes."""


def load(chapter: str, out_dir: str | Path | None = None) -> dict[str, Any]:
    """Read back a chapter's record written by :func:`save` (:class:`RecordError`, naming the file,
    when it is missing, damaged or lacks one of :data:`CHAPTER_KEYS`)."""
    out = Path(out_dir) if out_dir is not None else results_dir()
    return read_record(out / f"{chapter}.json", keys=CHAPTER_KEYS,
                       remake=f"re-execute the chapter book/{chapter}.ipynb (it writes this record)")


RUN_KIND = "coupling times"
"""The ``kind`` of a record :func:`save_run` writes."""


def check_recordable(path: str | Path, dirty: bool | None = None) -> None:
    """Refuse, before any compute, to record under ``data/`` from a checkout with uncommitted
    changes to tracked files: a recorded run must name the commit that made it, and a dirty tree
    makes no commit true. ``dirty`` defaults to :func:`git_state`'s. Also refused: recording into
    one checkout's ``data/`` with the library imported from another (its commit would not be the
    code that ran). :class:`RecordError` naming the file and the remedy; paths outside ``data/``
    (a test's temporary folder) pass, and ``TOKENDYN_RECORD_DIRTY=1`` lets a dirty tree pass."""
    try:
        data = data_dir().resolve()
    except FileNotFoundError:  # no checkout: nothing under data/ to protect
        return
    target = Path(path).resolve()
    if not (target == data or data in target.parents):
        return
    from ..core.paths import library_root, repo_root

    lib, book = library_root(), repo_root()
    if lib is not None and book is not None and lib.resolve() != book.resolve():
        # the record would name this checkout's commit while another checkout's code ran
        raise RecordError(f"{path}: refusing to record into {book} with the library imported from {lib}; "
                          f"put {book / 'lib'} first on PYTHONPATH (an editable install points at one checkout)")
    if dirty is None:
        dirty = git_state()["git_dirty"]
    if dirty is not True or os.environ.get(RECORD_DIRTY) == "1":
        return
    commit = (git_state()["git_commit"] or "?")[:10]
    raise RecordError(f"{path}: refusing to record from a dirty checkout ({commit} plus uncommitted changes to "
                      f"tracked files); commit first or record from a clean worktree (git worktree add), or set "
                      f"{RECORD_DIRTY}=1 for a scratch run")


def _cell_cap(params: Mapping[str, Any], n: int) -> int:
    """The budget a chapter 3 run gave its cells of length ``n``: the largest of its ``budget_factors``
    times n ln n (the run is made at the largest and cut at the others)."""
    from ..mcmc.diagnostics.scaling import budget_steps

    return budget_steps(max(params["budget_factors"]), n)


def save_run(path: str | Path, cells: Mapping[tuple[str, int, float], CensoredTimes], *,
             command: str, params: dict[str, Any], seed: int | None, models: list[str],
             setup: Any = None) -> Path:
    """Record a run's coupling times as an artifact (``data/runs/``), with what made it.

    ``cells`` maps ``(model, n, tau)`` to its :class:`~tokendyn.mcmc.censored.CensoredTimes`;
    ``command`` is the command line that remakes the run. A cell's ``times`` and ``censored`` are
    written, not its cap: :func:`load_run` reads the cap back from ``params["budget_factors"]``, so a
    cell whose cap is not that budget is refused (``ValueError``) before anything is written.
    Returns the path written.
    """
    path = Path(path)
    if "budget_factors" not in params:
        raise ValueError("params must hold the run's budget_factors: load_run reads each cell's cap from them")
    for (m, n, t), cell in cells.items():
        if cell.cap != _cell_cap(params, n):
            raise ValueError(f"cell ({m!r}, {n}, {t:g}) has cap {cell.cap}, not the run's budget "
                             f"{_cell_cap(params, n)} (max(budget_factors) n ln n): load_run would misread it")
    prov = provenance(params, seed, models, setup)
    check_recordable(path, prov.get("git_dirty"))
    record = {"kind": RUN_KIND, "command": command,
              "cells": [{"model": m, "n": int(n), "tau": float(t), "times": [int(v) for v in cell.times.tolist()],
                         "censored": [bool(v) for v in cell.censored.tolist()]} for (m, n, t), cell in cells.items()],
              "provenance": prov}
    write_json(path, record, sort_keys=True)
    return path


def load_run(path: str | Path) -> tuple[dict[tuple[str, int, float], CensoredTimes], dict[str, Any]]:
    """Read a run recorded by :func:`save_run`: ``(cells, {"command", "provenance"})``, each cell a
    :class:`~tokendyn.mcmc.censored.CensoredTimes` capped at the run's budget for its length
    (``max(budget_factors)`` n ln n, from the record's params). :class:`RecordError`, naming the file
    and its command, when it is damaged, another kind, or its cells do not fit that cap."""
    record = read_record(path, kind=RUN_KIND, keys=("cells", "command", "provenance"))
    params = record["provenance"].get("params") or {}
    if "budget_factors" not in params:
        raise RecordError(f"record {path} names no budget_factors in its params: the cap of its cells is not "
                          f"known. Remake it with: {record['command']}")
    cells = {}
    for c in record["cells"]:
        try:
            cells[(c["model"], c["n"], c["tau"])] = CensoredTimes(torch.tensor(c["times"], dtype=torch.long),
                                                                  torch.tensor(c["censored"], dtype=torch.bool),
                                                                  cap=_cell_cap(params, c["n"]))
        except ValueError as e:
            raise RecordError(f"record {path}: cell ({c['model']!r}, {c['n']}, {c['tau']:g}): {e}. "
                              f"Remake it with: {record['command']}") from e
    return cells, {"command": record["command"], "provenance": record["provenance"]}


def load_recorded_grids(rels: Sequence[str], *, top_tau: float, max_budget: float
                        ) -> tuple[dict[str, tuple[dict, dict[str, Any]]], dict[str, str], dict[str, tuple], list[str]]:
    """Chapter 3's recorded runs (paths under ``data/``, :func:`save_run` records) for reading beside
    its live run. A missing file is skipped (said so); a run without ``top_tau`` (``tau*`` is read
    against it) or without budgets up to ``max_budget`` raises ``ValueError`` naming it.

    Returns ``(recorded, run_label, sources, lines)``: ``recorded[label] = (cells, meta)``;
    ``run_label[rel] = label`` (the run's file name too, so two runs of one model with the same
    pairs get different labels); ``sources[label] = (cells, models, lengths, taus up to top_tau)``
    (:data:`tokendyn.mcmc.diagnostics.Source`, its hotter cells kept in ``cells``); ``lines``: what was
    read, with each run's command, seed, version and commit, for the page."""
    recorded, run_label, sources, lines = {}, {}, {}, []
    for rel in rels:
        path = data_dir() / rel
        if not path.is_file():
            lines.append(f"recorded run {rel}: not in data/, skipped")
            continue
        cells, meta = load_run(path)
        rec = meta["provenance"]["params"]
        if max(rec["budget_factors"]) < max_budget or top_tau not in rec["taus"]:
            raise ValueError(f"recorded_runs: {rel!r} was made with taus {rec['taus']} and budgets "
                             f"{rec['budget_factors']}: it needs this chapter's top tau {top_tau:g} (tau* is read "
                             f"against it) and budgets up to {max_budget}")
        label = f"recorded {rel.rsplit('-', 1)[-1].removesuffix('.json')}: {', '.join(rec['mlm_names'])}, {rec['n_pairs']} pairs"
        recorded[label], run_label[rel] = (cells, meta), label
        sources[label] = (cells, list(rec["mlm_names"]), list(rec["ns"]), sorted(t for t in rec["taus"] if t <= top_tau))
        lines += [f"{label} | {rel} | made by: {meta['command']}",
                  f"  seed {meta['provenance']['seed']} | tokendyn {meta['provenance']['tokendyn_version']} "
                  f"| commit {(meta['provenance'].get('git_commit') or 'not recorded')[:12]} | ns {rec['ns']} | taus {rec['taus']}"]
    return recorded, run_label, sources, lines


def row_stamp(name: str) -> dict[str, Any]:
    """What one recorded row of model ``name`` is computed from: the SHA-256 of its shipped weights
    file (None for a model not in ``data/models``) and the library's commit (:func:`git_state`). A
    row kept for a resumed run is valid only while :func:`same_weights` holds."""
    from ..core import integrity
    from ..models import shipped

    f = shipped.models_dir() / name / shipped.WEIGHTS
    return {"weights_sha256": integrity.sha256_file(f) if f.is_file() else None, **git_state()}


def same_weights(row: dict[str, Any], name: str) -> bool:
    """Whether a kept ``row`` of model ``name`` was computed from the weights ``name`` has now (a row
    without a stamp never counts: retraining a model must not resume its old numbers)."""
    return "weights_sha256" in row and row["weights_sha256"] == row_stamp(name)["weights_sha256"]


def recorded_rows_to_keep(path: str | Path, key: str, ignore: tuple[str, ...], names: list[str]) -> dict[str, dict[str, Any]]:
    """Rows of the recorded run at ``path`` that a new run may keep instead of recomputing: those of
    ``names`` when the record's parameters (less ``ignore``) give the new run's ``key``
    (:func:`tokendyn.core.checkpoint.params_key`), the record came from a clean checkout, and the model's
    shipped weights file now is byte-identical (git blob) to the one the row's model had at the
    record's commit. A model renamed since keeps its row that way: the row takes the new name and
    says the old one in ``recorded_as``. Each row is stamped (:func:`row_stamp`) with the weights'
    SHA-256 and the record's commit, so the new file says which rows an earlier commit computed.
    Anything else: ``{}`` for that model."""
    from ..core.checkpoint import params_key
    from ..models import shipped
    from ..core.paths import repo_root

    path, root = Path(path), repo_root()
    if not path.is_file() or root is None:
        return {}
    rows, meta = load_rows(path)
    prov = meta["provenance"]
    commit = prov.get("git_commit")
    if params_key(prov["params"], ignore=ignore) != key or not commit or prov.get("git_dirty"):
        return {}

    def blob(ref: str) -> str | None:
        out = subprocess.run(["git", "-C", str(root), *ref.split()], capture_output=True, text=True, timeout=60)
        return out.stdout.strip() if out.returncode == 0 else None

    def rel(name: str) -> str:
        return (shipped.models_dir() / name / shipped.WEIGHTS).relative_to(root).as_posix()

    then = {row["model"]: blob(f"rev-parse {commit}:{rel(row['model'])}") for row in rows}
    kept = {}
    for name in names:
        now = blob(f"hash-object {rel(name)}") if (shipped.models_dir() / name / shipped.WEIGHTS).is_file() else None
        # its own row first, else the row of the model whose weights then were these bytes
        match = [r for r in rows if r["model"] == name and then[name] == now] or \
                [r for r in rows if then[r["model"]] is not None and then[r["model"]] == now]
        if now is not None and match:
            row = match[0]
            renamed = {"model": name, "recorded_as": row["model"]} if row["model"] != name else {}
            kept[name] = {**row, **renamed, **row_stamp(name), "git_commit": commit, "git_dirty": False}
    return kept


def rows_per_model(units: Sequence[str], folder: str | Path, key: str, compute: Callable[[str], dict[str, Any]], *,
                   accept: Callable[[str, dict[str, Any]], bool] | None = None,
                   done: Callable[[str, dict[str, Any]], str] | None = None,
                   resume_from: str | Path | None = None, ignore: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The resumable loop of a recording script: one row per model (``units``, in order).

    Each model's row is kept at ``folder/<name>-<key>.json`` (``/`` in a name becomes ``_``) and
    reused by a rerun of the same parameters (``key``: :func:`tokendyn.core.checkpoint.params_key`)
    while its weights are unchanged (:func:`same_weights`, and ``accept(name, row)`` when given);
    otherwise ``compute(name)`` runs and its row, stamped with :func:`row_stamp`, is written
    atomically before the next model starts, so a killed run loses only the model it was in.
    ``resume_from`` (a recorded run) seeds the folder with the rows
    :func:`recorded_rows_to_keep` allows (``ignore``: the parameters that do not change a row).
    ``done(name, row)`` is the line printed for a computed row (default: its CPU and wall time)."""
    from ..core.checkpoint import kept_or_computed

    folder = Path(folder)
    path = {name: folder / f"{name.replace('/', '_')}-{key}.json" for name in units}
    if resume_from is not None:
        for name, row in recorded_rows_to_keep(resume_from, key, ignore, list(units)).items():
            if not path[name].is_file():
                write_json(path[name], row, end="")
    rows = []
    for name in units:
        row, resumed = kept_or_computed(path[name], lambda: {**compute(name), **row_stamp(name)},
                                        accept=lambda kept: same_weights(kept, name)
                                        and (accept is None or accept(name, kept)))
        rows.append(row)
        line = (f"{name}: done in {row['cpu_seconds']:.0f} s CPU ({row['wall_seconds']:.0f} s wall)" if done is None
                else done(name, row))
        print(f"{name}: resumed from {path[name]}" if resumed else line, flush=True)
    return rows


def save_rows(path: str | Path, rows: list[dict[str, Any]], *, kind: str, command: str, params: dict[str, Any],
              seed: int | None, models: list[str], setup: Any = None) -> Path:
    """Record a table of results (one dict per row) as an artifact (``data/runs/``), with the command
    line that remakes it and its provenance. Returns the path written."""
    path = Path(path)
    prov = provenance(params, seed, models, setup)
    check_recordable(path, prov.get("git_dirty"))
    record = {"kind": kind, "command": command, "rows": _plain(rows), "provenance": prov}
    write_json(path, record, sort_keys=True)
    return path


def load_rows(path: str | Path, kind: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Read a table recorded by :func:`save_rows`: ``(rows, {"kind", "command", "provenance"})``;
    ``kind``: the kind of run it must be. :class:`RecordError`, naming the file and its command,
    when it is missing, damaged, lacks a key or is another kind."""
    record = read_record(path, kind=kind, keys=("kind", "command", "rows", "provenance"))
    return record["rows"], {k: record[k] for k in ("kind", "command", "provenance")}


def load_ladder(path: str | Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A recorded ladder (a :func:`save_rows` table, one row per model) as ``(rows sorted by
    their ``params``, {"kind", "command", "provenance"})``; a missing file raises naming the
    scripts that write ladders."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no recorded ladder here; its command is in the chapter's text "
                                "(scripts/record_size_ladder.py or scripts/record_traps.py)")
    rows, meta = load_rows(path)
    return sorted(rows, key=lambda row: int(row["params"])), meta


def values_words(values: Sequence[float]) -> str:
    """A sorted grid in words: an evenly spaced run of at least four values as "a to b in steps of
    s", the others listed (``[1, 1.25, ..., 3, 5]`` -> "1 to 3 in steps of 0.25, and 5")."""
    vs = sorted(float(v) for v in values)
    parts, i = [], 0
    while i < len(vs):
        j = i + 1
        while j + 1 < len(vs) and math.isclose(vs[j + 1] - vs[j], vs[i + 1] - vs[i]):
            j += 1
        if j - i >= 3:
            parts.append(f"{vs[i]:g} to {vs[j]:g} in steps of {vs[i + 1] - vs[i]:g}")
            i = j + 1
        else:
            parts.append(f"{vs[i]:g}")
            i += 1
    return ", ".join(parts[:-1]) + (", and " if len(parts) > 1 else "") + parts[-1]


def run_words(meta: Mapping[str, Any]) -> str:
    """What a chapter 3 run recorded by :func:`save_run` measured, in words, from its parameters
    (``meta`` as :func:`load_run` returns it): models, lengths, temperatures, pairs and budgets."""
    p = meta["provenance"]["params"]
    return (f"{', '.join(p['mlm_names'])}; n = {', '.join(str(n) for n in p['ns'])}; τ = {values_words(p['taus'])}; "
            f"{p['n_pairs']} pairs a cell; budgets up to {max(p['budget_factors']):g} n ln n")
