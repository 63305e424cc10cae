"""Plotting helpers: altair charts that render offline, in the built book and in Jupyter.

``setup()`` registers the ``tokendyn`` altair renderer. A chart then displays as a small HTML
element holding its Vega-Lite spec as JSON; the book serves Vega, Vega-Lite and vega-embed itself
(``book/assets/tokendyn-charts.js`` plus the bundle from ``vl-convert-python``, copied at build
time), so no page fetches anything from a CDN. The same output also carries the Vega-Lite
mimetype, which Jupyter front ends render natively.
"""

from __future__ import annotations

import html
import json
from typing import Any

import altair as alt

RENDERER = "tokendyn"
CHART_CLASS = "tokendyn-vega"
_counter = 0


def _mimetype() -> str:
    major = alt.SCHEMA_VERSION.lstrip("v").split(".")[0]
    return f"application/vnd.vegalite.v{major}+json"


def render_spec(spec: dict[str, Any], **_: Any) -> dict[str, Any]:
    """Altair renderer: a Vega-Lite spec -> a mimebundle with book HTML and the Vega-Lite type."""
    global _counter
    _counter += 1
    payload = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    # "</" inside the JSON would end the <script> element early; escape it.
    payload = payload.replace("</", "<\\/")
    title = spec.get("title")
    label = title if isinstance(title, str) else (title or {}).get("text", "chart") if isinstance(title, dict) else "chart"
    body = (f'<div class="{CHART_CLASS}" id="tokendyn-chart-{_counter}" role="figure" '
            f'aria-label="{html.escape(str(label))}">'
            f'<script type="application/json">{payload}</script></div>')
    return {"text/html": body, _mimetype(): spec,
            "text/plain": f"<altair chart: {label}>"}


def setup(width: int = 520, height: int = 300) -> None:
    """Enable the offline renderer and a plain theme; call once at the top of each chapter."""
    if RENDERER not in alt.renderers.names():
        alt.renderers.register(RENDERER, render_spec)
    alt.renderers.enable(RENDERER)
    alt.data_transformers.disable_max_rows()

    @alt.theme.register("tokendyn", enable=True)
    def _theme() -> alt.theme.ThemeConfig:
        return {"config": {"view": {"continuousWidth": width, "continuousHeight": height},
                           "axis": {"labelFontSize": 11, "titleFontSize": 12},
                           "legend": {"labelFontSize": 11, "titleFontSize": 12}}}
