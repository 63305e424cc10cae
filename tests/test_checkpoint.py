"""Checkpoint round trips, atomic writes and resume-by-fingerprint."""

import json
import copy
import os

import pytest
import torch

from tokendyn.core import checkpoint


def test_tensors_round_trip_with_meta(tmp_path):
    t = {"T": torch.arange(6).reshape(2, 3), "c": torch.tensor([True, False]),
         "x": torch.linspace(0, 1, 5, dtype=torch.float64)}
    p = checkpoint.save_tensors(tmp_path / "a" / "cell.safetensors", t, {"tau": 1.5, "n": [8, 16]})
    back, meta = checkpoint.load_tensors(p)
    assert meta == {"tau": 1.5, "n": [8, 16]}
    for k in t:
        assert torch.equal(back[k], t[k]) and back[k].dtype == t[k].dtype
    with pytest.raises(TypeError, match="'bad'"):
        checkpoint.save_tensors(tmp_path / "b.safetensors", {"bad": [1, 2]})


def test_json_round_trip_and_no_temp_files_left(tmp_path):
    p = checkpoint.save_json(tmp_path / "r.json", {"b": 2, "a": [1.5, None]})
    assert checkpoint.load_json(p) == {"a": [1.5, None], "b": 2}
    assert os.listdir(tmp_path) == ["r.json"]


def test_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    p = tmp_path / "cell.safetensors"
    checkpoint.save_tensors(p, {"x": torch.ones(3)})

    def crash_mid_write(tensors, filename, metadata=None):
        with open(filename, "wb") as f:
            f.write(b"half a file")
        raise OSError("killed mid-write")

    monkeypatch.setattr(checkpoint, "save_file", crash_mid_write)
    with pytest.raises(OSError, match="mid-write"):
        checkpoint.save_tensors(p, {"x": torch.zeros(3)})
    back, _ = checkpoint.load_tensors(p)
    assert torch.equal(back["x"], torch.ones(3))
    assert os.listdir(tmp_path) == ["cell.safetensors"]


def test_store_computes_once_and_resumes(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"v": torch.tensor([len(calls)])}

    store = checkpoint.Store(tmp_path)
    a = store.get_or_compute("coupling", {"tau": 1.0, "n": 8}, compute)
    b = checkpoint.Store(tmp_path).get_or_compute("coupling", {"n": 8, "tau": 1.0}, compute)
    assert a["v"].item() == b["v"].item() == 1 and len(calls) == 1
    # a changed parameter is a different cell, never a stale resume
    c = store.get_or_compute("coupling", {"tau": 2.0, "n": 8}, compute)
    assert c["v"].item() == 2
    assert store.has("coupling", {"tau": 1.0, "n": 8})
    off = checkpoint.Store(None)
    off.get_or_compute("coupling", {"tau": 1.0, "n": 8}, compute)
    assert len(calls) == 3 and off.path("coupling", {}) is None
    with pytest.raises(ValueError, match="key"):
        store.path("../x", {})


def test_fingerprint_is_stable_and_order_free():
    assert checkpoint.fingerprint({"a": 1, "b": [1, 2]}) == checkpoint.fingerprint({"b": [1, 2], "a": 1})
    assert checkpoint.fingerprint({"a": 1}) != checkpoint.fingerprint({"a": 2})
    assert checkpoint.fingerprint({"a": 1, "b": "x"}) == "ecf9e98ec064"  # golden: sha256 of '{"a":1,"b":"x"}'


# --- caches never lie ---------------------------------------------------------------

def _store_cell(tmp_path, values):
    store = checkpoint.Store(tmp_path)
    store.get_or_compute("coupling", {"tau": 1.0}, lambda: {"T": values})
    (path,) = tmp_path.glob("*.safetensors")
    return store, path


def test_another_model_under_the_same_tag_never_gets_the_first_models_cells(tmp_path):
    from tokendyn.analysis import experiments
    from tokendyn.mcmc import toy

    x0 = torch.zeros(6, 5, dtype=torch.long)
    y0 = torch.ones(6, 5, dtype=torch.long)
    kw = dict(taus=[0.7], max_steps=200, seed=0, key="survey", tag={"model": "default"})
    a, b = toy.potts_chain(5, 3, coupling=2.0, seed=0), toy.potts_chain(5, 3, coupling=-1.0, seed=1)
    store = checkpoint.Store(tmp_path)
    got_a = experiments.coupling_grid(a, x0, y0, store=store, **kw)[0.7].times
    got_b = experiments.coupling_grid(b, x0, y0, store=store, **kw)[0.7].times
    fresh_b = experiments.coupling_grid(b, x0, y0, **kw)[0.7].times
    assert torch.equal(got_b, fresh_b) and not torch.equal(got_a, got_b)
    assert len(list(tmp_path.glob("*.safetensors"))) == 2
    # a second pass reads both cells back, each for its own model
    assert torch.equal(experiments.coupling_grid(a, x0, y0, store=store, **kw)[0.7].times, got_a)


