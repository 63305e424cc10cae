"""The offline altair renderer emits the element the book's chart loader draws."""

import json
import re

import altair as alt
import pandas as pd

import tokendyn.plotting as tp


def test_renderer_embeds_spec_for_the_book_loader():
    tp.setup()
    chart = alt.Chart(pd.DataFrame({"x": [1, 2], "y": ["</script>", "b"]}), title="T").mark_point().encode(x="x", y="y")
    bundle = chart._repr_mimebundle_()
    if isinstance(bundle, tuple):
        bundle = bundle[0]
    html = bundle["text/html"]
    assert 'class="tokendyn-vega"' in html and "cdn" not in html.lower()
    payload = re.search(r'<script type="application/json">(.*)</script></div>$', html, re.S).group(1)
    assert "</script>" not in payload  # would close the element early
    spec = json.loads(payload.replace("<\\/", "</"))
    assert spec["title"] == "T" and spec["mark"]["type"] == "point"
    assert any(k.startswith("application/vnd.vegalite") for k in bundle)
