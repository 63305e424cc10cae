"""Parameter sweeps over chapters, on one machine or across a Ray cluster.

A sweep is a grid of points; each point is one chapter notebook executed by papermill with one set
of parameters, writing its results JSON into a folder of its own named by a hash of the chapter
(its file name and the source of its code cells) and the parameters. A point whose folder is marked
``done`` is skipped, so a killed sweep resumes where it stopped, and machines that share the output
folder never redo each other's finished work. At the end every point's results JSON is gathered into
one table (parquet, or CSV) with its parameters and provenance.

From the command line (``tokendyn`` is installed with the package)::

    tokendyn sweep book/03_phase_transition.ipynb --grid 'ns=[8,16],[32]' --grid seed=0,1 \\
        -p n_pairs=256 --backend ray --address auto --out sweeps/03

and the same from Python::

    from tokendyn.publish import sweep
    res = sweep.run_sweep("book/03_phase_transition.ipynb", {"ns": [[8, 16], [32]], "seed": [0, 1]},
                          params={"n_pairs": 256}, backend="ray", address="auto", out="sweeps/03")
    res.table            # one row per point: parameters, status, metrics, provenance

``backend="ray"`` runs each point as a Ray task that asks for one GPU when the cluster has GPUs and
one CPU otherwise. Without ``address`` it starts a local Ray (and stops it at the end); with one it
joins that cluster (``"auto"``: the one ``ray start`` made on this machine). Every worker must see
the chapter and the output folder at the same paths (a shared file system, or one machine).
"""

from __future__ import annotations

import ast
import hashlib
import io
import itertools
import json
import math
import os
import tokenize
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.atomic import read_record, write_atomic, write_json, write_text
from ..core.checks import check_choice, check_range
from ..core.jsonable import plain as _plain

BACKENDS = ("local", "ray")
TABLE_FORMATS = ("auto", "parquet", "csv")
_DONE = "done"


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


# --- parsing "--grid tau=0.5,1,2" ----------------------------------------------------------------

