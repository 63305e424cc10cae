"""Chapter 4's tables, claim rows and record (tokendyn.publish.chapters.basins) and the computations
they call (tokendyn.analysis.traps.repetition_basins, tokendyn.analysis.topics.fluency_gates and
label_frames), on constructed inputs: every count is one the input fixes by hand, and each claim
row's verdict moves when its input crosses the rule's threshold."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from tokendyn.analysis import topics, traps
from tokendyn.core.stats import Estimate
from tokendyn.publish.chapters import attractor, trap_census
from tokendyn.publish.chapters import basins as rows


def _e(v, lo, hi, n=50):
    return Estimate(v, lo, hi, n)


def _d(v, lo, hi, n=50):
    return {"value": v, "lo": lo, "hi": hi, "n": n}


# --- repetition basins --------------------------------------------------------------------------

def _chains():
    """Two chains of 4 sites over 5 records (steps 0, 10, ..., 40): chain 0 falls into a basin of
    token 7 at step 20 and stays (dominance 3/4, then 1); chain 1 never repeats a token."""
    a = [[1, 2, 3, 4], [1, 2, 3, 5], [7, 7, 7, 5], [7, 7, 7, 7], [7, 7, 7, 7]]
    b = [[1, 2, 3, 4], [5, 2, 3, 4], [5, 6, 3, 4], [5, 6, 8, 4], [5, 6, 8, 9]]
    return torch.tensor([a, b]).transpose(0, 1), torch.arange(5) * 10        # [T=5, B=2, n=4], [T]


def test_repetition_basins_count_entries_time_and_the_common_window():
    traj, steps = _chains()
    r = traps.repetition_basins(traj, steps, share=0.5, within=20)
    assert (r.chains, r.entered, r.entered_within) == (2, 1, 1)
    assert r.time == pytest.approx(3 / 8)                    # 3 of the 4 records after the start, one chain of two
    assert traps.repetition_basins(traj, steps, share=0.5, within=10).entered_within == 0
    assert traps.repetition_basins(traj, steps, share=1.0, within=40).entered == 1
    # second half: steps 20, 30, 40; chain 0 repeats 3, 4 and 4 of its 4 sites there, chain 1 none
    assert r.late_repeat == pytest.approx((0.75 + 1 + 1) / 6)
    assert r.path_steps.tolist() == [0, 10, 20, 30, 40]
    assert r.path_dominance.tolist() == pytest.approx([0.25, 0.25, 0.5, 0.625, 0.625])
    assert traps.repetition_basins(traj, steps, share=0.5, within=40, points=2).path_steps.tolist() == [0, 20, 40]
    with pytest.raises(ValueError):
        traps.repetition_basins(traj, steps[:4], share=0.5, within=10)


def test_repetition_table_rows_per_model_and_tau():
    traj, steps = _chains()
    ch = SimpleNamespace(trajectory=torch.cat([traj, traj], 1), steps=steps)    # chains 0, 1 at tau 0.7; 2, 3 at tau 1
    table, paths = trap_census.repetition_table({"m": ch}, [0.7, 0.7, 1.0, 1.0], [0.7, 1.0], share=0.5, common=20,
                                         head={"m": 0.2}, text_repeat=0.1,
                                         cards={"m": {"repetition": {"data": 0.11, "model": 0.16}}})
    assert table["tau"].tolist() == [0.7, 1.0] and table["entered"].tolist() == [1, 1]
    assert list(table.columns)[:6] == ["model", "tau", "chains", "entered", "time in basin", "entered in 20 steps"]
    assert table["chain / text"].tolist() == pytest.approx([2.75 / 6 / 0.1] * 2) and table["head / text"].tolist() == pytest.approx([2.0, 2.0])
    assert table["appendix text / first guess"].iloc[0] == "0.11 / 0.16"
    assert len(paths) == 10 and set(paths.columns) == {"model", "tau", "step", "mean dominance", "window repeat"}
    none = trap_census.repetition_table({"m": ch}, [0.7, 0.7, 1.0, 1.0], [0.7], share=0.5, common=20, head={"m": 0.2},
                                 text_repeat=0.1, cards={"m": {}})[0]
    assert none["appendix text / first guess"].iloc[0] == "not measured"


# --- the fluency gate -------------------------------------------------------------------------------

def test_fluency_gates_score_shared_starts_once_and_gate_each_trap(monkeypatch):
    nll = {"real a": 2.0, "real b": 3.0, "real c": 4.0, "fine text": 2.5, "word salad": 9.0,
           "a mental hospital, also known as a mental hospital, is a mental hospital": 1.0}
    calls = []

    def fake_nll(ar, texts, batch=16):
        calls.append(tuple(texts))
        return torch.tensor([nll[t] for t in texts], dtype=torch.float64)

    monkeypatch.setattr(topics, "ar_nll", fake_nll)
    real = ["real a", "real b", "real c"]
    traps_ = ["fine text", "word salad", "a mental hospital, also known as a mental hospital, is a mental hospital"]
    gates = topics.fluency_gates(None, {"x": traps_, "y": traps_, "z": []},
                                 {"x": torch.tensor([0.25, 0.25, 0.25]), "y": torch.tensor([0.75, 0.25, 0.25]),
                                  "z": torch.zeros(0)}, {"x": real, "y": real, "z": real}, keep=0.95, repeat_share=0.5)
    assert calls.count(tuple(real)) == 1                                # three groups, one scoring of the starts
    x, y, z = gates["x"], gates["y"], gates["z"]
    assert x.nll_limit == pytest.approx(float(np.quantile([2.0, 3.0, 4.0], 0.95)))
    assert x.fluent.tolist() == [True, False, False]                    # salad fails on NLL, the tautology on words
    assert x.tautology.tolist() == [False, False, True]
    assert y.fluent.tolist() == [False, False, False]                   # a repetition basin never counts as fluent
    assert len(z.nll) == 0 and len(z.fluent) == 0
    with pytest.raises(ValueError):
        topics.fluency_gates(None, {"x": traps_}, {"x": torch.zeros(2)}, {"x": real})
    table = trap_census.fluency_table(gates, repeat_share=0.5)
    assert table.set_index("model").loc["x", ["traps", "fluent traps", "tautologies", "fluent by NLL alone",
                                             "repetition traps"]].tolist() == [3, 1, 1, 2, 0]
    assert table.set_index("model").loc["y", ["fluent by NLL alone", "repetition traps"]].tolist() == [1, 1]
    assert np.isnan(table.set_index("model").loc["z", "traps: median NLL"])
    recs = [traps.TrapRecord(m, [i, i + 1], t, 0.1) for m in ("x", "y") for i, t in enumerate(traps_)]
    tt = trap_census.trap_table(recs, {"x": x, "y": y})
    assert tt["SmolLM2 NLL"].tolist() == [2.5, 9.0, 1.0] * 2 and tt["ids"].tolist()[:2] == ["0 1", "1 2"]
    assert tt["dominance"].tolist()[3] == 0.75


# --- labelled frames and visits -------------------------------------------------------------------

class _Tok:
    def decode(self, ids):
        return " ".join(f"w{i}" for i in ids)


class _Embedder:
    """Sentence embeddings by the text's first word: w0 -> (1, 0), w1 -> (0, 1), others far from both."""

    def encode(self, texts, **kw):
        v = {"w0": [1.0, 0.0], "w1": [0.0, 1.0]}
        return torch.tensor([v.get(t.split()[0], [-1.0, -1.0]) for t in texts])


