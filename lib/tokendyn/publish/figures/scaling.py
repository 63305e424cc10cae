"""Figures of n log n scaling: T / (n ln n) against n, and the crossover temperature tau*(n)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ...mcmc.diagnostics import n_log_n
from ._style import need_columns, tau_palette

__all__ = ["scaling_ratios", "crossover_vs_budget", "ratio_vs_tau"]

EXACT = "uniform (exact median)"


def scaling_ratios(ratios: pd.DataFrame, exact: pd.DataFrame) -> alt.FacetChart:
    """Median T / (n ln n) against n (log-log) with 95% bootstrap bars, one panel per model (rows)
    and measure (columns).

    ``ratios`` has one row per (measure, model, tau, n): columns ``measure``, ``model``, ``tau``
    (a number), ``n``, ``T / (n ln n)``, ``lo``, ``hi`` (censored values already placed at the
    budget) and ``censored`` (bool, drawn as the point's shape). ``exact`` has columns ``n`` and
    ``exact_median``: the uniform model's exact median coupling time (coupon collector), drawn in
    black in every panel, so that a median is compared with a median.
    """
    measures = list(dict.fromkeys(ratios["measure"]))
    models = list(dict.fromkeys(ratios["model"]))
    taus = list(dict.fromkeys(ratios["tau"]))
    exact_ratio = pd.DataFrame([{"measure": measure, "model": name, "tau": EXACT, "n": n,
                                 "T / (n ln n)": med / n_log_n(n), "lo": med / n_log_n(n),
                                 "hi": med / n_log_n(n), "censored": False}
                                for measure in measures for name in models
                                for n, med in zip(exact["n"].tolist(), exact["exact_median"].tolist())])
    scale_all = pd.concat([ratios.assign(tau=[f"tau={t:g}" for t in ratios["tau"]]), exact_ratio])
    series = [f"tau={t:g}" for t in taus] + [EXACT]
    color = alt.Color("tau:N", title=None, sort=series,
                      scale=alt.Scale(domain=series, range=tau_palette(len(taus)) + ["black"]))
    x = alt.X("n:Q", scale=alt.Scale(type="log", base=2), title="n")
    pts = alt.Chart().encode(x=x, y=alt.Y("T / (n ln n):Q", scale=alt.Scale(type="log"),
                                          title="median T / (n ln n)"), color=color)
    return alt.layer(
        pts.mark_line(),
        pts.mark_point(filled=True, size=60).encode(shape=alt.Shape("censored:N", title="censored at budget")),
        alt.Chart().mark_rule().encode(x=x, y="lo:Q", y2="hi:Q", color=color),
        data=scale_all,
    ).properties(width=240, height=220).facet(row=alt.Row("model:N", title=None), column=alt.Column("measure:N", title=None)
    ).properties(title="T / (n ln n) against n: flat means n log n mixing; censored medians are drawn at the budget")


def crossover_vs_budget(cross: pd.DataFrame, *, taus: list[float]) -> alt.FacetChart:
    """tau* against the budget factor, one line per n, one panel per model (and source, when a
    recorded run is shown beside the live one), with 95% bootstrap bars; orange band: the
    paper's tau ~ 1.5-2.

    ``cross`` has columns ``model``, ``source``, ``n``, ``budget_factor``, ``tau_star``, ``lo``,
    ``hi``; a value above the grid (nan or inf) is drawn at 1.2 times the grid's top temperature.
    """
    top = max(taus) * 1.2
    plot = cross.assign(**{k: cross[k].astype(float).replace([float("inf")], top).fillna(top)
                           for k in ("tau_star", "lo", "hi")}, n=cross["n"].astype(str),
                       panel=[src if m in src else f"{src}: {m}" for src, m in zip(cross["source"], cross["model"])])
    x = alt.X("budget_factor:Q", scale=alt.Scale(type="log"), title="budget (multiples of n ln n)")
    y = alt.Y("tau_star:Q", title="τ*", scale=alt.Scale(domain=[0, top * 1.05]))
    band = alt.Chart().mark_rect(opacity=0.15, color="orange").encode(y=alt.datum(1.5), y2=alt.datum(2.0))
    base = alt.Chart().encode(x=x, color=alt.Color("n:N", title="n", sort=None))
    return alt.layer(
        band,
        base.mark_line(point=True).encode(y=y),
        base.mark_rule().encode(y="lo:Q", y2="hi:Q"),
        data=plot,
    ).properties(width=190, height=180).facet(
        # one panel per (source, model) that has data: a source x model grid leaves empty cells
        facet=alt.Facet("panel:N", title=None, sort=list(dict.fromkeys(plot["panel"]))), columns=3
    # each panel its own x axis: a shared one is drawn under every column of the last row, empty or not
    ).resolve_axis(x="independent").properties(
        title=f"τ* against the coupling budget (top of the axis: above the grid, > {max(taus):g})")


def ratio_vs_tau(ratios: pd.DataFrame, *, blowup: float, top: float) -> alt.FacetChart:
    """Median T / (n ln n) against tau (log y), one line per model, one panel per n, with 95%
    bootstrap bars: where each model's chains slow down. A dashed rule per model marks ``blowup``
    times its value at ``top`` (the reference tau*): a temperature whose point lies under its
    model's rule mixes.

    ``ratios`` has :func:`tokendyn.mcmc.diagnostics.scaling_table`'s ratio columns (``model``, ``tau``,
    ``n``, ``T / (n ln n)``, ``lo``, ``hi``, ``censored``; censored values already at the cap),
    in the order the legend should take (smaller model first).
    """
    need_columns(ratios, ("model", "tau", "n", "T / (n ln n)", "lo", "hi", "censored"), "ratios")
    ref = ratios[ratios["tau"] == top]
    if ref.empty:
        raise ValueError(f"top={top:g}: no rows at that tau (taus: {sorted(set(ratios['tau']))})")
    # The rule's level rides on every row of its (model, n): a layer with its own data is not faceted.
    levels = ref.assign(level=ref["T / (n ln n)"] * blowup)[["model", "n", "level"]]
    ratios = ratios.merge(levels, on=["model", "n"], how="left")
    models = list(dict.fromkeys(ratios["model"]))
    color = alt.Color("model:N", title=None, sort=models)
    x = alt.X("tau:Q", title="τ")
    y = alt.Y("T / (n ln n):Q", scale=alt.Scale(type="log"), title="median T / (n ln n)")
    pts = alt.Chart().encode(x=x, y=y, color=color)
    return alt.layer(
        pts.mark_line(),
        pts.mark_point(filled=True, size=60).encode(shape=alt.Shape("censored:N", title="censored at budget"),
                                                     tooltip=["model", "n", "tau", alt.Tooltip("T / (n ln n):Q", format=".2f")]),
        alt.Chart().mark_rule().encode(x=x, y="lo:Q", y2="hi:Q", color=color),
        alt.Chart().mark_rule(strokeDash=[4, 3]).encode(y="level:Q", color=color),
        data=ratios,
    ).properties(width=260, height=220).facet(column=alt.Column("n:O", title="n")).properties(
        title=f"Where the chains slow down: a point under its model's dashed rule ({blowup:g}x its value at τ = {top:g}) mixes")
