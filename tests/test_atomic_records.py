"""Atomic writes and damaged records (:mod:`tokendyn.core.atomic`).

Every file the project writes goes through :func:`tokendyn.core.atomic.write_atomic`, so a reader
never sees a half-written record (two writers racing on one path, a reader polling it) and a
writer killed mid-save leaves the old record intact. Every record reader raises
:class:`tokendyn.core.atomic.RecordError` naming the file, what is wrong and how to remake it.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import signal
import time
from pathlib import Path

import nbformat
import pytest
import torch

from tokendyn.core import atomic, checkpoint
from tokendyn.publish import claims, results, sweep
from tokendyn.analysis import size
from tokendyn.core.atomic import RecordError
from tokendyn.mcmc.censored import CensoredTimes

ROOT = Path(__file__).resolve().parents[1]
CMD = "TOKENDYN_THREADS=1 nice -n 5 .venv/bin/python scripts/record_size_ladder.py --seed 3"
KIND = "terminal flips"


@pytest.fixture(autouse=True)
def quick_provenance(monkeypatch):
    """Provenance without git or the passage pools (a write loop here must not wait on them)."""
    monkeypatch.setattr(results, "provenance",
                        lambda params, seed, models, setup=None: {"params": dict(params), "seed": seed,
                                                                  "models": list(models)})


def _rows(n: int) -> list[dict]:
    return [{"model": f"m{i}", "params": 1000 + i, "delta": [0.25, 0.5, i / 7]} for i in range(n)]


def _save_rows(path: Path, n: int) -> Path:
    return results.save_rows(path, _rows(n), kind=KIND, command=CMD, params={"n": n}, seed=3, models=["m"])


# --- the helper ----------------------------------------------------------------------------------

def test_write_atomic_keeps_the_old_file_when_write_raises(tmp_path):
    p = atomic.write_text(tmp_path / "sub" / "r.json", '{"old": 1}\n')  # parent folders made
    assert (p.stat().st_mode & 0o777) == 0o644

    def half_then_fail(tmp: Path) -> None:
        tmp.write_bytes(b'{"new": ')
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic.write_atomic(p, half_then_fail)
    assert p.read_text() == '{"old": 1}\n' and sorted(x.name for x in p.parent.iterdir()) == ["r.json"]
    atomic.write_json(p, {"b": 1, "a": [1.5]}, sort_keys=True)
    assert p.read_bytes() == b'{"a": [1.5], "b": 1}\n'  # json.dumps(obj, **kw) + "\n", byte for byte
    atomic.write_json(p, {"x": "é"}, end="", ensure_ascii=False)
    assert p.read_bytes() == '{"x": "é"}'.encode()


def test_replace_dir_swaps_a_whole_folder_in_and_keeps_the_old_one_when_fill_fails(tmp_path):
    d = tmp_path / "cache"

    def fill(n: int):
        def f(tmp: Path) -> None:
            for k in range(n):
                (tmp / f"f{k}.txt").write_text(str(n))
        return f

    atomic.replace_dir(d, fill(2))
    assert sorted(x.name for x in d.iterdir()) == ["f0.txt", "f1.txt"]

    def broken(tmp: Path) -> None:
        (tmp / "f0.txt").write_text("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        atomic.replace_dir(d, broken)
    assert [x.read_text() for x in sorted(d.iterdir())] == ["2", "2"]
    atomic.replace_dir(d, fill(1))  # the old folder's files go with it
    assert sorted(x.name for x in d.iterdir()) == ["f0.txt"] and (d / "f0.txt").read_text() == "1"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["cache"]  # nothing left aside


def test_no_library_module_or_script_writes_in_place_or_keeps_its_own_temporary_names():
    pattern = re.compile(r"""\.write_text\(|\.write_bytes\(|with_suffix\(["']\.tmp|\+ ["']\.tmp["']""")
    found = [f"{f.relative_to(ROOT)}:{k}: {line.strip()}"
             for f in sorted([*(ROOT / "lib" / "tokendyn").rglob("*.py"), *(ROOT / "scripts").glob("*.py"),
                              *(ROOT / "benchmarks").glob("*.py")])
             if f.name != "atomic.py"
             for k, line in enumerate(f.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, "write through tokendyn.core.atomic instead:\n" + "\n".join(found)


# --- a race: two writers and a reader on one record ----------------------------------------------

def _writer(path: str, n_rows: int, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        _save_rows(Path(path), n_rows)


def test_two_writers_racing_on_one_record_never_show_a_reader_a_partial_file(tmp_path):
    path = tmp_path / "runs" / "race.json"
    _save_rows(path, 1)
    ctx = mp.get_context("fork")  # the children inherit the quick provenance
    writers = [ctx.Process(target=_writer, args=(str(path), n, 2.5)) for n in (1, 20_000)]
    for w in writers:
        w.start()
    reads, partial, sizes = 0, [], set()
    try:
        while any(w.is_alive() for w in writers):
            text = path.read_text()
            reads += 1
            try:
                rec = json.loads(text)
                sizes.add(len(rec["rows"]))
            except (json.JSONDecodeError, KeyError) as e:
                partial.append(f"{len(text)} chars: {type(e).__name__} {e}"[:120])
    finally:
        for w in writers:
            w.join(30)
    assert all(w.exitcode == 0 for w in writers)
    assert not partial, f"{len(partial)} of {reads} reads saw a partial record, e.g. {partial[:3]}"
    assert reads > 20 and sizes <= {1, 20_000}
    assert sorted(p.name for p in path.parent.iterdir()) == ["race.json"], "a finished write left its temp file"
    assert results.load_rows(path, kind=KIND)[0] in (_rows(1), _rows(20_000))


# --- a kill mid-save -----------------------------------------------------------------------------

def _slow_saver(path: str, said) -> None:
    """Save a big record over ``path``, but stop for the kill halfway through its bytes."""

    def half_then_wait(self: Path, data, *args, **kwargs):
        data = data.encode() if isinstance(data, str) else data
        with open(self, "wb") as f:
            f.write(data[: len(data) // 2])
            f.flush()
            os.fsync(f.fileno())
        said.put("half written")
        time.sleep(120)

    Path.write_bytes = half_then_wait  # whatever writes the record's bytes, in place or not
    Path.write_text = half_then_wait
    _save_rows(Path(path), 20_000)


def test_a_writer_killed_mid_save_leaves_the_old_record_intact(tmp_path):
    path = tmp_path / "runs" / "kept.json"
    _save_rows(path, 3)
    before = path.read_bytes()
    ctx = mp.get_context("fork")
    said = ctx.Queue()
    child = ctx.Process(target=_slow_saver, args=(str(path), said))
    child.start()
    try:
        assert said.get(timeout=60) == "half written"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.join(30)
    assert child.exitcode == -signal.SIGKILL
    assert path.read_bytes() == before
    rows, meta = results.load_rows(path, kind=KIND)
    assert rows == _rows(3) and meta["command"] == CMD
    # a half-written temporary may be left, but never under a name a reader takes for the record
    assert [p.name for p in path.parent.iterdir() if not p.name.startswith(".")] == ["kept.json"]
    assert all(re.fullmatch(r"\.kept\.json\..+\.tmp", p.name) for p in path.parent.iterdir() if p != path)


# --- damaged records -----------------------------------------------------------------------------

def _chapter_notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]})]
    nbformat.write(nb, path)
    return path


def _chapter_record(folder: Path) -> Path:
    return results.save("99_demo", {"y": 4}, params={"x": 2}, seed=0, models=["toy"], out_dir=folder)


def _point(tmp_path: Path) -> tuple[Path, Path, Path]:
    nb = _chapter_notebook(tmp_path / "99_demo.ipynb")
    folder = sweep.point_dir(nb, {"x": 2}, tmp_path / "sweep")
    (folder / "done").parent.mkdir(parents=True)
    (folder / "done").write_text("ok\n")
    return nb, folder, _chapter_record(folder)


GENERIC = "or restore the committed copy (git checkout -- "

# each reader: (make a record, read it back, the key a damaged copy drops, its kind, its command,
# a phrase of the remake hint when it has no command)
READERS = {
    "results.load": (lambda t: _chapter_record(t), lambda p: results.load("99_demo", p.parent), "metrics", None, None,
                     "book/99_demo.ipynb"),
    "results.load_run": (lambda t: results.save_run(t / "run.json",
                                                    {("toy", 4, 1.0): CensoredTimes(torch.tensor([3, 9]),
                                                                                    torch.tensor([False, True]), cap=9)},
                                                    command=CMD, params={"budget_factors": [1.6]}, seed=0,
                                                    models=["toy"]),  # cap: 1.6 x 4 ln 4 = 8.9 -> 9
                         results.load_run, "cells", results.RUN_KIND, CMD, GENERIC),
    "results.load_rows": (lambda t: _save_rows(t / "rows.json", 2), lambda p: results.load_rows(p, kind=KIND), "rows",
                          KIND, CMD, GENERIC),
    "results.load_ladder": (lambda t: _save_rows(t / "ladder.json", 2), results.load_ladder, "rows", None, CMD, GENERIC),
    "sweep.collect": (lambda t: _point(t)[2], lambda p: sweep.collect(p.parents[1], "99_demo"), "metrics", None, None,
                      "run the sweep again"),
    "sweep.gather": (lambda t: _point(t)[2],
                     lambda p: sweep.gather(p.parents[2] / "99_demo.ipynb", [{"x": 2}], p.parents[1]), "provenance",
                     None, None, "run the sweep again"),
    "claims.scoreboard": (lambda t: _chapter_record(t), lambda p: claims.scoreboard(p.parent), "claims", None, None,
                          "book/99_demo.ipynb"),
    "checkpoint.kept_or_computed": (lambda t: checkpoint.kept_or_computed(t / "unit.json", lambda: {"row": 1})[0] and
                                    t / "unit.json",
                                    lambda p: checkpoint.kept_or_computed(p, lambda: {"row": 2}), None, None, None,
                                    "rm "),
}


def _damage(path: Path, how: str, drop: str | None) -> None:
    text = path.read_text()
    if how == "truncated":  # cut short inside its provenance (a run's command comes before it)
        path.write_text(text[: text.index('"provenance"') + 5] if '"provenance"' in text else text[: len(text) // 2])
    elif how == "not JSON":
        path.write_text("<html>502 Bad Gateway</html>\n")
    elif how == "missing":
        rec = json.loads(text)
        del rec[drop]
        path.write_text(json.dumps(rec, sort_keys=True) + "\n")
    else:
        path.write_text(json.dumps({**json.loads(text), "kind": "another run"}, sort_keys=True) + "\n")


CASES = [(name, how) for name, r in READERS.items() for how in ("truncated", "not JSON", "missing", "kind")
         if (how != "missing" or r[2] is not None) and (how != "kind" or r[3] is not None)]


@pytest.mark.parametrize("reader,how", CASES, ids=[f"{r}-{h}" for r, h in CASES])
def test_a_damaged_record_raises_naming_the_file_the_problem_and_how_to_remake_it(tmp_path, reader, how):
    make, read, drop, _, command, hint = READERS[reader]
    path = make(tmp_path)
    read(path)  # the intact record reads
    _damage(path, how, drop)
    with pytest.raises(RecordError) as e:
        read(path)
    msg = str(e.value)
    assert str(path) in msg and {"missing": f"missing key '{drop}'", "kind": "another kind"}.get(how, how) in msg
    if command is not None and how != "not JSON":
        assert f"Remake it with: {command}" in msg
    else:
        assert hint in msg, msg


def test_a_missing_record_is_a_record_error_and_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"99_none\.json is missing.*Re-execute the chapter book/99_none"):
        results.load("99_none", tmp_path)
    with pytest.raises(RecordError, match="rows.json is missing"):
        results.load_rows(tmp_path / "rows.json")
    _save_rows(tmp_path / "rows.json", 1)
    with pytest.raises(RecordError, match=r"from another kind of run: its kind is 'terminal flips', not 'coupling"):
        results.load_run(tmp_path / "rows.json")
    (tmp_path / "list.json").write_text("[1, 2]\n")
    with pytest.raises(RecordError, match="list.json is not a record: it holds a JSON list"):
        results.load_rows(tmp_path / "list.json")