def _clf():
    e = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    labels = ["politics", "politics", "food", "food"]
    clf = topics.fit_centroids(e, labels, order=["food", "politics"])
    return clf, topics.with_reject(clf, e, keep=1.0), e, labels


def test_label_frames_keeps_every_kth_record_and_labels_it():
    clf, gclf, e, labels = _clf()
    traj = torch.tensor([[[0, 5], [1, 5]], [[9, 9], [9, 9]], [[1, 5], [2, 5]], [[9, 9], [9, 9]]])   # [T=4, B=2, n=2]
    f = topics.label_frames(SimpleNamespace(tokenizer=_Tok()), _Embedder(), traj, torch.arange(4) * 5, every=10,
                            clf=clf, gated_clf=gclf, refs=e, ref_labels=labels, regions=["food", "politics"], k=1)
    assert f.steps.tolist() == [0, 10] and f.states.shape == (2, 2, 2)
    assert f.texts == ["w0 w5", "w1 w5", "w1 w5", "w2 w5"]
    assert f.label_names[:3] == ["politics", "food", "food"] and f.argmax.tolist()[0] == [1, 0]
    assert f.gated_names[3] == topics.NONE and int(f.gated[1, 1]) == -1
    assert f.similarity.shape == (2, 2, 2) and float(f.similarity[0, 0, 1]) == pytest.approx(1.0)
    assert f.classes == ("food", "politics")


