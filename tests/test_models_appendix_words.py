"""The models appendix's glued words (tokendyn.publish.chapters.models_appendix) state the records'
numbers, and their wording turns with the values (above / within a target, under / over a bar)."""

from __future__ import annotations

import re

import pytest
import torch

from tokendyn.publish.chapters import models_appendix as ma


def _stage(steps, copy=None, ul=0.0, planned=None, batch=32, seq_len=64):
    st = {"steps": steps, "batch": batch, "seq_len": seq_len, "unlikelihood": ul,
          "command": f"train_mlm.py --steps {planned or steps}"}
    if copy is not None:
        st["eval"] = {"copy_rate": copy}
    return st


def _numbers(text):
    return re.findall(r"\d[\d,]*(?:\.\d+)?", text)


def test_fraction_words_name_the_nearest_simple_share():
    assert ma.fraction_words(0.5) == "half"
    assert ma.fraction_words(0.2) == "a fifth"
    assert ma.fraction_words(0.2077) == "about a fifth"
    assert ma.fraction_words(0.335) == "a third" and ma.fraction_words(0.36) == "about a third"
    assert ma.fraction_words(0.8) == "80%"


def test_corpus_words_state_the_inputs():
    w = ma.corpus_words(politics_leads=886, heldout_every=20, sotu_share=0.15, seq_len=64, shares=(0.8, 0.1, 0.1))
    assert w == {"politics_leads": "886", "heldout_share": "5%", "sotu_cap": "15%", "window_len": "64",
                 "bert_masking": "80% mask token, 10% random, 10% unchanged"}


def test_mix_size_words_give_millions_or_billions():
    assert ma.mix_size_words(1_631_859) == {"corpus_words": "1.6 million"}
    assert ma.mix_size_words(3_300_000_000) == {"corpus_words": "3.3 billion"}


def test_stage_words_follow_the_copy_rate_and_the_stops():
    stages = [_stage(500, copy=0.256), _stage(292, copy=0.264, ul=0.5, planned=1500), _stage(1000, ul=2.0)]
    w = ma.stage_words(stages, trained_layers=4, copy_target=0.10)
    assert w["trained_layers"] == "four" and w["more_stages"] == "two"
    assert "did not cure it" in w["first_stage"] and "0.26, well above the 10% target" in w["first_stage"]
    assert w["ul_stages"] == ("Stage 2 used weight 0.5 and was stopped early, after 292 of its 1,500 steps, when the "
                              "copy rate had not moved (0.26 against 0.26 before it); stage 3 used weight 2.0 for 1,000 steps.")
    # a first stage within the target says so; a stopped stage whose copy rate moved says where it went
    w = ma.stage_words([_stage(500, copy=0.08), _stage(100, copy=0.03, ul=1.0, planned=400)], trained_layers=1)
    assert "within the 10% target" in w["first_stage"] and "did not cure" not in w["first_stage"]
    assert "with the copy rate at 0.03 (from 0.08)" in w["ul_stages"] and w["more_stages"] == "one"
    assert "above" in ma.stage_words([_stage(500, copy=0.15)], trained_layers=4)["first_stage"]
    assert "well above" not in ma.stage_words([_stage(500, copy=0.15)], trained_layers=4)["first_stage"]


def _ladder():
    ladder = {"r-a1": ("minilm", 1), "r-a2": ("minilm", 2), "r-b12": ("mpnet", 12)}
    tr = {"max_windows": 16000, "mask_rate": 0.25, "steps": 600, "batch": 32, "lr": 1e-3, "mask_row_steps": 300}
    metas = {"r-a1": {"n_params": 14e6, "training": tr}, "r-a2": {"n_params": 15.6e6, "training": tr},
             "r-b12": {"n_params": 109.19e6, "weights_bytes": 1.25e6, "training": tr},
             "base": {"n_shipped_params": 7.7e6, "weights_bytes": 15.4e6, "training": {"steps": 600, "lr": 5e-4}}}
    evals = {"r-b12": {"copy_rate": 0.35}}
    return ladder, metas, evals


def test_ladder_words_read_the_rungs():
    ladder, metas, evals = _ladder()
    w = ma.ladder_words(ladder, metas, evals, base_model="base", default_copy=0.21, package_mask=(0.24, 1.1),
                        mpnet_mask=(1.5, 1.2), row_size=384, min_span=7.0)
    assert (w["cache_windows"], w["mask_share"], w["head_steps"], w["head_batch"]) == ("16,000", "25%", "600", "32")
    assert w["minilm_depths"] == "1 and 2" and w["mpnet_depths"] == "12"
    assert w["top_params"] == "109.2M" and w["top_head_mb"] == "1.2 MB"
    assert w["top_copy"] == "on about a third of the probe (copy rate 0.35), more than the default `minilm-mlm` (0.21)"
    assert w["base_recipe"] == "the same 600 steps (lr 5e-4, half the ladder's"
    assert w["base_shipped"] == "7.7M parameters, 15.4 MB in fp16"
    assert w["mpnet_row"].startswith("longer") and w["minilm_row"] == "about a fifth"
    assert (w["row_size"], w["row_steps"]) == ("384", "300")
    # 109.19 / 15.6 = 6.9994 would round onto the bar: the span is printed to the digit that shows it is under
    assert "the 2-to-12-layer ladder spans" in w["span"] and "a hair under the 7x" in w["span"]
    span = float(re.search(r"spans (\d+\.\d+)x", w["span"]).group(1))
    assert span < 7.0 and "one-layer rung was added" in w["span"]


