"""Figures of chapter 6: DABI against perturbation norm, structured against isotropic flips, and the
DABI x CCI taxonomy beside the paper's systems."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ._style import need_columns

__all__ = ["dabi_curves", "flip_contrast", "taxonomy"]


def dabi_curves(df: pd.DataFrame, *, reference: float | None = None) -> alt.LayerChart | alt.FacetChart:
    """DABI (log y) with its interval against the perturbation norm (log x), one line per decoder.

    ``df``: columns ``decoder``, ``kind`` (``"image"``/``"text"``/``"anchor"``), ``norm``, ``DABI``,
    ``lo``, ``hi``. A dashed rule marks DABI = 1. With a column ``along`` (the kind of structured
    direction, e.g. ``"residual"``/``"sharpest"``) there is one panel per direction kind, side by
    side, so that decoders are compared like with like. ``reference``: a dotted vertical rule at
    that norm (the reference ``s`` of the claims table).
    """
    need_columns(df, ["decoder", "kind", "norm", "DABI", "lo", "hi"], "df")
    # two lines: one line ran past its 300 px panel into the next panel's title
    x = alt.X("norm:Q", scale=alt.Scale(type="log"), title=["perturbation norm s", "(latent RMS per coordinate)"])
    y = alt.Y("DABI:Q", scale=alt.Scale(type="log"), title="DABI (structured / isotropic loss increase)")
    base = alt.Chart(df)
    # kind as the points' shape: a stroke-dash legend over dotted lines drew three alike dots
    kind = alt.Shape("kind:N", title="kind", scale=alt.Scale(domain=["anchor", "image", "text"],
                                                             range=["diamond", "square", "circle"]))
    tooltip = ["decoder", "kind", "norm", "DABI", "lo", "hi"] + (["along"] if "along" in df.columns else [])
    layers = [base.mark_line(strokeDash=[2, 2]).encode(x=x, y=y, color=alt.Color("decoder:N", legend=alt.Legend(columns=2))),
              base.mark_point(filled=True, size=50, opacity=1).encode(x=x, y=y, color="decoder:N", shape=kind,
                                                                      tooltip=tooltip),
              base.mark_rule().encode(x="norm:Q", y="lo:Q", y2="hi:Q", color="decoder:N")]
    title = "DABI against the perturbation norm (95% bootstrap intervals)"
    if "along" not in df.columns:
        one = alt.Chart(pd.DataFrame({"one": [1.0]})).mark_rule(color="gray", strokeDash=[4, 3]).encode(y="one:Q")
        chart = alt.layer(*layers, one)
        if reference is not None:
            chart += alt.Chart(pd.DataFrame({"ref": [float(reference)]})).mark_rule(
                color="gray", strokeDash=[1, 3]).encode(x="ref:Q")
        return chart.properties(width=460, height=300, title=title)
    # in a faceted chart every layer reads the same data: the guides are constants of it
    layers.append(base.mark_rule(color="gray", strokeDash=[4, 3]).encode(y=alt.datum(1.0)))
    if reference is not None:
        layers.append(base.mark_rule(color="gray", strokeDash=[1, 3]).encode(x=alt.datum(float(reference))))
    return alt.layer(*layers).properties(width=300, height=280).facet(
        column=alt.Column("along:N", title="structured direction")).properties(title=title)


def flip_contrast(df: pd.DataFrame) -> alt.FacetChart:
    """Flip rates under a structured and a norm-matched isotropic perturbation, per decoder and norm.

    ``df``: columns ``decoder``, ``norm``, ``direction``, ``rate``, ``lo``, ``hi``.
    """
    need_columns(df, ["decoder", "norm", "direction", "rate", "lo", "hi"], "df")
    base = alt.Chart(df).encode(x=alt.X("norm:Q", scale=alt.Scale(type="log"), title="norm s (latent RMS units)"),
                                color=alt.Color("direction:N", title="perturbation"))
    return (base.mark_line(point=True).encode(y=alt.Y("rate:Q", title="token flip rate"),
                                              tooltip=["decoder", "norm", "direction", "rate", "lo", "hi"])
            + base.mark_rule().encode(y="lo:Q", y2="hi:Q")
            ).properties(width=170, height=160).facet(facet=alt.Facet("decoder:N", title=None), columns=3)


# the claims tables' green and red: the paper's verdict on few-step generation, and ours on the oracle K = 4 step
VERDICT_COLOURS = {"works": "#1a7f37", "K = 4 step holds": "#1a7f37", "fails": "#cf222e", "K = 4 step flips": "#cf222e"}


def _label_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Where each point's label goes: points on one CCI row are taken left to right, and their labels
    alternate above and below it, further out each time two would meet, so that none overlaps;
    labels of points in the right third of the axis end at the point instead of starting there."""
    import math

    df = df.copy().reset_index(drop=True)
    df["label_y"] = df["CCI"].astype(float)
    df["side"] = "left"
    lx = df["DABI"].astype(float).map(lambda v: math.log10(max(v, 1e-12)))
    span = (lx.min(), lx.max())
    right = span[0] + 2 * (span[1] - span[0]) / 3
    for _, idx in df.groupby("CCI").groups.items():
        order = sorted(idx, key=lambda i: lx[i])
        for k, i in enumerate(order):
            level = k // 2 + 1
            df.loc[i, "label_y"] = float(df.loc[i, "CCI"]) + (0.07 * level if k % 2 == 0 else -0.07 * level)
            df.loc[i, "side"] = "right" if lx[i] > right else "left"
    return df


