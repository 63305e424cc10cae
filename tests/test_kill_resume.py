"""Kill and resume: a checkpointed survey killed with SIGKILL at random points, then resumed.

The survey is eight cells of :func:`tokendyn.analysis.experiments.coupling_grid` on a Potts toy, checkpointed in
one :class:`~tokendyn.core.checkpoint.Store`. A worker process runs it; at each kill point it stops and
the test kills it with SIGKILL. The kill points (``KILL_POINTS``, drawn from a seeded generator so
every run of the test kills at the same places) are: random forward passes of the sampler, as a
fraction of the work left; the middle of writing a checkpoint (half its bytes on disk); and the
moment between a complete temporary file and its rename. After every kill each finished cell must
still be there and verify, and a cell finished before a run must not be computed again in it. The
resumed survey must equal an uninterrupted one (run in its own process) bit for bit.
"""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tokendyn.core import atomic, checkpoint
from tokendyn.analysis import experiments
from tokendyn.mcmc import glauber, toy

N_CELLS = 8
TAUS = [0.8, 2.0]


def _kill_points() -> list[tuple[str, float]]:
    """Seven kill points: 4 at random forward passes (a seeded fraction in [0.1, 0.6] of the passes
    the unfinished cells need), 2 in the middle of writing a checkpoint (the run's 1st or 2nd
    write), 1 just before a rename. In this order some work is always left for the next one."""
    rng = random.Random(17)
    step = lambda: ("step", rng.uniform(0.1, 0.6))  # noqa: E731
    return [step(), ("write", 2), step(), ("rename", 1), step(), step(), ("write", 1)]


KILL_POINTS = _kill_points()


def survey(folder: Path) -> dict[str, torch.Tensor]:
    """The checkpointed run: every cell's coupling times and censoring, keyed by cell."""
    store = checkpoint.Store(folder)
    model = toy.potts_chain(6, 3, coupling=1.2, seed=0)
    out = {}
    for k in range(N_CELLS):
        x0 = torch.full((16, 6), k % 3, dtype=torch.long)
        y0 = torch.full((16, 6), (k + 1) % 3, dtype=torch.long)
        res = experiments.coupling_grid(model, x0, y0, taus=TAUS, max_steps=200, seed=k, store=store,
                                   key=f"cell{k}", tag={"survey": "kill-resume"})
        for tau, cell in res.items():
            out[f"cell{k}/tau{tau}/times"] = cell.times
            out[f"cell{k}/tau{tau}/censored"] = cell.censored
    return out