def _frames(labels_gated):
    """Two chains, 4 frames at steps 0..30, labels given per frame and chain (index into classes)."""
    lab = torch.tensor(labels_gated)
    return topics.LabelledFrames(states=torch.tensor([[[1, 1], [1, 2]]] * 4), steps=torch.arange(4) * 10,
                                 texts=["t"] * 8, emb=torch.zeros(8, 2), argmax=lab.clamp_min(0), gated=lab,
                                 label_names=["x"] * 8, gated_names=["y"] * 8, similarity=torch.zeros(4, 2, 2),
                                 classes=("food", "politics"))


def test_visits_table_groups_and_frames_table_rows():
    f = _frames([[0, 0], [1, 0], [1, -1], [0, 0]])   # chain 0 visits politics at frames 1-2; chain 1 never
    v = attractor.visits_table({"d": f, "o": f}, ["food", "health"], [0.7, 0.7], regions=["food", "politics"],
                          starts=["food", "health"], taus=[0.7], default_model="d", seed=0)
    d = v[(v.model == "d") & (v.region == "politics") & (v.labels == "gated")].set_index("start")
    assert list(d.index) == ["food", "health", "all"]                  # per start topic, then pooled
    assert d.loc["food", "time_fraction value"] == pytest.approx(2 / 3) and d.loc["health", "ever value"] == 0
    assert d.loc["all", "chains"] == 2 and d.loc["food", "chains"] == 1
    assert set(v[v.model == "o"]["start"]) == {"all"}                  # other models: pooled only
    ft = attractor.frames_table({"d": f}, ["food", "health"], [0.7, 0.7], ["food", "politics"])
    assert len(ft) == 8 and ft["chain"].tolist()[:2] == [0, 1] and ft["step"].tolist()[-1] == 30
    assert ft["dominance"].tolist()[:2] == [1.0, 0.5] and {"sim food", "sim politics"} <= set(ft.columns)


# --- claim rows: each verdict follows its input across the rule's threshold --------------------------

def _census_row(model, near=None):
    return {"model": model, "n_traps": 76, "starts": 90, "params": 22.7e6, "median_margin": _d(0.149, 0.109, 0.215),
            "tau_1000": _d(0.036, 0.025, 0.051), "exact_dwell": {"0.5": _d(6.28, 5.91, 7.16), "1": _d(2.15, 2.06, 2.3)},
            "dwell_law": {"0.5": {"ratio": _d(0.95, 0.86, 1.06)}}}


