"""Chapter 5's glued words (tokendyn.publish.chapters.tube_law, tube_law_map and tube_law_image: the
pages 5.1, 5.2 and 5.3) on constructed tables: every number is the input's, and the words turn when a
value crosses the line they state."""

from __future__ import annotations

import re

import pandas as pd
import torch

from tokendyn.core.stats import Estimate
from tokendyn.latent import geometry, mechanism
from tokendyn.publish import verdicts
from tokendyn.publish.book import Setup
from tokendyn.publish.chapters import count_words
from tokendyn.publish.chapters import tube_law as words
from tokendyn.publish.chapters import tube_law_image as image_words
from tokendyn.publish.chapters import tube_law_map as map_words

CTX = {"dim": 100, "vocab_size": 12345, "seq_len": 16,
       "data": {"heldout_windows": 200, "train_windows": 1000},
       "flow": {"depth": 3, "width": 128},
       "training": {"readout_steps": 700, "flow_steps": 2500},
       "reconstruction_accuracy": {"train": 0.95, "heldout": 0.9}}
SEP = {"autoencoder": {"latent_dim": 8, "vocab_size": 2048}}


def _numbers(text: str) -> list[str]:
    return re.findall(r"\d[\d,]*(?:\.\d+)?", text)


def _term(ratios=(2.6, 1.8, 1.5), rates=(0.11, 0.04, 0.018)) -> pd.DataFrame:
    return pd.DataFrame({"K": [4, 8, 16], "rate": rates, "lo": [r * 0.9 for r in rates], "hi": [r * 1.05 for r in rates],
                         "ratio": ratios, "ratio_lo": [r * 0.9 for r in ratios], "ratio_hi": [r * 1.1 for r in ratios],
                         "residual_rms": [0.3, 0.2, 0.1], "n": [4096] * 3}).set_index("K")


def test_model_and_terminal_words_are_the_configs():
    w = words.model_texts(CTX, SEP, flow_params=2_851_000, image_shape=(8, 8), terminal_steps=[1, 2, 4])
    assert w == {"ctx_dim": "100", "ctx_vocab": "12,345", "seq_len": "16", "heldout_windows": "200",
                 "heldout_tokens": "3,200", "sep_dim": "8", "sep_vocab": "2,048", "flow_params": "2.85M",
                 "flow_steps": "2,500", "digit_shape": "8x8", "n_terminal_steps": "three"}
    t = words.terminal_texts([2, 4, 8], n_terminal=50, heldout_windows=200, seq_len=16)
    assert t["term_kmin"] == "2" and t["claim9_min_flips"] == str(words.default(verdicts.claim_9, "min_flips"))
    assert t["terminal_scale"] == "50 of the 200 held-out windows (800 tokens)"
    assert words.terminal_texts([4], n_terminal=200, heldout_windows=200, seq_len=16)["terminal_scale"] == (
        "every held-out window (200 windows, 3,200 tokens)")
    assert count_words(7, through=10) == "seven" and count_words(12, through=10) == "12"   # chapter 5's style


def test_toys_rms_pixels_and_spans():
    t = map_words.toy_texts(toy_d=32, toy_tokens=6, toy_sigma=0.4, toy_spacings={"crowded": 2.0, "separated": 7.0}, ctx_dim=100)
    assert t["toy_crowded"] == "2" and t["toy_separated"] == "7" and t["toy_sigma"] == "0.4" and t["toy_tokens"] == "6"
    assert t["unaimed_ctx"] == f"{geometry.isotropic_abs_cos(100):.2f} at d = 100"
    assert words.latent_rms_text({"a": 1.01, "b": 0.5}) == "1.01 (a) and 0.50 (b)"
    assert image_words.pixel_range_text(torch.tensor([0.0, 0.5, 1.0])) == "[0, 1]"
    assert words.span([2.6, 1.5, 1.8], unit="x") == "1.5-2.6x" and words.span([3.0, 3.01]) == "3"


def test_geometry_growth_names_the_steps_that_clear():
    geo = pd.DataFrame({"generator": ["contextual flow"] * 2 + ["exact toy, crowded"] * 2, "K": [2, 4, 2, 4],
                        "mean_abs_cos": [0.12, 0.09, 0.3, 0.11], "unaimed": [0.04, 0.04, 0.1, 0.1]})
    dims = [{"d": 4, "lo": 4, "hi": 6}, {"d": 16, "lo": 10, "hi": 16}, {"d": 64, "lo": 17, "hi": 30},
            {"d": 256, "lo": 26, "hi": 50}]
    g = map_words.geometry_texts(geo, dims)
    assert g["flow_aim_x"] == "2.2-3 times" and g["toy_aim_x"] == "at most 1.1 times"   # the toy's K = 2 is left out
    assert g["dim_growth"] == "from d = 4 to 16 and from d = 16 to 64 beyond the intervals, while 64 and 256 overlap at this sample"
    dims[-1]["lo"] = 31
    assert map_words.geometry_texts(geo, dims)["dim_growth"] == "every step from d = 4 to 256 beyond the previous interval"