def test_retrained_weights_under_the_same_name_are_a_new_cell(tmp_path):
    from tokendyn.mcmc.conditional import MLMConditional
    from tokendyn.models.tiny import build_tiny

    loaded = build_tiny("bert", seed=0)
    pristine = copy.deepcopy(loaded)
    cond = MLMConditional(loaded)
    before = checkpoint.model_fingerprint(cond)
    store = checkpoint.Store(tmp_path)
    calls = []
    cell = lambda: calls.append(1) or {"v": torch.tensor([len(calls)])}  # noqa: E731
    store.get_or_compute("c", {"n": 8}, cell, model=cond)
    store.get_or_compute("c", {"n": 8}, cell, model=cond)
    assert len(calls) == 1
    with torch.no_grad():  # "retraining" through .data: no version counter sees it
        cond.model.bert.embeddings.word_embeddings.weight.data[7, 0] += 1e-3
    after = checkpoint.model_fingerprint(cond)
    assert after["weights"] != before["weights"] and after["config"] == before["config"]
    assert store.get_or_compute("c", {"n": 8}, cell, model=cond)["v"].item() == 2
    # dtype, wrapping scheme and configuration are part of the fingerprint too
    assert checkpoint.model_fingerprint(MLMConditional(pristine, wrap="none")) != before
    half = copy.deepcopy(pristine)
    half.model.to(torch.bfloat16)
    assert checkpoint.model_fingerprint(MLMConditional(half))["dtype"] == "torch.bfloat16"
    assert checkpoint.model_fingerprint(MLMConditional(build_tiny("bert", seed=0, layers=1)))["config"] != before["config"]
    assert checkpoint.model_fingerprint(MLMConditional(build_tiny("bert", seed=0))) == before
    assert before["tokendyn"] == __import__("tokendyn").__version__


def test_a_flipped_data_byte_is_caught_and_names_the_file(tmp_path):
    store, path = _store_cell(tmp_path, torch.tensor([1500, 12, 7]))
    raw = bytearray(path.read_bytes())
    n = int.from_bytes(raw[:8], "little")
    raw[8 + n] ^= 0x03  # first data byte: 1500 -> 1503 (a flipped bit)
    path.write_bytes(bytes(raw))
    with pytest.raises(checkpoint.CheckpointError, match="failed its checksum") as err:
        store.get_or_compute("coupling", {"tau": 1.0}, lambda: {"T": torch.tensor([0])})
    assert str(path) in str(err.value) and "rm " in str(err.value)
    with pytest.raises(checkpoint.CheckpointError, match=str(path)):
        checkpoint.load_tensors(path)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "header"])
def test_an_unreadable_checkpoint_names_the_file(tmp_path, damage):
    store, path = _store_cell(tmp_path, torch.arange(10))
    raw = path.read_bytes()
    path.write_bytes({"truncate": raw[: len(raw) // 2], "garbage": b"\x00" * 5,
                      "header": raw[:12] + b"#" + raw[13:]}[damage])
    with pytest.raises(checkpoint.CheckpointError) as err:
        store.get_or_compute("coupling", {"tau": 1.0}, lambda: {"T": torch.arange(10)})
    assert str(path) in str(err.value) and "Store(folder, on_mismatch='recompute')" in str(err.value)


def test_recompute_mode_sets_a_bad_file_aside_and_recomputes(tmp_path):
    _, path = _store_cell(tmp_path, torch.tensor([1500]))
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    store = checkpoint.Store(tmp_path, on_mismatch="recompute")
    out = store.get_or_compute("coupling", {"tau": 1.0}, lambda: {"T": torch.tensor([1500])})
    assert out["T"].tolist() == [1500]
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, path.name + ".rejected"]
    assert checkpoint.load_tensors(path)[0]["T"].tolist() == [1500]  # the new file verifies
    with pytest.raises(ValueError, match="on_mismatch='keep'"):
        checkpoint.Store(tmp_path, on_mismatch="keep")


def test_stored_parameters_and_model_are_compared_on_load(tmp_path):
    from tokendyn.mcmc import toy

    a, b = toy.potts_chain(4, 2, seed=0), toy.potts_chain(4, 2, seed=1)
    store = checkpoint.Store(tmp_path)
    store.get_or_compute("c", {"n": 4}, lambda: {"v": torch.ones(1)}, model=a)
    # a file renamed onto another cell's name (or a fingerprint collision) is refused
    src = store.path("c", {"n": 4}, a)
    dst = store.path("c", {"n": 4}, b)
    src.rename(dst)
    with pytest.raises(checkpoint.CheckpointError, match="another model"):
        store.get_or_compute("c", {"n": 4}, lambda: {"v": torch.zeros(1)}, model=b)
    dst.rename(store.path("c", {"n": 5}, a))
    with pytest.raises(checkpoint.CheckpointError, match="other parameters"):
        store.get_or_compute("c", {"n": 5}, lambda: {"v": torch.zeros(1)}, model=a)


