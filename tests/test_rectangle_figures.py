"""The rectangle test's interval figures draw what their docstrings say: one panel per statistic,
an interval per point, the family joined and other recipes marked."""

import pandas as pd
import pytest

from tokendyn.publish import figures


def _rows(spec) -> list[dict]:
    return [r for d in spec.get("datasets", {}).values() for r in d]


def _ci(models=("a", "b")):
    return pd.DataFrame([{"model": m, "protocol": p, "statistic": s, "mean": 0.5, "lo": 0.4, "hi": 0.6}
                         for m in models for p in ("model", "uniform") for s in ("raw delta", "normalized delta")])


def test_delta_intervals_one_panel_per_statistic_with_the_paper_band_on_raw_only():
    spec = figures.delta_intervals(_ci(), (0.64, 0.80)).to_dict()
    assert spec["facet"]["column"]["sort"] == ["raw delta", "normalized delta"]
    rows = _rows(spec)
    assert len(rows) == 8
    assert [(r["statistic"], r["paper lo"]) for r in rows if r["paper lo"] is not None] == [("raw delta", 0.64)]
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["spec"]["layer"]]
    assert marks == ["rect", "rule", "point"]
    assert "paper lo" not in _rows(figures.delta_intervals(_ci()).to_dict())[0]
    with pytest.raises(ValueError, match="statistic"):
        figures.delta_intervals(_ci().assign(statistic="delta"))
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['hi'\]"):
        figures.delta_intervals(_ci().drop(columns="hi"))


def test_delta_by_gap_draws_intervals_when_given():
    g = pd.DataFrame({"model": ["a", "a"], "gap": [1, 2], "mean delta": [0.5, 0.3]})
    assert "layer" not in figures.delta_by_gap(g).to_dict()
    spec = figures.delta_by_gap(g.assign(lo=[0.4, 0.2], hi=[0.6, 0.4])).to_dict()
    assert [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]] \
        == ["line", "rule"]
    assert spec["title"].endswith("(bars: 95% intervals)")


def test_delta_vs_depth_joins_the_family_and_marks_other_recipes():
    fam = pd.DataFrame([{"model": m, "layers": k, "parameters (M)": p, "recipe": rec, "statistic": s,
                         "mean": 0.5, "lo": 0.4, "hi": 0.6}
                        for m, k, p, rec in (("d2", 2, 15.0, "family"), ("d3", 3, 16.8, "family"),
                                             ("other", 6, 22.7, "other recipe"))
                        for s in ("raw delta", "normalized delta")])
    spec = figures.delta_vs_depth(fam).to_dict()
    layers = spec["spec"]["layer"]
    assert [la.get("transform", [{}])[0].get("filter") for la in layers] == [
        "(datum.recipe === 'family')", None, "(datum.recipe === 'family')", "(!(datum.recipe === 'family'))"]
    assert layers[3]["mark"]["shape"] == "square" and layers[3]["mark"]["filled"] is False
    assert {r["label"] for r in _rows(spec)} == {"d2 (15.0M)", "d3 (16.8M)", "other (22.7M)"}
    with pytest.raises(ValueError, match="recipe"):
        figures.delta_vs_depth(fam.drop(columns="recipe"))


def test_delta_distribution_draws_five_numbers_per_box():
    deltas = pd.DataFrame({"model": ["a"] * 5 + ["b"] * 5, "protocol": ["model"] * 10,
                           "delta": [0.0, 1.0, 2.0, 3.0, 4.0, 1.0, 1.0, 1.0, 1.0, 9.0], "I_i": 0.0})
    spec = figures.delta_distribution(deltas, (0.64, 0.80)).to_dict()
    rows = [r for r in _rows(spec) if "model" in r]
    assert [(r["model"], r["min"], r["q25"], r["median"], r["q75"], r["max"]) for r in rows] == [
        ("a", 0.0, 1.0, 2.0, 3.0, 4.0), ("b", 1.0, 1.0, 1.0, 1.0, 9.0)]
    assert "I_i" not in rows[0]
    with pytest.raises(ValueError, match="delta"):
        figures.delta_distribution(deltas.drop(columns="delta"), (0.64, 0.80))
