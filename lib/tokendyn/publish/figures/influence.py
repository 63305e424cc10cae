"""Figures of Dobrushin influence: the sampled alpha_hat(tau) curves and one influence matrix c_ij."""

from __future__ import annotations

import altair as alt
import pandas as pd
import torch

__all__ = ["influence_curves", "influence_matrix"]


def influence_curves(alpha: pd.DataFrame) -> alt.LayerChart:
    """alpha_hat(tau) per model on log-log axes, with a dashed rule at alpha = 1.

    ``alpha`` has one row per (model, tau): columns ``model``, ``tau``, ``alpha_hat``.
    """
    one = alt.Chart(pd.DataFrame({"y": [1.0]})).mark_rule(strokeDash=[4, 3]).encode(y="y:Q")
    return alt.layer(alt.Chart(alpha).mark_line(point=True).encode(
        x=alt.X("tau:Q", scale=alt.Scale(type="log"), title="temperature tau"),
        y=alt.Y("alpha_hat:Q", scale=alt.Scale(type="log"), title="alpha_hat(tau) (lower bound on alpha)"),
        color="model:N"), one).properties(title="Sampled Dobrushin influence; dashed: alpha = 1")


def influence_matrix(c: torch.Tensor, *, model: str, tau: float) -> alt.Chart:
    """Heatmap of the sampled influence ``c`` [n, n] of site j (columns) on site i (rows)."""
    n = c.shape[0]
    heat = pd.DataFrame([{"i (updated site)": i, "j (changed site)": j, "c_ij": float(c[i, j])}
                         for i in range(n) for j in range(n)])
    return alt.Chart(heat).mark_rect().encode(
        x="j (changed site):O", y="i (updated site):O",
        color=alt.Color("c_ij:Q", scale=alt.Scale(scheme="viridis")),
        tooltip=["i (updated site)", "j (changed site)", "c_ij"]
    ).properties(width=320, height=320, title=f"{model}: sampled c_ij at tau = {tau:g}")
