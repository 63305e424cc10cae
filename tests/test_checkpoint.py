"""Checkpoint round trips, atomic writes and resume-by-fingerprint."""

import os

import pytest
import torch

from tokendyn import checkpoint


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
