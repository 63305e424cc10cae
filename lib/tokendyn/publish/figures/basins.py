"""Figures of the low-temperature landscape and of chains through topic regions (chapter 4):
Arrhenius plots of traps, dwell times, repetition, time spent per region, similarity and fluency
of the states, paths through embedding space and a kernel-free chain explorer.

Each function takes the tables the chapter computes (pandas DataFrames with the columns named in
its docstring) and returns an altair chart; captions stay in the chapter.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from ._style import need_columns

__all__ = ["arrhenius_lines", "arrhenius_collapse", "trap_depth", "dwell_vs_geometric", "trap_dwells",
           "repetition_paths", "region_time", "group_boxplot", "embedding_paths", "path_explorer",
           "corpus_ablation", "dwell_law_panels", "basin_vs_exact", "attractor_vs_null"]


def arrhenius_lines(arr: pd.DataFrame) -> alt.FacetChart:
    """``log10 q`` against ``1/tau``, one line per trap (``trap``), coloured by its ``min margin``,
    one panel per ``model``. ``arr``: one row per (model, trap, tau) with ``1/tau``, ``log10 q``."""
    need_columns(arr, ["model", "trap", "tau", "1/tau", "log10 q", "min margin"], "arr")
    return alt.Chart(arr).mark_line(point=True).encode(
        x=alt.X("1/tau:Q", title="1 / tau"), y=alt.Y("log10 q:Q", title="log10 q (per-step leave probability)"),
        detail="trap:N",
        color=alt.Color("min margin:Q", scale=alt.Scale(scheme="viridis"), title="min margin m (nats)"),
        tooltip=["model", "trap", "tau", "log10 q", "min margin"],
    ).properties(width=260, height=240).facet(column=alt.Column("model:N", title=None)).properties(
        title="Arrhenius plot: log q against 1/tau, one line per perfect trap")


def arrhenius_collapse(arr: pd.DataFrame, support_size: int, n: int) -> alt.LayerChart:
    """Every (trap, tau) point at ``x = m / tau`` (column ``m/tau``), with the asymptote
    ``log10((1/n) e^(-x))`` (solid) and the uniform-margin bound ``log10((|V|-1) e^(-x))`` (dashed),
    ``support_size`` = ``|V|``."""
    need_columns(arr, ["model", "trap", "tau", "m/tau", "log10 q", "min margin"], "arr")
    xs = np.linspace(0, float(arr["m/tau"].max()), 60)
    guide = pd.concat([
        pd.DataFrame({"m/tau": xs, "log10 q": (math.log(support_size - 1) - xs) / math.log(10),
                      "line": "bound (|V|-1) exp(-m/tau)"}),
        pd.DataFrame({"m/tau": xs, "log10 q": (-math.log(n) - xs) / math.log(10),
                      "line": "asymptote (1/n) exp(-m/tau)"})])
    return alt.layer(
        alt.Chart(arr).mark_point(filled=True, size=30, opacity=0.7).encode(
            x=alt.X("m/tau:Q", title="m / tau (depth of the trap in units of temperature)"),
            y=alt.Y("log10 q:Q", title="log10 q"), color=alt.Color("model:N", title=None),
            tooltip=["model", "trap", "tau", "min margin", "log10 q"]),
        alt.Chart(guide).mark_line(color="black").encode(
            x="m/tau:Q", y="log10 q:Q", strokeDash=alt.StrokeDash("line:N", title=None)),
    ).properties(title="All traps collapse onto the exp(-m/tau) line, far below the margin bound")


def trap_depth(fits: pd.DataFrame) -> alt.Chart:
    """Histogram (stacked by ``model``, legend in the order models first appear in ``fits``) of the
    smallest margin ``min margin`` of each trap."""
    need_columns(fits, ["model", "min margin"], "fits")
    return alt.Chart(fits).mark_bar(opacity=0.8).encode(
        x=alt.X("min margin:Q", bin=alt.Bin(maxbins=20), title="smallest margin m (nats)"),
        y=alt.Y("count():Q", title="distinct perfect traps (stacked)"),
        color=alt.Color("model:N", title=None, sort=list(dict.fromkeys(fits["model"]))),  # the table's order
    ).properties(title="Trap depth: the smallest margin of each perfect trap")


def dwell_vs_geometric(dwell: pd.DataFrame) -> alt.FacetChart:
    """Observed survival against Geometric(q): rows ``model``, ``tau`` (a label), ``t``, ``curve``
    (``observed`` or ``Geometric(q)``) and ``P(T > t)``; one panel per model."""
    need_columns(dwell, ["model", "tau", "t", "curve", "P(T > t)"], "dwell")
    return alt.Chart(dwell).mark_line(interpolate="step-after").encode(
        x=alt.X("t:Q", title="steps since the start in the trap"), y=alt.Y("P(T > t):Q"),
        color=alt.Color("tau:N", title=None),
        # observed solid, the law dashed, as the chapter's caption says (altair's default order is alphabetical)
        strokeDash=alt.StrokeDash("curve:N", title=None, scale=alt.Scale(domain=["observed", "Geometric(q)"],
                                                                         range=[[1, 0], [6, 4]])),
    ).properties(width=260, height=200).facet(column=alt.Column("model:N", title=None)).properties(
        title="Dwell in the exact trap state against Geometric(q)")


def dwell_law_panels(exact: pd.DataFrame, law: pd.DataFrame, *, mark: float = 1000.0) -> alt.HConcatChart:
    """The dwell law at a few temperatures, two panels. Left: the exact dwell ``1/q`` of every trap
    (``exact``: one row per (model, tau, trap) with ``exact dwell 1/q``) on a log scale, with each
    model's median and its interval (``law``: ``median``, ``median lo``, ``median hi``) and a rule at
    ``mark`` steps. Right: observed over Geometric-predicted mean dwell (``law``: ``ratio``,
    ``ratio lo``, ``ratio hi``), a rule at 1. ``tau`` is numeric in both tables."""
    need_columns(exact, ["model", "tau", "trap", "exact dwell 1/q"], "exact")
    need_columns(law, ["model", "tau", "median", "median lo", "median hi", "ratio", "ratio lo", "ratio hi"], "law")
    x = alt.X("tau:O", title="tau")
    off = alt.XOffset("model:N")
    color = alt.Color("model:N", title=None)
    ymax = max(float(exact["exact dwell 1/q"].max()), mark) * 2
    y = alt.Y("exact dwell 1/q:Q", title="exact dwell 1/q (steps)",
              scale=alt.Scale(type="log", domain=[1, ymax]))
    left = alt.layer(
        alt.Chart(exact).mark_point(opacity=0.35, size=14).encode(x=x, xOffset=off, y=y, color=color,
                                                                  tooltip=["model", "tau", "trap", "exact dwell 1/q"]),
        alt.Chart(law).mark_rule(strokeWidth=3).encode(x=x, xOffset=off, y=alt.Y("median lo:Q"), y2="median hi:Q",
                                                        color=color),
        alt.Chart(law).mark_tick(thickness=3, size=18, color="black").encode(x=x, xOffset=off, y=alt.Y("median:Q")),
        alt.Chart(pd.DataFrame({"y": [mark]})).mark_rule(color="orange", strokeDash=[4, 3]).encode(y="y:Q"),
    ).properties(width=300, height=260, title="Exact dwell 1/q per trap; median [95% interval]")
    right = alt.layer(
        alt.Chart(law).mark_rule(strokeWidth=2).encode(x=x, xOffset=off, y=alt.Y("ratio lo:Q", title="observed / Geometric(q) mean dwell",
                                                                                  scale=alt.Scale(zero=False)),
                                                        y2="ratio hi:Q", color=color),
        alt.Chart(law).mark_point(filled=True, size=50).encode(x=x, xOffset=off, y="ratio:Q", color=color,
                                                                tooltip=["model", "tau", "ratio", "ratio lo", "ratio hi"]),
        alt.Chart(pd.DataFrame({"y": [1.0]})).mark_rule(color="black", strokeDash=[4, 3]).encode(y="y:Q"),
    ).properties(width=200, height=260, title="Observed / predicted (1 = Geometric law)")
    return alt.hconcat(left, right).properties(title="The dwell law at low temperatures")


def basin_vs_exact(traps: pd.DataFrame, *, mark: float = 1000.0) -> alt.HConcatChart:
    """Each trap's dwell in its basin against its exact-state dwell, log-log: ``traps`` has one row
    per (model, tau, trap) with ``exact dwell 1/q``, ``basin dwell`` (its chains' median exit time
    from the Hamming ball) and ``censored`` (the median is the watch's end, a lower bound: hollow).
    The dashed diagonal is "the basin holds no longer than the state"; the orange rule is ``mark``
    steps. One panel per ``tau``, side by side."""
    need_columns(traps, ["model", "tau", "trap", "exact dwell 1/q", "basin dwell", "censored"], "traps")
    hi = max(float(traps["basin dwell"].max()), mark) * 2
    scale = alt.Scale(type="log", domain=[1, hi])
    ticks = [10.0 ** k for k in range(int(math.log10(hi)) + 1)]      # decades only: no colliding labels
    color = alt.Color("model:N", title=None, legend=alt.Legend(orient="bottom"))
    diag = pd.DataFrame({"x": [1.0, hi], "y": [1.0, hi]})

    def panel(tau: float, d: pd.DataFrame) -> alt.LayerChart:
        return alt.layer(
            alt.Chart(d).mark_point(size=30, opacity=0.7).encode(
                x=alt.X("exact dwell 1/q:Q", title="exact-state dwell 1/q (steps)", scale=scale,
                        axis=alt.Axis(values=ticks, format="~s")),
                y=alt.Y("basin dwell:Q", title="basin dwell, median of its chains (steps)", scale=scale,
                        axis=alt.Axis(values=ticks, format="~s")),
                color=color, shape=alt.Shape("model:N", legend=None),
                fill=alt.condition(alt.datum["censored"], alt.value("white"), color),
                tooltip=["model", "tau", "trap", "exact dwell 1/q", "basin dwell", "censored"]),
            alt.Chart(diag).mark_line(color="gray", strokeDash=[4, 3]).encode(x="x:Q", y="y:Q"),
            alt.Chart(pd.DataFrame({"y": [mark]})).mark_rule(color="orange").encode(y="y:Q"),
        ).properties(width=240, height=240, title=f"tau = {tau:g}")

    return alt.hconcat(*(panel(t, g) for t, g in traps.groupby("tau", sort=True))).properties(
        title="Dwell near a trap against dwell in it")


def trap_dwells(basin: pd.DataFrame, measures: Sequence[str], censored_measure: str, *,
                mark: float = 1000.0) -> alt.FacetChart:
    """Dwell times of traps on a log scale: ``basin`` has one row per (model, tau, trap) with
    ``text``, ``censored`` and one column per name in ``measures``; points of
    ``censored_measure`` with ``censored`` True are hollow (lower bounds). A rule at ``mark``."""
    need_columns(basin, ["model", "tau", "trap", "text", "censored", *measures], "basin")
    long = basin.melt(id_vars=["model", "tau", "trap", "censored", "text"], value_vars=list(measures),
                      var_name="measure", value_name="steps")
    long["lower bound"] = long["censored"] & (long["measure"] == censored_measure)
    return alt.layer(
        alt.Chart(long).mark_point(size=70).encode(
            x=alt.X("measure:N", title=None, sort=list(measures), axis=alt.Axis(labelAngle=-20)),
            y=alt.Y("steps:Q", scale=alt.Scale(type="log"), title="steps"),
            color=alt.Color("tau:N", title="tau"), xOffset="tau:N",
            fill=alt.condition(alt.datum["lower bound"], alt.value("white"), alt.Color("tau:N")),
            tooltip=["trap", "text", "steps", "lower bound"]),
        alt.Chart(long).transform_aggregate(n="count()").mark_rule(color="orange").encode(y=alt.datum(mark)),
    ).properties(width=250, height=240).facet(column=alt.Column("model:N", title=None)).properties(
        title="Dwell in and near perfect traps at low temperature")


def repetition_paths(dom: pd.DataFrame, share: float, text_level: float) -> alt.LayerChart:
    """Mean share of sites held by the top token (``mean dominance``) against ``step``, a line per
    (``model``, ``tau``); a dashed rule at the basin threshold ``share``, a grey one at the text's
    own level ``text_level``."""
    need_columns(dom, ["model", "tau", "step", "mean dominance"], "dom")
    return alt.layer(
        alt.Chart(dom).mark_line().encode(
            x=alt.X("step:Q", title="steps"),
            y=alt.Y("mean dominance:Q", title="share of sites holding the top token", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("model:N", title=None), strokeDash=alt.StrokeDash("tau:N", title="tau")),
        alt.Chart(pd.DataFrame({"y": [share]})).mark_rule(strokeDash=[4, 3], color="black").encode(y="y:Q"),
        alt.Chart(pd.DataFrame({"y": [text_level]})).mark_rule(color="gray").encode(y="y:Q"),
    ).properties(title="Do chains fall into repetition basins?")


def region_time(visits: pd.DataFrame, regions: Sequence[str], starts: Sequence[str], title: str) -> alt.FacetChart:
    """Time fraction per region with its interval, argmax and gated labels side by side: rows of
    ``visits`` with ``region``, ``labels``, ``start``, ``tau``, ``time_fraction value|lo|hi``;
    panels by start topic (rows, in ``starts`` order) and temperature (columns)."""
    need_columns(visits, ["region", "labels", "start", "tau", "time_fraction value", "time_fraction lo",
                   "time_fraction hi"], "visits")
    base = alt.Chart().encode(
        x=alt.X("region:N", title=None, sort=list(regions)), xOffset="labels:N",
        color=alt.Color("labels:N", scale=alt.Scale(range=["#9ecae1", "#08519c"]), title=None))
    return alt.layer(
        base.mark_bar().encode(y=alt.Y("time_fraction value:Q", title="time fraction")),
        base.mark_rule().encode(y="time_fraction lo:Q", y2="time_fraction hi:Q", color=alt.value("black")),
        data=visits,
    ).properties(width=230, height=100).facet(
        column=alt.Column("tau:N", title="tau"), row=alt.Row("start:N", title="start topic", sort=list(starts)),
    ).properties(title=title)


def group_boxplot(values: Mapping[str, Sequence[float]], x_title: str, title: str, *,
                  rule: float | None = None) -> alt.Chart | alt.LayerChart:
    """One box (min-max whiskers) per group of ``values`` (group name -> numbers), groups in the
    order given, with an optional vertical dashed rule at ``rule``."""
    df = pd.concat([pd.DataFrame({"group": g, x_title: np.asarray(v, dtype=float)}) for g, v in values.items()])
    box = alt.Chart(df).mark_boxplot(extent="min-max").encode(
        x=alt.X(f"{x_title}:Q"), y=alt.Y("group:N", title=None, sort=list(values), axis=alt.Axis(labelLimit=320)),
        color=alt.Color("group:N", legend=None))
    if rule is None:
        return box.properties(height=200, title=title)
    return alt.layer(box, alt.Chart(pd.DataFrame({"x": [rule]})).mark_rule(strokeDash=[4, 3]).encode(x="x:Q")
                     ).properties(height=200, title=title)


def embedding_paths(refs: pd.DataFrame, path: pd.DataFrame, title: str) -> alt.LayerChart:
    """Reference passages (``pc1``, ``pc2``, ``topic``, ``text``) faint behind chain paths (``chain``,
    ``frame``, ``step``, ``pc1``, ``pc2``, ``start``, ``label``, ``gated``, ``text``): one line per
    chain, each state coloured by its gated label and shaped by the start topic, starts ringed."""
    need_columns(refs, ["pc1", "pc2", "topic", "text"], "refs")
    need_columns(path, ["chain", "frame", "step", "pc1", "pc2", "start", "label", "gated", "text"], "path")
    return alt.layer(
        alt.Chart(refs).mark_circle(size=25, opacity=0.35).encode(
            x=alt.X("pc1:Q", title="PC 1"), y=alt.Y("pc2:Q", title="PC 2"), color=alt.Color("topic:N", title="topic"),
            tooltip=["topic", "text"]),
        alt.Chart(path).mark_line(opacity=0.6, color="black", strokeWidth=1).encode(
            x="pc1:Q", y="pc2:Q", detail="chain:N", order="frame:Q"),
        alt.Chart(path).mark_point(filled=True, size=30).encode(
            x="pc1:Q", y="pc2:Q", shape=alt.Shape("start:N", title="chain start"),
            color=alt.Color("gated:N", title="topic"), tooltip=["chain", "step", "start", "label", "gated", "text"]),
        alt.Chart(path[path["frame"] == 0]).mark_point(size=160, color="black").encode(x="pc1:Q", y="pc2:Q"),
    ).properties(width=520, height=380, title=title)


def path_explorer(refs: pd.DataFrame, path: pd.DataFrame, *, width: int = 80) -> alt.VConcatChart:
    """A chain explorer that needs no kernel: a dropdown picks a ``chain`` and a slider a ``frame``;
    the chart shows the reference passages, the chain's path, the chosen state (red) and its text
    (``step``, ``gated`` label and ``text``, wrapped at ``width`` characters) below."""
    need_columns(refs, ["pc1", "pc2", "topic"], "refs")
    need_columns(path, ["chain", "frame", "step", "pc1", "pc2", "gated", "text"], "path")
    path = path.assign(wrapped=["\n".join(textwrap.wrap(f"step {s}: [{g}] {t}", width))
                                for s, g, t in zip(path["step"], path["gated"], path["text"])])
    chains = sorted(int(c) for c in path["chain"].unique())
    pick_chain = alt.param(name="chain_pick", value=chains[0], bind=alt.binding_select(options=chains, name="chain "))
    pick_frame = alt.param(name="frame_pick", value=0,
                           bind=alt.binding_range(min=0, max=int(path["frame"].max()), step=1, name="state "))
    one = alt.datum.chain == pick_chain
    now = (alt.datum.chain == pick_chain) & (alt.datum.frame == pick_frame)
    plane = alt.layer(
        alt.Chart(refs).mark_circle(size=20, opacity=0.25).encode(
            x=alt.X("pc1:Q", title="PC 1"), y=alt.Y("pc2:Q", title="PC 2"), color=alt.Color("topic:N", title="topic")),
        alt.Chart(path).mark_line(color="gray").encode(x="pc1:Q", y="pc2:Q", order="frame:Q").transform_filter(one),
        alt.Chart(path).mark_point(size=220, filled=True, color="red").encode(
            x="pc1:Q", y="pc2:Q").transform_filter(now),
    ).add_params(pick_chain, pick_frame).properties(width=520, height=320)
    caption = alt.Chart(path).mark_text(align="left", baseline="top", lineBreak="\n", fontSize=12).encode(
        x=alt.value(0), y=alt.value(0), text="wrapped:N").transform_filter(now).properties(width=520, height=70)
    return alt.vconcat(plane, caption).properties(title="Chain explorer: one chain, one recorded state at a time")


def corpus_ablation(abl: pd.DataFrame, regions: Sequence[str]) -> alt.FacetChart:
    """Time fraction per ``region`` with its interval (``lo``, ``hi``), one bar per ``corpus``, one
    panel per ``tau``: rows of ``abl`` with ``corpus``, ``region``, ``tau``, ``time fraction``."""
    need_columns(abl, ["corpus", "region", "tau", "time fraction", "lo", "hi"], "abl")
    base = alt.Chart().encode(x=alt.X("region:N", sort=list(regions), title=None), xOffset="corpus:N",
                              color=alt.Color("corpus:N", title=None))
    return alt.layer(base.mark_bar().encode(y=alt.Y("time fraction:Q", title="time fraction (gated)")),
                     base.mark_rule(color="black").encode(y="lo:Q", y2="hi:Q"), data=abl,
                     ).properties(width=300, height=180).facet(column=alt.Column("tau:N", title="tau")).properties(
        title="With and without political prose in training")


def attractor_vs_null(tests: pd.DataFrame) -> alt.FacetChart:
    """The target region's excess beside the null (the largest control region's) with their
    intervals: ``tests`` has one row per (``model``, ``tau``, ``statistic``) with ``value``,
    ``lo``, ``hi``; ``statistic`` names what the row is (say "politics" or "null: science"), and
    rows whose ``statistic`` starts with "null" are grey. One panel per model, tau on x."""
    need_columns(tests, ["model", "tau", "statistic", "value", "lo", "hi"], "tests")
    t = tests.assign(kind=np.where(tests["statistic"].str.startswith("null"), "null (largest control region)",
                                   "politics"))
    colour = alt.Color("kind:N", title=None, scale=alt.Scale(domain=["politics", "null (largest control region)"],
                                                             range=["#c0392b", "#7f8c8d"]))
    base = alt.Chart().encode(x=alt.X("tau:N", title="tau"), xOffset="kind:N", color=colour)
    return alt.layer(
        base.mark_rule(strokeWidth=2).encode(y=alt.Y("lo:Q", title="excess time share over the other regions"),
                                             y2="hi:Q"),
        base.mark_point(filled=True, size=70).encode(y="value:Q", tooltip=["statistic", "value", "lo", "hi"]),
        alt.Chart().mark_rule(color="black", strokeDash=[4, 3]).encode(y=alt.datum(0)),
        data=t).properties(width=220, height=220).facet(column=alt.Column("model:N", title=None)).properties(
        title="Pull of the political region against label noise")