def parse_value(text: str) -> Any:
    """One command-line value: JSON (``1``, ``0.5``, ``true``, ``null``, ``"x"``, ``[8, 16]``), then a
    Python literal (``None``, ``True``, ``(1, 2)``), else the text itself as a string."""
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets and quotes: ``[8,16],[32]`` -> ``["[8,16]", "[32]"]``."""
    parts, depth, quote, escaped, cur = [], 0, None, False, []
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return parts


def _check_name(name: str, what: str) -> None:
    if not name.isidentifier():
        raise ValueError(f"{what} {name!r} is not a parameter name (a Python identifier)")


def parse_axis(spec: str) -> tuple[str, list[Any]]:
    """``"tau=0.5,1,2"`` -> ``("tau", [0.5, 1, 2])``; lists as values: ``"ns=[8,16],[32]"``."""
    if not isinstance(spec, str) or "=" not in spec:
        raise ValueError(f"--grid {spec!r} must look like NAME=V1,V2,... (e.g. tau=0.5,1,2)")
    name, _, rest = spec.partition("=")
    name = name.strip()
    _check_name(name, "--grid")
    pieces = [p for p in _split_top_level(rest)]
    if not rest.strip() or any(not p.strip() for p in pieces):
        raise ValueError(f"--grid {spec!r} has an empty value: give NAME=V1,V2,...")
    return name, [parse_value(p) for p in pieces]


def parse_grid(specs: Sequence[str]) -> dict[str, list[Any]]:
    """Several ``--grid`` specs -> ``{name: values}`` in the order given (names must differ)."""
    axes: dict[str, list[Any]] = {}
    for spec in specs:
        name, values = parse_axis(spec)
        if name in axes:
            raise ValueError(f"--grid {name!r} is given twice: list all its values in one --grid")
        axes[name] = values
    return axes


def parse_params(specs: Sequence[str]) -> dict[str, Any]:
    """``-p NAME=VALUE`` specs (one value each) -> ``{name: value}``."""
    out: dict[str, Any] = {}
    for spec in specs:
        if "=" not in spec:
            raise ValueError(f"-p {spec!r} must look like NAME=VALUE")
        name, _, value = spec.partition("=")
        name = name.strip()
        _check_name(name, "-p")
        if not value.strip():
            raise ValueError(f"-p {spec!r} has an empty value")
        out[name] = parse_value(value)
    return out


# --- one point -----------------------------------------------------------------------------------

def chapter_code_hash(notebook: str | Path) -> str:
    """A 12-hex-digit hash of a notebook's code cells (sources only: outputs, execution counts and
    metadata do not count), so re-executing a chapter keeps its key and editing its code does not."""
    p = Path(notebook).resolve()
    st = p.stat()
    return _code_hash(str(p), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=64)
def _code_hash(path: str, mtime_ns: int, size: int) -> str:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    h = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            h.update(cell.source.encode() + b"\0")
    return h.hexdigest()[:12]


def run_key(notebook: str | Path, params: Mapping[str, Any], *, code: str | None = None) -> str:
    """A stable 12-hex-digit name for one run: the chapter's file name, its parameters and, when
    given, the hash of its code cells (:func:`chapter_code_hash`; :func:`run_one` passes it)."""
    doc: dict[str, Any] = {"notebook": Path(notebook).name, "params": _plain(dict(params))}
    if code is not None:
        doc["code"] = code
    blob = json.dumps(doc, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def point_dir(notebook: str | Path, params: Mapping[str, Any], out_root: str | Path) -> Path:
    """The folder of one point: ``<out_root>/<stem>-<key>``."""
    nb = Path(notebook)
    return Path(out_root) / f"{nb.stem}-{run_key(nb, params, code=chapter_code_hash(nb))}"


def is_done(folder: str | Path) -> bool:
    """True when the point in ``folder`` finished (its ``done`` marker exists)."""
    return (Path(folder) / _DONE).is_file()


def run_one(notebook: str | Path, params: Mapping[str, Any], out_root: str | Path, *,
            kernel_name: str = "python3", timeout_s: int | None = None) -> Path:
    """Execute one chapter with ``params`` into its point folder (:func:`point_dir`); return it.

    The folder holds the executed notebook, ``params.json``, ``point.json`` (chapter, key, code
    hash) and the chapter's results JSON (``TOKENDYN_RESULTS`` points there during the run). Skips
    the run if ``done`` exists; writes ``done`` only after papermill finished without error.
    """
    import papermill

    nb = Path(notebook).resolve()
    if not nb.is_file():
        raise FileNotFoundError(f"notebook={str(notebook)!r} does not exist")
    code = chapter_code_hash(nb)
    key = run_key(nb, params, code=code)
    out = Path(out_root).resolve() / f"{nb.stem}-{key}"
    if is_done(out):
        return out
    plain = _plain(dict(params))
    write_json(out / "params.json", plain, end="", indent=2, sort_keys=True)
    write_json(out / "point.json", {"chapter": nb.stem, "notebook": nb.name, "key": key, "code": code,
                                    "params": plain}, end="", indent=2, sort_keys=True)
    old = os.environ.get("TOKENDYN_RESULTS")
    os.environ["TOKENDYN_RESULTS"] = str(out)
    try:
        papermill.execute_notebook(str(nb), str(out / nb.name), parameters=dict(params),
                                   kernel_name=kernel_name, cwd=str(nb.parent),
                                   progress_bar=False, execution_timeout=timeout_s)
    finally:
        if old is None:
            os.environ.pop("TOKENDYN_RESULTS", None)
        else:
            os.environ["TOKENDYN_RESULTS"] = old
    write_text(out / _DONE, "ok\n")
    return out


def _parameters_cell(notebook: str | Path):
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            return cell
    return None


def chapter_parameters(notebook: str | Path) -> list[dict[str, str]]:
    """The ``parameters`` cell of a chapter: one dict per parameter with ``name``, ``default`` (its
    source text) and ``help`` (its inline comment, where the chapters note GPU-scale values).

    Read with ``ast`` and ``tokenize``: every assignment is found, whatever its comment says
    (papermill's own reader skips a line whose comment it cannot parse)."""
    cell = _parameters_cell(notebook)
    if cell is None:
        return []
    src = cell.source
    try:
        tree = ast.parse(src)
        comments = {t.start[0]: t.string.lstrip("#").strip()
                    for t in tokenize.generate_tokens(io.StringIO(src).readline)
                    if t.type == tokenize.COMMENT}
    except (SyntaxError, tokenize.TokenError):
        import papermill

        found = papermill.inspect_notebook(str(notebook))
        return [{"name": v["name"], "default": v["default"], "help": v["help"]} for v in found.values()]
    rows = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        default = ast.get_source_segment(src, value) or ""
        help_ = comments.get(node.end_lineno, comments.get(node.lineno, ""))
        rows += [{"name": t.id, "default": default, "help": help_} for t in targets if isinstance(t, ast.Name)]
    return rows


def parameter_names(notebook: str | Path) -> list[str] | None:
    """Names assigned in the chapter's ``parameters`` cell (``None`` if it has none, or the cell is
    not plain Python)."""
    cell = _parameters_cell(notebook)
    if cell is None:
        return None
    try:
        ast.parse(cell.source)
    except SyntaxError:
        return None
    return [r["name"] for r in chapter_parameters(notebook)]


POINT_KEYS = ("metrics", "provenance")
"""What a point's results record must hold to be gathered (:func:`tokendyn.publish.results.save` writes both)."""


def read_point(folder: Path, f: Path) -> dict[str, Any]:
    """The results record ``f`` of the point in ``folder``;
    :class:`~tokendyn.core.atomic.RecordError` naming the file when it is damaged or lacks
    :data:`POINT_KEYS`, with how to rerun the point."""
    return read_record(f, keys=POINT_KEYS,
                       remake=f"delete the point's folder (rm -r '{folder}') and run the sweep again: it reruns that point")


def collect(out_root: str | Path, chapter: str) -> list[dict[str, Any]]:
    """Every finished run's results record for ``chapter`` under ``out_root``, in folder order
    (a damaged one raises :class:`~tokendyn.core.atomic.RecordError`, see :func:`read_point`)."""
    rows = []
    for d in sorted(Path(out_root).glob("*/")):
        f = d / f"{chapter}.json"
        if is_done(d) and f.is_file():
            rows.append(read_point(d, f))
    return rows


# --- the gathered table --------------------------------------------------------------------------

_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _cell(v: Any) -> Any:
    """A table cell: non-finite numbers back from their JSON strings, lists and dicts as JSON."""
    if isinstance(v, str) and v in _NONFINITE:
        return _NONFINITE[v]
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v, sort_keys=True)
    return v


