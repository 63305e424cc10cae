"""Figures of the escapes: ODE against SDE over K under a real judge, the commitment ablation, readout
interventions against the tube law, and the interface measure of Gaussian partitions against M."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ._style import need_columns

__all__ = ["ode_sde_curves", "ode_sde_ladder", "ablation_panels", "intervention_flips", "interface_scaling"]


def ode_sde_curves(df: pd.DataFrame, real: pd.DataFrame) -> alt.HConcatChart:
    """Judge perplexity (left, log) and unigram entropy (right) of text generated from noise against K.

    ``df``: one row per (K, sampler) with columns ``K``, ``sampler``, ``ppl``, ``ppl_lo``, ``ppl_hi``,
    ``entropy``, ``entropy_lo``, ``entropy_hi``. ``real``: one row, columns ``ppl`` and ``entropy`` of
    held-out real text (the dashed reference lines).
    """
    need_columns(df, ["K", "sampler", "ppl", "ppl_lo", "ppl_hi", "entropy", "entropy_lo", "entropy_hi"], "df")
    need_columns(real, ["ppl", "entropy"], "real")
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


def ode_sde_ladder(scores: pd.DataFrame, matched: pd.DataFrame, paper_ratio: float = 294 / 50) -> alt.HConcatChart:
    """The ODE/SDE comparison along the generator ladder: judge perplexity of each sampler (left,
    log) and the ODE/SDE perplexity ratio at equal per-text entropy (right, log; solid: 1, dashed:
    the paper's raw ratio), one column of points per generator, ordered as given (worst generator
    first), one colour per sampler (left) or K (right), 95% intervals as rules.

    ``scores``: columns ``generator``, ``K``, ``sampler`` (ODE, SDE), ``ppl``, ``ppl_lo``, ``ppl_hi``.
    ``matched``: columns ``generator``, ``K``, ``ratio``, ``ratio_lo``, ``ratio_hi``.
    """
    need_columns(scores, ["generator", "K", "sampler", "ppl", "ppl_lo", "ppl_hi"], "scores")
    need_columns(matched, ["generator", "K", "ratio", "ratio_lo", "ratio_hi"], "matched")
    order = list(dict.fromkeys(scores["generator"]))
    x = alt.X("generator:N", sort=order, title=None, axis=alt.Axis(labelAngle=-30, labelLimit=140))
    s = scores.assign(series=scores["sampler"] + ", K = " + scores["K"].astype(str))
    a = alt.Chart(s).encode(x=x, color=alt.Color("series:N", title="sampler"), xOffset="series:N")
    left = (a.mark_point(filled=True, size=50).encode(
                y=alt.Y("ppl:Q", scale=alt.Scale(type="log"), title="SmolLM2-135M judge perplexity (log)"),
                tooltip=["generator", "K", "sampler", "ppl", "ppl_lo", "ppl_hi"])
            + a.mark_rule(strokeWidth=2).encode(y="ppl_lo:Q", y2="ppl_hi:Q")
            ).properties(width=230, height=220, title="Judge perplexity by sampler")
    m = matched.assign(series="K = " + matched["K"].astype(str))
    b = alt.Chart(m).encode(x=x, color=alt.Color("series:N", title="at equal entropy"), xOffset="series:N")
    refs = alt.Chart(pd.DataFrame({"v": [1.0, paper_ratio], "what": ["no edge", "paper (raw)"]})).mark_rule(
        color="gray").encode(y="v:Q", strokeDash=alt.StrokeDash("what:N", title=None,
                                                                  scale=alt.Scale(range=[[1, 0], [4, 3]])))
    right = (refs + b.mark_point(filled=True, size=50).encode(
                 y=alt.Y("ratio:Q", scale=alt.Scale(type="log"), title="ODE / SDE perplexity (log)"),
                 tooltip=["generator", "K", "ratio", "ratio_lo", "ratio_hi"])
             + b.mark_rule(strokeWidth=2).encode(y="ratio_lo:Q", y2="ratio_hi:Q")
             ).properties(width=230, height=220, title="ODE over SDE at equal entropy")
    return alt.hconcat(left, right).resolve_scale(color="independent")


def ablation_panels(df: pd.DataFrame) -> alt.FacetChart:
    """Committed against ablated (expected-embedding feedback) per generator, one panel per score.

    ``df``: columns ``generator``, ``variant``, ``score``, ``value``, ``lo``, ``hi`` (long format).
    """
    need_columns(df, ["generator", "variant", "score", "value", "lo", "hi"], "df")
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
    need_columns(df, ["readout", "flip", "lo", "hi", "predicted"], "df")
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
    need_columns(df, ["M", "partition", "S", "lo", "hi"], "df")
    legend = alt.Legend(orient="bottom", columns=1)
    base = alt.Chart(df).encode(x=alt.X("M:Q", scale=alt.Scale(type="log", base=2), title="M modes"),
                                color=alt.Color("partition:N", title=None, legend=legend))
    return (base.mark_line(point=True).encode(y=alt.Y("S:Q", scale=alt.Scale(type="log"),
                                                      title="interface measure S (stiffness ∝ S)"),
                                              tooltip=["M", "partition", "S", "lo", "hi"])
            + base.mark_rule().encode(y="lo:Q", y2="hi:Q")
            ).properties(width=440, height=280, title="What a smooth map must cut: interface measure against M")
