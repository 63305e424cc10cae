"""The offline altair renderer emits the element the book's chart loader draws."""

import json
import re

import altair as alt
import pandas as pd

import tokendyn.publish.plotting as tp


def test_renderer_embeds_spec_for_the_book_loader():
    tp.setup()
    chart = alt.Chart(pd.DataFrame({"x": [1, 2], "y": ["</script>", "b"]}), title="T").mark_point().encode(x="x", y="y")
    bundle = chart._repr_mimebundle_()
    if isinstance(bundle, tuple):
        bundle = bundle[0]
    html = bundle["text/html"]
    assert 'class="tokendyn-vega"' in html and "cdn" not in html.lower()
    payload = re.search(r'<script type="application/json">(.*?)</script></div><figcaption>', html, re.S).group(1)
    assert "</script>" not in payload  # would close the element early
    spec = json.loads(payload.replace("<\\/", "</"))
    assert spec["title"] == "T" and spec["mark"]["type"] == "point"
    assert any(k.startswith("application/vnd.vegalite") for k in bundle)


def _html(chart):
    bundle = chart._repr_mimebundle_()
    return (bundle[0] if isinstance(bundle, tuple) else bundle)


def test_figures_are_numbered_per_chapter_and_carry_their_caption():
    tp.setup()
    tp.number_figures(3)
    chart = alt.Chart(pd.DataFrame({"x": [1]}), title="T").mark_point().encode(x="x")
    tp.caption("Coupling **survival** <against> the exact law.")
    first = _html(chart)
    second = _html(chart)
    assert "<strong>Figure 3.1.</strong> Coupling <strong>survival</strong> &lt;against&gt; the exact law." in first["text/html"]
    assert first["text/plain"].startswith("Figure 3.1. Coupling")
    # the caption is used once; an uncaptioned chart falls back to its title, numbered on
    assert "<strong>Figure 3.2.</strong> T" in second["text/html"]
    tp.number_figures(4)
    assert "Figure 4.1." in _html(chart)["text/plain"]


def test_titles_and_captions_show_maths_in_unicode_and_leave_data_alone():
    import altair as alt
    import pandas as pd

    from tokendyn.publish import plotting as tp

    assert tp.pretty("alpha_hat(tau) at tau* = 2; delta vs |i - j|; 4 x 4; K -> 1") == \
        "α̂(τ) at τ* = 2; δ vs |i − j|; 4 × 4; K → 1"
    assert tp.pretty("taus, deltas, metadata") == "taus, deltas, metadata"  # whole words only
    tp.setup()
    tp.number_figures(9)
    tp.caption("Crossing of alpha_hat against tau.")
    chart = alt.Chart(pd.DataFrame({"tau": [1.0], "delta": [0.5]})).mark_point().encode(
        x="tau:Q", y=alt.Y("delta:Q", title="mean delta")).properties(title="delta against tau")
    out = tp.render_spec(chart.to_dict())
    spec = next(v for k, v in out.items() if k.startswith("application/vnd.vegalite"))
    assert spec["title"] == "δ against τ"
    assert spec["encoding"]["x"]["title"] == "τ" and spec["encoding"]["x"]["field"] == "tau"
    assert spec["encoding"]["y"]["title"] == "mean δ"
    assert next(iter(spec["datasets"].values())) == [{"tau": 1.0, "delta": 0.5}]
    assert "Crossing of α̂ against τ." in out["text/html"]