def _flatten(prefix: str, d: Mapping[str, Any], out: dict[str, Any]) -> None:
    for k, v in d.items():
        if isinstance(v, Mapping):
            _flatten(f"{prefix}{k}.", v, out)
        else:
            out[f"{prefix}{k}"] = _cell(v)


def _results_file(folder: Path, chapter: str) -> Path | None:
    f = folder / f"{chapter}.json"
    if f.is_file():
        return f
    others = [p for p in sorted(folder.glob("*.json")) if p.name not in ("params.json", "point.json")]
    return others[0] if len(others) == 1 else None


def gather(notebook: str | Path, points: Sequence[Mapping[str, Any]], out_root: str | Path):
    """One row per point, in grid order, as a ``pandas.DataFrame``.

    Columns: ``point`` (the folder name), the parameters, ``status`` (``done`` or ``missing``),
    every metric of the point's results JSON (nested ones as ``a.b``), and ``provenance.*`` (seed,
    models, library and torch versions, Python, device, time written). A finished point whose
    results JSON is damaged raises :class:`~tokendyn.core.atomic.RecordError` (:func:`read_point`).
    """
    import pandas as pd

    nb = Path(notebook)
    rows = []
    for params in points:
        folder = point_dir(nb, params, out_root)
        row: dict[str, Any] = {"point": folder.name}
        row.update({k: _cell(_plain(v)) for k, v in params.items()})
        done = is_done(folder)
        row["status"] = "done" if done else "missing"
        f = _results_file(folder, nb.stem) if done else None
        if f is not None:
            rec = read_point(folder, f)
            metrics: dict[str, Any] = {}
            _flatten("", rec["metrics"], metrics)
            for k, v in metrics.items():
                row[k if k not in row else f"metric.{k}"] = v
            prov = dict(rec["provenance"])
            prov.pop("params", None)  # the parameters are columns already
            if isinstance(prov.get("models"), list):
                prov["models"] = ", ".join(map(str, prov["models"]))
            _flatten("provenance.", prov, row)
        rows.append(row)
    return pd.DataFrame(rows)


