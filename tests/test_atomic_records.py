"""Records survive races, kills and damage: tokendyn.atomic and the readers built on it."""

import json
import multiprocessing as mp
import os
import signal
import time
from pathlib import Path

import pytest
import torch

from tokendyn import atomic, results

PARAMS = {"n": 8}


def _writer(path: str, rows: int, seconds: float) -> None:
    end = time.time() + seconds
    while time.time() < end:
        results.save_rows(path, [{"model": "m", "i": i, "x": 0.5} for i in range(rows)], kind="race",
                          command="python make_race.py", params=PARAMS, seed=0, models=["m"])


def test_a_reader_beside_two_writers_never_sees_a_partial_record(tmp_path):
    path = tmp_path / "race.json"
    results.save_rows(path, [], kind="race", command="c", params=PARAMS, seed=0, models=["m"])
    ctx = mp.get_context("fork")
    writers = [ctx.Process(target=_writer, args=(str(path), rows, 3.0)) for rows in (1, 20_000)]
    for w in writers:
        w.start()
    reads, partial = 0, 0
    end = time.time() + 3.0
    while time.time() < end:
        try:
            json.loads(path.read_text())
        except json.JSONDecodeError:
            partial += 1
        reads += 1
    for w in writers:
        w.join(30)
    assert reads > 100
    assert partial == 0, f"{partial} of {reads} reads saw a partial record"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")], "a finished write left its temp file"


def _slow_save(path: str) -> None:
    real_text, real_bytes = Path.write_text, Path.write_bytes

    def hang(real):
        def half_then_hang(self, data, *args, **kwargs):  # the kill lands after half the bytes are written
            real(self, data[: len(data) // 2], *args, **kwargs)
            real_text(Path(path).with_name("started"), "1")
            time.sleep(60)
        return half_then_hang

    Path.write_text, Path.write_bytes = hang(real_text), hang(real_bytes)  # only in this child process
    results.save_rows(path, [{"model": "m", "x": float(i)} for i in range(1000)], kind="k",
                      command="python new.py", params=PARAMS, seed=0, models=["m"])


def test_a_writer_killed_mid_save_leaves_the_old_record_intact(tmp_path):
    path = tmp_path / "run.json"
    results.save_rows(path, [{"model": "m", "x": 1.0}], kind="k", command="python old.py", params=PARAMS,
                      seed=0, models=["m"])
    before = path.read_bytes()
    child = mp.get_context("fork").Process(target=_slow_save, args=(str(path),))
    child.start()
    deadline = time.time() + 60
    while not (tmp_path / "started").exists() and time.time() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "started").exists(), "the child never began its write"
    os.kill(child.pid, signal.SIGKILL)
    child.join(10)
    assert path.read_bytes() == before
    rows, meta = results.load_rows(path)
    assert rows == [{"model": "m", "x": 1.0}] and meta["command"] == "python old.py"


def test_write_atomic_keeps_the_old_file_when_the_writer_fails(tmp_path):
    path = tmp_path / "a.json"
    atomic.write_json(path, {"a": 1})

    def broken(p: Path) -> None:
        p.write_text('{"a": ')
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic.write_atomic(path, broken)
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def _record(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "02_ladder.json"
    results.save_rows(path, [{"model": "m", "x": 1.0}], kind="size ladder", command="python scripts/record.py --n 8",
                      params=PARAMS, seed=0, models=["m"])
    return path, path.read_text()


def test_a_truncated_record_names_its_file_and_its_command(tmp_path):
    path, text = _record(tmp_path)
    path.write_text(text[: len(text) // 2 + 40])
    with pytest.raises(atomic.RecordError, match="truncated") as e:
        results.load_rows(path)
    assert "02_ladder.json" in str(e.value) and "python scripts/record.py --n 8" in str(e.value)


def test_a_record_that_is_not_json_or_lacks_a_key_or_is_another_kind(tmp_path):
    path, text = _record(tmp_path)
    path.write_text("<html>not a record</html>\n")
    with pytest.raises(atomic.RecordError, match="not JSON") as e:
        results.load_rows(path)
    assert "02_ladder.json" in str(e.value)
    record = json.loads(text)
    del record["rows"]
    path.write_text(json.dumps(record))
    with pytest.raises(atomic.RecordError, match="missing key 'rows'") as e:
        results.load_rows(path)
    assert "python scripts/record.py --n 8" in str(e.value)
    path.write_text(text)
    with pytest.raises(atomic.RecordError, match="another kind"):
        results.load_rows(path, kind="trap ladder")
    with pytest.raises(atomic.RecordError, match="another kind") as e:
        results.load_run(path)
    assert "02_ladder.json" in str(e.value)


def test_chapter_records_and_coupling_runs_read_with_clear_errors(tmp_path):
    results.save("03_phase", {"a": 1}, params=PARAMS, seed=0, models=["m"], out_dir=tmp_path)
    assert results.load("03_phase", out_dir=tmp_path)["metrics"] == {"a": 1}
    (tmp_path / "03_phase.json").write_text('{"chapter": "03_phase", "metrics": {"a": ')
    with pytest.raises(atomic.RecordError, match="truncated") as e:
        results.load("03_phase", out_dir=tmp_path)
    assert "03_phase.json" in str(e.value) and "book/03_phase.ipynb" in str(e.value)
    with pytest.raises(atomic.MissingRecordError, match="missing"):
        results.load("04_none", out_dir=tmp_path)
    run = tmp_path / "run.json"
    results.save_run(run, {("m", 8, 1.0): (torch.tensor([3, 5]), torch.tensor([False, True]))},
                     command="python run.py", params=PARAMS, seed=0, models=["m"])
    cells, meta = results.load_run(run)
    assert cells[("m", 8, 1.0)][0].tolist() == [3, 5] and meta["command"] == "python run.py"
    run.write_text(run.read_text()[:-30])
    with pytest.raises(atomic.RecordError, match="truncated") as e:
        results.load_run(run)
    assert "python run.py" in str(e.value)
