"""Figures of the rectangle test: the distribution of delta, its mean and normalised mean with
intervals, its dependence on distance, temperature, size and depth, Arnold-Press grids, the
controls, and paired deltas of two models."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import pandas as pd
import torch

from ._style import need_columns

__all__ = ["delta_distribution", "delta_intervals", "delta_by_gap", "delta_vs_tau", "delta_vs_size",
           "delta_vs_depth", "arnold_press", "delta_controls", "paired_deltas"]

STATISTICS = ("raw delta", "normalized delta")
"""The two statistics the interval figures draw, one panel each, in this order."""


def _paper_band(paper_range: tuple[float, float]) -> alt.Chart:
    """The paper's range of delta as an orange band across the x axis."""
    return alt.Chart(pd.DataFrame({"lo": [paper_range[0]], "hi": [paper_range[1]]})).mark_rect(
        opacity=0.25, color="orange").encode(x="lo:Q", x2="hi:Q")


def delta_distribution(deltas: pd.DataFrame, paper_range: tuple[float, float]) -> alt.LayerChart:
    """Box plots (whiskers min-max, box the quartiles, tick the median) of delta per model and
    protocol over the paper's range.

    ``deltas`` has one row per rectangle: columns ``model``, ``protocol``, ``delta`` (other columns
    are ignored). The five numbers are computed here, so the chart carries one row per box, not
    one per rectangle.
    """
    _check_columns("deltas", deltas, ("model", "protocol", "delta"))
    g = deltas.groupby(["model", "protocol"])["delta"]
    five = pd.concat([g.min().rename("min"), g.quantile(0.25).rename("q25"), g.median().rename("median"),
                      g.quantile(0.75).rename("q75"), g.max().rename("max")], axis=1).reset_index()
    base = alt.Chart(five).encode(y=alt.Y("model:N", title=None), yOffset="protocol:N", color="protocol:N",
                                  tooltip=["model", "protocol", "min", "q25", "median", "q75", "max"])
    box = alt.layer(
        base.mark_rule().encode(x=alt.X("min:Q", title="rectangle delta (nats, tau = 1)"), x2="max:Q"),
        base.mark_bar(size=12).encode(x="q25:Q", x2="q75:Q"),
        base.mark_tick(thickness=2, size=12).encode(x="median:Q", color=alt.value("black")))
    return alt.layer(_paper_band(paper_range), box).properties(height=110 * deltas["model"].nunique(),
        title=f"Distribution of delta per model and protocol; orange band: the paper's [{paper_range[0]:.2f}, {paper_range[1]:.2f}]")


def _check_columns(name: str, frame: pd.DataFrame, columns: tuple[str, ...]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} lacks the column(s) {missing}; it has {list(frame.columns)}")


def delta_intervals(ci_df: pd.DataFrame, paper_range: tuple[float, float] | None = None) -> alt.FacetChart:
    """Mean with its interval per model and protocol, one panel per statistic (raw delta in nats,
    normalized delta in [0, 1]).

    ``ci_df`` has one row per (model, protocol, statistic): columns ``model``, ``protocol``,
    ``statistic`` (one of :data:`STATISTICS`), ``mean``, ``lo``, ``hi``. ``paper_range``, if given,
    is drawn as an orange band in the raw-delta panel.
    """
    _check_columns("ci_df", ci_df, ("model", "protocol", "statistic", "mean", "lo", "hi"))
    bad = sorted(set(ci_df["statistic"]) - set(STATISTICS))
    if bad:
        raise ValueError(f"statistic must be one of {list(STATISTICS)}, got {bad}")
    df = ci_df.copy()
    if paper_range is not None:   # on one row of the raw panel only, so that the band is drawn once
        first = [k == (df["statistic"] == STATISTICS[0]).idxmax() and s == STATISTICS[0]
                 for k, s in zip(df.index, df["statistic"])]
        df["paper lo"] = [paper_range[0] if f else None for f in first]
        df["paper hi"] = [paper_range[1] if f else None for f in first]
    base = alt.Chart().encode(y=alt.Y("model:N", title=None, sort=None), yOffset="protocol:N", color="protocol:N")
    layers = [base.mark_rule(strokeWidth=2).encode(x=alt.X("lo:Q", title="mean over rectangles [95% interval]"),
                                                    x2="hi:Q"),
              base.mark_point(filled=True, size=60).encode(x="mean:Q", tooltip=["model", "protocol", "mean", "lo", "hi"])]
    if paper_range is not None:
        layers.insert(0, alt.Chart().mark_rect(opacity=0.2, color="orange").encode(x="paper lo:Q", x2="paper hi:Q"))
    return alt.layer(*layers, data=df).properties(width=300, height=40 * df["model"].nunique()).facet(
        column=alt.Column("statistic:N", sort=list(STATISTICS), title=None)
    ).resolve_scale(x="independent").properties(
        title="Mean raw and normalized delta per model and protocol, with 95% bootstrap intervals")


