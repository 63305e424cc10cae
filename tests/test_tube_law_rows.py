"""Chapter 5's tables, records and claim rows (tokendyn.publish.chapters.tube_law, tube_law_map and
tube_law_image: the pages 5.1, 5.2 and 5.3), the terminal table 5.1 records and 5.2 reads back, and the
measurements they are built from (tokendyn.latent.tube's terminal table, fit and DABI; tokendyn.latent.geometry's
terminal aim), on constructed inputs: every number is the input's, and a verdict turns when its
statistic crosses the rule's line."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from tokendyn.core.stats import Estimate
from tokendyn.latent import exact, geometry, tube
from tokendyn.latent.dabi import residual_dabi
from tokendyn.publish import results, verdicts
from tokendyn.publish.chapters import tube_law as tl
from tokendyn.publish.chapters import tube_law_image as tli
from tokendyn.publish.chapters import tube_law_map as tlm

CTX = {"final_flow_loss": 0.42}


def _flips(K: int, s: float, rate: float, iso: float, *, k_iso: int = 5, n: int = 1000) -> tube.TerminalFlips:
    return tube.TerminalFlips(K, s, Estimate(rate, rate * 0.9, rate * 1.1, 10), Estimate(iso, iso * 0.8, iso * 1.2, 10),
                              Estimate(rate / iso, rate / iso * 0.9, rate / iso * 1.1, 10), int(rate * n), k_iso, n, 10, 0.3)


# ---- tokendyn.latent.tube: the terminal table, its tube-law fit and DABI -----------------------------------------

def test_terminal_rows_are_two_per_k_with_the_shared_ratio():
    rows = tube.terminal_rows("m", [_flips(4, 1 / 3, 0.2, 0.05), _flips(8, 1 / 7, 0.1, 0.04, k_iso=0)])
    assert [(r["K"], r["residual"]) for r in rows] == [(4, "structured"), (4, "isotropic"), (8, "structured"), (8, "isotropic")]
    st, iso = rows[0], rows[1]
    assert st["rate"] == 0.2 and st["lo"] == pytest.approx(0.18) and st["k"] == 200 and st["n"] == 1000
    assert iso["rate"] == 0.05 and iso["hi"] == pytest.approx(0.06) and iso["k"] == 5
    assert st["ratio"] == iso["ratio"] == pytest.approx(4.0) and st["residual_rms"] == 0.3 and st["model"] == "m"
    assert not st["bound"] and rows[2]["bound"] and rows[3]["bound"]   # no isotropic flip: a lower bound


def test_terminal_fit_leaves_out_pure_noise_and_recovers_kappa():
    margins = torch.linspace(0.0, 1.0, 2001)[1:]          # F(r) = r on [0, 1]
    ss = [0.02, 0.05, 0.1]
    flips = [_flips(1, float("inf"), 0.95, 0.9)] + [_flips(k, s, 3.0 * s, 0.01) for k, s in zip((2, 4, 8), ss)]
    fit = tube.terminal_fit(flips, margins)
    assert fit["kappa"] == pytest.approx(3.0, rel=0.01)
    assert list(fit["predicted"]) == [2, 4, 8]              # K = 1 (s infinite) is not fitted
    assert [fit["predicted"][k] for k in (2, 4, 8)] == pytest.approx([0.06, 0.15, 0.3], abs=2e-3)
    assert fit["mean_abs_error"] < 2e-3
    off = tube.terminal_fit([_flips(2, 0.02, 0.06, 0.01), _flips(4, 0.05, 0.35, 0.01)], margins)
    assert off["mean_abs_error"] == pytest.approx(np.mean([abs(off["predicted"][2] - 0.06), abs(off["predicted"][4] - 0.35)]))
    assert off["mean_abs_error"] > 0.04                      # a law that cannot fit both points shows its miss


def test_terminal_dabi_draws_each_k_from_its_own_seeds():
    mix = exact.token_mixture(8, 4, spacing=3.0, sigma=0.5, seed=0)
    x1, ids = mix.sample((4, 16), torch.Generator().manual_seed(1))
    loss = tube.cross_entropy_loss(mix.readout().logits, ids)
    got = tube.terminal_dabi(mix, x1, loss, [2, 4], seed=5)
    assert list(got) == [2, 4]
    for k in (2, 4):
        x_hat, _ = tube.oracle_terminal(mix, x1, k, torch.Generator().manual_seed(5 + k))
        assert got[k] == residual_dabi(loss, x1, x_hat - x1, torch.Generator().manual_seed(105 + k))


def test_terminal_alignment_is_the_alignment_of_each_k():
    mix = exact.token_mixture(8, 3, spacing=4.0, sigma=0.5, seed=1, arrangement="simplex")
    x1, _ = mix.sample((6, 16), torch.Generator().manual_seed(2))
    both = geometry.terminal_alignment(mix, x1, mix.readout(), [2, 4], seed=3)
    only = geometry.terminal_alignment(mix, x1, mix.readout(), [2], seed=3, counterfactual=False)
    x_hat, _ = tube.oracle_terminal(mix, x1, 2, torch.Generator().manual_seed(3 + 300 + 2))
    al = geometry.alignment(x1, x_hat, mix.readout(), seed=3)
    cf = geometry.aligned_counterfactual(x1, x_hat, mix.readout(), seed=3 + 2)
    assert list(both) == [2, 4] and only[2][1] is None
    assert both[2][0].mean_abs_cos == al.mean_abs_cos == only[2][0].mean_abs_cos
    assert both[2][1].ratio == cf.ratio and both[2][1].k_aligned == cf.k_aligned
    assert both[4][0].mean_abs_cos != both[2][0].mean_abs_cos   # another K, another terminal step


# ---- tokendyn.publish.chapters.tube_law: tables, readings, record, claim rows ------------------------------------

def _term(ratios=(2.6, 1.8, 1.5), rates=(0.11, 0.04, 0.018), bound=(False, False, False)) -> pd.DataFrame:
    return pd.DataFrame({"K": [4, 8, 16], "s": [1 / 3, 1 / 7, 1 / 15], "rate": rates, "lo": [r * 0.9 for r in rates],
                         "hi": [r * 1.05 for r in rates], "ratio": ratios, "ratio_lo": [r * 0.9 for r in ratios],
                         "ratio_hi": [r * 1.1 for r in ratios], "bound": bound, "residual_rms": [0.3, 0.2, 0.1],
                         "n": [4096] * 3}).set_index("K")


def _term_df() -> pd.DataFrame:
    rows = []
    for model, scale in (("contextual", 1.0), ("separated 16-d", 0.1)):
        rows += tube.terminal_rows(model, [_flips(k, 1 / (k - 1), scale * r, scale * r / q)
                                           for k, r, q in ((4, 0.11, 2.6), (8, 0.04, 1.8), (16, 0.018, 1.5))])
    return pd.DataFrame(rows)


def _aim(value: float, unaimed: float = 0.04) -> SimpleNamespace:
    return SimpleNamespace(mean_abs_cos=Estimate(value, value - 0.01, value + 0.01, 8), isotropic_abs_cos=unaimed,
                           mean_cos=Estimate(value / 2, value / 2 - 0.01, value / 2 + 0.01, 8))


def _cf(ratio: float) -> SimpleNamespace:
    return SimpleNamespace(ratio=Estimate(ratio, ratio * 0.8, ratio * 1.2, 8), aligned=Estimate(0.2, 0.18, 0.22, 8),
                           isotropic=Estimate(0.2 / ratio, 0.1 / ratio, 0.3 / ratio, 8), predicted_ratio=ratio * 1.1,
                           small_norm_ratio=48.0)


def _rungs(ratios=(2.4, 2.6), flips=(0.108, 0.103)) -> pd.DataFrame:
    return pd.DataFrame([{"generator": g, "n_tokens": 16384, "flow_loss": loss, "ratio": r, "ratio_lo": r * 0.92,
                          "ratio_hi": r * 1.08, "flips": f, "flips_lo": f * 0.94, "flips_hi": f * 1.06,
                          "mean_abs_cos": a, "abs_lo": a - 0.001, "abs_hi": a + 0.001}
                         for g, loss, r, f, a in zip(("ladder, 1,000 steps", "ladder, 10,000 steps"), (1.505, 1.25),
                                                     ratios, flips, (0.114, 0.104))])


def test_terminal_rates_and_ladder_estimates():
    rates = tl.terminal_rates(_term_df(), "separated 16-d")
    assert list(rates.index) == [4, 8, 16] and rates.loc[4, "structured"] == pytest.approx(0.011)
    assert rates.loc[8, "isotropic"] == pytest.approx(0.004 / 1.8)
    ratio, flips, aim = tlm.ladder_estimates(_rungs())
    assert [g for g, _ in ratio] == ["ladder, 1,000 steps", "ladder, 10,000 steps"]
    assert ratio[1][1] == Estimate(2.6, 2.6 * 0.92, 2.6 * 1.08, 16384)
    assert flips[0][1].value == 0.108 and aim[1][1].lo == pytest.approx(0.103)


def test_aim_rows_keep_the_order_and_the_numbers():
    flow = {2: (_aim(0.12), _cf(16.0)), 4: (_aim(0.09), _cf(28.0))}
    toy_aim = {"crowded": {2: (_aim(0.3, 0.1), None), 4: (_aim(0.11, 0.1), None)}, "separated": {2: (_aim(0.2, 0.1), None)}}
    toy_flips = {("crowded", 2): _flips(2, 1.0, 0.3, 0.1), ("crowded", 4): _flips(4, 1 / 3, 0.2, 0.1),
                 ("separated", 2): _flips(2, 1.0, 0.05, 0.01)}
    term = _term().rename(index={16: 2})                     # K = 2 and 4 present
    geo, ratios = tlm.aim_rows(flow, toy_aim, toy_flips, term)
    assert [(r["generator"], r["K"]) for r in geo] == [("contextual flow", 2), ("contextual flow", 4), ("exact toy, crowded", 2),
                                                       ("exact toy, crowded", 4), ("exact toy, separated", 2)]
    assert geo[1]["mean_abs_cos"] == 0.09 and geo[1]["unaimed"] == 0.04 and geo[1]["mean_cos_hi"] == pytest.approx(0.055)
    assert [(r["generator"], r["K"], r["kind"]) for r in ratios][:4] == [
        ("contextual flow", 2, "its own residual"), ("contextual flow", 2, "same norms along n"),
        ("contextual flow", 4, "its own residual"), ("contextual flow", 4, "same norms along n")]
    assert ratios[0]["ratio"] == 1.5 and ratios[1]["ratio"] == 16.0 and ratios[2]["hi"] == pytest.approx(2.6 * 1.1)
    assert [(r["generator"], r["K"], r["ratio"]) for r in ratios[4:]] == [
        ("exact toy, crowded", 2, pytest.approx(3.0)), ("exact toy, crowded", 4, pytest.approx(2.0)),
        ("exact toy, separated", 2, pytest.approx(5.0))]


def _findings_kw(**over):
    heldout = pd.DataFrame({"K": [4, 8, 16], "s": [1 / 3, 1 / 7, 1 / 15], "measured": [0.11, 0.04, 0.018],
                            "lo": [0.1, 0.035, 0.015], "hi": [0.12, 0.045, 0.021], "predicted": [0.1, 0.045, 0.02]})
    heldout["predicted / measured"] = heldout["predicted"] / heldout["measured"]
    kw = dict(spread_start=0.1, r2=0.95, small_s=0.1, small=pd.DataFrame({"flip rate": [0.01, 0.02]}), n_roll=2048,
              heldout=heldout, half=256, n_windows=512, n_test=8192, term=_term(), band_k=[4, 8, 16],
              median_margin=1.734)
    return kw | over


def test_findings_claims_9_to_11_read_their_numbers_and_turn():
    rows = tl.findings(**_findings_kw())
    assert [r.claim for r in rows] == [9, 10, 11]
    c9, c10, c11 = rows
    assert c9.ours == "collapse spread 0.10; R^2 0.95 for s(t0) <= 0.1" and c9.verdict == verdicts.REPRODUCED
    assert "contextual model, 61 flipped tokens in the s -> 0 range" in c9.basis   # 0.03 of 2048 tokens
    assert "kappa fitted on 256 windows, F(kappa s) against the flips of the other 256 (8192 tokens a K)" in c9.basis
    assert c9.basis.endswith("predicted / measured 0.91 at K=4, 1.12 at K=8, 1.11 at K=16")
    assert tl.findings(**_findings_kw(spread_start=0.5))[0].verdict == verdicts.PARTLY   # the curves do not meet
    assert c10.ours == "K=4: 2.6 [2.3, 2.9]; K=8: 1.8 [1.6, 2]; K=16: 1.5 [1.4, 1.7]" and c10.verdict == verdicts.NOT
    assert c10.basis == ("terminal step, contextual model, 4096 tokens; isotropic floored at one token; the residual's aim "
                         "and the readout's amplification of an aimed push (a geometric check, not a claim): section 5.2's rows")
    inside = tl.findings(**_findings_kw(term=_term(ratios=(20.0, 15.0, 12.0), bound=(True, False, False))))[1]
    assert inside.verdict == verdicts.REPRODUCED and inside.ours.startswith("K=4: ≥20 [18, 22]")
    assert c11.ours == "K=4: 11.0% [9.9%, 11.6%]; K=8: 4.0% [3.6%, 4.2%]; K=16: 1.8% [1.6%, 1.9%]"
    assert c11.verdict == verdicts.NOT and c11.basis == "contextual model, 4096 held-out tokens; median margin 1.7"
    assert tl.findings(**_findings_kw(term=_term(rates=(0.2, 0.04, 0.018))))[2].verdict == verdicts.PARTLY


def _map_findings_kw(**over):
    kw = dict(rungs=None, k_ladder=4, cf_k={4: (_aim(0.12), _cf(16.0)), 8: (_aim(0.1), _cf(28.0))}, k_aim=4, cf_band=[4, 8])
    return kw | over


def test_findings_ladder_and_map_rows():
    rows = tlm.findings(**_map_findings_kw(rungs=_rungs()))
    assert len(rows) == 2
    ratio, flips = rows
    assert ratio.ours == "2.4 → 2.6" and ratio.verdict == verdicts.NOT and ratio.paper_value == "10-33x (ELF-B)"
    assert ratio.headline == "2.4 [2.2, 2.6] → 2.6 [2.4, 2.8]"
    assert "(ladder, 1,000 steps, ladder, 10,000 steps); 16,384 tokens each" in ratio.basis
    assert "the shipped flow's aim at K = 4 on this run's roll-in windows: mean |cos(r, n)| 0.12 [0.11, 0.13] against 0.04 " \
           "for no aim" in ratio.basis
    assert ratio.basis.endswith("a geometric check and not a claim: K=4: 16 [13, 19], K=8: 28 [22, 34]")
    assert flips.ours == "10.8% → 10.3%" and "aim 0.114 [0.113, 0.115] → 0.104 [0.103, 0.105]" in flips.basis
    better = tlm.findings(**_map_findings_kw(rungs=_rungs(ratios=(2.4, 8.0))))[0]
    assert better.verdict == verdicts.REPRODUCED                 # apart and toward 10-33x
    box = [{"separation": 9.6}, {"separation": 31.2}]
    v = verdicts.Verdict(verdicts.PARTLY, "exact_generator_regime", "some K")
    kw = dict(map_meta={"provenance": {"params": {"length": 32}}}, in_box=box, n_cells=810, n_mixtures=270, n_seq=32,
              v_map=v, ours_sep={"contextual 381-d": (44.0, 1.0, 900)})
    (m,) = tlm.findings(**_map_findings_kw(**kw))
    assert m.ours == ("2 of 810 map cells inside the paper's box at K = 4, 8, 16 (separation 10 to 31); "
                      "our contextual latents' separation about 44")
    assert m.verdict == verdicts.PARTLY and m.headline == "2 of 810 cells in the box"
    assert "of 270 token mixtures, 32 sequences of 32 tokens a cell" in m.basis
    assert "box at K = 4, 8, 16; our" in tlm.findings(**_map_findings_kw(**(kw | {"in_box": []})))[-1].ours
    assert tlm.findings(**_map_findings_kw(**(kw | {"map_meta": None}))) == []   # no ladder, no map rows: no rows
    with pytest.raises(ValueError, match="needs its verdict"):
        tlm.findings(**_map_findings_kw(**(kw | {"v_map": None})))


def _metrics_kw(**over):
    kw = dict(recon=0.1, margins=torch.tensor([1.0, 2.0, 3.0]), sep_margins=torch.tensor([4.0, 5.0]), spread_start=0.5,
              spread_s=1.9, slope=0.3, r2=0.96, kappa=1.2, err={"4": 0.01}, kappa_half=1.1, heldout_error=0.003,
              heldout=pd.DataFrame({"K": [4], "measured": [0.1]}), term_fit={"contextual": {"kappa": 1.2}},
              term_df=_term_df(), terminal_key={"seed": 0}, band=pd.DataFrame({"ratio (isotropic floored at one token)": [3.3, 2.9]}),
              dabi_k={4: 7.9}, roll=pd.DataFrame({"K": ["4"]}))
    return kw | over


def _map_metrics_kw(**over):
    geo = pd.DataFrame([{"generator": "contextual flow", "K": 4, "mean_abs_cos": 0.1, "lo": 0.09, "hi": 0.11, "unaimed": 0.04,
                         "mean_cos": 0.05, "mean_cos_lo": 0.04, "mean_cos_hi": 0.06}])
    kw = dict(term_df=_term_df(), geo_df=geo, ladder_df=None, cf_k={4: (_aim(0.1), _cf(16.0))}, ctx_config=CTX,
              toy_flips={("crowded", 4): _flips(4, 1 / 3, 0.3, 0.1)}, toys=["crowded"],
              dim_df=pd.DataFrame({"d": [4], "ratio": [5.0]}))
    return kw | over


def test_metrics_hold_the_run_under_the_record_keys():
    m = tl.metrics(**_metrics_kw())
    assert m["text_reconstruction_accuracy"] == 0.9 and m["median_margin"] == 2.0 and m["median_margin_separated"] == 4.0
    assert m["terminal_flip_rate"] == {4: 0.11, 8: 0.04, 16: 0.018}
    assert m["structured_isotropic_ratio"] == pytest.approx({4: 2.6, 8: 1.8, 16: 1.5})
    assert m["isotropic_flip_rate"] == pytest.approx({4: 0.11 / 2.6, 8: 0.04 / 1.8, 16: 0.018 / 1.5})
    assert m["terminal_flip_rate_separated"] == pytest.approx({4: 0.011, 8: 0.004, 16: 0.0018})
    assert len(m["terminal"]) == 12 and m["terminal_key"] == {"seed": 0} and m["ratio_in_paper_band"] == [3.3, 2.9]
    assert m["dabi_text"] == {4: 7.9} and list(m)[-1] == "rollin_text"
    gen = pd.DataFrame({"K": [4], "sampler": ["ODE"], "bigram PPL": [300.0], "example": ["a b"]})
    im = tli.metrics(img_term=pd.DataFrame({"K": [4], "DABI": [1.1]}), img_recon=0.05, img_spread=0.2,
                     img_rows=pd.DataFrame({"K": ["4"]}), gen=gen, real_ppl=250.0)
    assert im["generation_separated"] == [{"K": 4, "sampler": "ODE", "bigram PPL": 300.0}] and im["dabi_image"] == {4: 1.1}
    assert im["real_bigram_ppl"] == 250.0 and im["image_collapse_spread"] == 0.2 and im["rollin_image"] == [{"K": "4"}]
    mm = tlm.metrics(**_map_metrics_kw())
    assert mm["residual_alignment"] == {"contextual flow": {4: {"mean_cos": 0.05, "lo": 0.04, "hi": 0.06, "mean_abs_cos": 0.1,
                                                                "abs_lo": 0.09, "abs_hi": 0.11, "unaimed_abs_cos": 0.04}}}
    assert mm["aligned_counterfactual"][4]["ratio"] == 16.0 and mm["aligned_counterfactual"][4]["predicted_ratio"] == 16.0 * 1.1
    lad = mm["generator_ladder"]
    assert list(lad) == ["contextual flow (shipped, 3,000 steps)", "exact toy, crowded (perfect posterior mean)"]
    assert lad["contextual flow (shipped, 3,000 steps)"]["flow_loss"] == 0.42
    assert lad["contextual flow (shipped, 3,000 steps)"]["terminal_flip_rate"] == {4: 0.11, 8: 0.04, 16: 0.018}
    assert lad["exact toy, crowded (perfect posterior mean)"]["structured_isotropic_ratio"] == {4: pytest.approx(3.0)}
    assert list(mm)[-1] == "toy_ratio_by_dimension" and "mechanism_map" not in mm
    ladder = _rungs().assign(K=4, train_steps=[1000, 10000], mean_cos=0.05, mean_cos_lo=0.04, mean_cos_hi=0.06,
                             unaimed_abs_cos=0.02, aligned_ratio=20.0)
    mapped = tlm.metrics(**_map_metrics_kw(ladder_df=ladder, map_meta={}, in_box=[{}], n_cells=810, n_mixtures=270,
                                           ours_sep={"contextual 381-d": (44.0, 2.0, 900)}))
    assert mapped["mechanism_map"] == {"cells_in_box": 1, "cells": 810, "mixtures": 270, "separation": {"contextual 381-d": 22.0}}
    rec = mapped["generator_ladder"]["contextual flow, ladder, 10,000 steps (recorded)"]
    assert rec["train_steps"] == 10000 and rec["flow_loss"] == 1.25 and rec["structured_isotropic_ratio"] == {4: 2.6}
    assert mapped["residual_alignment"]["contextual flow, ladder, 1,000 steps (recorded)"][4]["unaimed_abs_cos"] == 0.02


def test_summary_table_and_measured_text():
    term_df = _term_df()
    ctx, sep = tl.terminal_rates(term_df, "contextual"), tl.terminal_rates(term_df, "separated 16-d")
    kw = dict(spread_start=0.5, spread_s=1.9, small_s=0.1, r2=0.96, dabi_k={4: 7.9, 8: 6.4},
              term_fit={"contextual": {"mean_abs_error": 0.007, "kappa": 1.2}, "separated 16-d": {"mean_abs_error": 0.002, "kappa": 1.7}})
    table = tl.summary_table(ctx_term=ctx, sep_term=sep, term=_term(bound=(True, False, False)), n_windows=64, **kw)
    ours = dict(zip(table["quantity"], table["ours (contextual)"]))
    assert ours["collapse of flip-rate curves across K (largest relative spread, against s(t0))"] == "0.5 (terminal s: 1.9)"
    assert ours["terminal flip rate, K = 4 / 8 / 16 (contextual; 16-d in brackets)"] == "11.0% (1.1%) / 4.0% (0.4%) / 1.8% (0.2%)"
    assert ours["structured / isotropic flip ratio, K = 4 / 8 / 16 (terminal step)"] == "≥2.6 / 1.8 / 1.5"
    assert len(table) == 6 and "live: this run's 64 roll-in windows" in table["quantity"].iloc[5]
    assert ours[table["quantity"].iloc[5]] == "7.9 / 6.4"
    recorded = tlm.summary_table(ladder_dabi={4: 507.0, 8: 61.2})
    assert "K = 4 / 8 (chapter 6 reads it" in recorded["quantity"].iloc[0]
    assert 'data-quantity="flow-dabi-recorded-K4">507</span> / ' in recorded["ours (contextual)"].iloc[0]
    assert tlm.summary_table(ladder_dabi={})["ours (contextual)"].iloc[0] == "not recorded"
    img_term = pd.DataFrame({"K": [4, 8], "structured": [0.103, 0.0565], "DABI": [1.11, 1.1]})
    gen = pd.DataFrame({"K": [4, 4], "sampler": ["SDE", "ODE"], "bigram PPL": [50.0, 294.0]})
    image = dict(zip(*tli.summary_table(gen=gen, img_term=img_term)[["quantity", "ours"]].to_dict("list").values()))
    assert image == {"generative PPL, ODE vs SDE at K = 4 (ours: bigram PPL, 16-d model)": "294 vs 50",
                     "DABI image, K = 4 / 8": "1.11 / 1.1"}
    text = tl.measured_text(band=pd.DataFrame({"ratio (isotropic floored at one token)": [3.3, 2.9]}), term=_term(),
                            err={"4": 0.012, "8": 0.01, "16": 0.0097}, sep_term=sep, n_windows=64, slope=0.3, **kw)
    assert "largest relative spread of **0.5**, against **1.9**" in text and "$R^2$ = **0.96**" in text
    assert "**11.0% [9.9%, 11.6%] / 4.0% [3.6%, 4.2%] / 1.8% [1.6%, 1.9%]** for K = 4 / 8 / 16" in text
    assert "the separated 16-d model: 1.10% / 0.40% / 0.18%." in text and "the ratio is 3.3x, 2.9x." in text
    assert "the mean miss is 0.012 / 0.01 / 0.0097" in text and "7.9 / 6.4 on this run's 64 roll-in windows (live;" in text
    assert "generator ladder" in text and text.endswith("(the paper: 508 for ELF).\n")
    none = tl.measured_text(band=pd.DataFrame({"ratio (isotropic floored at one token)": []}), term=_term(),
                            err={"4": 0.0, "8": 0.0, "16": 0.0}, sep_term=sep, n_windows=64, slope=0.3, **kw)
    assert "the ratio is none." in none
    img = tli.measured_text(img_term=img_term, gen=gen, real_ppl=250.0)
    assert "DABI **1.11 / 1.1**: no cliff." in img and "(K = 4 / 8)" in img
    assert "the ODE's bigram PPL is\n  **294** and the SDE's **50**, against 250 for held-out text" in img
    assert tlm.measured_text(rungs=None, k_ladder=4, ladder_dabi={}) == "\n"
    ladder = tlm.measured_text(rungs=_rungs(), k_ladder=4, ladder_dabi={4: 507.0})
    assert "(recorded, K = 4, 16,384 tokens a rung). From the worst flow (ladder, 1,000 steps, held-out loss 1.505)" in ladder
    assert "the ratio, *not reproduced*; the flips, *not reproduced*; every step up the ladder" in ladder
    assert 'has DABI <span class="tokendyn-quantity" data-quantity="flow-dabi-recorded-K4">507</span> at K = 4' in ladder
    three = _rungs(ratios=(2.4, 2.6), flips=(0.108, 0.103))
    three = pd.concat([three.iloc[:1], three.iloc[:1].assign(generator="mid", ratio=2.0), three.iloc[1:]])
    assert "; not every step up the ladder" in tlm.measured_text(rungs=three, k_ladder=4, ladder_dabi={})


# ---- the terminal table 5.1 records and 5.2 reads back -------------------------------------------------------------

def test_terminal_flips_and_table_run_both_models():
    mix = exact.token_mixture(8, 4, spacing=3.0, sigma=0.5, seed=0)
    x1, _ = mix.sample((4, 16), torch.Generator().manual_seed(1))
    model = SimpleNamespace(autoencoder=SimpleNamespace(decode=mix.decode), flow=mix)
    empty = torch.zeros(0)
    held = tl.HeldOut(x1, mix.decode(x1), empty, x1[:2], mix.decode(x1[:2]), empty)
    flips = tl.terminal_flips(model, model, held, [2, 4], seed=3)
    want = tube.terminal_flips(mix.decode, mix, x1[:2], mix.decode(x1[:2]), [2, 4], seed=3)
    assert list(flips) == ["contextual", "separated 16-d"] and flips["separated 16-d"] == want
    table = tl.terminal_table(flips)
    assert list(zip(table["model"], table["K"], table["residual"]))[:3] == [("contextual", 2, "structured"),
                                                                          ("contextual", 2, "isotropic"),
                                                                          ("contextual", 4, "structured")]
    assert len(table) == 8 and table.iloc[4]["n"] == 32 and table.iloc[0]["n"] == 64


def test_terminal_key_changes_with_the_parameters_and_the_weights():
    torch.manual_seed(0)
    model = SimpleNamespace(autoencoder=torch.nn.Linear(3, 2), flow=torch.nn.Linear(2, 2))
    key = tl.terminal_key(model, model, seed=0, n_terminal=8, terminal_steps=(1, 4))
    assert key["seed"] == 0 and key["n_terminal"] == 8 and key["terminal_steps"] == [1, 4]
    assert sorted(key["models"]) == ["context-latent autoencoder", "context-latent flow", "text-latent autoencoder",
                                     "text-latent flow"]
    assert tl.terminal_key(model, model, seed=0, n_terminal=8, terminal_steps=(1, 4)) == key
    assert tl.terminal_key(model, model, seed=1, n_terminal=8, terminal_steps=(1, 4)) != key
    with torch.no_grad():
        model.flow.weight.add_(1.0)
    assert tl.terminal_key(model, model, seed=0, n_terminal=8, terminal_steps=(1, 4)) != key


def test_recorded_terminal_reads_the_table_back_only_under_its_key(tmp_path):
    term_df = tl.terminal_table({"contextual": [_flips(1, float("inf"), 0.9, 0.3), _flips(4, 1 / 3, 0.2, 0.05)]})
    key = {"seed": 0, "n_terminal": 8, "terminal_steps": [1, 4], "models": {"a": {"weights": "abc"}}}
    assert tl.recorded_terminal(key, tmp_path) is None                        # no record: the page computes
    results.save(tl.RECORD, {"terminal": term_df.to_dict("records"), "terminal_key": key}, params={}, seed=0, models=[],
                 out_dir=tmp_path)
    back = tl.recorded_terminal(key, tmp_path)
    assert back["s"].iloc[0] == float("inf") and back["s"].dtype == float   # JSON's "inf" read back as a number
    pd.testing.assert_frame_equal(back[list(term_df.columns)], term_df)
    assert tl.recorded_terminal(key | {"seed": 1}, tmp_path) is None            # made with other parameters
    assert tl.recorded_terminal(key | {"models": {"a": {"weights": "abd"}}}, tmp_path) is None   # or other weights


def test_map_reading_reads_the_band_and_our_crowding():
    map_k = pd.DataFrame({"K": [4, 4, 8, 16, 16, 4], "flips": [0.2, 0.3, 0.15, 0.13, 0.2, 0.011],
                          "ratio": [40.0, 12.0, 9.0, 1.0, 1.2, 3.0], "crowding": [1.7, 0.53, 1.0, 0.6, 2.57, 5.0],
                          "separation": [20.0, 10.0, 8.0, 3.0, 2.0, 40.0]})
    in_band = map_k[(map_k["flips"] >= 0.12) & (map_k["flips"] <= 0.41)]
    split = pd.DataFrame({"K": [4, 4, 8], "pair_aim": [0.6, 0.66, 0.32], "unaimed": [0.1, 0.1, 0.1],
                          "bimodal_ratio": [4.0, 4.1, 2.0], "rest_ratio": [4.03, 4.03, 1.54]})
    v = verdicts.Verdict(verdicts.PARTLY, "exact_generator_regime", "3 mixtures at some K")
    kw = dict(v_map=v, map_k=map_k, ours_crowd={4: 5.2, 8: 12.0}, term=_term(),
              ours_sep={"contextual 381-d": (88.0, 2.0, 900)}, split_df=split, regime_k=[4, 8, 16])
    text = tlm.map_reading(in_band=in_band, **kw)
    assert "- *The rule*: **partly** (3 mixtures at some K)." in text
    assert "between **0.53 and 2.57**" in text and "**40x / 9x / 1.2x**" in text
    assert "separation of at least\n  10)" in text and "(median 1.1x)" in text
    assert "**5.2 / 12** at K = 4 / 8 / 16" in text and "flip at most **1.1% / nan%**" in text   # no cell near K = 8's 12
    assert "Our flow flips **11.0% / 4.0%**" in text and "(ratio 2.6x / 1.8x)" in text and "(**44**," in text
    assert "median |cos| **0.63 / 0.32**" in text and "(medians 4.05 against 4.03 / 2 against 1.54," in text
    assert "higher in 50% / 100% of the cells" in text
    assert tlm.map_reading(in_band=in_band.iloc[:0], **kw) == "The mechanism map is not recorded here."


class _Model:
    """A stand-in text model: ``heldout`` notes what it was asked for, the autoencoder embeds ids and reads them out."""

    def __init__(self, vocab: int = 6, dim: int = 4):
        torch.manual_seed(0)
        emb, readout = torch.randn(vocab, dim), torch.nn.Linear(dim, vocab)
        self.asked: list[tuple[int, int]] = []
        self.autoencoder = SimpleNamespace(encode=lambda ids: emb[ids], decode=lambda x: readout(x).argmax(-1), readout=readout)

    def heldout(self, n: int, seed: int = 0) -> torch.Tensor:
        self.asked.append((n, seed))
        return torch.arange(3 * 5).reshape(3, 5) % 6


def test_held_out_draws_each_models_windows_and_measures_their_margins():
    ctx, sep = _Model(), _Model()
    held = tl.held_out(ctx, sep, n_terminal=0, seed=3)
    assert ctx.asked == [(1345, 3)] and sep.asked == [(1208, 3)]       # 0: every held-out window of each model
    ro = ctx.autoencoder.readout
    assert torch.equal(held.ref, ro(held.x1).argmax(-1)) and held.x1.shape == (3, 5, 4)
    assert torch.equal(held.margins, tube.readout_margins(ro.weight, ro.bias, held.x1))
    tl.held_out(ctx, sep, n_terminal=7, seed=0)
    assert ctx.asked[-1] == (7, 0) and sep.asked[-1] == (7, 0)
