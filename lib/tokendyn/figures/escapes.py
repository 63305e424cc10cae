"""Figures of the escapes: ODE against SDE over K under a real judge, the commitment ablation, readout
interventions against the tube law, and the interface measure of Gaussian partitions against M."""

from __future__ import annotations

import altair as alt
import pandas as pd

from .dabi import _need

__all__ = ["ode_sde_curves", "ablation_panels", "intervention_flips", "interface_scaling"]


def ode_sde_curves(df: pd.DataFrame, real: pd.DataFrame) -> alt.HConcatChart:
    """Judge perplexity (left, log) and unigram entropy (right) of text generated from noise against K.

    ``df``: one row per (K, sampler) with columns ``K``, ``sampler``, ``ppl``, ``ppl_lo``, ``ppl_hi``,
    ``entropy``, ``entropy_lo``, ``entropy_hi``. ``real``: one row, columns ``ppl`` and ``entropy`` of
    held-out real text (the dashed reference lines).
    """
    _need(df, ["K", "sampler", "ppl", "ppl_lo", "ppl_hi", "entropy", "entropy_lo", "entropy_hi"], "df")
    _need(real, ["ppl", "entropy"], "real")
    x = alt.X("K:Q", scale=alt.Scale(type="log", base=2), title="K steps from noise")
    base = alt.Chart(df).encode(x=x, color=alt.Color("sampler:N", title="sampler"))

    def panel(col: str, title: str, log: bool) -> alt.LayerChart:
        scale = alt.Scale(type="log") if log else alt.Scale(zero=False)
        return (base.mark_line(point=True).encode(y=alt.Y(f"{col}:Q", scale=scale, title=title),
                                                  tooltip=["K", "sampler", col, f"{col}_lo", f"{col}_hi"])
                + base.mark_rule().encode(y=f"{col}_lo:Q", y2=f"{col}_hi:Q")
                + alt.Chart(real).mark_rule(color="gray", strokeDash=[4, 3]).encode(y=f"{col}:Q")
                ).properties(width=280, height=240)

    return (panel("ppl", "SmolLM2-135M judge perplexity", True).properties(title="Judge perplexity (dashed: real text)")
            | panel("entropy", "unigram entropy (nats)", False).properties(title="Unigram entropy (dashed: real text)"))


def ablation_panels(df: pd.DataFrame) -> alt.FacetChart:
    """Committed against ablated (expected-embedding feedback) per generator, one panel per score.

    ``df``: columns ``generator``, ``variant``, ``score``, ``value``, ``lo``, ``hi`` (long format).
    """
    _need(df, ["generator", "variant", "score", "value", "lo", "hi"], "df")
    base = alt.Chart(df).encode(x=alt.X("variant:N", title=None), color=alt.Color("variant:N", title="feedback"))
    return (base.mark_bar(opacity=0.8).encode(y=alt.Y("value:Q", title=None),
                                              tooltip=["generator", "variant", "score", "value", "lo", "hi"])
            + base.mark_rule(color="black").encode(y="lo:Q", y2="hi:Q")
            ).properties(width=110, height=150).facet(row=alt.Row("generator:N", title=None),
                                                       column=alt.Column("score:N", title=None)
                                                       ).resolve_scale(y="independent")


def intervention_flips(df: pd.DataFrame) -> alt.LayerChart:
    """Terminal flip rate of the oracle roll-in per readout (bars, interval rules) with the tube-law
    prediction from each readout's own clean margins (black ticks; none for a nonlinear head).

    ``df``: columns ``readout``, ``flip``, ``lo``, ``hi``, ``predicted`` (NaN where not defined).
    """
    _need(df, ["readout", "flip", "lo", "hi", "predicted"], "df")
    base = alt.Chart(df).encode(x=alt.X("readout:N", title=None, sort=None))
    y = alt.Y("flip:Q", title="terminal flip rate (K = 4)", axis=alt.Axis(format="%"))
    return (base.mark_bar(opacity=0.7).encode(y=y, tooltip=["readout", "flip", "lo", "hi", "predicted"])
            + base.mark_rule(color="black").encode(y="lo:Q", y2="hi:Q")
            + base.mark_tick(color="black", thickness=3, size=30).encode(y="predicted:Q")
            ).properties(width=420, height=240, title="K = 4 terminal flips after each readout intervention")


def interface_scaling(df: pd.DataFrame) -> alt.LayerChart:
    """Interface measure ``S`` against the number of modes ``M`` (log-log), one line per partition.

    ``df``: columns ``M``, ``partition``, ``S``, ``lo``, ``hi`` (``lo = hi = S`` for exact values).
    """
    _need(df, ["M", "partition", "S", "lo", "hi"], "df")
    legend = alt.Legend(orient="bottom", columns=1)
    base = alt.Chart(df).encode(x=alt.X("M:Q", scale=alt.Scale(type="log", base=2), title="M modes"),
                                color=alt.Color("partition:N", title=None, legend=legend))
    return (base.mark_line(point=True).encode(y=alt.Y("S:Q", scale=alt.Scale(type="log"),
                                                      title="interface measure S (stiffness ∝ S)"),
                                              tooltip=["M", "partition", "S", "lo", "hi"])
            + base.mark_rule().encode(y="lo:Q", y2="hi:Q")
            ).properties(width=440, height=280, title="What a smooth map must cut: interface measure against M")