def delta_by_gap(gap_df: pd.DataFrame) -> alt.Chart | alt.LayerChart:
    """Mean delta against the distance |i - j| per model. ``gap_df``: columns ``model``, ``gap``,
    ``mean delta``, and optionally ``lo``, ``hi`` (an interval per point, drawn as a bar)."""
    line = alt.Chart(gap_df).mark_line(point=True).encode(
        x=alt.X("gap:Q", title="|i - j|"), y=alt.Y("mean delta:Q", title="mean delta (model protocol)"), color="model:N")
    title = "Incompatibility against the distance between the two sites"
    if not {"lo", "hi"} <= set(gap_df.columns):
        return line.properties(title=title)
    bars = alt.Chart(gap_df).mark_rule().encode(x="gap:Q", y="lo:Q", y2="hi:Q", color="model:N")
    return alt.layer(line, bars).properties(title=title + " (bars: 95% intervals)")


def delta_vs_tau(tau_df: pd.DataFrame, *, reference: str | None = None) -> alt.Chart:
    """Mean delta against tau (log-log) per model: one line per set of rectangles, solid, except
    the set named ``reference`` (a value of ``rectangles``), dashed; the points' shape names the set.

    ``tau_df``: columns ``model``, ``tau``, ``rectangles``, ``mean delta``.
    """
    need_columns(tau_df, ["model", "tau", "rectangles", "mean delta"], "tau_df")
    if reference is not None and reference not in set(tau_df["rectangles"]):
        raise ValueError(f"reference={reference!r} is not a value of tau_df['rectangles']: "
                         f"{sorted(set(tau_df['rectangles']))}")
    x = alt.X("tau:Q", scale=alt.Scale(type="log"), title="τ")
    y = alt.Y("mean delta:Q", scale=alt.Scale(type="log"), title="mean δ")
    base = alt.Chart(tau_df).encode(x=x, y=y, color=alt.Color("model:N", title="model"), detail="rectangles:N")
    # the line style by a condition, not a dash legend (a dash legend over points drew alike dots)
    dash = alt.condition(alt.datum.rectangles == reference, alt.value([6, 4]), alt.value([1, 0]))
    return (base.mark_line().encode(strokeDash=dash) + base.mark_point(filled=True, size=50, opacity=1).encode(
        shape=alt.Shape("rectangles:N", title="rectangles"))
    ).properties(title="δ against τ (log-log); slope −1 is 1/τ")


def delta_vs_size(summary: pd.DataFrame, sizes: Mapping[str, float]) -> alt.Chart:
    """Mean delta against parameter count (log x), per model and protocol.

    ``summary`` has one row per (model, protocol) with a ``mean`` column; ``sizes`` maps a model's
    name to its parameter count in millions.
    """
    size_df = summary.merge(pd.DataFrame([{"model": k, "parameters (M)": v} for k, v in sizes.items()]), on="model")
    return alt.Chart(size_df).mark_point(size=90, filled=True).encode(
        x=alt.X("parameters (M):Q", scale=alt.Scale(type="log")), y=alt.Y("mean:Q", title="mean delta"),
        color="model:N", shape="protocol:N", tooltip=["model", "protocol", "mean", "parameters (M)"]
    ).properties(title="Mean delta against model size (the paper: incompatibility persists across size)")


