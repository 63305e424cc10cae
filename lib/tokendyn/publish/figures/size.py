"""Figures of the size ladder: a statistic per rung against parameters, with its fit."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import numpy as np
import pandas as pd

from ._style import need_columns

__all__ = ["size_ladder"]


def size_ladder(df: pd.DataFrame, *, bands: Mapping[str, tuple[float, float]] | None = None,
                title: str = "", within: bool = False) -> alt.FacetChart:
    """One panel per statistic: each rung's value with its 95% interval against parameters (log x),
    coloured by encoder, and the least-squares line of the values on ln(parameters) over all rungs
    (dashed; its slope is :func:`tokendyn.core.stats.size_slope`'s point).

    ``df`` has one row per (rung, statistic): columns ``model``, ``encoder``, ``parameters (M)``,
    ``statistic``, ``value``, ``lo``, ``hi``. ``bands`` maps a statistic to a range drawn as an
    orange band (the paper's). ``within``: also draw, in each encoder's colour, the fit with one
    slope for all encoders and an intercept each (``size_slope(groups=...)``'s point), over each
    encoder's own sizes: where it and the dashed line part, the pooled slope reads the backbone as size.
    """
    need_columns(df, ("model", "encoder", "parameters (M)", "statistic", "value", "lo", "hi"), "df")
    stats = list(dict.fromkeys(df["statistic"]))
    lines = []
    for s in stats:
        d = df[df.statistic == s]
        x = np.log(d["parameters (M)"].to_numpy(float))
        b, a = np.polyfit(x, d["value"].to_numpy(float), 1)
        for p in (d["parameters (M)"].min(), d["parameters (M)"].max()):
            lines.append({"statistic": s, "parameters (M)": float(p), "fit": float(a + b * np.log(p))})
    within_lines = []
    for s in stats if within else []:
        d = df[df.statistic == s]
        x, y, g = np.log(d["parameters (M)"].to_numpy(float)), d["value"].to_numpy(float), d["encoder"].to_numpy()
        xc = x - np.array([x[g == k].mean() for k in g])
        if not np.dot(xc, xc) > 0:
            continue  # no encoder holds two sizes: no within slope to draw
        b = float(np.dot(xc, y - np.array([y[g == k].mean() for k in g])) / np.dot(xc, xc))
        for k in dict.fromkeys(g):
            xs = x[g == k]
            a = float(y[g == k].mean() - b * xs.mean())
            within_lines += [{"statistic": s, "encoder": k, "parameters (M)": float(np.exp(v)), "fit": a + b * v}
                             for v in (xs.min(), xs.max())]
    band_df = pd.DataFrame([{"statistic": s, "lo": lo, "hi": hi} for s, (lo, hi) in (bands or {}).items()
                            if s in stats], columns=["statistic", "lo", "hi"])
    # Pad the log axis by a fifth on each side: an exact [min, max] domain cuts the end rungs' points in half.
    p_lo, p_hi = float(df["parameters (M)"].min()), float(df["parameters (M)"].max())
    x = alt.X("parameters (M):Q", title="parameters (millions, log scale)",
              scale=alt.Scale(type="log", nice=False, domain=[p_lo / 1.2, p_hi * 1.2]))
    tip = ["model", "encoder", alt.Tooltip("parameters (M):Q", format=".1f"), alt.Tooltip("value:Q", format=".3f"),
           alt.Tooltip("lo:Q", format=".3f"), alt.Tooltip("hi:Q", format=".3f")]
    encoders = list(dict.fromkeys(df["encoder"]))  # legend in the table's order, not alphabetical
    colour = alt.Color("encoder:N", title="frozen encoder", sort=encoders)
    charts = []
    for s in stats:
        d = df[df.statistic == s]
        layers = []
        if not band_df[band_df.statistic == s].empty:
            layers.append(alt.Chart(band_df[band_df.statistic == s]).mark_rect(opacity=0.2, color="orange").encode(
                y="lo:Q", y2="hi:Q"))
        layers += [
            alt.Chart(pd.DataFrame([r for r in lines if r["statistic"] == s])).mark_line(
                strokeDash=[5, 3], color="gray").encode(x=x, y=alt.Y("fit:Q", title=s)),
            *([alt.Chart(pd.DataFrame([r for r in within_lines if r["statistic"] == s])).mark_line(
                strokeWidth=1.5, opacity=0.7).encode(x=x, y="fit:Q", color=colour, detail="encoder:N")]
              if any(r["statistic"] == s for r in within_lines) else []),
            alt.Chart(d).mark_rule(strokeWidth=2).encode(x=x, y="lo:Q", y2="hi:Q", color=colour),
            alt.Chart(d).mark_point(filled=True, size=70).encode(x=x, y=alt.Y("value:Q", title=s), color=colour,
                                                                  shape=alt.Shape("encoder:N", title="frozen encoder", sort=encoders),
                                                                  tooltip=tip),
        ]
        charts.append(alt.layer(*layers).properties(width=230, height=200, title=s))
    return alt.hconcat(*charts).resolve_scale(y="independent").properties(title=title)