def _claim6(near, with_census=True):
    rec = {"m": _census_row("m")} if with_census else {}
    basin_rows = [{"model": "m", "basin_dwell": {"2": {"0.5": {"median": near}}}}]
    ladder = [{"model": "r1", "params": 10e6}, {"model": "r2", "params": 40e6}]
    return rows.claim6(
        rec_traps=rec, rec_keys=["0.5", "1"] if with_census else [],
        rec_meta={"provenance": {"params": {"starts": 90, "chains": 8}}},
        basin_rows=basin_rows, basin_meta={"provenance": {"params": {"chains": 8, "steps": 10000}}}, basin_h="2",
        rule_key="0.5", ladder=ladder, base=[{"model": "b"}],
        ladder_tau={"r1": _e(0.03, 0.02, 0.04), "r2": _e(0.05, 0.04, 0.06), "b": _e(0.06, 0.05, 0.07)},
        ladder_dwell={"b": _e(13.6, 11.3, 16.9)}, within=_e(0.02, 0.01, 0.03), pooled=_e(0.01, 0.0, 0.02),
        kmc={"m": _e(3730, 969, 8800, 4)}, kmc_tau=0.05, t1000={"m": torch.tensor([0.03, 0.04, 0.05])},
        live_dwell={"m": torch.tensor([4.0, 6.0, 9.0])}, depth={"m": _e(0.15, 0.1, 0.2)}, h=2, basin_traps=4,
        basin_moves=16, seed=0)


def test_claim6_row_reads_the_basin_run_and_its_verdict_crosses_1000_steps():
    f, v = _claim6(_d(22, 18, 25))
    assert v.verdict == f.verdict == "not reproduced" and f.claim == 6
    for part in ("median dwell within Hamming 2 of a trap at tau = 0.5: m 22 [18, 25] steps;",
                 "m (76 traps): median exact dwell 1/q at tau = 0.5: 6.3 [5.9, 7.2], 1: 2.1 [2.1, 2.3] steps",
                 "observed / Geometric mean dwell at tau = 0.5: 0.95 [0.86, 1.06]", "median depth 0.15 [0.11, 0.21] nats"):
        assert part in f.ours, part
    assert f.headline == "m: near a trap 22 [18, 25] steps at tau = 0.5; in it (1/q) m 6.3 [5.9, 7.2]"
    assert f.basis.startswith("recorded basin run (scripts/record_basin_dwell.py, 8 chains a trap watched up to 10,000")
    assert "size ladder (2 rungs, 4.0x): tau_1000 r1 0.030 [0.020, 0.040], r2 0.050 [0.040, 0.060]" in f.basis
    assert f.basis.endswith("; base-size b (top layer trained too) tau_1000 0.060 [0.050, 0.070], dwell at 0.5 13.6 [11.3, 16.9] steps")
    assert _claim6(_d(150, 90, 300))[1].verdict == "partly"             # the point reaches 100 steps
    assert _claim6(_d(2500, 1200, 4000))[1].verdict == "reproduced"     # the whole interval at or above 1,000


def test_claim6_without_the_census_reads_this_run():
    f, v = _claim6(_d(22, 18, 25), with_census=False)
    assert v.verdict == "not reproduced"                                # the basin run still decides
    assert f.ours.startswith("m: stay within Hamming 2 of a trap at tau = 0.05: median 3,730 [969, 8,800] steps; "
                             "exact dwell 1/q = 1,000 at tau = 0.040")
    assert f.ours.endswith("at tau = 0.5 it is 6 steps") and f.headline.startswith("m: tau_1000 = 0.040")
    assert f.basis == ("4 traps per model followed by kinetic Monte Carlo (16 moves), exact q of 3 traps from their "
                       "logits; median trap depth m 0.15 nats")


def _claim7(fluent, n_approx, n_rep):
    fluency = pd.DataFrame([{"model": "a", "traps": 10, "fluent traps": fluent}, {"model": "b", "traps": 0, "fluent traps": 0}])
    rep = pd.DataFrame([{"model": "a", "tau": 0.7, "entered": 3, "chains": 9}, {"model": "a", "tau": 1.0, "entered": 0, "chains": 9}])
    return trap_census.claim7(perfect={"a": torch.tensor([True, True, False, False]), "b": torch.tensor([False] * 4)},
                       fluency=fluency, n_approx=n_approx, n_rep=n_rep, rep=rep, min_tau=0.7, n_starts=4, n_models=3,
                       n_chains=18, h=2, min_dwell=100)


