"""Chapter 4's glued words (tokendyn.publish.chapters.basins) on constructed runs and records: every
number is the input's or the rule's, and the words follow the numbers (a trend, an interval against
a threshold, which model beats its null, the verdict)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from tokendyn.core.stats import Estimate
from tokendyn.publish import verdicts
from tokendyn.publish.chapters import attractor, trap_census
from tokendyn.publish.chapters import basins as words


def _e(v, lo, hi, n=50):
    return Estimate(v, lo, hi, n)


def _d(v, lo, hi, n=50):
    return {"value": v, "lo": lo, "hi": hi, "n": n}


def test_setup_rule_and_recorded_settings_are_the_parameters():
    w = words.run_text(["a", "b"], {"a": 200, "b": 600, "c": 600}, 18)
    assert w == {"run_models": "two MLMs for the traps, three for the long chains, 18 chains each, 200 to 600 steps"}
    assert words.run_text(["a", "b"]) == {"run_models": "two MLMs for the traps"}            # page 4.1: no long chains
    assert words.run_text((), {"a": 200, "b": 600}, 18) == {"run_models": "two for the long chains, 18 chains each, "
                                                                          "200 to 600 steps"}  # page 4.3
    with pytest.raises(ValueError, match="needs trap_models or chain_steps"):
        words.run_text()
    assert words.rule_texts() == {"dwell_mark": "1,000", "rule_tau": "0.5"}
    assert trap_census.rule_texts() == {"min_examples": "5", "fluent_level": "0.5"}
    census = {"provenance": {"params": {"min_traps": 64, "taus": [0.3, 0.5, 1.0]}}}
    assert words.census_texts(census, {"a": 17, "b": 15}) == {"live_traps": "15 to 17", "rec_min_traps": "64",
                                                              "rec_taus": "0.3, 0.5 and 1"}
    assert words.census_texts(None, {"a": 17})["live_traps"] == "17"
    basin = {"provenance": {"params": {"chains": 8, "taus": [0.5, 1.0], "radii": [2], "steps": 10000}}}
    assert words.basin_texts(basin, [{"n_tokens": 16}]) == {"basin_chains": "8", "basin_taus": "0.5 and 1", "basin_h": "2",
                                                            "basin_sites": "16", "basin_watch": "10,000"}
    att = {"provenance": {"params": {"chains": 34, "embed_every": 100, "n_fluency": 256}}}
    assert attractor.attractor_texts(att, SimpleNamespace(chains=102, steps=10000)) == {
        "att_per_topic": "34", "att_chains": "102", "att_steps": "10,000", "att_every": "100", "att_fluency": "256"}
    assert attractor.corpus_texts({"sotu_share": 0.15}) == {"sotu_share": "15%"}


def test_ladder_words_are_chapter_twos_for_the_trap_rungs():
    rungs = [{"model": f"m{k}", "encoder": e, "layers": k, "params": p}
             for e, k, p in (("minilm", 1, 13.9e6), ("minilm", 6, 22.7e6), ("mpnet", 2, 38.6e6), ("mpnet", 12, 109.5e6))]
    w = words.ladder_texts(rungs, {"provenance": {"params": {"starts": 48}}})
    assert w == {"tl_cuts": "all-MiniLM-L6-v2 cut to 1 and 6 layers (13.9M to 22.7M parameters) and all-mpnet-base-v2 "
                            "cut to 2 and 12 layers (38.6M to 109.5M parameters)", "tl_span": "7.9x", "tl_starts": "48"}


def _census_row(model, ratio, consistent=True):
    return {"model": model, "n_traps": 76, "starts": 90, "median_margin": _d(0.149, 0.109, 0.215),
            "tau_1000": _d(0.036, 0.025, 0.051),
            "exact_dwell": {"0.3": _d(13.2, 11.3, 16.1), "0.5": _d(6.28, 5.91, 7.16), "1": _d(2.15, 2.06, 2.3)},
            "dwell_law": {k: {"ratio": ratio, "consistent": consistent} for k in ("0.3", "0.5", "1")}}


def _metastability(ratio, basin_median, consistent=True):
    rec_meta = {"provenance": {"params": {"starts": 90, "chains": 8}}}
    basin_meta = {"provenance": {"params": {"chains": 8, "steps": 10000, "radii": [2]}}}
    basin_rows = [{"model": "m", "basin_dwell": {"2": {"0.5": {"median": basin_median, "censored": 3, "chains": 608}}}}]
    v6 = verdicts.claim_6({"m": Estimate(**basin_median)}, watched=10000)
    return words.metastability_md(slope_ratio=1.004, looseness_log10=5.3, below_bound=True,
                                  rec_rows=[_census_row("m", ratio, consistent)], rec_meta=rec_meta, rule_key="0.5",
                                  kmc=_e(3730, 969, 880003, 4), kmc_tau=0.05, kmc_h=2, basin_rows=basin_rows,
                                  basin_meta=basin_meta, v6=v6)


def test_metastability_quotes_the_records_and_follows_the_rule():
    text = _metastability(_d(0.95, 0.86, 1.06), _d(22, 18, 25))
    for part in ("claim 6): not reproduced", "1.00 at the median", "$10^{5}$", "76 of `m` distinct perfect traps",
                 "from 90 real starts each, 8 plain chains", "is 0.95 at $\\tau$ = 0.3, 0.5 and 1, every interval contains 1",
                 "stay inside the Kolmogorov band", "0.15 (`m`) nats deep", "1,000 steps only at $\\tau$ = 0.036 [0.025, 0.051]",
                 "6.3 [5.9, 7.2] (`m`) steps (13 at $\\tau$ = 0.3; 2 at $\\tau$ = 1)", "3,730 [969, 880,003] steps",
                 "`m` 22 [18, 25] steps (3 of 608 chains still near after 10,000)", "far from the rule's 1,000 steps",
                 "verdict is *not reproduced*"):
        assert part in text, part
    off = _metastability(_d(1.4, 1.2, 1.6), _d(1500, 1200, 2000), consistent=False)
    assert "not every interval contains 1" in off and "not always inside" in off
    assert "verdict is *reproduced*" in off and "far from" not in off


def _ladder(mini_depths):
    rows = []
    for e, cuts in (("minilm", [(1, 13.9e6), (6, 22.7e6)]), ("mpnet", [(2, 38.6e6), (12, 109.5e6)])):
        for j, (k, p) in enumerate(cuts):
            d = mini_depths[j] if e == "minilm" else (0.13, 0.29)[j]
            rows.append({"model": f"{e}-l{k}", "encoder": e, "params": p, "n_traps": 24 + 19 * j,
                         "traps": [{"min_margin": d + 0.01 * i} for i in range(-5, 6)]})
    return rows


def _size(within_tau, mini_depths=(0.15, 0.09)):
    rungs = _ladder(mini_depths)
    base = [{"model": "base", "encoder": "mpnet", "params": 109.5e6}]
    depth = {"minilm-l1": _e(mini_depths[0], 0.1, 0.2), "minilm-l6": _e(mini_depths[1], 0.05, 0.12),
             "mpnet-l2": _e(0.13, 0.06, 0.15), "mpnet-l12": _e(0.29, 0.18, 0.52), "base": _e(0.34, 0.14, 0.52)}
    tau = {"minilm-l1": _e(0.03, 0.02, 0.06), "minilm-l6": _e(0.03, 0.02, 0.05), "mpnet-l2": _e(0.028, 0.016, 0.033),
           "mpnet-l12": _e(0.068, 0.042, 0.117), "base": _e(0.080, 0.032, 0.110)}
    dwell = {"mpnet-l12": _e(9.1, 7.8, 12.9), "base": _e(13.6, 11.3, 16.9)}
    return words.size_md(rungs=rungs, base=base, depth=depth, tau1000=tau, dwell=dwell,
                         within={"depth": _e(0.11, 0.03, 0.27), "tau": within_tau},
                         pooled={"depth": _e(0.05, 0.0, 0.1), "tau": _e(0.011, 0.002, 0.022)}, rule_tau=0.5)


def test_size_paragraph_reads_the_ladder_and_its_trend():
    text = _size(_e(0.028, 0.010, 0.057))
    for part in ("four cuts of two frozen encoders", "13.9M to 110M parameters, 24 to 43 distinct traps",
                 "traps deepen with size within a backbone", "from 0.13 nats at 38.6M parameters to 0.29 [0.18, 0.52] at 110M",
                 "from 0.028 to 0.068 [0.042, 0.117]", "+0.11 [+0.03, +0.27] nats and +0.028 [+0.010, +0.057]",
                 "MiniLM's two cuts (1.6x)", "grow shallower", "flatter (+0.011 [+0.002, +0.022]",
                 "size moves claim 6 toward the paper, but slowly", "9.1 [7.8, 12.9] steps",
                 "about 15 more e-folds", "and 7.6 (some 2,000 times", "about as deep", "inside the head-only",
                 "13.6 [11.3, 16.9] steps against 9.1", "a little, within the intervals", "close the gap to 1,000"):
        assert part in text, part
    flat = _size(_e(-0.01, -0.03, 0.01), mini_depths=(0.09, 0.15))
    assert "does not show size moving claim 6" in flat and "would not reach 0.5" in flat and "deepen too" in flat


def _census(both_fluent, n_approx):
    fluency = pd.DataFrame([{"model": "d", "traps": 17, "fluent by NLL alone": 15, "fluent traps": both_fluent,
                             "tautologies": 9, "repetition traps": 1},
                            {"model": "s", "traps": 17, "fluent by NLL alone": 7, "fluent traps": 2, "tautologies": 14,
                             "repetition traps": 8}])
    low = pd.DataFrame([{"model": "d", "held": True, "perfect trap": False, "held steps": 1712.0, "censored": False,
                         "sites below argmax": 1},
                        {"model": "s", "held": True, "perfect trap": True, "held steps": 5000.0, "censored": True,
                         "sites below argmax": 0}])
    rep = pd.DataFrame([{"model": "d", "tau": 0.7, "chains": 9, "entered": 0, "chain / text": 1.6, "head / text": 1.45},
                        {"model": "s", "tau": 0.7, "chains": 9, "entered": 8, "chain / text": 3.2, "head / text": 1.16},
                        {"model": "s", "tau": 1.0, "chains": 9, "entered": 0, "chain / text": 0.6, "head / text": 1.16}])
    examples = [{"model": "s", "dominance": 0.9, "top token": "pro", "perfect trap": True},
                {"model": "d", "dominance": 0.4, "top token": "the", "perfect trap": False}]
    v7 = verdicts.claim_7({"d": Estimate(both_fluent / 17, 0, 1, 17)}, n_approx, 16)
    return trap_census.census_md(default_model="d", fluency=fluency, low=low, approx_chains=1, min_tau=0.7, rep=rep,
                           examples=examples, steps={"d": 200, "s": 600}, chains_per_cell=9, n_approx=n_approx, n_rep=16,
                           v7=v7)


def test_census_paragraph_counts_and_thresholds():
    text = _census(6, 3)
    for part in ("all three kinds exist; the verdict is *partly*", "mostly tautologies", "finds 0.88 [0.66, 0.97]",
                 "9 of the default model's 17 traps", "0.35 [0.17, 0.59], an interval straddling 0.5",
                 "Of `s`'s 17 traps, 8 are repetition basins", "one `d` state is held for 1,712 steps with one site off",
                 "in 1 of the long chains at $\\tau \\ge$ 0.7", "`d` 0 of 9 chains; `s` 8 of 9 chains",
                 "\"pro pro pro ...\", itself a perfect trap", "1.2 to 1.4 times", "end at 3.2 times",
                 "the dynamics amplifying a mild habit", "200 steps, the others' up to 600", "with 9 chains a cell",
                 "at least 5 chains", "Here 3 chains"):
        assert part in text, part
    assert "an interval below 0.5" in _census(1, 3)


def _run(beat_splade, abl_lo):
    t = {("d", 0.7, "gated"): SimpleNamespace(excess=_e(0.087, 0.048, 0.124), null=_e(0.069, 0.012, 0.131), null_region="food"),
         ("d", 1.0, "gated"): SimpleNamespace(excess=_e(0.171, 0.158, 0.184), null=_e(0.073, 0.063, 0.083), null_region="food"),
         ("s", 0.7, "gated"): SimpleNamespace(excess=_e(-0.041, -0.066, -0.011), null=_e(0.089, 0.04, 0.142),
                                              null_region="science"),
         ("s", 1.0, "gated"): SimpleNamespace(excess=_e(0.3, 0.2, 0.4) if beat_splade else _e(0.058, 0.037, 0.078),
                                              null=_e(0.074, 0.033, 0.117), null_region="food")}
    return SimpleNamespace(models=("d", "s"), ablation_models=("s", "s-nopol"), tests=t,
                           politics_fluent=_e(0.07, 0.05, 0.10, 512), real_fluent=_e(0.91, 0.86, 0.94),
                           ablation={0.7: _e(-0.011, -0.038, 0.017), 1.0: _e(0.049, abl_lo, 0.075)}, chains=102, steps=10000)


def _attractor(run):
    shares = pd.DataFrame([{"text": g, "labels": "argmax", "label": lab, "share": s}
                           for g, ss in (("random", {"food": 0.56, "politics": 0.2}), ("shuffled", {"food": 0.38, "politics": 0.12}))
                           for lab, s in ss.items()])
    v8 = verdicts.claim_8({k[:2]: r.excess for k, r in run.tests.items()}, {k[:2]: r.null for k, r in run.tests.items()},
                          run.politics_fluent, run.real_fluent, run.ablation, chains=run.chains, steps=run.steps)
    return attractor.attractor_md(shares=shares, nulls=["random", "shuffled"], live_chains=9, live_steps=[200, 600],
                              live_excess=_e(0.1, 0.02, 0.2), top_tau=1.0, run=run, v8=v8)


def test_attractor_paragraph_names_where_politics_beats_its_null():
    text = _attractor(_run(False, 0.023))
    for part in ("at the size the rule fixed, not reproduced", "its sink is *food*, not politics", "(9 a temperature, 200 to 600 steps)",
                 "point toward politics at $\\tau$ = 1 (gated excess +0.10 [+0.02, +0.20])", "102 chains a (model, τ), 10,000 steps each, on `d` and `s`",
                 "`d` at τ = 1: +0.17 [+0.16, +0.18] against +0.07 [+0.06, +0.08] (food)", "beats its null on `d` at $\\tau$ = 1 and nowhere else", "most often *food*, the classifier's sink",
                 "0.07 [0.05, 0.10] of 512 sampled", "word-salad order", "it holds on one model of two", "verdict is *not reproduced*"):
        assert part in text, part
    both = _attractor(_run(True, 0.023))
    assert "it holds on two models of two" in both and "verdict is *partly*" in both


def test_ablation_words_follow_each_interval():
    v = verdicts.paired_differences(_run(False, 0.023).ablation)
    text = attractor.ablation_md(run=_run(False, 0.023), v_abl=v, live_chains=9)
    for part in ("in the data? Partly.", "-0.011 [-0.038, +0.017] at τ = 0.7, +0.049 [+0.023, +0.075] at τ = 1",
                 "At $\\tau$ = 0.7 there is no difference to see; at $\\tau$ = 1 the corpus accounts for a share",
                 "`s`'s political region does not beat its null", "on 9 chains"):
        assert part in text, part
    beaten = attractor.ablation_md(run=_run(True, -0.01), v_abl=verdicts.paired_differences(_run(True, -0.01).ablation), live_chains=9)
    assert "Not reproduced." in beaten and "accounts for" not in beaten and "does not beat its null" not in beaten


def test_setting_paragraph_reads_sizes_and_steps():
    text = words.setting_md(sizes={"a": 22.7e6, "b": 4.4e6}, steps={"a": 200, "b": 600}, chains_per_tau=9)
    assert "(4.4 to 22.7 million parameters" in text and "200 to 600 steps and 9 chains per temperature" in text
    traps_only = words.setting_md(sizes={"a": 22.7e6, "b": 4.4e6})      # page 4.1: the exact parts, no chains
    assert "chains per temperature" not in traps_only and "do not depend on scale" in traps_only
