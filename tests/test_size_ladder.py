"""The size ladder's statistics (tokendyn.analysis.size) on rows with known answers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tokendyn.publish import results
from tokendyn.analysis import size


def _row(model, params, delta, **kw):
    return {"model": model, "params": params, "encoder": "x", "delta": list(delta), **kw}


def test_slopes_and_estimates_read_the_rows_and_skip_undefined_items(tmp_path):
    rng = np.random.default_rng(0)
    rows = [_row(f"m{k}", int(1e6 * np.e ** k), 1.0 + 0.2 * k + rng.normal(0, 0.05, 300),
                 normalized=[None, *rng.uniform(0.4, 0.6, 50)],
                 traps=[{"min_margin": v} for v in (0.1 * k + rng.uniform(0, 0.01, 20))]) for k in (2, 0, 1)]
    path = results.save_rows(tmp_path / "ladder.json", rows, kind="test", command="(test)", params={}, seed=0,
                             models=[r["model"] for r in rows])
    got, meta = results.load_ladder(path)
    assert [r["model"] for r in got] == ["m0", "m1", "m2"] and meta["command"] == "(test)"
    est = size.rung_estimates(got, "delta")
    assert est["m1"].lo < est["m1"].value < est["m1"].hi and abs(est["m1"].value - 1.2) < 0.02
    assert len(size.values(got[0], "normalized")) == 50  # the undefined (None) item is left out
    s = size.slope(got, "delta")
    assert s.lo < 0.2 < s.hi and s.n == 3
    m = size.slope(got, "traps.min_margin", np.median)
    assert m.lo < 0.1 < m.hi
    assert size.span(got) == pytest.approx(np.e ** 2, rel=1e-6)
    with pytest.raises(FileNotFoundError, match="record_size_ladder"):
        results.load_ladder(tmp_path / "none.json")


def test_paired_quality_comparisons():
    items = [{"text": f"s{i} [MASK] word", "answers": ["a"], "top": ["a", "b"] if i % 2 else ["word", "c"]}
             for i in range(40)]
    worse = [{**it, "top": ["z"]} for it in items]
    top, copy, n = size.paired_probe(items, worse)
    assert n == 40 and top.value == pytest.approx(0.5) and top.lo > 0
    assert copy.value == pytest.approx(0.5)  # the even sentences' best word is "word", in the sentence
    a = {"passage_nll": [10.0, 20.0, 15.0], "passage_tokens": [10, 10, 10]}
    b = {"passage_nll": [20.0, 30.0, 25.0], "passage_tokens": [10, 10, 10]}
    r = size.paired_pppl_ratio(a, b)
    assert r.value == pytest.approx(np.exp(-1.0)) and r.hi < 1
    with pytest.raises(ValueError, match="same passages"):
        size.paired_pppl_ratio(a, {"passage_nll": [1.0], "passage_tokens": [1]})
    with pytest.raises(ValueError, match="in common"):
        size.paired_probe(items[:1], worse[:1])
    json.dumps(top.__dict__)


def test_probe_top5_is_the_share_of_hits():
    items = [{"text": f"s{i}", "answers": ["a"], "top": ["a"] if i < 3 else ["b"]} for i in range(10)]
    e = size.probe_top5(items)
    assert e.value == pytest.approx(0.3) and e.n == 10 and e.lo < 0.3 < e.hi


def test_ladder_figure_keeps_the_end_rungs_inside_the_axis_and_the_legend_in_table_order():
    import pandas as pd

    from tokendyn.publish import figures
    from tokendyn.publish.figures import basins

    df = pd.DataFrame([{"model": m, "encoder": e, "parameters (M)": p, "statistic": "raw delta",
                        "value": v, "lo": v - 0.1, "hi": v + 0.1}
                       for m, e, p, v in (("s", "zeta", 15.6, 0.3), ("m", "alpha", 40.0, 0.6),
                                          ("l", "alpha", 109.5, 1.1))])
    spec = figures.size_ladder(df).to_dict()
    layers = spec["hconcat"][0]["layer"]
    point = layers[-1]["encoding"]
    lo, hi = point["x"]["scale"]["domain"]
    assert lo < 15.6 and hi > 109.5  # an exact [min, max] domain would halve the end points
    assert point["color"]["sort"] == ["zeta", "alpha"]  # the table's order, not alphabetical
    traps = pd.DataFrame({"model": ["l10", "l2", "l10"], "min margin": [0.1, 0.2, 0.3]})
    assert basins.trap_depth(traps).to_dict()["encoding"]["color"]["sort"] == ["l10", "l2"]


def test_the_within_backbone_lines_share_one_slope_and_span_each_encoders_sizes():
    """Two encoders on parallel lines (+0.5 per e-fold), one offset by +3: the within-backbone lines
    have slope 0.5 each over their own sizes, while the dashed pooled line is steeper."""
    import math

    import pandas as pd

    from tokendyn.publish import figures

    rows = [("a1", "small", 10.0, 0.0), ("a2", "small", 10.0 * math.e, 0.0),
            ("b1", "large", 40.0, 3.0), ("b2", "large", 40.0 * math.e, 3.0), ("b3", "large", 40.0 * math.e ** 2, 3.0)]
    df = pd.DataFrame([{"model": m, "encoder": e, "parameters (M)": p, "statistic": "raw delta",
                        "value": 1.0 + 0.5 * math.log(p) + off, "lo": 0.0, "hi": 9.0} for m, e, p, off in rows])
    spec = figures.size_ladder(df, within=True).to_dict()
    lines = [layer for layer in spec["hconcat"][0]["layer"] if layer.get("mark", {}).get("type") == "line"]
    assert len(lines) == 2  # the pooled line and the within-backbone lines
    data = spec["datasets"]
    within = pd.DataFrame(next(v for v in data.values() if v and "encoder" in v[0] and "fit" in v[0]))
    for enc, d in within.groupby("encoder"):
        d = d.sort_values("parameters (M)")
        slope = (d["fit"].iloc[1] - d["fit"].iloc[0]) / math.log(d["parameters (M)"].iloc[1] / d["parameters (M)"].iloc[0])
        assert slope == pytest.approx(0.5)
    assert sorted(within["parameters (M)"].round(3)) == sorted(round(p, 3) for p in (10.0, 10.0 * math.e, 40.0, 40.0 * math.e ** 2))
    assert len(figures.size_ladder(df).to_dict()["hconcat"][0]["layer"]) == len(spec["hconcat"][0]["layer"]) - 1