def test_fingerprint_sees_every_element_of_a_tensor():
    big = torch.zeros(2000)
    other = big.clone()
    other[1000] = 1  # str() of both tensors is the same truncated "tensor([0., 0., ..., 0.])"
    assert checkpoint.fingerprint({"x": big}) != checkpoint.fingerprint({"x": other})


def test_kept_or_computed_resumes_a_unit_and_recomputes_one_it_refuses(tmp_path):
    from tokendyn.core.checkpoint import kept_or_computed, params_key

    calls = []
    path = tmp_path / "units" / "a.json"

    def compute():
        calls.append(1)
        return {"row": len(calls)}

    assert kept_or_computed(path, compute) == ({"row": 1}, False)
    assert kept_or_computed(path, compute) == ({"row": 1}, True) and len(calls) == 1  # kept, not recomputed
    got, resumed = kept_or_computed(path, compute, accept=lambda kept: kept["row"] > 1)
    assert (got, resumed, len(calls)) == ({"row": 2}, False, 2)  # refused, recomputed and rewritten
    assert json.loads(path.read_text()) == {"row": 2} and not list(path.parent.glob("*.tmp"))

    def killed():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        kept_or_computed(tmp_path / "b.json", killed)
    assert not (tmp_path / "b.json").exists()  # a killed unit leaves nothing to resume
    assert params_key({"a": 1, "b": 2}) == params_key({"b": 2, "a": 1}) != params_key({"a": 1, "b": 3})
    assert params_key({"a": 1, "threads": 2}, ignore=("threads",)) == params_key({"a": 1, "threads": 8}, ignore=("threads",))


def test_a_kept_row_counts_only_for_the_weights_it_was_computed_from(tmp_path, monkeypatch):
    """results.row_stamp / same_weights, and recorded_rows_to_keep: a recorded run's row is reused
    only for a model whose weights file is the same git blob at the record's commit and now, under
    the same parameters; a retrained model's row is recomputed."""
    import json
    import subprocess

    from tokendyn.publish import results
    from tokendyn.core.checkpoint import params_key

    root = tmp_path / "repo"
    for name in ("kept", "retrained"):
        (root / "data" / "models" / name).mkdir(parents=True)
        (root / "data" / "models" / name / "weights.safetensors").write_bytes(name.encode())
    monkeypatch.setenv("TOKENDYN_ROOT", str(root))
    monkeypatch.setenv("TOKENDYN_DATA", str(root / "data"))

    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "weights")
    commit = git("rev-parse", "HEAD")
    params = {"seed": 0, "n": 8, "models": ["kept", "retrained"]}
    record = root / "data" / "runs" / "r.json"
    record.parent.mkdir()
    record.write_text(json.dumps({"kind": "k", "command": "c", "rows": [{"model": "kept", "v": 1}, {"model": "retrained", "v": 2}],
                                  "provenance": {"params": params, "git_commit": commit, "git_dirty": False}}))
    stamp = results.row_stamp("kept")
    assert results.same_weights(stamp, "kept") and not results.same_weights({}, "kept")
    (root / "data" / "models" / "retrained" / "weights.safetensors").write_bytes(b"new")
    assert not results.same_weights(results.row_stamp("kept"), "retrained")
    key = params_key(params, ignore=("models",))
    rows = results.recorded_rows_to_keep(record, key, ("models",), ["kept", "retrained"])
    assert list(rows) == ["kept"] and rows["kept"]["v"] == 1 and rows["kept"]["git_commit"] == commit
    assert results.same_weights(rows["kept"], "kept")
    assert results.recorded_rows_to_keep(record, params_key({**params, "n": 9}, ignore=("models",)),
                                         ("models",), ["kept"]) == {}  # other parameters: nothing kept
    assert results.recorded_rows_to_keep(record, key, ("models",), ["retrained"]) == {}
    # a model renamed since: the new name whose weights are the old model's bytes keeps that row
    (root / "data" / "models" / "renamed").mkdir()
    (root / "data" / "models" / "renamed" / "weights.safetensors").write_bytes(b"retrained")
    rows = results.recorded_rows_to_keep(record, key, ("models",), ["renamed", "retrained", "absent"])
    assert list(rows) == ["renamed"] and rows["renamed"]["v"] == 2
    assert rows["renamed"]["model"] == "renamed" and rows["renamed"]["recorded_as"] == "retrained"
    assert results.same_weights(rows["renamed"], "renamed") and "recorded_as" not in \
        results.recorded_rows_to_keep(record, key, ("models",), ["kept"])["kept"]