def test_claim7_row_and_verdict():
    f, v = _claim7(10, 6, 5)
    assert v.verdict == "reproduced"                                    # fluent share above 0.5, both kinds >= 5
    assert f.ours.startswith("a: starts ending in a perfect trap 0.50 [0.15, 0.85], fluent 1.00 [0.72, 1.00]; "
                             "b: starts ending in a perfect trap 0.00 [0.00, 0.49], fluent 0.00 [0.00, 0.79]; ")
    assert f.ours.endswith("approximate traps (held, not all argmax) in 6 chains; repetition basins entered at tau = "
                           "0.7 by a 0.33 [0.12, 0.65]")
    assert f.basis == "4 starts per model; long chains of 3 models, 18 chains each; (2, 100) approximate traps"
    assert _claim7(10, 4, 5)[1].verdict == "partly"                     # one kind seen fewer than 5 times
    assert _claim7(3, 6, 5)[1].verdict == "partly"                      # the fluent share's interval reaches 0.5
    assert _claim7(10, 0, 5)[1].verdict == "not reproduced"             # a kind never seen


def _run(beat, abl_lo):
    t = {(m, tau, "gated"): SimpleNamespace(excess=_e(0.3, 0.2, 0.4) if beat or m == "d" else _e(0.05, 0.0, 0.1),
                                            null=_e(0.07, 0.06, 0.08), null_region="food")
         for m in ("d", "s", "s-nopol") for tau in (0.7, 1.0)}
    return SimpleNamespace(models=("d", "s"), ablation_models=("s", "s-nopol"), tests=t,
                           politics_fluent=_e(0.9, 0.85, 0.95, 512), real_fluent=_e(0.91, 0.86, 0.94),
                           ablation={0.7: _e(0.02, abl_lo, 0.04), 1.0: _e(0.05, 0.02, 0.08)}, chains=102, steps=10000)


def _claim8(run, excess_lo=0.1):
    visits = pd.DataFrame([{"model": "d", "start": "all", "tau": 1.0, "labels": lab, "region": "politics",
                            "time_fraction value": 0.3, "time_fraction lo": 0.2, "time_fraction hi": 0.4}
                           for lab in ("argmax", "gated")])
    excess = {(m, t, lab): _e(0.2, excess_lo, 0.3, 9) for m in ("d", "s") for t in (0.7, 1.0) for lab in ("argmax", "gated")}
    shares = pd.DataFrame([{"text": "random", "labels": "argmax", "label": "politics", "share": 0.2}])
    return attractor.claim8(run=run, run_rows=[{"accuracy": _d(0.9, 0.85, 0.94)}], visits=visits, excess=excess,
                       fluent={"real held-out snippets": _e(0.9, 0.8, 0.95)}, shares=shares, nulls=["random"],
                       default_model="d", top_tau=1.0, taus=[0.7, 1.0], paper_models=["d", "s"], steps={"d": 200, "s": 600},
                       chains_per_tau=9, accuracy=_e(0.9, 0.85, 0.94), abl_diffs={1.0: _e(0.1, 0.0, 0.2)})


def test_claim8_reads_the_recorded_run_and_its_verdict_follows_the_null():
    f, v = _claim8(_run(True, 0.01))
    assert v.verdict == "reproduced"                                    # above the null everywhere, fluent, ablation > 0
    assert f.ours.startswith("d, tau = 0.7: politics excess +0.300 [+0.200, +0.400] vs null (food) +0.070 [+0.060, +0.080] (gated)")
    assert "; politics-labelled states fluent 0.90 [0.85, 0.95] vs real snippets 0.91 [0.86, 0.94]; paired ablation" in f.ours
    assert f.headline == ("d, tau = 1: excess +0.30 [+0.20, +0.40], null +0.07 [+0.06, +0.08]; "
                          "s, tau = 1: excess +0.30 [+0.20, +0.40], null +0.07 [+0.06, +0.08]")
    assert f.basis.endswith("on d, s and s-nopol; classifier accuracy 0.90 [0.85, 0.94]")
    assert _claim8(_run(True, -0.01))[1].verdict == "partly"            # the ablation's interval reaches 0 at one tau
    assert _claim8(_run(False, 0.01))[1].verdict == "not reproduced"    # s never beats its null