def write_table(table, path_stem: str | Path, fmt: str = "auto") -> Path:
    """Write the gathered table as ``<path_stem>.parquet`` (``fmt="auto"`` when pyarrow is
    installed) or ``.csv``; return the path."""
    check_choice("fmt", fmt, TABLE_FORMATS)
    if fmt == "auto":
        try:
            import pyarrow  # noqa: F401
            fmt = "parquet"
        except ImportError:
            fmt = "csv"
    path = Path(f"{path_stem}.{fmt}")
    if fmt == "parquet":
        safe = table.copy()
        for c in safe.columns:  # a column of mixed types (a metric that is a number or "n/a")
            if safe[c].dtype == object:
                kinds = {type(v) for v in safe[c] if v is not None and not (isinstance(v, float) and math.isnan(v))}
                if len(kinds) > 1:
                    safe[c] = safe[c].map(lambda v: None if v is None else str(v))
        return write_atomic(path, lambda p: safe.to_parquet(p, index=False))
    return write_atomic(path, lambda p: table.to_csv(p, index=False))


# --- the sweep -----------------------------------------------------------------------------------

@dataclass
class SweepResult:
    """What :func:`run_sweep` did: the output folder, every point, which ``ran`` now, which were
    ``skipped`` (already done), which ``failed`` (folder name -> error), the gathered ``table``
    (a ``pandas.DataFrame``) and where it was written."""

    out: Path
    points: list[dict[str, Any]]
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    table: Any = None
    table_path: Path | None = None


def resolve_chapter(chapter: str | Path) -> Path:
    """A chapter as given on the command line: a notebook path, or a name in the book's folder
    (``03_phase_transition`` or ``03_phase_transition.ipynb``)."""
    p = Path(chapter).expanduser()
    if p.is_file():
        return p.resolve()
    from ..core.paths import repo_root

    root = repo_root()
    name = p.name if p.suffix == ".ipynb" else f"{p.name}.ipynb"
    if root is not None and (root / "book" / name).is_file() and len(p.parts) == 1:
        return (root / "book" / name).resolve()
    raise FileNotFoundError(f"chapter {str(chapter)!r} is neither a notebook file nor a chapter in "
                            f"{str(root / 'book') if root else 'book/'}")


def _check_known(notebook: Path, names: Iterable[str]) -> None:
    known = parameter_names(notebook)
    if known is None:
        return
    unknown = sorted(n for n in set(names) if n not in known)
    if unknown:
        raise ValueError(f"{', '.join(map(repr, unknown))} is not a parameter of {notebook.name}: "
                         f"its parameters cell sets {', '.join(known) or 'nothing'}")


def _progress(total: int, initial: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit="point", disable=not enabled,
                dynamic_ncols=True)


def task_resources(cluster: Mapping[str, float], num_gpus: float | None = None) -> dict[str, float]:
    """Ray resources of one point: ``num_gpus`` GPUs when given, else one GPU when the cluster
    has any (``cluster``: ``ray.cluster_resources()``), else one CPU."""
    if num_gpus is None:
        num_gpus = 1 if cluster.get("GPU", 0) >= 1 else 0
    return {"num_gpus": num_gpus} if num_gpus else {"num_cpus": 1}


def _ray_point(notebook: str, params: dict[str, Any], out: str, kernel_name: str,
               timeout_s: int | None) -> str:
    """The Ray task: one point, run where Ray placed it."""
    return str(run_one(notebook, params, out, kernel_name=kernel_name, timeout_s=timeout_s))