def test_ladder_and_map_words_read_their_records():
    ladder = pd.DataFrame({"generator": ["ladder, 1,000 steps", "ladder, 9,000 steps", "shipped"], "train_steps": [1000, 9000, 3000]})
    lt = map_words.ladder_texts(ladder, {"provenance": {"params": {"windows": 256}}}, _term(), [4, 8, 16])
    assert lt == {"ratio_span": "1.5-2.6x", "ladder_top": "9,000", "ladder_snaps": "1,000 and 9,000", "ladder_windows": "256"}
    assert map_words.ladder_texts(None, None, _term(), [4])["ladder_top"] == "(not recorded)"
    rows = [{"d": d, "M": m, "sigma": s, "spacing": sp, "K": k} for d, m, s, sp, k in
            ((8, 100, 0.1, 0.5, 1), (32, 4000, 0.3, 6.0, 8))]
    mt = map_words.map_texts({"provenance": {"params": {"windows": 12, "length": 24}}}, rows, [4, 8])
    assert mt["map_d"] == "8 and 32" and mt["map_M"] == "100 and 4,000" and mt["map_sigma"] == "from 0.1 to 0.3"
    assert mt["map_spacing"] == "0.5 to 6" and mt["map_K"] == "1 to 8" and mt["map_seqs"] == "12 sequences of 24 tokens"
    assert mt["regime_k"] == "4 and 8" and mt["bimodal_top2"] == f"{mechanism.BIMODAL_TOP2:g}"


def test_cliff_words_are_the_table():
    cliff = pd.DataFrame([{"lambda": lam, "model": m, "direction": d, "response": v}
                          for lam, vs in ((0.2, (0.001, 0.0005)), (1.0, (0.02, 0.01)), (8.0, (0.3, 0.1)))
                          for m in ("text: token flip rate", "image: pixel RMS error")
                          for d, v in zip(("structured", "isotropic"), vs)])
    c = image_words.cliff_texts(cliff, short=0.25)
    assert c["cliff_short"] == "0.1% at λ = 0.2"
    assert c["cliff_long"].startswith("at the longest push (λ = 8) the structured direction flips 3 times as many")


def test_regime_reason_states_where_the_flips_lie():
    kw = dict(tube_mass={"contextual": {0.1: 0.04, 0.5: 0.16}, "separated": {0.5: 0.008}}, iso={4: 0.043, 8: 0.022, 16: 0.012},
              band_k=[4, 8, 16], fit_error=0.007, ctx_config=CTX, sep_dim=8, dabi={4: 7.9, 8: 6.4})
    first = words.regime_text(term=_term(), **kw)
    assert "4% within 0.1 and 16% within 0.5, against 0.8% within 0.5 for the 8-d model" in first
    assert "is 11.0% [9.9%, 11.6%], just below the paper's 12-41%" in first
    assert "90% of held-out tokens, 95% of training tokens, after 700 steps on 16k tokens" in first
    assert "RMS 0.3 per coordinate at K = 4, so a norm near 3 in 100 dimensions" in first
    assert "1.2%-4.3% at K = 4 / 8 / 16" in first and "ratio is 1.5-2.6x" in first and "7.9 / 6.4 at K = 4 / 8" in first
    inside = words.regime_text(term=_term(rates=(0.2, 0.04, 0.018)), **kw)
    assert "inside the paper's 12-41%" in inside


def test_geometry_reason_says_whether_the_amplification_reaches_the_paper():
    second = map_words.geometry_reason({4: Estimate(16, 13, 21, 100), 8: Estimate(28, 20, 41, 100)})
    assert "16-28x" in second and "at K = 4 / 8" in second and "as much as the paper's ratio asks" in second
    assert "less than the paper's ratio asks" in map_words.geometry_reason({4: Estimate(6, 5, 8, 100)})


