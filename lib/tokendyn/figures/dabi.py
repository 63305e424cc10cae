"""Figures of chapter 6: DABI against perturbation norm, structured against isotropic flips, and the
DABI x CCI taxonomy beside the paper's systems."""

from __future__ import annotations

import altair as alt
import pandas as pd

__all__ = ["dabi_curves", "flip_contrast", "taxonomy"]


def _need(df: pd.DataFrame, cols: list[str], name: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{name} lacks columns {missing}")


def dabi_curves(df: pd.DataFrame) -> alt.LayerChart:
    """DABI (log y) with its interval against the perturbation norm (log x), one line per decoder.

    ``df``: columns ``decoder``, ``kind`` (``"image"``/``"text"``/``"anchor"``), ``norm``, ``DABI``,
    ``lo``, ``hi``. A dashed rule marks DABI = 1.
    """
    _need(df, ["decoder", "kind", "norm", "DABI", "lo", "hi"], "df")
    x = alt.X("norm:Q", scale=alt.Scale(type="log"), title="perturbation norm s (units of the latent RMS per coordinate)")
    y = alt.Y("DABI:Q", scale=alt.Scale(type="log"), title="DABI (structured / isotropic loss increase)")
    base = alt.Chart(df)
    return (base.mark_line(point=True).encode(x=x, y=y, color=alt.Color("decoder:N", legend=alt.Legend(columns=2)),
                                              strokeDash=alt.StrokeDash("kind:N", title="kind"),
                                              tooltip=["decoder", "norm", "DABI", "lo", "hi"])
            + base.mark_rule().encode(x="norm:Q", y="lo:Q", y2="hi:Q", color="decoder:N")
            + alt.Chart(pd.DataFrame({"one": [1.0]})).mark_rule(color="gray", strokeDash=[4, 3]).encode(y="one:Q")
            ).properties(width=460, height=300, title="DABI against the perturbation norm (95% bootstrap intervals)")


def flip_contrast(df: pd.DataFrame) -> alt.FacetChart:
    """Flip rates under a structured and a norm-matched isotropic perturbation, per decoder and norm.

    ``df``: columns ``decoder``, ``norm``, ``direction``, ``rate``, ``lo``, ``hi``.
    """
    _need(df, ["decoder", "norm", "direction", "rate", "lo", "hi"], "df")
    base = alt.Chart(df).encode(x=alt.X("norm:Q", scale=alt.Scale(type="log"), title="norm s (latent RMS units)"),
                                color=alt.Color("direction:N", title="perturbation"))
    return (base.mark_line(point=True).encode(y=alt.Y("rate:Q", title="token flip rate"),
                                              tooltip=["decoder", "norm", "direction", "rate", "lo", "hi"])
            + base.mark_rule().encode(y="lo:Q", y2="hi:Q")
            ).properties(width=170, height=160).facet(facet=alt.Facet("decoder:N", title=None), columns=3)


def taxonomy(df: pd.DataFrame) -> alt.LayerChart:
    """The DABI x CCI plane: log DABI (x) against CCI (y), ours beside the paper's.

    ``df``: columns ``system``, ``DABI``, ``CCI``, ``source`` (``"ours"``/``"paper"``) and
    ``few-step works`` (a short label such as ``"works"``, ``"fails"``, ``"n/a (commits)"``).
    """
    _need(df, ["system", "DABI", "CCI", "source", "few-step works"], "df")
    base = alt.Chart(df).encode(
        x=alt.X("DABI:Q", scale=alt.Scale(type="log"), title="DABI (log)"),
        y=alt.Y("CCI:Q", scale=alt.Scale(domain=[-0.1, 1.1]), title="CCI (committed share of positions)"))
    pts = base.mark_point(size=140, filled=True, opacity=0.8).encode(
        shape=alt.Shape("source:N", title="source"), color=alt.Color("few-step works:N", title="few-step generation"),
        tooltip=["system", "DABI", "CCI", "source", "few-step works"])
    text = base.mark_text(align="left", dx=9, dy=-7, fontSize=10).encode(text="system:N")
    return (pts + text).properties(width=520, height=320, title="DABI x CCI: where few-step generation works")
