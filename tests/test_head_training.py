"""The size ladder's head recipe (tokendyn.training.head) and the MPNet loader, on a tiny MPNet.

The tiny MPNet (:func:`tokendyn.models.tiny.save_tiny_mpnet`) is written where the all-mpnet-base-v2
asset would be, with a manifest of its own, so that the loader, the registry rung
``mpnet-base-mlm``, the cache, the training and the export all run the real code paths in seconds.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil

import pytest
import torch

from tokendyn.core import integrity
from tokendyn.core.integrity import IntegrityError
from tokendyn.models import mpnet, shipped
from tokendyn.models.tiny import _CORPUS, save_tiny_mpnet
from tokendyn.core.paths import data_dir
from tokendyn.training import head
from tokendyn.training.mlm import IncompatibleCheckpoint

TEXTS = [" ".join(_CORPUS[i:i + 3]) for i in range(len(_CORPUS) - 2)]  # 21 windows of ~40 tokens
VAL = _CORPUS[:8]
FILES = ("config.json", "model.safetensors", "tokenizer.json", "vocab.txt")


@pytest.fixture
def tiny_assets(tmp_path, monkeypatch):
    """A tiny 12-layer MPNet as the asset (manifest included), and a data folder holding the probe."""
    assets = tmp_path / "assets"
    folder = save_tiny_mpnet(assets / mpnet.ASSET, layers=12, hidden=16)
    manifest = tmp_path / "tiny-mpnet.SHA256SUMS"
    manifest.write_text("".join(f"{integrity.sha256_file(folder / n)}  {mpnet.ASSET}/{n}\n" for n in FILES))
    probe = data_dir() / "probe"
    monkeypatch.setattr(mpnet, "MANIFEST", manifest)
    monkeypatch.setenv("TOKENDYN_ASSETS", str(assets))
    monkeypatch.setenv("TOKENDYN_DATA", str(tmp_path / "data"))
    shutil.copytree(probe, tmp_path / "data" / "probe")
    return folder


def _settings(**kw) -> head.HeadSettings:
    base = dict(model="mpnet-base-mlm", steps=30, batch=8, lr=3e-3, warmup=3, views=2, shard_items=8,
                val_windows=8, encode_batch=8)
    return head.HeadSettings(**{**base, **kw})


def _run(s, ck, **kw):
    return head.train_head(s, ck, device=torch.device("cpu"), texts=TEXTS, val_texts=VAL,
                           ckpt_minutes=1e9, log=lambda m: None, **kw)


def test_the_recipe_resumes_its_cache_and_training_and_exports_a_loadable_model(tiny_assets, tmp_path):
    s = _settings()
    ck, ref = tmp_path / "ck", tmp_path / "ref"
    # the cache, killed after 2 of its 6 shards, and with a third written but not yet recorded
    assert _run(s, ck, cache_stop_after=2) is None
    cache = ck / "cache_train"
    kept = {p.name: p.stat().st_mtime_ns for p in cache.glob("shard_*.safetensors")}
    assert len(kept) == 2
    (cache / "shard_00002.safetensors").write_bytes(b"half a shard")
    (cache / "shard_00003.safetensors.tmp").write_bytes(b"a kill mid-write")
    run = _run(s, ck, stop=12)
    assert run is not None and run.step == 12
    # finished shards were kept, not recomputed; the unrecorded one was
    assert {n: (cache / n).stat().st_mtime_ns for n in kept} == kept
    manifest = json.loads((cache / head.MANIFEST).read_text())
    assert len(manifest["shards"]) == manifest["n_shards"] == 6  # 21 windows x 2 views, 8 a shard
    for name, rec in manifest["shards"].items():  # the digests are recorded, and match
        assert integrity.sha256_file(cache / name) == rec["sha256"]
    run = _run(s, ck)  # training resumes from head.pt at step 12
    straight = _run(s, ref)
    assert json.loads((ref / "cache_train" / head.MANIFEST).read_text())["shards"] == manifest["shards"]
    got, want = dict(run.model.named_parameters()), dict(straight.model.named_parameters())
    assert run.trainable == straight.trainable == shipped.head_names(run.model)
    for n in run.trainable:
        assert torch.equal(got[n], want[n]), n  # resumed == uninterrupted, bit for bit
    # the loss falls: held-out loss at each checkpoint, and the training loss
    assert [h["step"] for h in run.history] == [12, 30]
    assert run.history[-1]["val_loss"] < run.history[0]["val_loss"]
    untrained = shipped.build("mpnet-base-mlm", torch.Generator().manual_seed(0))[0]
    val = head.load_cache(ck / "cache_val")
    assert run.history[-1]["val_loss"] < head.cached_loss(untrained, val, 12) - 0.5
    # other settings on the same folder are refused
    with pytest.raises(IncompatibleCheckpoint, match="move it away"):
        _run(_settings(mask_rate=0.2), ck)

    ev = head.export_head(run, s, command="(test)", hardware="test", eval_passages=2, log=lambda m: None)
    out = shipped.models_dir() / "mpnet-base-mlm"
    assert integrity.read_sums(out / integrity.SUMS) == {
        shipped.WEIGHTS: integrity.sha256_file(out / shipped.WEIGHTS)}
    meta = json.loads((out / "model.json").read_text())
    assert meta["n_shipped_params"] == sum(got[n].numel() for n in run.trainable)
    assert meta["training"]["recipe"] == head.recipe_text(0) and "stage 0" not in head.recipe_text(0)
    assert "mask_row_minutes" not in meta["training"]
    assert set(ev) >= {"top1", "top5", "copy_rate", "pseudo_perplexity"}
    assert json.loads((out / "eval.json").read_text())["model"] == "mpnet-base-mlm"
    # it loads back the way every shipped model does, and the registry lists it
    loaded = shipped.load_shipped("mpnet-base-mlm")
    back = dict(loaded.model.named_parameters())
    for n in run.trainable:
        assert torch.equal(back[n], got[n].detach().half().float()), n
    assert "mpnet-base-mlm" in [r.name for r in shipped.trained()]


def test_top_layers_train_on_cached_whole_windows(tiny_assets, tmp_path):
    model, tok = mpnet.load_mpnet_encoder()
    enc = tok(TEXTS[:4], return_tensors="pt", padding=True)
    ids, attn = enc["input_ids"], enc["attention_mask"]
    full = model.mpnet(input_ids=ids, attention_mask=attn).last_hidden_state
    split = head.upper_states(model, head.lower_states(model, ids, attn, 9), attn, 9)
    assert torch.allclose(split[attn.bool()], full[attn.bool()], atol=1e-5)
    s = _settings(top_layers=2, steps=6)
    run = _run(s, tmp_path / "ck")
    assert any(n.startswith("mpnet.encoder.layer.11.") for n in run.trainable)
    assert head.recipe_text(0, 2) == "frozen encoder, cached states, head and top 2 layer(s) trained (tokendyn.training.head)"
    assert not any(n.startswith("mpnet.encoder.layer.9.") for n in run.trainable)
    cache = head.load_cache(tmp_path / "ck" / "cache_train")
    assert cache.attn is not None and cache.h.shape[1:] == (s.seq_len, 16)
    untrained = shipped.build("mpnet-base-mlm", torch.Generator().manual_seed(0))[0]
    val = head.load_cache(tmp_path / "ck" / "cache_val")
    assert run.history[-1]["val_loss"] < head.cached_loss(untrained, val, 10)


def test_stage_0_trains_only_the_mask_row_resumes_bit_for_bit_and_the_row_ships(tiny_assets, tmp_path):
    """A rung with ``mask_row_steps``: stage 0 moves the mask token's embedding row and nothing else
    (its throwaway head is put back fresh), a killed stage 0 resumes to the same row, and the row
    is exported beside the head and applied on load."""
    from tokendyn.training.corpus import make_chunks

    s = _settings(mask_row_steps=8, steps=6)
    fresh_model, tok, _ = shipped.build("mpnet-base-mlm", torch.Generator().manual_seed(0))
    fresh = {n: p.detach().clone() for n, p in fresh_model.named_parameters()}
    windows = make_chunks(tok, TEXTS, s.seq_len)
    row = tok.mask_token_id
    quiet = dict(ckpt_minutes=1e9, log=lambda m: None)

    straight = shipped.build("mpnet-base-mlm", torch.Generator().manual_seed(0))[0]
    assert head.train_mask_row(straight, tok, windows, s, tmp_path / "straight", **quiet).step == 8
    killed = shipped.build("mpnet-base-mlm", torch.Generator().manual_seed(0))[0]
    assert head.train_mask_row(killed, tok, windows, s, tmp_path / "killed", stop=3, **quiet).step == 3
    resumed = shipped.build("mpnet-base-mlm", torch.Generator().manual_seed(0))[0]  # a new process
    done = head.train_mask_row(resumed, tok, windows, s, tmp_path / "killed", **quiet)
    assert done.step == 8 and done.elapsed > 0

    emb = "mpnet.embeddings.word_embeddings.weight"
    got, want = dict(resumed.named_parameters()), dict(straight.named_parameters())
    for n, p in want.items():
        assert torch.equal(got[n], p), n  # resumed == uninterrupted, bit for bit
        if n == emb:
            others = torch.arange(len(p)) != row
            assert torch.equal(p[others], fresh[n][others])  # every other row (and the tied decoder) kept
            assert not torch.allclose(p[row], fresh[n][row])  # the mask row moved
        else:
            assert torch.equal(p, fresh[n]), n  # encoder frozen, head put back fresh
    # the recipe: stage 0, then the cached head; the row ships with the head and comes back on load
    run = _run(s, tmp_path / "ck")
    assert run.trainable == shipped.head_names(run.model) + [f"{emb}[{row}]"]
    assert json.loads((tmp_path / "ck" / "cache_train" / head.MANIFEST).read_text())["key"]["mask_row_steps"] == 8
    head.export_head(run, s, command="(test)", hardware="test", eval_passages=2, log=lambda m: None)
    meta = json.loads((shipped.models_dir() / "mpnet-base-mlm" / "model.json").read_text())
    assert meta["training"]["mask_row_steps"] == 8
    assert 0 < run.mask_row_elapsed and meta["training"]["recipe"] == head.recipe_text(8)
    assert "stage 0" in head.recipe_text(8)
    assert meta["training"]["train_minutes"] == round((run.elapsed + run.mask_row_elapsed) / 60, 1)
    assert meta["n_shipped_params"] == sum(p.numel() for n, p in run.model.named_parameters()
                                           if n in shipped.head_names(run.model)) + fresh[emb].shape[1]
    # replaying stage 0 from model.json gives the shipped row (to fp16), far closer than stage 0 moved it
    replay = head.replay_mask_row("mpnet-base-mlm", tmp_path / "replay", texts=TEXTS, log=lambda m: None)
    assert replay["rel_diff"] < 1e-3 and replay["moved_rel"] > 100 * replay["rel_diff"] and replay["minutes"] > 0
    back = shipped.load_shipped("mpnet-base-mlm").model.get_input_embeddings().weight
    assert torch.equal(back[row], want[emb][row].detach().half().float())
    with pytest.raises(ValueError, match="ladder-mpnet-l2.*not exported"):
        head.replay_mask_row("ladder-mpnet-l2", tmp_path / "none", log=lambda m: None)
    mj = shipped.models_dir() / "mpnet-base-mlm" / "model.json"
    meta["training"].pop("mask_row_steps")
    mj.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="records no stage 0"):
        head.replay_mask_row("mpnet-base-mlm", tmp_path / "none", log=lambda m: None)
    with pytest.raises(ValueError, match="mask_row_steps=8"):
        head.cache_family(s, tmp_path / "fam", device=torch.device("cpu"), texts=TEXTS, val_texts=VAL)


def test_the_loader_names_what_to_run_and_refuses_damaged_or_impossible_requests(tiny_assets, tmp_path,
                                                                              monkeypatch):
    model, tok = mpnet.load_mpnet_encoder(6, generator=torch.Generator().manual_seed(1))
    assert type(model).__name__ == "MPNetForMaskedLM" and model.config.num_hidden_layers == 6
    assert model.lm_head.decoder.weight is model.mpnet.embeddings.word_embeddings.weight
    assert tok.mask_token_id == len(tok) - 1 and tok.pad_token_id == 1
    assert len(tok(" ".join(["the"] * 300), add_special_tokens=False)["input_ids"]) == 300  # no 128 cut
    with pytest.raises(ValueError, match=re.escape("has layers 1..12")):
        mpnet.load_mpnet_encoder(13)
    w = tiny_assets / "model.safetensors"
    data = bytearray(w.read_bytes())
    data[-5] ^= 0xFF
    w.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=re.escape("bash scripts/fetch_mpnet.sh")):
        mpnet.load_mpnet_encoder()
    monkeypatch.setenv("TOKENDYN_ASSETS", str(tmp_path / "nothing"))
    with pytest.raises(FileNotFoundError, match=re.escape("run `bash scripts/fetch_mpnet.sh`")):
        shipped.build("ladder-mpnet-l6", torch.Generator())


def test_the_real_asset_when_fetched():
    if not (mpnet.assets_dir() / mpnet.ASSET).is_dir():
        pytest.skip("all-mpnet-base-v2 is not fetched (bash scripts/fetch_mpnet.sh)")
    tok = mpnet.mpnet_tokenizer()
    assert tok.mask_token_id == mpnet.MASK_ID == 30526 and len(tok) == 30527
    ids = tok("The capital of France is <mask>.")["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["<s>", "the", "capital", "of", "france", "is", "<mask>", ".",
                                              "</s>"]


def test_a_bert_rung_splits_its_encoder_exactly():
    model, tok, trainable = shipped.build("ladder-minilm-l2", torch.Generator().manual_seed(0))
    assert trainable == shipped.head_names(model) and all(n.startswith("cls.") for n in trainable)
    enc = tok(["the capital of france is paris.", "a short one"], return_tensors="pt", padding=True)
    ids, attn = enc["input_ids"], enc["attention_mask"]
    with torch.no_grad():
        full = model.bert(input_ids=ids, attention_mask=attn).last_hidden_state
        for k in (0, 1, 2):
            split = head.upper_states(model, head.lower_states(model, ids, attn, k), attn, k)
            assert torch.allclose(split[attn.bool()], full[attn.bool()], atol=1e-6), k
    assert head.n_layers(model) == 2


def test_one_pass_fills_every_rung_of_an_encoder_as_its_own_run_would(tiny_assets, tmp_path):
    """cache_family writes each MPNet rung's cache from one 12-layer pass; each equals (byte for byte)
    the cache that rung's own train_head builds, and a killed family pass resumes."""
    s = _settings()
    fam, own = tmp_path / "fam", tmp_path / "own"
    kw = dict(device=torch.device("cpu"), texts=TEXTS, val_texts=VAL, log=lambda m: None)
    assert not head.cache_family(s, fam, stop_after=2, **kw)
    assert head.cache_family(s, fam, **kw)
    rungs = [r for r, (f, _) in shipped.HEAD_LADDER.items() if f == "mpnet"]
    assert len(rungs) >= 3
    for r in rungs:
        _run(dataclasses.replace(s, model=r), own / r, cache_only=True)
        for part in ("cache_train", "cache_val"):
            a = json.loads((fam / r / part / head.MANIFEST).read_text())
            b = json.loads((own / r / part / head.MANIFEST).read_text())
            assert a == b, (r, part)
    # the rungs' states differ (layer 6 is not layer 12), their masked targets do not
    six = head.load_cache(fam / "ladder-mpnet-l6" / "cache_train")
    top = head.load_cache(fam / "ladder-mpnet-l12" / "cache_train")
    assert torch.equal(six.targets, top.targets) and not torch.equal(six.h, top.h)
    with pytest.raises(ValueError, match="top_layers=1"):
        head.cache_family(dataclasses.replace(s, top_layers=1), fam, **kw)


def test_the_base_size_model_loads_offline_from_the_registry_and_fills_a_blank():
    """mpnet-base-mlm: the fetched all-mpnet-base-v2 encoder (12 layers) under the shipped layer 12 and head."""
    if not (mpnet.assets_dir() / mpnet.ASSET).is_dir():
        pytest.skip("all-mpnet-base-v2 is not fetched (bash scripts/fetch_mpnet.sh; the set-up does it)")
    from tokendyn import evaluation, models

    rows = {r["name"]: r for r in models.available()}
    assert rows["mpnet-base-mlm"]["kind"] == "mlm (embedded)"
    m = models.load_mlm("mpnet-base-mlm")
    assert type(m.model).__name__ == "MPNetForMaskedLM" and m.model.config.num_hidden_layers == 12
    assert 109e6 < sum(p.numel() for p in m.model.parameters()) < 111e6
    logits = evaluation.masked_logits(m, ["The capital of France is <mask>."])[0]
    top = [evaluation.token_word(m.tokenizer, int(i)) for i in logits.topk(5).indices]
    assert "paris" in top, top