def test_ladder_words_turn_when_the_values_do():
    ladder, metas, evals = _ladder()
    metas["r-a2"]["n_params"] = 12e6  # the ladder without its smallest rung already spans the bar
    metas["r-a1"]["n_params"] = 11e6
    evals["r-b12"]["copy_rate"] = 0.1
    w = ma.ladder_words(ladder, metas, evals, base_model="base", default_copy=0.21, package_mask=(0.24, 1.1),
                        mpnet_mask=(0.9, 1.2), row_size=384, min_span=7.0)
    assert "already spans" in w["span"] and "hair under" not in w["span"]
    assert "no more than the default" in w["top_copy"] and w["mpnet_row"].startswith("shorter")


def test_bert_gap_words_compute_the_shares():
    stages = [_stage(1000, batch=32, seq_len=64)]
    pre = {"words": 3.3e9, "steps": 1_000_000, "batch": 256, "seq_lens": ((128, 1.0),)}
    w = ma.bert_gap_words({"n_params": 100e6, "layers": 12, "hidden": 768}, {"n_params": 20e6}, stages, pre)
    assert (w["bert_params"], w["bert_layers"], w["bert_hidden"]) == ("100M", "12", "768")
    assert (w["bert_words"], w["bert_steps"], w["bert_batch"]) == ("3.3 billion", "1M", "256")
    assert w["default_share"] == "a fifth" and w["default_steps"] == "1,000 steps of 32"
    # (1e6 * 256 * 128 * 100e6) / (1000 * 32 * 64 * 20e6) = 80,000
    assert w["compute_share"] == "1/80,000"


def _configs():
    return {"context-latent": {"seq_len": 32, "dim": 381, "vocab_size": 30522, "reconstruction_accuracy": {"heldout": 0.923},
                               "median_heldout_margin": 1.7279, "command": "nice .venv/bin/python scripts/a.py all"},
            "text-latent": {"autoencoder": {"latent_dim": 16, "vocab_size": 4096}, "reconstruction_accuracy": {"heldout": 0.998},
                            "command": "python scripts/b.py text"},
            "image-latent": {"flow": {"seq_len": 16}, "autoencoder": {"channels": 2}, "reconstruction_mse": {"heldout": 0.0025},
                             "command": "python scripts/b.py image"},
            "faces-latent": {"flow": {"seq_len": 36}, "autoencoder": {"channels": 4, "size": 24},
                             "reconstruction_mse": {"heldout": 0.0035}, "data": {"heldout_images": 10},
                             "command": "python scripts/b.py faces"}}


def test_latent_table_states_every_config_value():
    t = ma.latent_table(_configs(), text_margin=2.09, digit_size=8)
    rows = t.splitlines()
    assert len(rows) == 6 and all(r.count("|") == 6 for r in rows)
    assert "32-token windows, 381-d" in rows[2] and "30,522 WordPiece" in rows[2] and "92.3%" in rows[2] and "1.73" in rows[2]
    assert "16-d" in rows[3] and "4,096 words" in rows[3] and "99.8%" in rows[3] and "median margin 2.1" in rows[3]
    assert "4x4 grid of 2 channels (8x8 digits)" in rows[4] and "RMS error 0.050" in rows[4]
    assert "6x6 grid of 4 channels (24x24" in rows[5] and "MSE 0.0035 (10 faces)" in rows[5]
    assert "`scripts/a.py all`" in rows[2]


def test_reading_words_mark_the_members_under_the_bar():
    fam = {"d-depth2": 2, "d-depth3": 3, "d-depth4": 4}
    w = ma.reading_words(0.25, fam, {"d-depth2": 0.198, "d-depth3": 0.28, "d-depth4": 0.27})
    assert w["context_bar"] == "0.25"
    assert w["family"].startswith("`d-depth2/3/4` (all-MiniLM-L6-v2 cut to 2, 3 and 4 layers")
    assert "`d-depth2` (top-5 0.20) falls short of the bar and is marked" in w["family"]
    w = ma.reading_words(0.25, fam, {"d-depth2": 0.3, "d-depth3": 0.28, "d-depth4": 0.27})
    assert "every member clears the bar" in w["family"] and "short" not in w["family"]


def test_target_words_are_the_constants():
    assert ma.target_words() == {"top5_target": f"{ma.TOP5_TARGET:.0%}", "copy_target": f"{ma.COPY_TARGET:.0%}"}
    assert ma.target_words(0.5, 0.05) == {"top5_target": "50%", "copy_target": "5%"}


def test_quality_words():
    assert ma.quality_words(121, 1.0, 64) == {"probe_n": "121", "wordpiece_coverage": "100%", "ppl_tokens": "64"}
    assert _numbers(ma.quality_words(90, 0.84, 32)["wordpiece_coverage"]) == ["84"]