def test_claim8_without_the_record_is_not_yet_measured():
    f, v = _claim8(None)
    assert v.verdict == "not yet measured"                              # 9 chains a tau, no null: below the rule's size
    assert f.ours.startswith("d, tau = 1: politics time 0.30 [0.20, 0.40] (argmax), 0.30 [0.20, 0.40] (gated); "
                             "excess over the regions not started in +0.20 [+0.10, +0.30] (argmax)")
    assert "fluent n/a vs real snippets 0.90 [0.80, 0.95]" in f.ours
    assert f.basis == ("9 chains at tau = 1, 200 steps; classifier accuracy 0.90; null text labelled politics random 0.20")


def test_ablation_row_follows_the_paired_differences():
    abl_df = pd.DataFrame([{"model": m, "tau": 1.0, "region": "politics", "labels": "gated", "time fraction": tf,
                            "lo": tf - 0.1, "hi": tf + 0.1} for m, tf in (("s", 0.3), ("s-nopol", 0.2))])
    excess = {(m, 1.0, "gated"): _e(0.1, 0.0, 0.2) for m in ("s", "s-nopol")}
    kw = dict(abl_df=abl_df, excess=excess, ablation={"with": "s", "without": "s-nopol"}, top_tau=1.0,
              steps={"s": 600, "s-nopol": 600})
    f, v = attractor.ablation_claim(run=_run(True, 0.01), abl_diffs={}, **kw)
    assert v.verdict == "reproduced" and f.paper_value == "(beyond the paper)"
    assert f.ours.startswith("paired difference in gated politics share (with - without) tau = 0.7: +0.020 [+0.010, +0.040]")
    assert "; excess over the regions not started in: s tau = 0.7 +0.300" in f.ours and "s-nopol tau = 1 +0.300" in f.ours
    assert attractor.ablation_claim(run=_run(True, -0.01), abl_diffs={}, **kw)[1].verdict == "partly"
    f, v = attractor.ablation_claim(run=None, abl_diffs={0.7: _e(-0.1, -0.2, 0.0), 1.0: _e(-0.05, -0.1, 0.01)}, **kw)
    assert v.verdict == "not reproduced"
    assert f.ours.startswith("politics time (gated, tau = 1) with 0.30 [0.20, 0.40], without 0.20 [0.10, 0.30]")
    assert f.headline == "paired difference, tau = 1: -0.05 [-0.10, +0.01]"
    assert f.basis == "s vs s-nopol, one recipe and seed, 600 steps"


def test_arrhenius_row_holds_by_construction_only_near_one():
    fits = pd.DataFrame({"model": ["a", "a", "b"], "slope / limit": [0.98, 1.02, 1.1]})
    f = rows.arrhenius_finding(fits, [0.02, 0.03])
    assert f.verdict == "holds by construction" and f.ours == "median fitted slope / (-m) a 1.00, b 1.10"
    assert f.basis == "3 traps, fitted on tau in [0.02, 0.03]; the softmax forces it as tau -> 0"
    assert rows.arrhenius_finding(fits.assign(**{"slope / limit": [0.5, 0.6, 0.7]}), [0.02]).verdict == "not reproduced"


# --- the ladder's lines and the record --------------------------------------------------------------

def _ladder():
    rungs = [{"model": "r1", "encoder": "mpnet", "params": 10e6, "perfect": 40, "starts": 48, "n_traps": 30},
             {"model": "r2", "encoder": "mpnet", "params": 40e6, "perfect": 44, "starts": 48, "n_traps": 35}]
    base = [{"model": "b", "encoder": "mpnet", "params": 40e6, "perfect": 45, "starts": 48, "n_traps": 36}]
    depth, tau = "median trap depth m (nats)", "τ where 1/q = 1,000"
    est = {depth: {"r1": _e(0.1, 0.08, 0.12), "r2": _e(0.2, 0.15, 0.25), "b": _e(0.25, 0.2, 0.3)},
           tau: {"r1": _e(0.03, 0.02, 0.04), "r2": _e(0.05, 0.04, 0.06), "b": _e(0.06, 0.05, 0.07)}}
    slope = {depth: _e(0.05, 0.01, 0.09), tau: _e(0.01, 0.005, 0.015)}
    kw = dict(rungs=rungs, base=base, est=est, dwell={m: _e(9.0, 8.0, 10.0) for m in ("r1", "r2", "b")}, pooled=slope,
              within=slope, mpnet=slope, mpnet_rows=rungs, tau_key=tau)
    return rungs + base, kw


