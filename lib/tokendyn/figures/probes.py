"""Figures of the cloze probe: how well each masked LM fills a blank, and how often it copies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import pandas as pd

__all__ = ["cloze_scores", "register_scores", "scoreboard"]


def cloze_scores(qual: pd.DataFrame) -> alt.Chart:
    """Top-1, top-5 and copy rate per model and head: ``qual`` has columns ``model``, ``head``,
    ``top1``, ``top5``, ``copy_rate`` (one row per model and head)."""
    long = qual.melt(id_vars=["model", "head"], value_vars=["top1", "top5", "copy_rate"],
                     var_name="metric", value_name="share")
    names = {"top1": "top-1", "top5": "top-5", "copy_rate": "copy rate"}
    long["metric"] = long["metric"].map(names)
    # one row per model, a panel per head: a panel per (model, head) pair left 13 panels whose
    # headers printed over each other
    return alt.Chart(long, title="Cloze probe (121 sentences): accuracy and copy rate").mark_bar().encode(
        y=alt.Y("model:N", title=None, sort=list(dict.fromkeys(qual["model"]))),
        yOffset=alt.YOffset("metric:N", sort=list(names.values())),
        x=alt.X("share:Q", scale=alt.Scale(domain=[0, 1]), title="share of the probe's blanks"),
        color=alt.Color("metric:N", title=None, sort=list(names.values())),
        column=alt.Column("head:N", title=None, sort=["trained", "untrained"]),
        tooltip=["model", "head", "metric", alt.Tooltip("share:Q", format=".3f")],
    ).properties(width=220, height=alt.Step(7))


def register_scores(probes: Mapping[str, Mapping[str, Any]], names: Sequence[str]) -> alt.Chart:
    """Top-5 accuracy by register for each model: ``probes[name]`` is that model's
    :func:`~tokendyn.evaluation.cloze_probe` result (its ``by_register`` entry is read)."""
    rows = [{"register": g, "model": n, "top5": v["top5"], "top1": v["top1"]}
            for n in names for g, v in probes[n]["by_register"].items()]
    return alt.Chart(pd.DataFrame(rows), title="Top-5 accuracy by register").mark_bar().encode(
        x=alt.X("register:N", title=None), y=alt.Y("top5:Q", scale=alt.Scale(domain=[0, 1])),
        color="model:N", xOffset="model:N",
        tooltip=["model", "register", alt.Tooltip("top5:Q", format=".3f")])


def scoreboard(points: Sequence[Mapping[str, Any]]) -> alt.FacetChart:
    """The scoreboard's opening figure: per numeric claim (one row each, its own x scale), the
    paper's range as a band and each of our numbers as a point with its 95% interval, coloured by
    the row's verdict. ``points``: :func:`tokendyn.claims.scoreboard_points`."""
    df = pd.DataFrame(list(points))
    need = ["claim", "label", "value", "lo", "hi", "paper_lo", "paper_hi", "verdict"]
    missing = [c for c in need if c not in df.columns]
    if df.empty or missing:
        raise ValueError(f"points must hold rows with {need}; missing {missing or 'every row'}")
    colours = {"reproduced": "#1a7f37", "partly": "#9a6700", "not reproduced": "#cf222e",
               "holds by construction": "#0550ae", "not yet measured": "#6e7781"}
    seen = [v for v in colours if v in set(df["verdict"])]
    band = alt.Chart().mark_rect(color="orange", opacity=0.25).encode(x="paper_lo:Q", x2="paper_hi:Q")
    base = alt.Chart().encode(y=alt.Y("label:N", title=None, sort=None),
                              color=alt.Color("verdict:N", title="verdict",
                                              scale=alt.Scale(domain=seen, range=[colours[v] for v in seen])))
    return alt.layer(
        band,
        base.mark_rule(strokeWidth=2).encode(x=alt.X("lo:Q", title=None, scale=alt.Scale(zero=False)), x2="hi:Q"),
        base.mark_point(filled=True, size=60, opacity=1).encode(
            x="value:Q", tooltip=["claim", "label", "value", "lo", "hi", "paper_lo", "paper_hi", "verdict"]),
        data=df,
    ).properties(width=440, height=alt.Step(16)).facet(
        row=alt.Row("claim:N", title=None, sort=list(dict.fromkeys(df.sort_values("order", kind="stable")["claim"]))
                    if "order" in df else None,
                    header=alt.Header(labelAngle=0, labelAlign="left", labelAnchor="start", labelOrient="top",
                                      labelFontWeight="bold", labelLimit=600))
    ).resolve_scale(x="independent", y="independent").properties(
        title="Ours (points, 95% intervals) against the paper's range (orange)")
