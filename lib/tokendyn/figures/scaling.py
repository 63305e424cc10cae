"""Figures of n log n scaling: T / (n ln n) against n, and the crossover temperature tau*(n)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..diagnostics import n_log_n
from ._style import tau_palette

__all__ = ["scaling_ratios", "crossover"]

EXACT = "uniform (exact n H_n)"


def scaling_ratios(ratios: pd.DataFrame, anchors: pd.DataFrame) -> alt.FacetChart:
    """Median T / (n ln n) against n (log-log), one panel per model (rows) and measure (columns).

    ``ratios`` has one row per (measure, model, tau, n): columns ``measure``, ``model``, ``tau``
    (a number), ``n``, ``T / (n ln n)`` (censored medians already placed at the budget) and
    ``censored`` (bool, drawn as the point's shape). ``anchors`` has columns ``n`` and
    ``exact_mean_nHn``: the uniform model's exact mean, drawn in black in every panel.
    """
    measures = list(dict.fromkeys(ratios["measure"]))
    models = list(dict.fromkeys(ratios["model"]))
    taus = list(dict.fromkeys(ratios["tau"]))
    exact_ratio = pd.DataFrame([{"measure": measure, "model": name, "tau": EXACT, "n": n,
                                 "T / (n ln n)": mean / n_log_n(n), "censored": False}
                                for measure in measures for name in models
                                for n, mean in zip(anchors["n"].tolist(), anchors["exact_mean_nHn"].tolist())])
    scale_all = pd.concat([ratios.assign(tau=[f"tau={t:g}" for t in ratios["tau"]]), exact_ratio])
    series = [f"tau={t:g}" for t in taus] + [EXACT]
    pts = alt.Chart().encode(
        x=alt.X("n:Q", scale=alt.Scale(type="log", base=2), title="n"),
        y=alt.Y("T / (n ln n):Q", scale=alt.Scale(type="log"), title="median T / (n ln n)"),
        color=alt.Color("tau:N", title=None, sort=series,
                        scale=alt.Scale(domain=series, range=tau_palette(len(taus)) + ["black"])))
    return alt.layer(
        pts.mark_line(),
        pts.mark_point(filled=True, size=60).encode(shape=alt.Shape("censored:N", title="censored at budget")),
        data=scale_all,
    ).properties(width=240, height=220).facet(row=alt.Row("model:N", title=None), column=alt.Column("measure:N", title=None)
    ).properties(title="T / (n ln n) against n: flat means n log n mixing; censored medians are drawn at the budget")


def crossover(cross: pd.DataFrame, *, top_tau: float) -> alt.LayerChart:
    """tau*(n) per model and measure against n, with the paper's tau ~ 1.5-2 as an orange band.

    ``cross`` has columns ``model``, ``measure``, ``n``, ``tau_star`` (nan when the crossover is
    above the grid: drawn at 1.2 times ``top_tau``, the grid's highest temperature).
    """
    band = alt.Chart(pd.DataFrame({"lo": [1.5], "hi": [2.0]})).mark_rect(opacity=0.15, color="orange").encode(
        y="lo:Q", y2="hi:Q")
    cross_plot = cross.assign(tau_star=cross.tau_star.fillna(top_tau * 1.2))
    return alt.layer(
        band,
        alt.Chart(cross_plot).mark_line(point=True).encode(
            x=alt.X("n:Q", scale=alt.Scale(type="log", base=2)), y=alt.Y("tau_star:Q", title="tau*(n)"),
            color="model:N", strokeDash="measure:N"),
    ).properties(title="Crossover tau*(n) (orange band: the paper's tau ~ 1.5-2)", width=420, height=260)
