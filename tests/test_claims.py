"""Intervals, findings and the scoreboard: the numbers behind every verdict in the book."""

import json

import numpy as np
import pytest

from tokendyn import claims, results, stats, verdicts


def test_wilson_matches_known_values():
    # Wilson 95% for 0/10 is [0, 0.2775]; for 5/10 it is [0.2366, 0.7634] (standard tables)
    e = stats.wilson(0, 10)
    assert e.lo == 0 and abs(e.hi - 0.2775) < 1e-4
    e = stats.wilson(5, 10)
    assert abs(e.lo - 0.2366) < 1e-4 and abs(e.hi - 0.7634) < 1e-4
    with pytest.raises(ValueError, match="k=11 is out of range"):
        stats.wilson(11, 10)


def test_bootstrap_is_seeded_and_covers_the_mean():
    x = np.random.default_rng(1).normal(2.0, 1.0, 400)
    a, b = stats.bootstrap(x, seed=3), stats.bootstrap(x, seed=3)
    assert a == b and a.lo < x.mean() < a.hi
    # the interval has the width the CLT predicts: 2 * 1.96 * sd / sqrt(n)
    assert abs((a.hi - a.lo) - 2 * 1.96 * x.std() / 20) < 0.03
    assert stats.bootstrap(x, np.median, seed=3).value == float(np.median(x))
    with pytest.raises(ValueError, match="values"):
        stats.bootstrap([1.0])


def test_ratio_interval_floors_a_zero_denominator():
    r = stats.ratio_interval(10, 100, 0, 100)
    assert r.value == 10.0 and np.isfinite(r.hi)


def test_findings_are_checked_and_verdicts_computed():
    e = stats.Estimate(0.5, 0.45, 0.66, 64)
    v = verdicts.claim_1({"m": e})
    with pytest.raises(TypeError, match="never types a verdict"):
        claims.finding(1, e, "reproduced")
    with pytest.raises(ValueError, match="claim=17 is not a claim number"):
        claims.finding(17, e, v)
    f = claims.finding(1, e, v, basis="64 rectangles")
    assert f.ours == "0.5 [0.45, 0.66]" and f.paper == "delta in [0.64, 0.80]"
    assert (f.verdict, f.rule) == ("not reproduced", "claim_1") and "inside [0.64, 0.8]: none" in f.reason
    assert len(claims.CLAIMS) == 16 and sorted(claims.CLAIMS) == list(range(1, 17))


def test_scoreboard_gathers_every_claim_from_results(tmp_path):
    f = claims.finding(2, "max 0 (exact)", verdicts.claim_2(0.0), basis="SmolLM2")
    local = claims.finding("topics separate", "0.15 vs 0.01", verdicts.above(stats.Estimate(0.15, 0.13, 0.17, 60), 0),
                           paper_value="-")
    results.save("02_rectangle_test", {}, params={}, seed=0, models=[], claims=[f, local], out_dir=tmp_path)
    board = claims.scoreboard(tmp_path)
    assert len(board.rows) == 16  # one row per claim here: only claim 2 was measured, once
    row2 = next(r for r in board.rows if r["id"] == "2")
    assert row2["verdict"] == "holds by construction" and row2["basis"].startswith("02_rectangle_test")
    assert row2["rule"] == "claim_2" and 'href="appendix_rules.html#rule-claim_2"' in board._repr_html_()
    assert sum(r["verdict"] == "not yet measured" for r in board.rows) == 15
    assert "tokendyn-verdict-holds-by-construction" in board._repr_html_()
    rec = json.loads((tmp_path / "02_rectangle_test.json").read_text())
    assert rec["claims"][1]["claim"] == "topics separate"
    assert "[2] An autoregressive" in repr(claims.table([f]))


def test_scoreboard_points_read_every_interval_of_a_range_claim():
    from tokendyn import figures

    assert claims.intervals_in("a: 0.45 [0.39, 0.51]; K=4: 11.0% [10.3%, 11.6%], n=16: 2 [2, 3]") == [
        ("a", 0.45, 0.39, 0.51), ("K=4", pytest.approx(0.11), pytest.approx(0.103), pytest.approx(0.116)),
        ("n=16", 2.0, 2.0, 3.0)]
    rows = [{"id": "1", "text": "t", "paper": "p", "ours": "m: 0.45 [0.39, 0.51]; n: 0.43 [0.36, 0.51]",
             "basis": "", "verdict": "partly", "chapter": "02", "rule": "claim_1", "reason": "", "headline": ""},
            {"id": "6", "text": "t", "paper": "p", "ours": "x 3 [1, 5]", "basis": "", "verdict": "partly",
             "chapter": "04", "rule": "", "reason": "", "headline": ""}]
    pts = claims.scoreboard_points(claims.Table(rows))
    assert [(p["label"], p["paper_lo"], p["verdict"]) for p in pts] == [("m", 0.64, "partly"), ("n", 0.64, "partly")]
    spec = figures.scoreboard(pts).to_dict()
    assert spec["resolve"]["scale"]["x"] == "independent"
    with pytest.raises(ValueError, match="points must hold"):
        figures.scoreboard([])


def test_split_keeps_order_and_refuses_an_unknown_claim():
    v = verdicts.Verdict("reproduced", "exact_match", "r")
    rows = [claims.finding(4, "a", v), claims.finding("local check", "b", v), claims.finding(5, "c", v)]
    checked, unchecked = claims.split(rows, (5, "local check"))
    assert [f.claim for f in checked] == [4] and [f.claim for f in unchecked] == ["local check", 5]
    assert claims.split(rows, ()) == (rows, [])
    with pytest.raises(ValueError, match="unchecked=\\[13\\]"):
        claims.split(rows, (5, 13))
