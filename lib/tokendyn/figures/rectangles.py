"""Figures of the rectangle test: the distribution of delta, its dependence on distance, temperature
and size, Arnold-Press grids, the controls, and paired deltas of two models."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import pandas as pd
import torch

__all__ = ["delta_distribution", "delta_by_gap", "delta_vs_tau", "delta_vs_size", "arnold_press",
           "delta_controls", "paired_deltas"]


def _paper_band(paper_range: tuple[float, float]) -> alt.Chart:
    """The paper's range of delta as an orange band across the x axis."""
    return alt.Chart(pd.DataFrame({"lo": [paper_range[0]], "hi": [paper_range[1]]})).mark_rect(
        opacity=0.25, color="orange").encode(x="lo:Q", x2="hi:Q")


def delta_distribution(deltas: pd.DataFrame, paper_range: tuple[float, float]) -> alt.LayerChart:
    """Box plots (whiskers min-max) of delta per model and protocol over the paper's range.

    ``deltas`` has one row per rectangle: columns ``model``, ``protocol``, ``delta``.
    """
    box = alt.Chart(deltas).mark_boxplot(extent="min-max", size=14).encode(
        x=alt.X("delta:Q", title="rectangle delta (nats, tau = 1)"), y=alt.Y("model:N", title=None),
        yOffset="protocol:N", color="protocol:N")
    return alt.layer(_paper_band(paper_range), box).properties(height=110 * deltas["model"].nunique(),
        title=f"Distribution of delta per model and protocol; orange band: the paper's [{paper_range[0]:.2f}, {paper_range[1]:.2f}]")


def delta_by_gap(gap_df: pd.DataFrame) -> alt.Chart:
    """Mean delta against the distance |i - j| per model. ``gap_df``: columns ``model``, ``gap``, ``mean delta``."""
    return alt.Chart(gap_df).mark_line(point=True).encode(
        x=alt.X("gap:Q", title="|i - j|"), y=alt.Y("mean delta:Q", title="mean delta (model protocol)"), color="model:N"
    ).properties(title="Incompatibility against the distance between the two sites")


def delta_vs_tau(tau_df: pd.DataFrame) -> alt.Chart:
    """Mean delta against tau (log-log) per model, solid/dashed by how the rectangles were drawn.

    ``tau_df``: columns ``model``, ``tau``, ``rectangles``, ``mean delta``.
    """
    return alt.Chart(tau_df).mark_line(point=True).encode(
        x=alt.X("tau:Q", scale=alt.Scale(type="log")), y=alt.Y("mean delta:Q", scale=alt.Scale(type="log")),
        color="model:N", strokeDash="rectangles:N"
    ).properties(title="delta against tau (log-log); slope -1 is 1/tau")


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