def _worker() -> None:
    """The process that gets killed. Logs each cell it computes and its forward passes; at the
    point TD_KILL names it says "kill me" and waits for the SIGKILL."""
    folder, log, kill = Path(os.environ["TD_FOLDER"]), os.environ["TD_LOG"], os.environ["TD_KILL"]
    kind, _, at = kill.partition(":")
    count = {"passes": 0, "writes": 0, "syncs": 0}

    def note(line: str) -> None:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, (line + "\n").encode())
        os.close(fd)

    def wait_for_the_kill() -> None:
        print("kill me", flush=True)
        time.sleep(600)

    real_coupling = glauber.coupling_times

    def logged(model, x0, y0, *, seed, **kw):
        note(f"start cell{seed} {count['passes']}")
        return real_coupling(model, x0, y0, seed=seed, **kw)

    glauber.coupling_times = logged
    real_logits = toy.PairwiseConditional.site_logits

    def counted(self, tokens, sites):
        count["passes"] += 1
        if kind == "step" and count["passes"] == int(at):
            wait_for_the_kill()
        return real_logits(self, tokens, sites)

    toy.PairwiseConditional.site_logits = counted
    real_save = checkpoint.save_file

    def save(tensors, filename, metadata=None):
        real_save(tensors, filename, metadata=metadata)
        count["writes"] += 1
        if kind == "write" and count["writes"] == int(at):
            with open(filename, "r+b") as f:  # half the bytes are on disk
                f.truncate(os.path.getsize(filename) // 2)
            wait_for_the_kill()

    checkpoint.save_file = save
    real_fsync = atomic._fsync_file  # every atomic write flushes its temporary file, then renames it

    def fsync(path):
        real_fsync(path)
        count["syncs"] += 1
        if kind == "rename" and count["syncs"] == int(at):
            wait_for_the_kill()  # a complete temporary file, not yet renamed onto its cell

    atomic._fsync_file = fsync
    print("ready", flush=True)
    out = survey(folder)
    note(f"end {count['passes']}")
    checkpoint.save_tensors(folder.parent / "result.safetensors", out)


def _run(folder: Path, log: Path, kill: str) -> tuple[bool, str]:
    """Run the worker until it finishes or reaches its kill point, where it is SIGKILLed.
    Returns (killed, stderr)."""
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            "import test_kill_resume as t; t._worker()")
    env = {**os.environ, "TD_FOLDER": str(folder), "TD_LOG": str(log), "TD_KILL": kill,
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = iter(proc.stdout.readline, "")
        assert next(lines).strip() == "ready"
        killed = False
        for line in lines:
            if line.strip() == "kill me":
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
        proc.wait(300)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        proc.stdout.close(), proc.stderr.close()
    assert proc.returncode == (-signal.SIGKILL if killed else 0), err[-3000:]
    return killed, err


def _passes_per_cell(log: Path) -> dict[str, int]:
    """Forward passes each cell took, from an uninterrupted run's log."""
    marks = [line.split() for line in log.read_text().splitlines()]
    starts = [(m[1], int(m[2])) for m in marks if m[0] == "start"] + [("end", int(marks[-1][1]))]
    return {cell: nxt - at for (cell, at), (_, nxt) in zip(starts, starts[1:])}


def _cells(folder: Path) -> dict[str, dict[str, torch.Tensor]]:
    """Every finished cell in the folder, each verified (checksum), keyed by cell name."""
    out = {}
    for p in sorted(folder.glob("cell*.safetensors")):
        out[p.name.split("-")[0]] = checkpoint.load_tensors(p, require_checksum=True)[0]
    return out


def _computed(log: Path) -> list[str]:
    return [line.split()[1] for line in log.read_text().splitlines() if line.startswith("start")] \
        if log.exists() else []


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume_is_bit_identical(tmp_path):
    t0 = time.perf_counter()
    _run(tmp_path / "reference" / "cells", tmp_path / "reference.log", "none")
    reference, _ = checkpoint.load_tensors(tmp_path / "reference" / "result.safetensors")
    passes = _passes_per_cell(tmp_path / "reference.log")
    folder, history = tmp_path / "killed" / "cells", []
    for r, (kind, value) in enumerate(KILL_POINTS):
        before = _cells(folder) if folder.exists() else {}
        if kind == "step":  # a random forward pass among those the unfinished cells need
            left = sum(n for cell, n in passes.items() if cell not in before)
            value = max(1, int(value * left))
        log = tmp_path / f"run{r}.log"
        killed, _ = _run(folder, log, f"{kind}:{value}")
        after = _cells(folder) if folder.exists() else {}  # every cell file verifies
        history.append((kind, value, killed, len(after)))
        for name, tensors in before.items():  # no finished cell is ever lost or changed
            assert name in after and all(torch.equal(tensors[k], after[name][k]) for k in tensors)
        assert not set(before) & set(_computed(log)), f"run {r} recomputed a finished cell"
        assert killed, f"kill point {kind}:{value} was never reached; so far {history}"
    # resume, with no kill
    before = _cells(folder)
    log = tmp_path / "resume.log"
    _run(folder, log, "none")
    assert sorted(_computed(log)) == sorted(set(passes) - set(before))  # only the unfinished ones
    result, _ = checkpoint.load_tensors(tmp_path / "killed" / "result.safetensors")
    assert result.keys() == reference.keys()
    for k, v in reference.items():
        assert torch.equal(result[k], v), k
    assert len(_cells(folder)) == N_CELLS and len(before) < N_CELLS
    print(f"{len(KILL_POINTS)} kill points (kind, point, killed, cells finished after): {history}; "
          f"{time.perf_counter() - t0:.1f} s")