def test_ladder_lines_say_every_rung_and_the_distance_to_half():
    all_rows, kw = _ladder()
    meta = {"provenance": {"params": {"starts": 48}, "git_commit": "abcdef0123456", "git_dirty": True}, "command": "make it"}
    lines = rows.ladder_lines([dict(r, git_commit="c1") for r in all_rows[:2]] + [all_rows[2]], meta, **kw)
    assert lines[0] == "recorded: 48 real starts a rung (commit abcdef0123, uncommitted changes in the tree); made by: make it"
    assert lines[1].startswith("rows computed at commit c1 (2 rows), ? (1 rows)")
    assert lines[2].startswith("r1 (mpnet, 10.0M): 40 of 48 starts end in a perfect trap, 30 distinct; median depth 0.100")
    assert lines[4].startswith("b (mpnet, 40.0M, base-size model, not a rung): 45 of 48")
    assert lines[6].startswith("τ where 1/q = 1,000: slope per e-fold of parameters over 4.0x, pooled +0.0100")
    # (0.5 - 0.05) / 0.01 = 45 e-folds at the slope, / 0.015 = 30 at the steepest
    assert lines[7] == ("to bring tau_1000 from r2's 0.050 to 0.5, if it stays linear in ln(parameters): 45.0 more e-folds "
                        f"at the within-backbone slope, 30.0 (x{np.exp(30):,.0f} the parameters) at the steepest slope its "
                        "interval allows")
    assert lines[8].startswith("b against r2 (same encoder, layer 12 trained too): median depth 0.250")
    m = rows.size_metrics(recorded="runs/x.json", command="make it", **kw)
    assert [m["trap_depth_by_size"][k]["rung"] for k in ("r1", "r2", "b")] == [True, True, False]
    assert m["trap_size_slope"]["span"] == pytest.approx(4.0) and m["trap_size_slope"]["command"] == "make it"


def test_record_helpers_keep_every_key():
    fits = pd.DataFrame({"model": ["a", "a"], "min margin": [0.1, 0.3], "slope": [-0.1, -0.3], "intercept": [0.0, 0.1],
                         "limit slope": [-0.1, -0.3], "slope / limit": [1.0, 1.2]})
    a = rows.arrhenius_metrics(fits, [0.02])["a"]
    assert a["slope_over_limit"] == {"median": pytest.approx(1.1), "min": 1.0, "max": 1.2} and len(a["per_trap"]) == 2
    d = rows.dwell_metrics({}, {}, None)
    assert d == {"dwell_checks": {}, "dwell_law_recorded": None}
    visits = pd.DataFrame([{"model": "d", "region": r, "start": s, "tau": 1.0, "labels": lab,
                            **{f"{m} {p}": 0.5 for m in ("ever", "time_fraction", "returns", "first_entry")
                               for p in ("value", "lo", "hi")}}
                           for r in ("food", "politics") for s in ("food", "all") for lab in ("argmax", "gated")])
    reg = attractor.region_metrics(visits, "d", regions=["food", "politics"], starts=["food"], taus=[1.0])
    assert set(reg) == {"political", "control_regions"} and set(reg["control_regions"]) == {"food"}
    assert reg["political"]["all"]["1.0"]["gated"]["returns"] == {"value": 0.5, "lo": 0.5, "hi": 0.5}
    abl = pd.DataFrame([{"corpus": "c", "model": "s", "tau": 1.0, "region": "politics"}])
    assert attractor.ablation_metrics(abl, {"with": "s"}, {"s": {"top5": 0.5}}) == {
        "with": {"model": "s", "card": {"top5": 0.5}, "regions": [{"tau": 1.0, "region": "politics"}]}}