def _rungs(aim_best: float, ratio_best: float) -> pd.DataFrame:
    return pd.DataFrame([
        {"generator": "ladder, 1,000 steps", "train_steps": 1000, "flow_loss": 1.5, "residual_rms": 0.4, "n_tokens": 1000,
         "mean_abs_cos": 0.114, "abs_lo": 0.113, "abs_hi": 0.116, "ratio": 2.4, "ratio_lo": 2.2, "ratio_hi": 2.6,
         "flips": 0.108, "flips_lo": 0.10, "flips_hi": 0.115, "aligned_ratio": 20, "aligned_ratio_lo": 18, "aligned_ratio_hi": 22},
        {"generator": "ladder, 10,000 steps", "train_steps": 10000, "flow_loss": 1.25, "residual_rms": 0.35, "n_tokens": 1000,
         "mean_abs_cos": aim_best, "abs_lo": aim_best - 0.001, "abs_hi": aim_best + 0.001, "ratio": ratio_best,
         "ratio_lo": ratio_best * 0.92, "ratio_hi": ratio_best * 1.08, "flips": 0.103, "flips_lo": 0.097, "flips_hi": 0.11,
         "aligned_ratio": 22, "aligned_ratio_lo": 19, "aligned_ratio_hi": 24}])


def test_ladder_reason_turns_with_the_aim_and_the_ratio():
    flat = map_words.ladder_reason(_rungs(0.104, 2.6), 4, CTX)
    assert flat.startswith("*A better flow does not aim better.*")
    assert "Trained for 10,000 steps instead of 1,000" in flat and "(1.500 → 1.250)" in flat
    assert "aim at the nearest boundary falls (0.114 [0.113, 0.116] → 0.104 [0.103, 0.105])" in flat
    assert "stays near its 1,000-step value (2.4 [2.2, 2.6] → 2.6 [2.4, 2.8])" in flat
    assert "(3 layers, width 128)" in flat and "not a matter of training longer" in flat
    better = map_words.ladder_reason(_rungs(0.2, 12.0), 4, CTX)
    assert better.startswith("*A better flow aims better.*") and "moves from 2.4 [2.2, 2.6] to 12 [11, 13]" in better
    assert "training longer does move the ratio toward 10-33x" in better
    assert "not recorded" in map_words.ladder_reason(None, 4, CTX)


def test_map_reason_counts_the_box():
    in_band = pd.DataFrame({"K": [4, 16, 16], "ratio": [40.0, 1.0, 1.2], "crowding": [1.7, 0.6, 2.5]})
    part = map_words.map_reason(n_mixtures=270, boxed=[("a", 4), ("b", 8), ("c", 8)], regime_k=[4, 8, 16], in_band=in_band,
                            ours_crowd={4: 5.2, 8: 12.0, 16: 26.0})
    assert "over 270 token mixtures" in part and "in three of them, at one K at a time at most, never at K = 4, 8 and 16" in part
    assert "(median 1.1x)" in part  # 1.0 and 1.2 at the last K and "5.2 / 12 / 26 at K = 4 / 8 / 16, against at most 2.5" in part
    full = map_words.map_reason(n_mixtures=9, boxed=[("a", 4), ("a", 8), ("a", 16)], regime_k=[4, 8, 16], in_band=in_band,
                            ours_crowd={4: 1.0})
    assert "at every K = 4, 8 and 16 in one of them" in full


def test_separated_collapse_and_scale_reasons():
    rates = pd.DataFrame({"structured": [0.86, 0.34, 0.0048, 0.0012], "isotropic": [0.33, 0.11, 0.0039, 0.0015]},
                         index=[1, 2, 4, 8])
    s = words.separated_reason(sep_dim=8, sep_vocab=2048, median_margin=2.04, tube_mass={0.5: 0.008}, rates=rates, band_k=[4, 8])
    assert "8-d latents and a 2,048-word readout, the median margin is 2 " in s and "(0.8% within 0.5)" in s
    assert "flips 0.48% / 0.12% of tokens, an isotropic residual of the same norm 0.39% / 0.15%" in s
    assert "(K = 1 / 2: 86% / 34%)" in s
    limit = words.default(verdicts.claim_9, "max_spread")
    apart = words.collapse_reason(ctx_config=CTX, spread_start=limit * 2, spread_terminal=1.9)
    assert "(3 layers, width 128, 2,500 training steps)" in apart and "do not meet" in apart
    assert "the K curves meet" in words.collapse_reason(ctx_config=CTX, spread_start=limit / 2, spread_terminal=1.9)
    setup = Setup(torch.device("cpu"), 1, torch.float32)
    sc = words.scale_reason(n_text=64, seq_len=32, n_terminal=512, heldout_windows=1345, setup=setup)
    assert "64 windows (2,048 tokens) and its terminal step 512; the recorded run above uses all 1,345" in sc
    assert "float32 on the CPU" in sc
    assert "float32 on the GPU (cuda)" in words.scale_reason(n_text=64, seq_len=32, n_terminal=512, heldout_windows=1345,
                                                          setup=Setup(torch.device("cuda"), 1, torch.float32))
    assert _numbers(sc)[:4] == ["64", "2,048", "512", "1,345"]