def _run_ray(nb: Path, pending: list[dict[str, Any]], out: Path, *, address: str | None,
             num_cpus: int | None, num_gpus: float | None, kernel_name: str, timeout_s: int | None,
             ray_init: Mapping[str, Any] | None, done: Callable[[str, str | None], None]) -> None:
    try:
        import ray
    except ImportError:
        raise ImportError("backend='ray' needs Ray: pip install 'ray==2.60.0' (it is pinned in "
                          "requirements/lock.txt)") from None
    started = False
    if not ray.is_initialized():
        kw = dict(ray_init or {})
        kw.setdefault("include_dashboard", False)
        if address:
            ray.init(address=address, **kw)
        else:
            if num_cpus is not None:
                kw.setdefault("num_cpus", num_cpus)
            ray.init(**kw)
        started = True
    try:
        opts = task_resources(ray.cluster_resources(), num_gpus)
        task = ray.remote(max_retries=0, **opts)(_ray_point)
        refs = {task.remote(str(nb), p, str(out), kernel_name, timeout_s): point_dir(nb, p, out).name
                for p in pending}
        waiting = list(refs)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            for ref in ready:
                try:
                    ray.get(ref)
                    done(refs[ref], None)
                except Exception as e:  # one failed point must not lose the others
                    done(refs[ref], f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:300] if str(e).strip() else ''}")
    finally:
        if started:
            ray.shutdown()


def run_sweep(notebook: str | Path, axes: Mapping[str, Sequence[Any]] | None = None, *,
              points: Sequence[Mapping[str, Any]] | None = None, params: Mapping[str, Any] | None = None,
              out: str | Path | None = None, backend: str = "local", address: str | None = None,
              num_cpus: int | None = None, num_gpus: float | None = None, progress: bool = True,
              table_format: str = "auto", kernel_name: str = "python3", timeout_s: int | None = None,
              ray_init: Mapping[str, Any] | None = None) -> SweepResult:
    """Run a chapter at every point of a grid, skip finished points, gather one table.

    ``axes`` (``{"tau": [0.5, 1, 2], "n": [8, 16]}``, see :func:`grid`) or an explicit list of
    ``points``; ``params`` are fixed for every point. ``out`` defaults to ``sweeps/<chapter>``.
    ``backend``: ``"local"`` (one point after another, here) or ``"ray"`` (one Ray task per point:
    ``address`` joins a cluster, ``None`` starts a local Ray with ``num_cpus`` CPUs and
    ``ray_init`` as extra ``ray.init`` keywords; ``num_gpus`` per point defaults to 1 when the
    cluster has GPUs, else each point takes one CPU). Every parameter name is checked against the
    chapter's parameters cell before anything runs. A progress bar counts points.

    Returns a :class:`SweepResult`; the table is also written to ``<out>/<chapter>-table.parquet``
    (or ``.csv``). Points that fail are listed in ``failed`` and left unmarked, so the next run
    retries them; the others are kept.
    """
    check_choice("backend", backend, BACKENDS)
    check_choice("table_format", table_format, TABLE_FORMATS)
    if num_cpus is not None:
        check_range("num_cpus", num_cpus, 1, integer=True)
    if num_gpus is not None:
        check_range("num_gpus", num_gpus, 0)
    if timeout_s is not None:
        check_range("timeout_s", timeout_s, 1, integer=True)
    if address is not None and backend != "ray":
        raise ValueError("address is for backend='ray' (a Ray cluster to join)")
    nb = resolve_chapter(notebook)
    fixed = dict(params or {})
    if (axes is None) == (points is None):
        raise ValueError("give the grid as axes={name: values} or as points=[{...}, ...], not both")
    pts = grid(**axes) if axes is not None else [dict(p) for p in points]
    if not pts:
        raise ValueError("points is empty: give at least one point")
    overlap = sorted(set(fixed) & {k for p in pts for k in p})
    if overlap:
        raise ValueError(f"{', '.join(map(repr, overlap))} is both a grid axis and a fixed parameter")
    pts = [{**p, **fixed} for p in pts]
    _check_known(nb, {k for p in pts for k in p})
    unique: dict[str, dict[str, Any]] = {}
    out_dir = Path(out if out is not None else Path("sweeps") / nb.stem).resolve()
    for p in pts:  # the same point twice would be two tasks racing on one folder
        unique.setdefault(point_dir(nb, p, out_dir).name, p)
    pts = list(unique.values())
    res = SweepResult(out=out_dir, points=pts)
    pending = []
    for p in pts:
        (res.skipped if is_done(point_dir(nb, p, out_dir)) else pending).append(p)
    res.skipped = [point_dir(nb, p, out_dir).name for p in res.skipped]
    out_dir.mkdir(parents=True, exist_ok=True)
    bar = _progress(len(pts), len(res.skipped), f"{nb.stem} ({backend})", progress)

    def done(name: str, error: str | None) -> None:
        if error is None:
            res.ran.append(name)
        else:
            res.failed[name] = error
        bar.update(1)

    try:
        if pending and backend == "local":
            for p in pending:
                name = point_dir(nb, p, out_dir).name
                try:
                    run_one(nb, p, out_dir, kernel_name=kernel_name, timeout_s=timeout_s)
                    done(name, None)
                except Exception as e:  # one failed point must not lose the others
                    msg = str(e).strip().splitlines()
                    done(name, f"{type(e).__name__}: {msg[-1][:300] if msg else ''}")
        elif pending:
            _run_ray(nb, pending, out_dir, address=address, num_cpus=num_cpus, num_gpus=num_gpus,
                     kernel_name=kernel_name, timeout_s=timeout_s, ray_init=ray_init, done=done)
    finally:
        bar.close()
    res.table = gather(nb, pts, out_dir)
    res.table_path = write_table(res.table, out_dir / f"{nb.stem}-table", table_format)
    return res


