"""Figures of the tube law: tube mass, roll-in flip rates and their collapse, the tube-law prediction,
structured against isotropic residuals, the cliff of a sharp readout, and generation from noise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from ._style import need_columns

__all__ = ["tube_mass", "rollin_flips", "tube_prediction", "residual_direction", "terminal_flips", "terminal_intervals",
           "image_rollin", "cliff", "generation_perplexity", "residual_aim", "generator_ladder", "mechanism_placement",
           "mechanism_separation"]

S_START = alt.X("s_start:Q", scale=alt.Scale(type="log"), title="s(t0), the roll-in's noise scale")


def tube_mass(r: Sequence[float] | np.ndarray, F: Sequence[float] | np.ndarray | Mapping[str, Sequence[float]]
              ) -> alt.Chart:
    """The tube mass ``F(r)`` [R] at distances ``r`` [R] (log x); ``F`` a mapping model -> [R] draws one
    line per model."""
    curves = F if isinstance(F, Mapping) else {"text readout": F}
    df = pd.concat([pd.DataFrame({"r": r, "F(r)": v, "model": k}) for k, v in curves.items()])
    return alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("r:Q", scale=alt.Scale(type="log"), title="distance r to the nearest readout boundary"),
        y=alt.Y("F(r):Q", title="F(r): share of clean latents within r"), color=alt.Color("model:N", title=None)
    ).properties(title="Tube mass of the text readouts")


def rollin_flips(roll: pd.DataFrame) -> alt.HConcatChart:
    """Terminal flip rate per K against the roll-in's s(t0) (left) and the terminal step's s (right).

    ``roll`` has one row per (K, t0): columns ``K`` (a string), ``s_start``, ``s``, ``flip rate``.
    """
    base = alt.Chart(roll).mark_line(point=True).encode(
        y=alt.Y("flip rate:Q", title="terminal token flip rate"), color=alt.Color("K:N", title="K steps"))
    return (base.encode(x=S_START).properties(title="against the roll-in noise scale s(t0)", width=300)
            | base.encode(x=alt.X("s:Q", scale=alt.Scale(type="log"), title="s(t_K-1) of the terminal step"))
            .properties(title="against the terminal step's noise scale", width=300))


def tube_prediction(roll: pd.DataFrame, predicted: pd.DataFrame) -> alt.LayerChart:
    """Measured flip rates (points, per K) with the tube-law prediction (dashed).

    ``roll``: columns ``K``, ``s_start``, ``flip rate``; ``predicted``: columns ``s_start`` and
    ``flip rate`` along a fine grid of s.
    """
    return (alt.Chart(roll).mark_point(filled=True, size=50).encode(
        x=S_START, y=alt.Y("flip rate:Q", title="terminal token flip rate"), color=alt.Color("K:N", title="measured, K"))
        + alt.Chart(predicted).mark_line(color="black", strokeDash=[5, 3]).encode(x="s_start:Q", y="flip rate:Q")
    ).properties(title="Measured flips (points) and the tube-law prediction F(kappa s) (dashed)")


def residual_direction(rollin: pd.DataFrame, k: int) -> alt.Chart:
    """Flip rate along one roll-in for the generator's residual and a norm-matched isotropic one.

    ``rollin`` (the rows of one K, ``k``): columns ``s_start``, ``flip rate`` and ``isotropic flip rate``.
    """
    return alt.Chart(rollin.melt(id_vars=["s_start"], value_vars=["flip rate", "isotropic flip rate"],
                                 var_name="residual", value_name="rate")).mark_line(point=True).encode(
        x=S_START, y=alt.Y("rate:Q", title="token flip rate"), color=alt.Color("residual:N", title=f"K = {k}, residual")
    ).properties(title="Generator residual against a norm-matched isotropic residual")


def terminal_flips(term: pd.DataFrame) -> alt.FacetChart:
    """Bars of the terminal step's flip rate, structured against isotropic residual, one panel per K.

    ``term`` has one row per K: columns ``K``, ``structured``, ``isotropic``.
    """
    long = term.melt(id_vars=["K"], value_vars=["structured", "isotropic"], var_name="residual",
                     value_name="flip rate")
    return alt.Chart(long).mark_bar().encode(
        x=alt.X("residual:N", title=None), y=alt.Y("flip rate:Q", title="token flip rate"),
        color="residual:N", column=alt.Column("K:O", title="K steps")
    ).properties(width=110, title="Terminal step: structured vs norm-matched isotropic residual")


def terminal_intervals(term: pd.DataFrame) -> alt.FacetChart:
    """Terminal flip rates with 95% intervals against K (log y), structured and isotropic, one
    panel per model.

    ``term``: columns ``model``, ``K``, ``residual``, ``rate``, ``lo``, ``hi`` (one row per model, K
    and residual). Rates of 0 (and lower bounds of 0) are drawn at the axis floor, 1e-4, since a
    log axis has no 0; the tooltip gives the exact value.
    """
    floor = 1e-4
    plot = term.assign(**{f"{k}_plot": term[k].astype(float).clip(lower=floor) for k in ("rate", "lo", "hi")})
    base = alt.Chart(plot).encode(x=alt.X("K:O", title="K steps (last step from t = 1 − 1/K)",
                                          axis=alt.Axis(labelAngle=0)),
                                  color=alt.Color("residual:N", title="residual"))
    y = alt.Y("rate_plot:Q", title="token flip rate (log; 0 drawn at 1e-4)",
              scale=alt.Scale(type="log", domain=[floor, 1]))
    return (base.mark_line(point=True, strokeWidth=1).encode(
                y=y, tooltip=["model", "K", "residual", "rate", "lo", "hi"])
            + base.mark_rule(strokeWidth=2).encode(y="lo_plot:Q", y2="hi_plot:Q")
            ).properties(width=250, height=220).facet(column=alt.Column("model:N", title=None), spacing=30).properties(
        title="Terminal step from noise: the generator's residual (structured) against a norm-matched isotropic one")


def image_rollin(rows: pd.DataFrame) -> alt.Chart:
    """Pixel RMS error of the decode against s(t0), per K. ``rows``: ``K``, ``s_start``, ``pixel RMS error``."""
    return alt.Chart(rows).mark_line(point=True).encode(
        x=S_START, y=alt.Y("pixel RMS error:Q", title="pixel RMS error vs clean decode"), color=alt.Color("K:N", title="K steps")
    ).properties(title="Image model: error against s, smooth and small")


def cliff(responses: pd.DataFrame) -> alt.FacetChart:
    """Response of a decoder to a push of length lambda along a direction, one panel per model.

    ``responses``: columns ``lambda``, ``model``, ``direction``, ``response`` (each panel its own y).
    """
    return alt.Chart(responses).mark_line(point=True).encode(
        x=alt.X("lambda:Q", scale=alt.Scale(type="log"), title="perturbation length lambda (latent units)"),
        y=alt.Y("response:Q", title=None), color="direction:N"
    ).properties(width=280, height=220).facet(column=alt.Column("model:N", title=None)).resolve_scale(y="independent")


def generation_perplexity(gen: pd.DataFrame, real_ppl: float) -> alt.LayerChart:
    """Bigram perplexity (log y) of text generated from noise against K, one line per sampler, with
    the held-out real text's perplexity as a dashed rule.

    ``gen``: columns ``K``, ``sampler``, ``bigram PPL``; ``real_ppl`` the held-out real text's.
    """
    # points and lines, not bars: a bar on a log axis has no baseline to stand on
    y = alt.Y("bigram PPL:Q", scale=alt.Scale(type="log"), title="bigram perplexity (log)")
    lines = alt.Chart(gen).mark_line(point=True).encode(
        x=alt.X("K:O", title="K steps from noise", axis=alt.Axis(labelAngle=0)), y=y,
        color=alt.Color("sampler:N", title="sampler"), tooltip=["K", "sampler", "bigram PPL"])
    real = alt.Chart(pd.DataFrame({"bigram PPL": [real_ppl]})).mark_rule(color="gray", strokeDash=[4, 3]).encode(y=y)
    return (lines + real).properties(width=420, height=240, title=(
        f"Generated text under a bigram model (dashed: held-out real text, {real_ppl:.0f})"))


def residual_aim(align: pd.DataFrame, ratios: pd.DataFrame, band: tuple[float, float] = (10.0, 33.0)
                      ) -> alt.HConcatChart:
    """Where each generator's terminal residual points, and what that aim is worth in flips.

    Left: mean ``|cos(r, n)|`` (residual against the nearest-boundary normal) per K and generator,
    with its interval, and a dashed tick per generator at the ``|cos|`` of an unaimed direction in
    its dimension. Right (log y): flip ratios over a same-norm isotropic residual per K, one line per
    ``kind`` (the generator's own residual, the same norms along the normal, ...), with the paper's
    band shaded. A ratio of 0 (no flip under either residual) is not drawn.

    ``align``: columns ``generator``, ``K``, ``mean_abs_cos``, ``lo``, ``hi``, ``unaimed``.
    ``ratios``: columns ``generator``, ``K``, ``kind``, ``ratio``, ``lo``, ``hi``.
    """
    need_columns(align, ["generator", "K", "mean_abs_cos", "lo", "hi", "unaimed"], "align")
    need_columns(ratios, ["generator", "K", "kind", "ratio", "lo", "hi"], "ratios")
    x = alt.X("K:O", title="K steps", axis=alt.Axis(labelAngle=0))
    gen = alt.Color("generator:N", title="generator", legend=alt.Legend(columns=1))
    a = alt.Chart(align).encode(x=x, color=gen)
    left = (a.mark_line(point=True).encode(y=alt.Y("mean_abs_cos:Q", title="mean |cos(r, n)|",
                                                    scale=alt.Scale(zero=True)),
                                           tooltip=["generator", "K", "mean_abs_cos", "lo", "hi", "unaimed"])
            + a.mark_rule(strokeWidth=2).encode(y="lo:Q", y2="hi:Q")
            + a.mark_tick(strokeDash=[3, 2], thickness=1.5, size=18).encode(y="unaimed:Q")
            ).properties(width=230, height=220, title="Aim (ticks: no aim)")
    floor = 0.5
    ratios = ratios[ratios["ratio"].astype(float) > 0]  # no flips either way: no ratio to draw
    r = ratios.assign(**{f"{k}_plot": ratios[k].astype(float).clip(lower=floor) for k in ("ratio", "lo", "hi")},
                      series=ratios["generator"] + ": " + ratios["kind"])
    y = alt.Y("ratio_plot:Q", title="flips over a same-norm isotropic residual (log)", scale=alt.Scale(type="log"))
    b = alt.Chart(r).encode(x=x, color=alt.Color("series:N", title="residual", legend=alt.Legend(columns=1, labelLimit=360)))
    shade = alt.Chart(pd.DataFrame({"lo": [band[0]], "hi": [band[1]]})).mark_rect(opacity=0.15, color="orange").encode(
        y="lo:Q", y2="hi:Q")
    right = (shade + b.mark_line(point=True).encode(y=y, tooltip=["generator", "kind", "K", "ratio", "lo", "hi"])
             + b.mark_rule(strokeWidth=2).encode(y="lo_plot:Q", y2="hi_plot:Q")
             ).properties(width=230, height=220, title=f"Worth (orange: the paper's {band[0]:g}-{band[1]:g}x)")
    return alt.hconcat(left, right).resolve_scale(color="independent")


def generator_ladder(ladder: pd.DataFrame, k: int, flips_band: tuple[float, float] = (0.12, 0.41),
                     ratio_band: tuple[float, float] = (10.0, 33.0)) -> alt.HConcatChart:
    """Does a better generator aim better? Three panels against the held-out flow loss (lower is a
    better generator), one point per generator at ``K = k`` with its 95% interval: the residual's
    mean ``|cos(r, n)|`` (dashed: an unaimed direction), the terminal flip rate and the structured /
    isotropic ratio (log), each with the paper's band shaded. Ladder rungs are joined in training order.

    ``ladder``: columns ``generator``, ``train_steps``, ``K``, ``flow_loss``, ``mean_abs_cos``,
    ``abs_lo``, ``abs_hi``, ``unaimed_abs_cos``, ``flips``, ``flips_lo``, ``flips_hi``, ``ratio``,
    ``ratio_lo``, ``ratio_hi`` (the rows of ``scripts/record_flow_ladder.py``).
    """
    need_columns(ladder, ["generator", "train_steps", "K", "flow_loss", "mean_abs_cos", "abs_lo", "abs_hi", "unaimed_abs_cos",
                   "flips", "flips_lo", "flips_hi", "ratio", "ratio_lo", "ratio_hi"], "ladder")
    d = ladder[ladder["K"] == k]
    if d.empty:
        raise ValueError(f"k={k} is not a K of the ladder: {sorted(ladder['K'].unique().tolist())}")
    x = alt.X("flow_loss:Q", title="held-out flow loss (lower: better)", scale=alt.Scale(zero=False, reverse=True))
    color = alt.Color("generator:N", title="generator", legend=alt.Legend(orient="bottom", columns=2, labelLimit=320))
    tip = ["generator", "train_steps", "flow_loss", "mean_abs_cos", "flips", "ratio"]
    rungs = d[d["generator"].str.startswith("ladder")].sort_values("train_steps")

    def panel(y: str, lo: str, hi: str, title: str, band: tuple[float, float] | None, log: bool, rule: str | None):
        scale = alt.Scale(type="log") if log else alt.Scale(zero=True)
        base = alt.Chart(d).encode(x=x, color=color)
        layers = []
        if band is not None:
            layers.append(alt.Chart(pd.DataFrame({"lo": [band[0]], "hi": [band[1]]})).mark_rect(
                opacity=0.15, color="orange").encode(y=alt.Y("lo:Q", scale=scale), y2="hi:Q"))
        if rule is not None:
            layers.append(alt.Chart(pd.DataFrame({"v": [float(d[rule].iloc[0])]})).mark_rule(
                strokeDash=[4, 3], color="gray").encode(y="v:Q"))
        layers += [alt.Chart(rungs).mark_line(color="gray", strokeWidth=1).encode(x=x, y=alt.Y(f"{y}:Q", scale=scale),
                                                                                  order="train_steps:Q"),
                   base.mark_rule(strokeWidth=2).encode(y=alt.Y(f"{lo}:Q", scale=scale), y2=f"{hi}:Q"),
                   base.mark_point(filled=True, size=60).encode(y=alt.Y(f"{y}:Q", title=title, scale=scale), tooltip=tip)]
        return alt.layer(*layers).properties(width=165, height=200)

    return alt.hconcat(
        panel("mean_abs_cos", "abs_lo", "abs_hi", "mean |cos(r, n)| (dashed: no aim)", None, False, "unaimed_abs_cos"),
        panel("flips", "flips_lo", "flips_hi", f"terminal flips at K = {k}", flips_band, False, None),
        panel("ratio", "ratio_lo", "ratio_hi", "structured / isotropic (log)", ratio_band, True, None),
    ).properties(title=f"The generator ladder at K = {k}: aim, flips and their ratio against the flow loss "
                       "(orange: the paper's range)")


def mechanism_placement(cells: pd.DataFrame, placed: pd.DataFrame, *, ratio_band: tuple[float, float] = (10.0, 33.0),
                        flips_band: tuple[float, float] = (0.12, 0.41)) -> alt.LayerChart:
    """Where the paper's numbers lie among exact generators: every map cell with an isotropic flip
    (``cells``: columns ``K``, ``flips``, ``isotropic``, ``ratio``, ``separation``, ``d``, ``M``,
    ``sigma``, ``spacing``; one point each, coloured by log10 of its separation; a cell with no
    isotropic flip has only a lower bound on its ratio and is left out) on log axes of terminal flips and structured / isotropic
    ratio, the paper's box (``flips_band`` x ``ratio_band``) shaded, and our generators on top
    (``placed``: ``generator``, ``K``, ``flips``, ``ratio``; black marks, shaped by generator)."""
    need_columns(cells, ["K", "flips", "isotropic", "ratio", "separation", "d", "M", "sigma", "spacing"], "cells")
    need_columns(placed, ["generator", "K", "flips", "ratio"], "placed")
    # a cell with no isotropic flip has only a lower bound on its ratio: left out
    c = cells[(cells["flips"] > 0) & (cells["isotropic"] > 0)].assign(log10_separation=lambda f: np.log10(f["separation"]))
    x = alt.X("flips:Q", title="terminal flip rate (log)", scale=alt.Scale(type="log", domain=[1e-3, 1]),
              axis=alt.Axis(values=[0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1], format="~g"))
    y = alt.Y("ratio:Q", title="structured / isotropic flips (log)", scale=alt.Scale(type="log", domain=[0.3, 1000]),
              axis=alt.Axis(values=[0.3, 1, 3, 10, 30, 100, 300, 1000], format="~g"))
    box = pd.DataFrame({"x": [flips_band[0]], "x2": [flips_band[1]], "y": [ratio_band[0]], "y2": [ratio_band[1]]})
    return alt.layer(
        alt.Chart(box).mark_rect(color="orange", opacity=0.2).encode(x="x:Q", x2="x2:Q", y="y:Q", y2="y2:Q"),
        alt.Chart(c).mark_circle(size=22, opacity=0.55).encode(
            x=x, y=y, color=alt.Color("log10_separation:Q", title="log10 spacing / sigma", scale=alt.Scale(scheme="viridis")),
            tooltip=["d", "M", "sigma", "spacing", "K", "flips", "ratio", "separation"]),
        alt.Chart(placed).mark_point(size=90, filled=True, color="black").encode(
            x=x, y=y, shape=alt.Shape("generator:N", title=None, legend=alt.Legend(orient="bottom", columns=1, labelLimit=400)),
            tooltip=["generator", "K", "flips", "ratio"]),
    ).properties(width=420, height=320, title="Exact generators (dots), ours (black) and the paper's box")


def mechanism_separation(cells: pd.DataFrame, ours: Mapping[str, float], *,
                         flips_band: tuple[float, float] = (0.12, 0.41),
                         ratio_band: tuple[float, float] = (10.0, 33.0)) -> alt.LayerChart:
    """What sets the ratio: the map's cells whose flip rate lies in ``flips_band``, their
    structured / isotropic ratio (log) against their separation ``spacing / sigma`` (log), coloured
    by ``d``, the paper's ratio band shaded, and a vertical rule at each latent space of ``ours``
    (name -> its measured separation, :func:`tokendyn.latent.mechanism.latent_separation`)."""
    need_columns(cells, ["K", "flips", "ratio", "separation", "d"], "cells")
    c = cells[(cells["flips"] >= flips_band[0]) & (cells["flips"] <= flips_band[1]) & (cells["ratio"] > 0)]
    x = alt.X("separation:Q", title="separation: spacing / sigma (log)", scale=alt.Scale(type="log"),
              axis=alt.Axis(values=[0.3, 1, 3, 10, 30, 100, 300, 1000], format="~g"))
    band = pd.DataFrame({"y": [ratio_band[0]], "y2": [ratio_band[1]]})
    rules = pd.DataFrame({"latents": list(ours), "separation": list(ours.values())})
    return alt.layer(
        alt.Chart(band).mark_rect(color="orange", opacity=0.2).encode(y="y:Q", y2="y2:Q"),
        alt.Chart(c).mark_point(size=40, filled=True, opacity=0.7).encode(
            x=x, y=alt.Y("ratio:Q", title="structured / isotropic flips (log)", scale=alt.Scale(type="log")),
            color=alt.Color("d:O", title="d"), shape=alt.Shape("K:O", title="K"),
            tooltip=["d", "M", "sigma", "spacing", "K", "flips", "ratio"]),
        alt.Chart(rules).mark_rule(strokeDash=[4, 3], color="black").encode(x="separation:Q", tooltip=["latents", "separation"]),
        alt.Chart(rules).mark_text(angle=270, align="left", dx=4, dy=-4, fontSize=10).encode(
            x="separation:Q", y=alt.value(8), text="latents:N"),
    ).properties(width=420, height=280, title="Cells with the paper's flip rates: ratio against separation")
