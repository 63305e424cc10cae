"""The model registry: offline loads, fast clear failures for hub ids, safe loading."""

import time

import pytest
import torch

from tokendyn.models import embedding
from tokendyn import models


def test_hub_id_fails_fast_offline_and_names_what_is_available(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t = time.perf_counter()
    with pytest.raises(models.OfflineModelError) as err:
        models.load_mlm("bert-base-uncased")
    assert time.perf_counter() - t < 30
    msg = str(err.value)
    assert "bert-base-uncased" in msg and models.AR_NAME in msg and models.EMBEDDER_NAME in msg


def test_available_lists_every_kind():
    rows = models.available()
    kinds = {r["kind"] for r in rows}
    assert {"autoregressive", "sentence embedder", "mlm (hub)"} <= kinds
    assert {r["name"] for r in rows} >= set(models.HUB_MLMS)


def test_no_remote_code_anywhere():
    import pathlib

    import tokendyn
    src = pathlib.Path(tokendyn.__file__).parent
    for f in src.rglob("*.py"):
        text = f.read_text()
        assert "trust_remote_code=True" not in text, f
        assert "weights_only=False" not in text, f


@pytest.mark.slow
def test_embedder_separates_topics():
    e = models.load_embedder()
    x = embedding.embed(e, ["The patient was given a vaccine against the virus.",
                            "Doctors treat the infection with antibiotics.",
                            "The striker scored twice in the football final."])
    assert x.shape == (3, 384)
    c = embedding.cosine_matrix(x)
    assert c[0, 1] > c[0, 2] + 0.1


@pytest.mark.slow
def test_ar_control_loads_offline_and_knows_paris():
    ar = models.load_ar()
    ids = ar.tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        nxt = ar.model(ids).logits[0, -1].argmax()
    assert ar.tokenizer.decode(nxt).strip() == "Paris"
    assert ar.info["n_params"] == 134_515_008


def test_pca_is_deterministic_and_exact():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 3, generator=g) * torch.tensor([5.0, 1.0, 0.1])
    s, r = embedding.pca(x, 2)
    s2, r2 = embedding.pca(x, 2)
    assert torch.equal(s, s2) and torch.equal(r, r2)
    assert r[0] > 0.9 and r.sum() <= 1
    with pytest.raises(ValueError, match="k=4 is out of range"):
        embedding.pca(x, 4)


# --- loaders say what is wrong, and leave the process's hub settings alone ----------

def test_load_mlm_tells_a_missing_path_from_a_hub_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # load_mlm("") loaded the current folder before the fix
    for empty in ("", "   "):
        with pytest.raises(ValueError, match="is empty"):
            models.load_mlm(empty)
    for missing in ("./no-such-model", "data/models/no-such-model", str(tmp_path / "gone"), "~/no-such-model"):
        t = time.perf_counter()
        with pytest.raises(FileNotFoundError, match="no directory") as err:
            models.load_mlm(missing)  # before the fix: treated as a hub id
        assert time.perf_counter() - t < 5 and repr(missing) in str(err.value)
    (tmp_path / "weights.safetensors").write_bytes(b"x")
    with pytest.raises(ValueError, match="is a file, not a model directory"):
        models.load_mlm("weights.safetensors")
    with pytest.raises(TypeError, match="name must be"):
        models.load_mlm(3)


@pytest.mark.slow
def test_load_embedder_leaves_hub_offline_mode_alone(tmp_path):
    import os
    import subprocess
    import sys

    code = (
        "import os, socket\n"
        "def refuse(self, addr):\n"
        "    raise SystemExit(f'network attempt to {addr}')\n"
        "socket.socket.connect = refuse\n"
        "from tokendyn import models\n"
        "e = models.load_embedder(device='cpu')\n"
        "import huggingface_hub.constants as c\n"
        "print(os.environ.get('HF_HUB_OFFLINE'), c.HF_HUB_OFFLINE, e.get_sentence_embedding_dimension())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    # before the fix: "1 True 384", so a later hub load by an online user failed
    assert out.stdout.split()[-3:] == ["None", "False", "384"]


# --- importing a model or training module changes no default -------------------------

def test_importing_shipped_and_training_registers_nothing_until_asked():
    import subprocess
    import sys

    code = (
        "import tokendyn.models.shipped, tokendyn.models.tiny, tokendyn.training.mlm, tokendyn.training.latents\n"
        "from tokendyn.models import available, registry\n"
        "assert not registry._EMBEDDED, 'shipped models registered on import'\n"
        "rows = available()\n"
        "assert registry.DEFAULT_MLM == 'minilm-mlm' and [r['name'] for r in rows if r['default']] == ['minilm-mlm']\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
