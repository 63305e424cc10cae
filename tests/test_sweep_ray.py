"""`tokendyn sweep --backend ray` on a local Ray: a 2-point sweep, and a sweep killed midway.

Both run the real console script in a subprocess, on a purpose-built tiny chapter, with Ray's
files in a short private folder. The first starts its own local Ray (no ``--address``); the
second joins a cluster made by ``ray start --head`` (``--address auto``), is killed with SIGKILL
once one point is finished and another is running, and is run again. Every process a test started
is found afterwards (they all inherit that folder in ``RAY_TMPDIR``) and must be gone; any that is
not is killed by its id and fails the test.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pandas as pd
import psutil
import pytest

pytestmark = pytest.mark.slow

TINY = ("import os, time\n"
        "if log:\n"
        "    with open(log, 'a') as f:\n"
        "        f.write(f'{x}\\n')\n"
        "while hold and x > 1 and os.path.exists(hold):\n"
        "    time.sleep(0.05)\n"
        "from tokendyn.publish import results\n"
        "results.save('99_tiny', {'y': x * x, 'half': x / 2, 'never': float('inf')},\n"
        "             params={'x': x}, seed=0, models=['none'])\n")


def _chapter(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1\nlog = ''\nhold = ''", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(TINY)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def _tokendyn() -> list[str]:
    script = Path(sys.executable).with_name("tokendyn")
    assert script.is_file(), "the console script is missing: run `pip install --no-deps -e .`"
    return [str(script)]


@pytest.fixture
def ray_env(tmp_path):
    """Environment for the sweep: Ray's files in a short private folder (unix socket paths are
    limited to 107 characters), and a check afterwards that nothing it started is left."""
    tmp = tempfile.mkdtemp(prefix="tdray-", dir="/tmp")
    env = {**os.environ, "RAY_TMPDIR": tmp, "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1"}
    yield env
    left = _wait_gone(tmp, 30)
    for p in left:
        p.kill()
    shutil.rmtree(tmp, ignore_errors=True)
    assert not left, f"processes left behind: {[p.info['name'] for p in left]}"


def _started_by(tmp: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["name", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and p.environ().get("RAY_TMPDIR") == tmp:
                found.append(p)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return found


def _wait_gone(tmp: str, timeout: float, kernels_only: bool = False) -> list[psutil.Process]:
    def left_over():
        found = _started_by(tmp)
        if kernels_only:  # the chapters' kernels, not the cluster's own processes
            found = [p for p in found if "ipykernel_launcher" in " ".join(_cmdline(p))]
        return found

    t = time.monotonic()
    while (left := left_over()) and time.monotonic() - t < timeout:
        time.sleep(0.5)
    return left


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
        return []


def test_ray_sweep_of_two_points_gathers_one_table(tmp_path, ray_env):
    nb = _chapter(tmp_path / "99_tiny.ipynb")
    out = tmp_path / "out"
    t = time.perf_counter()
    run = subprocess.run(_tokendyn() + ["sweep", str(nb), "--grid", "x=2,3", "--backend", "ray",
                                        "--num-cpus", "2", "--out", str(out), "--no-progress"],
                         env=ray_env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    print(f"2-point Ray sweep: {time.perf_counter() - t:.1f} s")
    assert "2 points: 2 ran, 0 already done, 0 failed" in run.stdout
    table = pd.read_parquet(out / "99_tiny-table.parquet")
    assert table["x"].tolist() == [2, 3] and table["status"].tolist() == ["done", "done"]
    assert table["y"].tolist() == [4, 9] and table["half"].tolist() == [1.0, 1.5]
    assert table["never"].tolist() == [float("inf")] * 2  # back from the JSON string "inf"
    assert set(table["provenance.tokendyn_version"]) == {__import__("tokendyn").__version__}
    assert table["provenance.models"].tolist() == ["none", "none"]
    assert {"provenance.device", "provenance.torch_version", "provenance.written_at"} <= set(table.columns)
    for folder in table["point"]:
        point = json.loads((out / folder / "point.json").read_text())
        assert point["chapter"] == "99_tiny" and (out / folder / "99_tiny.ipynb").is_file()


@pytest.fixture
def ray_cluster(ray_env, tmp_path):
    """A local Ray cluster, as `ray start --head` makes one, for sweeps that join it."""
    ray = Path(sys.executable).with_name("ray")
    log = (tmp_path / "head.log").open("w")
    head = subprocess.Popen([str(ray), "start", "--head", "--num-cpus", "2", "--include-dashboard", "false",
                             "--disable-usage-stats", "--block"], env=ray_env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in (tmp_path / "head.log").read_text():
            assert head.poll() is None and time.monotonic() < deadline, (tmp_path / "head.log").read_text()[-3000:]
            time.sleep(0.2)
        yield ray_env
    finally:
        head.terminate()  # `ray start --block` stops its cluster on SIGTERM (to it alone: ~3 s)
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(30)
        log.close()


def test_a_killed_ray_sweep_reruns_only_its_unfinished_points(tmp_path, ray_cluster):
    """Joins a running cluster (`--address auto`), so the kill takes the sweep and not Ray."""
    nb = _chapter(tmp_path / "99_tiny.ipynb")
    out, log, hold = tmp_path / "out", tmp_path / "runs.log", tmp_path / "hold"
    hold.write_text("points x > 1 wait while this file exists\n")
    cmd = _tokendyn() + ["sweep", str(nb), "--grid", "x=1,2,3", "-p", f"log={json.dumps(str(log))}",
                         "-p", f"hold={json.dumps(str(hold))}", "--backend", "ray", "--address", "auto",
                         "--out", str(out), "--no-progress"]
    ray_env = ray_cluster
    t = time.perf_counter()
    first = subprocess.Popen(cmd, env=ray_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        # kill once x=1 is finished and x=2 is running: one point done, one midway, one not started
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and first.poll() is None:
            if list(out.glob("*/done")) and log.is_file() and "2" in log.read_text().split():
                break
            time.sleep(0.2)
        assert first.poll() is None, first.stdout.read().decode()[-3000:]
        assert len(list(out.glob("*/done"))) == 1
        os.killpg(first.pid, signal.SIGKILL)  # the sweep's driver; Ray stops its tasks
        first.wait(30)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
        first.stdout.close()
    # Ray stops the dead driver's tasks; their kernels follow. None may still be running when
    # the hold is lifted, or it could finish a point behind the rerun's back.
    assert not _wait_gone(ray_env["RAY_TMPDIR"], 60, kernels_only=True)
    done_before = {d.parent.name: (d.parent / "99_tiny.json").stat().st_mtime_ns for d in out.glob("*/done")}
    assert len(done_before) == 1
    log.write_text("")
    hold.unlink()
    second = subprocess.run(cmd, env=ray_env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    print(f"kill + resume: {time.perf_counter() - t:.1f} s")
    assert "3 points: 2 ran, 1 already done, 0 failed" in second.stdout
    assert sorted(log.read_text().split()) == ["2", "3"]  # only the unfinished points ran again
    (name, mtime), = done_before.items()
    assert (out / name / "99_tiny.json").stat().st_mtime_ns == mtime  # the finished one untouched
    table = pd.read_csv(out / "99_tiny-table.csv") if (out / "99_tiny-table.csv").exists() else \
        pd.read_parquet(out / "99_tiny-table.parquet")
    assert table["y"].tolist() == [1, 4, 9] and set(table["status"]) == {"done"}
