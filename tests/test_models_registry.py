"""The model registry: offline loads, fast clear failures for hub ids, safe loading."""

import time

import pytest
import torch

from tokendyn import embedding, models


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