def taxonomy(df: pd.DataFrame) -> alt.LayerChart:
    """The DABI x CCI plane: log DABI (x) against CCI (y), ours beside the paper's.

    ``df``: columns ``system``, ``DABI``, ``CCI``, ``source`` (``"ours"``/``"paper"``) and
    ``few-step works`` (a short label such as ``"works"``, ``"fails"``, ``"K = 4 step holds"``,
    ``"n/a (commits)"``). The labels of :data:`VERDICT_COLOURS` are green or red, as in the claims
    tables; anything else grey. Each label is
    joined to its point by a thin line, staggered so that labels on one row do not overlap.
    """
    need_columns(df, ["system", "DABI", "CCI", "source", "few-step works"], "df")
    placed = _label_rows(df)
    labels = list(dict.fromkeys(placed["few-step works"]))
    domain = [v for v in VERDICT_COLOURS if v in labels] + [v for v in labels if v not in VERDICT_COLOURS]
    colours = [VERDICT_COLOURS.get(v, "#6e7781") for v in domain]
    x = alt.X("DABI:Q", scale=alt.Scale(type="log"), title="DABI (log)")
    y = alt.Y("CCI:Q", scale=alt.Scale(domain=[-0.45, 1.45]), title="CCI (committed share of positions)",
              axis=alt.Axis(values=[0, 0.5, 1]))
    base = alt.Chart(placed).encode(x=x)
    pts = base.mark_point(size=120, filled=True, opacity=0.85).encode(
        y=y, shape=alt.Shape("source:N", title="source"),
        color=alt.Color("few-step works:N", title="few-step generation", scale=alt.Scale(domain=domain, range=colours)),
        tooltip=["system", "DABI", "CCI", "source", "few-step works"])
    leader = base.mark_rule(color="#bbb", strokeWidth=0.8).encode(y="CCI:Q", y2="label_y:Q")
    text_l = base.transform_filter(alt.datum.side == "left").mark_text(align="left", dx=3, fontSize=10).encode(
        y="label_y:Q", text="system:N")
    text_r = base.transform_filter(alt.datum.side == "right").mark_text(align="right", dx=-3, fontSize=10).encode(
        y="label_y:Q", text="system:N")
    return (leader + pts + text_l + text_r).properties(
        width=520, height=340, title="DABI × CCI: where few-step generation works")