def delta_vs_depth(fam_df: pd.DataFrame) -> alt.FacetChart:
    """Mean raw and normalized delta (with intervals) against the number of encoder layers, one
    panel per statistic: the one-recipe family joined by a line, other recipes as open squares.

    ``fam_df`` has one row per (model, statistic): columns ``model``, ``layers``,
    ``parameters (M)``, ``recipe`` (``"family"`` or another label), ``statistic`` (one of
    :data:`STATISTICS`), ``mean``, ``lo``, ``hi``.
    """
    _check_columns("fam_df", fam_df, ("model", "layers", "parameters (M)", "recipe", "statistic", "mean", "lo", "hi"))
    df = fam_df.assign(label=[f"{m} ({p:.1f}M)" for m, p in zip(fam_df["model"], fam_df["parameters (M)"])])
    # Other recipes sit a little right of their depth so that they do not hide a family member
    # of the same depth (splade-tiny-mlm has 2 layers, like minilm-depth2).
    df["x"] = df["layers"].astype(float) + (df["recipe"] != "family") * 0.2
    fam = alt.datum.recipe == "family"
    lo, hi = float(df["layers"].min()) - 0.5, float(df["layers"].max()) + 0.7
    x = alt.X("x:Q", title="encoder layers", scale=alt.Scale(domain=[lo, hi], nice=False),
              axis=alt.Axis(values=sorted({int(v) for v in df["layers"]}), format="d"))
    base = alt.Chart().encode(x=x, color=alt.Color("label:N", title="model (parameters)",
                                                   legend=alt.Legend(columns=2)))
    tip = ["model", "recipe", "layers", "parameters (M)", "mean", "lo", "hi"]
    return alt.layer(
        base.transform_filter(fam).mark_line(strokeDash=[4, 3], strokeWidth=1.5).encode(
            y=alt.Y("mean:Q", title="mean over rectangles [95% interval]"), color=alt.value("gray"),
            detail="statistic:N"),
        base.mark_rule(strokeWidth=2).encode(y="lo:Q", y2="hi:Q"),
        base.transform_filter(fam).mark_point(filled=True, size=70, shape="circle", opacity=1).encode(
            y="mean:Q", tooltip=tip),
        base.transform_filter(~fam).mark_point(filled=False, size=90, shape="square", strokeWidth=2).encode(
            y="mean:Q", tooltip=tip),
        data=df,
    ).properties(width=240, height=200).facet(column=alt.Column("statistic:N", sort=list(STATISTICS), title=None)
    ).resolve_scale(y="independent").properties(
        title="δ against depth: filled circles on the dashed line, one recipe; open squares, other recipes")


def arnold_press(ap_df: pd.DataFrame, k: int) -> alt.Chart:
    """One tick per K x K grid for each statistic and model.

    ``ap_df`` has one row per grid: ``model`` and one column per statistic in nats (the residual
    RMS, the largest delta on the grid).
    """
    return alt.Chart(ap_df.melt(id_vars="model", var_name="statistic", value_name="nats")).mark_tick(thickness=2).encode(
        x="nats:Q", y=alt.Y("statistic:N", title=None), yOffset="model:N", color="model:N"
    ).properties(width=460, height=160, title=f"Arnold-Press {k} x {k} grids, one tick per grid")


def delta_controls(controls: Mapping[str, float], summary: pd.DataFrame,
                   paper_range: tuple[float, float]) -> alt.LayerChart:
    """Bars of the controls' mean delta next to each MLM's (model protocol), over the paper's range.

    ``controls`` maps a control's label -> its mean delta; ``summary`` has one row per (model,
    protocol) with a ``mean`` column.
    """
    rows = [{"case": case, "mean delta": v} for case, v in controls.items()]
    rows += [{"case": f"{m} [model]", "mean delta": v}
             for m, v in summary[summary.protocol == "model"][["model", "mean"]].values]
    return alt.layer(_paper_band(paper_range), alt.Chart(pd.DataFrame(rows)).mark_bar().encode(
        x=alt.X("mean delta:Q", title="mean rectangle delta (nats)"), y=alt.Y("case:N", sort=None, title=None))
    ).properties(title="Controls next to the MLMs; orange band: the paper's range")


def paired_deltas(d_ref: torch.Tensor, d_test: torch.Tensor, labels: tuple[str, str] = ("fp32", "bf16")) -> alt.LayerChart:
    """The same rectangles' delta under two models, one point each (symlog axes), with the diagonal.

    ``d_ref``, ``d_test`` [B]: the deltas under the reference and the test model.
    """
    lim = float(max(d_ref.max(), d_test.max()))
    x, y = f"{labels[0]} delta", f"{labels[1]} delta"
    return alt.layer(
        alt.Chart(pd.DataFrame({x: d_ref.numpy(), y: d_test.numpy()})).mark_circle(size=25, opacity=0.6).encode(
            x=alt.X(f"{x}:Q", scale=alt.Scale(type="symlog")), y=alt.Y(f"{y}:Q", scale=alt.Scale(type="symlog"))),
        alt.Chart(pd.DataFrame({"a": [0, lim], "b": [0, lim]})).mark_line(color="gray", strokeDash=[4, 3]).encode(x="a:Q", y="b:Q"),
    ).properties(width=320, height=320)
