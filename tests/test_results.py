"""The results convention and the argument checks."""

import json
import math
from pathlib import Path

import pytest
import torch

import tokendyn
from tokendyn.core import checks
from tokendyn.publish import results


def test_save_records_numbers_and_provenance(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYN_RESULTS", str(tmp_path))
    p = results.save("99_demo", {"delta": torch.tensor(0.5), "curve": torch.arange(3), "bad": math.inf},
                     params={"tau": 1.5}, seed=7, models=["toy"])
    rec = json.loads(p.read_text())
    assert p == tmp_path / "99_demo.json"
    assert rec["metrics"] == {"delta": 0.5, "curve": [0, 1, 2], "bad": "inf"}
    prov = rec["provenance"]
    assert prov["params"] == {"tau": 1.5} and prov["seed"] == 7 and prov["models"] == ["toy"]
    assert prov["tokendyn_version"] == tokendyn.__version__
    from tokendyn.core import data
    assert prov["passage_pool_hash"] == data.pool_hash() and len(prov["passage_pool_hash"]) == 16
    assert prov["dtype"] == "float32" and prov["threads"] >= 1
    assert results.load("99_demo") == rec


@pytest.mark.parametrize("kw,msg", [
    (dict(value=0.0, lo=0, lo_open=True), r"tau=0.0 is out of range: allowed \(0, inf\]"),
    (dict(value=5, lo=1, hi=4, integer=True), r"tau=5 is out of range: allowed \[1, 4\]"),
    (dict(value=float("nan"), lo=0), r"tau=nan is out of range"),
])
def test_check_range_messages(kw, msg):
    with pytest.raises(ValueError, match=msg):
        checks.check_range("tau", **kw)


def test_check_range_types_and_ok_values():
    with pytest.raises(TypeError, match="steps must be an integer"):
        checks.check_range("steps", 2.5, 0, integer=True)
    with pytest.raises(TypeError):
        checks.check_range("steps", True, 0, integer=True)
    checks.check_range("tau", 0.05, 0, 100, lo_open=True)
    checks.check_choice("scan", "random", ["random", "systematic"])
    with pytest.raises(ValueError, match=r"scan='zigzag' is not allowed: choose one of \['random', 'systematic'\]"):
        checks.check_choice("scan", "zigzag", ["random", "systematic"])


def test_rows_round_trip_with_their_command(tmp_path):
    from tokendyn.publish import results

    p = results.save_rows(tmp_path / "runs" / "t.json", [{"K": 4, "rate": 0.1, "bound": False}], kind="terminal flips",
                          command="papermill x.ipynb y.ipynb -p n 1", params={"n": 1}, seed=3, models=["m"])
    rows, meta = results.load_rows(p)
    assert rows == [{"K": 4, "rate": 0.1, "bound": False}]
    assert meta["command"].startswith("papermill") and meta["provenance"]["seed"] == 3


def test_git_state_names_the_commit_and_ignores_re_executed_notebooks(tmp_path):
    import subprocess

    def git(*a):
        subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "book").mkdir()
    (tmp_path / "lib.py").write_text("x = 1\n")
    (tmp_path / "book" / "ch.ipynb").write_text("{}\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    state = results.git_state(tmp_path)
    assert len(state["git_commit"]) == 40 and state["git_dirty"] is False
    (tmp_path / "book" / "ch.ipynb").write_text('{"executed": true}\n')   # a chapter re-executed in place
    assert results.git_state(tmp_path)["git_dirty"] is False
    (tmp_path / "lib.py").write_text("x = 2\n")                           # the code changed
    assert results.git_state(tmp_path)["git_dirty"] is True
    assert results.git_state(tmp_path / "nowhere") == {"git_commit": None, "git_dirty": None}
    assert "git_commit" in results.provenance({}, 0, [])


def test_a_dirty_checkout_records_nothing_under_data(tmp_path, monkeypatch):
    """The writer refuses before it writes (and scripts ask before they compute); elsewhere it writes."""
    data = tmp_path / "data"
    monkeypatch.setenv("TOKENDYN_DATA", str(data))
    monkeypatch.delenv(results.RECORD_DIRTY, raising=False)
    target = data / "runs" / "r.json"
    with pytest.raises(results.RecordError, match=r"r\.json: refusing to record from a dirty checkout.*commit first"):
        results.check_recordable(target, dirty=True)
    monkeypatch.setattr(results, "git_state", lambda root=None: {"git_commit": "abc", "git_dirty": True})
    with pytest.raises(results.RecordError, match="dirty checkout"):
        results.save_rows(target, [{"x": 1}], kind="k", command="c", params={}, seed=0, models=[])
    assert not target.exists()
    results.check_recordable(tmp_path / "elsewhere.json")              # a test's folder: allowed
    results.save_rows(tmp_path / "elsewhere.json", [{"x": 1}], kind="k", command="c", params={}, seed=0, models=[])
    monkeypatch.setenv(results.RECORD_DIRTY, "1")                      # a scratch run, said so in its provenance
    assert results.load_rows(results.save_rows(target, [{"x": 1}], kind="k", command="c", params={}, seed=0,
                                               models=[]))[1]["provenance"]["git_dirty"] is True
    results.check_recordable(target, dirty=False)


def test_a_record_names_the_checkout_whose_code_ran(tmp_path, monkeypatch):
    """A worktree whose tokendyn comes from another checkout's editable install would stamp its own
    commit on code it did not run: refused before any compute, and git_state reads the library's."""
    from tokendyn.core import paths
    data = tmp_path / "data"
    monkeypatch.setenv("TOKENDYN_DATA", str(data))
    monkeypatch.setattr(paths, "repo_root", lambda: tmp_path / "other-worktree")
    with pytest.raises(results.RecordError, match="with the library imported from"):
        results.check_recordable(data / "runs" / "r.json", dirty=False)
    results.check_recordable(tmp_path / "elsewhere.json", dirty=False)   # not a record: allowed
    monkeypatch.setattr(paths, "repo_root", paths.library_root)
    results.check_recordable(data / "runs" / "r.json", dirty=False)
    assert paths.library_root() == Path(results.__file__).resolve().parents[3]  # lib/tokendyn/publish/results.py


# Recorded before their commit was kept in the record; the list only shrinks.
NO_COMMIT = ("runs/05_tube_law-terminal-all.json",)


def test_every_committed_record_names_a_clean_commit():
    from tokendyn.core import paths

    root = paths.data_dir()
    seen = []
    for p in sorted((root / "runs").glob("*.json")):
        rel = str(p.relative_to(root))
        prov = results.read_record(p, keys=("provenance",))["provenance"]
        if rel in NO_COMMIT:
            assert not prov.get("git_commit"), f"{rel} names its commit now: take it off NO_COMMIT"
            continue
        seen.append(rel)
        assert prov.get("git_commit") and prov.get("git_dirty") is False, f"{rel}: commit {prov.get('git_commit')}, dirty {prov.get('git_dirty')}"
    assert seen


def test_rows_per_model_keeps_each_finished_model_and_recomputes_what_it_may_not_keep(tmp_path, monkeypatch, capsys):
    """The recording scripts' loop: a rerun reuses a kept row while its weights and ``accept`` allow."""
    monkeypatch.setattr(results, "row_stamp", lambda name: {"weights_sha256": f"w-{name}", "git_commit": "c"})
    calls = []

    def compute(name):
        calls.append(name)
        return {"model": name, "value": len(calls), "cpu_seconds": 1.0, "wall_seconds": 2.0}

    rows = results.rows_per_model(["a", "org/b"], tmp_path, "k1", compute)
    assert [r["model"] for r in rows] == ["a", "org/b"] and rows[1]["weights_sha256"] == "w-org/b"
    assert (tmp_path / "org_b-k1.json").is_file() and "a: done in 1 s CPU (2 s wall)" in capsys.readouterr().out
    again = results.rows_per_model(["a", "org/b"], tmp_path, "k1", compute)
    assert again == rows and calls == ["a", "org/b"] and "resumed from" in capsys.readouterr().out
    results.rows_per_model(["a", "org/b"], tmp_path, "k1", compute, accept=lambda name, row: name != "a",
                           done=lambda name, row: f"{name} redone")
    assert calls == ["a", "org/b", "a"] and "a redone" in capsys.readouterr().out
    monkeypatch.setattr(results, "row_stamp", lambda name: {"weights_sha256": "retrained", "git_commit": "c"})
    results.rows_per_model(["org/b"], tmp_path, "k1", compute)          # other weights: never resumed
    assert calls[-1] == "org/b"
    results.rows_per_model(["a"], tmp_path, "k2", compute)              # other parameters: another run
    assert calls[-1] == "a" and len(calls) == 5


def test_the_record_mime_type_is_a_stored_format_not_a_module_path():
    # every committed chapter stores its record under this type; renaming it (as a module move once
    # did by accident) orphans them from readers outside this checkout
    assert results.MIME == "application/vnd.tokendyn.results+json"


def test_read_notebook_is_parsed_once_and_again_after_an_edit(tmp_path):
    from tokendyn.publish import results

    nb = tmp_path / "nb.ipynb"
    nb.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": ["a"]}]}))
    first = results.read_notebook(nb)
    assert results.read_notebook(nb) is first  # the same parse
    nb.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": ["a longer text"]}]}))
    assert results.read_notebook(nb)["cells"][0]["source"] == ["a longer text"]  # an edited file is read again
