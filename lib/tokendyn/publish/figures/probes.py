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


def scoreboard(points: Sequence[Mapping[str, Any]]) -> alt.HConcatChart:
    """The scoreboard's opening figure: one row per claims row, so every claim shows. Left, its
    verdict as a coloured mark and word. Right, on one log axis for all claims, each of our numbers
    divided by the paper's value (the geometric middle of its range) with its 95% interval, over
    the paper's range so divided (orange band, 1 its middle), where both are numbers; for a claim
    without such a pair, the paper's value in words. ``points``:
    :func:`tokendyn.publish.claims.scoreboard_points`."""
    from ..plotting import pretty

    df = pd.DataFrame(list(points))
    need = ["claim", "order", "verdict", "paper", "compared", "label", "value", "lo", "hi", "ratio", "ratio_lo",
            "ratio_hi", "band_lo", "band_hi"]
    missing = [c for c in need if c not in df.columns]
    if df.empty or missing:
        raise ValueError(f"points must hold rows with {need}; missing {missing or 'every row'}")
    colours = {"reproduced": "#1a7f37", "partly": "#9a6700", "not reproduced": "#cf222e",
               "holds by construction": "#0550ae", "not yet measured": "#6e7781"}
    seen = [v for v in colours if v in set(df["verdict"])]
    order = list(dict.fromkeys(df.sort_values("order", kind="stable")["claim"]))
    df["paper_words"] = "paper: " + df["paper"].map(pretty)
    # each number of a row on a line of its own inside the row's band, the lines centred in the band
    count = df.groupby("claim")["claim"].transform("size")
    df["slot"] = df.groupby("claim").cumcount() + (count.max() - count) // 2
    rows, compared = df.drop_duplicates("claim"), df[df["compared"].astype(bool)]
    claim_y = alt.Y("claim:N", sort=order, title=None)
    colour = alt.Color("verdict:N", legend=None, scale=alt.Scale(domain=seen, range=[colours[v] for v in seen]))
    step = alt.Step(30, **{"for": "position"})  # a row per claim, the numbers of one row inside it
    verdict = alt.layer(
        alt.Chart().mark_point(filled=True, size=90, opacity=1).encode(x=alt.value(8)),
        alt.Chart().mark_text(align="left", baseline="middle", fontWeight="bold").encode(x=alt.value(18),
                                                                                          text="verdict:N"),
        data=rows,
    ).encode(y=claim_y.axis(labelLimit=250, labelFontSize=11), color=colour,
             tooltip=["claim", "verdict", "paper"]).properties(width=130, height=step, title="verdict")
    within = alt.YOffset("slot:O", scale=alt.Scale(domain=list(range(int(count.max())))))
    bare_y = alt.Y("claim:N", sort=order, axis=None)
    number_tip = ["claim", "label", "value", "lo", "hi", "paper", "verdict"]

    def log_x(field: str) -> alt.X:
        return alt.X(f"{field}:Q", scale=alt.Scale(type="log"),
                     axis=alt.Axis(format="~g", labelOverlap="greedy", labelSeparation=4),
                     title=["ours ÷ the paper's value (log scale)", "1: the middle of the paper's range (orange)"])

    against = alt.layer(
        alt.Chart(compared.drop_duplicates("claim")).mark_rect(color="orange", opacity=0.3).encode(
            x=log_x("band_lo"), x2="band_hi:Q", y=bare_y, tooltip=["claim", "paper"]),
        alt.Chart(compared).mark_rule(strokeWidth=2).encode(
            x=log_x("ratio_lo"), x2="ratio_hi:Q", y=bare_y, yOffset=within, color=colour, tooltip=number_tip),
        alt.Chart(compared).mark_point(filled=True, size=24, opacity=1).encode(
            x=log_x("ratio"), y=bare_y, yOffset=within, color=colour, tooltip=number_tip),
        alt.Chart(rows[~rows["compared"].astype(bool)]).mark_text(align="left", color="#57606a", limit=240).encode(
            x=alt.value(6), y=bare_y, text="paper_words:N", tooltip=["claim", "paper", "verdict"]),
    ).properties(width=250, height=step, title="ours against the paper")
    return alt.hconcat(verdict, against, spacing=8).resolve_scale(color="shared").properties(
        title="Every claim: its verdict, and our numbers against the paper's where both are numbers")