def summary_line(res: SweepResult) -> str:
    """``"4 points: 3 ran, 1 already done, 0 failed"``."""
    return (f"{len(res.points)} points: {len(res.ran)} ran, {len(res.skipped)} already done, "
            f"{len(res.failed)} failed")



GPU_SCALE_MARK = "# GPU scale"


def gpu_scale(notebook: str | Path) -> dict[str, Any]:
    """The GPU-scale values a chapter's ``parameters`` cell gives, as papermill parameters.

    They are a YAML mapping in a comment that starts ``# GPU scale (...):`` and may run on over
    following ``#   `` lines. Every key must be a parameter of the cell (``ValueError`` names the
    one that is not), so the command :func:`rerun_command` prints cannot drift from the chapter.
    ``{}`` when the chapter gives none.
    """
    import yaml

    cell = _parameters_cell(notebook)
    if cell is None:
        return {}
    lines = cell.source.split("\n")
    start = next((k for k, line in enumerate(lines) if line.startswith(GPU_SCALE_MARK)), None)
    if start is None:
        return {}
    text = [lines[start].split(":", 1)[1]]
    for line in lines[start + 1:]:
        if not line.startswith("#   "):
            break
        text.append(line[1:])
    values = yaml.safe_load(" ".join(text))
    if not isinstance(values, dict):
        raise ValueError(f"{Path(notebook).name}: the GPU-scale comment is not a mapping: {' '.join(text)!r}")
    known = parameter_names(notebook) or []
    for key in values:
        if key not in known:
            raise ValueError(f"{Path(notebook).name}: GPU-scale value for {key!r}, which is not a parameter "
                             f"of the chapter (its parameters: {known})")
    return values


def rerun_command(notebook: str | Path) -> str:
    """The shell command that reruns a chapter at GPU scale with papermill (from the project root)."""
    import shlex

    import yaml

    name = Path(notebook).name
    values = gpu_scale(notebook)
    cmd = f"TOKENDYN_DEVICE=cuda papermill book/{name} {Path(name).stem}-gpu.ipynb --cwd book"
    if values:
        flow = yaml.safe_dump(values, default_flow_style=True, width=10**6, sort_keys=False).strip()
        cmd += " -y " + shlex.quote(flow)
    return cmd


def recorded_run_time(notebook: str | Path) -> float | None:
    """Seconds the notebook's committed outputs took to make: from its first cell's start to its
    last cell's end, as the executing kernel stamped them (``metadata.execution``); ``None`` if the
    notebook carries no stamps."""
    from datetime import datetime

    from .results import read_notebook

    nb = read_notebook(notebook)
    stamps = [c.get("metadata", {}).get("execution", {}) for c in nb.get("cells", [])]
    starts = [s.get("iopub.execute_input") or s.get("iopub.status.busy") for s in stamps]
    ends = [s.get("shell.execute_reply") or s.get("iopub.status.idle") for s in stamps]
    starts, ends = [s for s in starts if s], [e for e in ends if e]
    if not starts or not ends:
        return None

    def parse(t: str) -> datetime:
        return datetime.fromisoformat(t.replace("Z", "+00:00"))

    return (max(map(parse, ends)) - min(map(parse, starts))).total_seconds()
