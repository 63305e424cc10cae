"""Tests for tokendyn.models.shipped: building, delta weights, the shipped models and the registry."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from tokendyn import evaluation, models
from tokendyn.core import integrity
from tokendyn.models import shipped

SHIPPED = [n for n in shipped.RECIPES if (shipped.models_dir() / n / shipped.WEIGHTS).is_file()]


def _tiny_bert():
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=16)
    torch.manual_seed(0)  # only to make the test model; the code under test takes no global seed
    return BertForMaskedLM(cfg)


def test_split_row():
    assert shipped.split_row("bert.embeddings.word_embeddings.weight[103]") == (
        "bert.embeddings.word_embeddings.weight", 103)
    assert shipped.split_row("cls.predictions.bias") == ("cls.predictions.bias", None)


def test_weights_round_trip_in_fp16_including_one_row(tmp_path):
    src, dst = _tiny_bert(), _tiny_bert()
    with torch.no_grad():
        for p in dst.parameters():
            p.zero_()
    names = ["bert.encoder.layer.1.output.dense.weight", "cls.predictions.bias",
             "bert.embeddings.word_embeddings.weight[7]"]
    shipped.save_weights(src, names, tmp_path / "w.safetensors")
    stored = load_file(str(tmp_path / "w.safetensors"))
    assert set(stored) == set(names) and all(v.dtype == torch.float16 for v in stored.values())
    assert stored["bert.embeddings.word_embeddings.weight[7]"].shape == (8,)
    shipped.apply_weights(dst, tmp_path / "w.safetensors")
    s, d = dict(src.named_parameters()), dict(dst.named_parameters())
    w = "bert.encoder.layer.1.output.dense.weight"
    assert torch.equal(d[w], s[w].half().float())
    row = d["bert.embeddings.word_embeddings.weight"]
    assert torch.equal(row[7], s["bert.embeddings.word_embeddings.weight"][7].half().float())
    assert row[6].abs().sum() == 0 and row[8].abs().sum() == 0  # other rows untouched
    assert d["bert.encoder.layer.0.output.dense.weight"].abs().sum() == 0


def test_apply_weights_rejects_unknown_keys(tmp_path):
    from safetensors.torch import save_file

    save_file({"not.a.weight": torch.zeros(2)}, str(tmp_path / "w.safetensors"))
    integrity.record(tmp_path / "w.safetensors")  # a recorded file, so only the keys are wrong
    with pytest.raises(RuntimeError, match="not.a.weight"):
        shipped.apply_weights(_tiny_bert(), tmp_path / "w.safetensors")


@pytest.mark.slow
def test_build_minilm_keeps_the_package_encoder_and_seeds_the_head():
    m1, tok, trainable = shipped.build_minilm(torch.Generator().manual_seed(0))
    m2, _, _ = shipped.build_minilm(torch.Generator().manual_seed(0))
    m3, _, _ = shipped.build_minilm(torch.Generator().manual_seed(1))
    pkg = load_file(str(shipped.minilm_package_dir() / "model.safetensors"))
    p1 = dict(m1.named_parameters())
    assert torch.equal(p1["bert.encoder.layer.0.attention.self.query.weight"],
                       pkg["encoder.layer.0.attention.self.query.weight"])
    head = "cls.predictions.transform.dense.weight"
    assert torch.equal(p1[head], dict(m2.named_parameters())[head])
    assert not torch.equal(p1[head], dict(m3.named_parameters())[head])
    # the decoder is the package's word embedding matrix (tied), so it is never shipped
    assert m1.cls.predictions.decoder.weight.data_ptr() == m1.bert.embeddings.word_embeddings.weight.data_ptr()
    assert any(n.startswith("bert.encoder.layer.5.") for n in trainable)
    assert any(n.startswith("bert.encoder.layer.2.") for n in trainable)
    assert not any(n.startswith(("bert.encoder.layer.0.", "bert.encoder.layer.1.")) for n in trainable)
    assert f"bert.embeddings.word_embeddings.weight[{tok.mask_token_id}]" in trainable
    assert "bert.embeddings.word_embeddings.weight" not in trainable


def test_shipped_weights_fit_the_budget():
    assert "minilm-mlm" in SHIPPED, "the default MLM is not shipped in data/models/minilm-mlm"
    total = sum(f.stat().st_size for f in shipped.models_dir().rglob("*.safetensors"))
    # 25 MiB for the first models, 4 MiB for each member of Part I's model family, and 30 MiB for the
    # contextual latent model of Part II (its linear readout over 30,522 WordPiece ids is 23 MiB in fp16),
    # 1.5 MiB for each rung of the size ladder (a head only: its encoder comes from the registry), and
    # 15 MiB for the base-size model (its head and MPNet's top layer, 7.7M values in fp16)
    assert total <= (25 + 4 * len(shipped.FAMILY_DEPTHS) + 30 + 1.5 * len(shipped.HEAD_LADDER) + 15) * 2**20


def test_registry_lists_every_shipped_model_with_its_size():
    rows = {r["name"]: r for r in models.available()}
    for name in SHIPPED:
        assert rows[name]["kind"] == "mlm (embedded)" and rows[name]["n_params"] > 1_000_000
        meta = json.loads((shipped.models_dir() / name / "model.json").read_text())
        script = "train_head.py" if name in shipped.HEAD_MODELS else "train_mlm.py"
        assert meta["training"]["command"].startswith(f"nice -n 10 .venv/bin/python scripts/{script}")
    assert models.DEFAULT_MLM == "minilm-mlm" and rows["minilm-mlm"]["default"]


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_model_loads_offline_and_matches_its_eval(name):
    m = models.load_mlm(name)
    assert not m.model.training
    tok = m.tokenizer
    assert tok.mask_token_id is not None and tok.cls_token_id is not None and tok.sep_token_id is not None
    assert len({tok.mask_token_id, tok.cls_token_id, tok.sep_token_id, tok.pad_token_id}) == 4
    ev = json.loads((shipped.models_dir() / name / "eval.json").read_text())
    probe = evaluation.cloze_probe(m)
    # the committed numbers are what the committed weights give
    assert probe["top1"] == pytest.approx(ev["top1"], abs=1e-9)
    assert probe["top5"] == pytest.approx(ev["top5"], abs=1e-9)
    assert probe["copy_rate"] == pytest.approx(ev["copy_rate"], abs=1e-9)


@pytest.mark.slow
def test_default_mlm_falls_short_of_paris_first_as_recorded():
    """The default MLM's known shortfall, asserted as it is (a strict xfail would pass on any
    exception): on "The capital of France is [MASK]." it ranks 'france' first and 'paris' second,
    and its probe copy rate (eval.json) is above the 0.10 the criterion asks. A retrained model that
    puts 'paris' first and copies less fails here: then assert the criterion itself."""
    m = models.load_mlm()
    assert m.name == "minilm-mlm" and type(m.model).__name__ == "BertForMaskedLM"
    logits = evaluation.masked_logits(m, ["The capital of France is [MASK]."])[0]
    top2 = [evaluation.token_word(m.tokenizer, int(i)) for i in logits.topk(2).indices]
    assert top2 == ["france", "paris"]
    ev = json.loads((shipped.models_dir() / "minilm-mlm" / "eval.json").read_text())
    assert 0.10 < ev["copy_rate"] < 0.25


def test_model_family_cuts_minilm_and_trains_only_its_top_layer():

    model, tok, trainable = shipped.build_minilm_depth(torch.Generator().manual_seed(0), 3)
    assert model.config.num_hidden_layers == 3 and len(model.bert.encoder.layer) == 3
    layer_names = {n.split(".")[3] for n in trainable if n.startswith("bert.encoder.layer.")}
    assert layer_names == {"2"}
    assert "cls.predictions.bias" in trainable
    pkg = load_file(str(shipped.minilm_package_dir() / "model.safetensors"))
    w = dict(model.named_parameters())["bert.encoder.layer.2.output.dense.weight"]
    assert torch.equal(w, pkg["encoder.layer.2.output.dense.weight"])  # the package's own layer, not a fresh one
    with pytest.raises(ValueError, match="depth=7"):
        shipped.build_minilm_depth(torch.Generator(), 7)
