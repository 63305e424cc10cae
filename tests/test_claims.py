"""Intervals, findings and the scoreboard: the numbers behind every verdict in the book."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tokendyn.publish import claims, results, verdicts
from tokendyn.core import stats


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


def test_scoreboard_points_show_every_claim_and_compare_where_both_are_numbers():
    from tokendyn.publish import figures

    assert claims.intervals_in("a: 0.45 [0.39, 0.51]; K=4: 11.0% [10.3%, 11.6%], n=16: 2 [2, 3]") == [
        ("a", 0.45, 0.39, 0.51), ("K=4", pytest.approx(0.11), pytest.approx(0.103), pytest.approx(0.116)),
        ("n=16", 2.0, 2.0, 3.0)]
    # the paper's numbers are read from its value as the claims row states it, never typed twice
    assert claims.paper_range("delta in [0.64, 0.80]") == (0.64, 0.8)
    assert claims.paper_range("12-41%") == (pytest.approx(0.12), pytest.approx(0.41))
    assert claims.paper_range("tau* ~ 1.5-2") == (1.5, 2.0)
    assert {c for c, k in claims.CLAIMS.items() if claims.paper_range(k.paper_value)} == {1, 5, 10, 11}
    f1 = claims.finding(1, "m: 0.45 [0.39, 0.51]; n: 0.8 [0.64, 1.0]", verdicts.Verdict("partly", "claim_1", "r"))
    f6 = claims.finding(6, "x 3 [1, 5]", verdicts.Verdict("not reproduced", "claim_6", "r"))
    board = claims.scoreboard_from([{"chapter": "02_rectangle_test", "claims": [f1.to_dict()]},
                                    {"chapter": "04_basins", "claims": [f6.to_dict()]}])
    pts = claims.scoreboard_points(board)
    assert sorted({p["order"] for p in pts}) == list(range(1, 17))  # every claim, measured or not
    assert len({tuple(sorted(p)) for p in pts}) == 1  # one set of keys, so every column exists
    one = [p for p in pts if p["order"] == 1]
    assert [(p["label"], p["compared"], p["verdict"]) for p in one] == [("m", True, "partly"), ("n", True, "partly")]
    middle = (0.64 * 0.80) ** 0.5
    assert one[0]["ratio"] == pytest.approx(0.45 / middle) and one[0]["ratio_lo"] == pytest.approx(0.39 / middle)
    assert one[1]["band_lo"] == pytest.approx(0.64 / middle) and one[1]["band_hi"] == pytest.approx(0.80 / middle)
    # a claim whose paper value is no range, or that no chapter measured, shows once, by its verdict
    six = [p for p in pts if p["order"] == 6]
    assert [(p["compared"], p["verdict"], p["paper"], p["ratio"]) for p in six] == [
        (False, "not reproduced", "1000s of steps", None)]
    assert [p["verdict"] for p in pts if p["order"] == 10] == ["not yet measured"]
    spec = figures.scoreboard(pts).to_dict()
    assert len(spec["hconcat"]) == 2  # the verdicts beside ours against the paper's
    shown = {d["claim"] for rows in spec["datasets"].values() for d in rows}
    assert {c.split(".")[0] for c in shown} == {str(k) for k in range(1, 17)}
    with pytest.raises(ValueError, match="points must hold"):
        figures.scoreboard([])


def test_scoreboard_rows_link_each_claim_to_its_evidence():
    """Every scoreboard row links to the section of its chapter's page that measures the claim (a
    chapter measuring another chapter's claim: to its claims table), shown under the claim."""
    f = claims.finding(14, "a", verdicts.Verdict("partly", "claim_14", "r"))
    board = claims.scoreboard_from([{"chapter": "07_escapes", "claims": [f.to_dict()]},
                                    {"chapter": "05_tube_law", "claims": [f.to_dict()]}])
    assert sorted({int(r["id"]) for r in board.rows}) == list(range(1, 17))
    for r in board.rows:
        c = claims.CLAIMS[int(r["id"])]
        want = c.evidence if r["chapter"] == c.chapter else claims.CLAIMS_AT_A_GLANCE
        assert r["evidence"] == f"{r['chapter']}.html#{want}", r
    assert [r["evidence"] for r in board.rows if r["id"] == "14"] == [
        "07_escapes.html#stochastic-re-injection-the-ode-against-the-sde-on-one-checkpoint",
        "05_tube_law.html#claims-at-a-glance"]
    page = board.html({"02_rectangle_test.html#the-masked-lms": "The rectangle test › The masked LMs"})
    assert page.count('class="tokendyn-evidence"') == len(board.rows)
    assert '<a class="tokendyn-evidence" href="02_rectangle_test.html#the-masked-lms">evidence: The rectangle ' \
           "test › The masked LMs</a>" in page
    assert 'href="02_rectangle_test.html#controls">evidence: 02_rectangle_test.html#controls</a>' in page
    assert "tokendyn-evidence" not in claims.table([f])._repr_html_()  # a chapter's own table links nowhere


def _section_ids(notebook: Path) -> set[str]:
    """The ids Sphinx gives the sections of a chapter page: each markdown heading's text, its maths
    as written (``$\\tau^*$`` reads ``tau``), made an id by docutils as the build does."""
    from docutils.nodes import make_id

    ids = set()
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            text = re.sub(r"```.*?```", "", "".join(cell["source"]), flags=re.S)
            ids |= {make_id(m.replace("$", "")) for m in re.findall(r"^#{1,6} +(.+)$", text, flags=re.M)}
    return ids


def test_every_claims_evidence_is_a_section_of_its_chapter():
    """A renamed heading fails here, not only as a build warning and a dead link on the scoreboard."""
    book = Path(__file__).resolve().parents[1] / "book"
    for c in claims.CLAIMS.values():
        ids = _section_ids(book / f"{c.chapter}.ipynb")
        assert c.evidence in ids and claims.CLAIMS_AT_A_GLANCE in ids, (c.id, c.chapter, c.evidence, sorted(ids))


def test_split_keeps_order_and_refuses_an_unknown_claim():
    v = verdicts.Verdict("reproduced", "exact_match", "r")
    rows = [claims.finding(4, "a", v), claims.finding("local check", "b", v), claims.finding(5, "c", v)]
    checked, unchecked = claims.split(rows, (5, "local check"))
    assert [f.claim for f in checked] == [4] and [f.claim for f in unchecked] == ["local check", 5]
    assert claims.split(rows, ()) == (rows, [])
    with pytest.raises(ValueError, match="unchecked=\\[13\\]"):
        claims.split(rows, (5, 13))
