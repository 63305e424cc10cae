"""Plotting helpers: altair charts that render offline, in the built book and in Jupyter.

``setup()`` registers the ``tokendyn`` altair renderer. A chart then displays as a numbered figure
(``Figure <chapter>.<k>``) with the caption set just before it by :func:`caption`, holding its
Vega-Lite spec as JSON; the book serves Vega, Vega-Lite and vega-embed itself (their UMD builds
from npm, loaded as classic scripts so that pages opened from disk draw them, and
``book/assets/tokendyn-charts.js``, copied at build time), so no page fetches anything from a CDN. The same output also carries the Vega-Lite
mimetype, which Jupyter front ends render natively.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import altair as alt

RENDERER = "tokendyn"
CHART_CLASS = "tokendyn-vega"
_counter = 0
_chapter = ""      # figure numbers read "Figure <chapter>.<k>"
_figure = 0
_caption: str | None = None


def _mimetype() -> str:
    major = alt.SCHEMA_VERSION.lstrip("v").split(".")[0]
    return f"application/vnd.vegalite.v{major}+json"


# ASCII maths as a reader should see it: Unicode in captions, chart titles and claims tables (the
# notebooks' code and printed checks keep the ASCII, which is what a user types).
_PRETTY = (
    (r"\balpha_hat\b", "α̂"), (r"\btau_1000\b", "τ₁₀₀₀"), (r"\btau\b", "τ"), (r"\bdelta\b", "δ"),
    (r"\bkappa\b", "κ"), (r"\blambda\b", "λ"), (r"\bsigma\b", "σ"), (r"\bTheta\(", "Θ("),
    (r"\bsqrt\(", "√("), (r"\|i - j\|", "|i − j|"), (r"\bs\(t0\)", "s(t₀)"), (r"\bt0\b", "t₀"),
    (r"\bx_t\b", "xₜ"), (r"\bx_0\b", "x₀"), (r" -> ", " → "), (r" >= ", " ≥ "), (r" <= ", " ≤ "),
    (r"\+-", "±"), (r"(?<=\d) x (?=\d)", " × "), (r"\bDABI x CCI\b", "DABI × CCI"),
)


def pretty(text: str) -> str:
    """``text`` with its ASCII maths in Unicode: alpha_hat -> α̂, tau -> τ, delta -> δ, kappa -> κ,
    lambda -> λ, |i - j| -> |i − j|, s(t0) -> s(t₀), ->, >=, <= and +- as arrows and signs, and
    "4 x 4" as "4 × 4". Words are matched whole, so "taus" or "deltas" stay as they are."""
    for pattern, repl in _PRETTY:
        text = re.sub(pattern, repl, text)
    return text


def _pretty_titles(node: Any) -> Any:
    """A Vega-Lite spec with every title (chart, axis, legend, header) in :func:`pretty` form; an
    encoding with no title of its own gets its field's name in that form. Data are left alone."""
    if isinstance(node, list):
        return [_pretty_titles(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k in ("data", "datasets", "values"):
            out[k] = v
        elif k == "title" and isinstance(v, str):
            out[k] = pretty(v)
        elif k == "title" and isinstance(v, list):
            out[k] = [pretty(t) if isinstance(t, str) else t for t in v]
        elif k == "title" and isinstance(v, dict):
            out[k] = {**v, **({"text": pretty(v["text"])} if isinstance(v.get("text"), str) else {})}
        else:
            out[k] = _pretty_titles(v)
    field = out.get("field")
    if isinstance(field, str) and "title" not in out and "type" in out and pretty(field) != field:
        out["title"] = pretty(field)
    return out


def caption(text: str) -> None:
    """Caption for the next chart displayed: say what the figure tests. Plain text, ``**bold**`` kept."""
    global _caption
    if not isinstance(text, str) or not text.strip():
        raise ValueError("caption text must be a non-empty string")
    _caption = pretty(text.strip())


def number_figures(chapter: str | int) -> None:
    """Restart figure numbering for a chapter: its charts become Figure <chapter>.1, .2, ..."""
    global _chapter, _figure, _caption
    _chapter, _figure, _caption = str(chapter), 0, None


def _caption_html(text: str) -> str:
    parts = html.escape(text).split("**")
    return "".join(f"<strong>{p}</strong>" if k % 2 else p for k, p in enumerate(parts))


def render_spec(spec: dict[str, Any], **_: Any) -> dict[str, Any]:
    """Altair renderer: a Vega-Lite spec -> a numbered figure (book HTML) plus the Vega-Lite type."""
    global _counter, _figure, _caption
    _counter += 1
    _figure += 1
    number = f"{_chapter}.{_figure}" if _chapter else str(_figure)
    text, _caption = _caption, None
    spec = _pretty_titles(spec)
    payload = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    # "</" inside the JSON would end the <script> element early; escape it.
    payload = payload.replace("</", "<\\/")
    title = spec.get("title")
    label = title if isinstance(title, str) else (title or {}).get("text", "chart") if isinstance(title, dict) else "chart"
    chart = (f'<div class="{CHART_CLASS}" id="tokendyn-chart-{_counter}" role="img" '
             f'aria-label="{html.escape(str(label))}">'
             f'<script type="application/json">{payload}</script></div>')
    cap = f"<strong>Figure {number}.</strong> " + (_caption_html(text) if text else html.escape(str(label)))
    body = (f'<figure class="tokendyn-figure" id="figure-{number.replace(".", "-")}">{chart}'
            f'<figcaption>{cap}</figcaption></figure>')
    plain = f"Figure {number}. {text or label}"
    return {"text/html": body, _mimetype(): spec, "text/plain": plain}


def setup(width: int = 480, height: int = 300) -> None:
    """Enable the offline renderer and a plain theme; call once at the top of each chapter."""
    if RENDERER not in alt.renderers.names():
        alt.renderers.register(RENDERER, render_spec)
    alt.renderers.enable(RENDERER)
    alt.data_transformers.disable_max_rows()

    @alt.theme.register("tokendyn", enable=True)
    def _theme() -> alt.theme.ThemeConfig:
        return {"config": {"view": {"continuousWidth": width, "continuousHeight": height},
                           "axis": {"labelFontSize": 11, "titleFontSize": 12},
                           # below the plot, so a chart fits the book's text column
                           "legend": {"labelFontSize": 11, "titleFontSize": 12, "orient": "bottom",
                                      "labelLimit": 320}}}
