"""Figures of semantic drift: chains' drift to their own start against the forgotten level."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import pandas as pd

from ...mcmc.diagnostics import DriftRun

__all__ = ["drift_panels"]


def drift_panels(runs: Mapping[tuple[str, int, float], DriftRun]) -> alt.VConcatChart:
    """Mean drift to the own start (dashed) and to the other starts (solid), one row of panels per
    model, one panel per length n, one colour per tau.

    ``runs`` maps (model, n, tau) -> the :class:`~tokendyn.mcmc.diagnostics.DriftRun` of that group's
    chains; the curves are means over its chains.
    """
    drift_df = pd.concat([pd.DataFrame({"model": name, "n": n, "tau": tau, "t": r.t.numpy(),
                                        "own start": r.drift.mean(1).numpy(),
                                        "other starts (forgotten level)": r.forgotten.mean(1).numpy()})
                          for (name, n, tau), r in runs.items()]).melt(
        id_vars=["model", "n", "tau", "t"], var_name="drift to", value_name="mean drift")
    models = list(dict.fromkeys(name for name, _, _ in runs))
    return alt.vconcat(*[
        alt.Chart(drift_df[drift_df.model == name]).mark_line().encode(
            x=alt.X("t:Q", title="steps t"), y=alt.Y("mean drift:Q", title="1 - cos"),
            color=alt.Color("tau:O", scale=alt.Scale(scheme="viridis")),
            strokeDash=alt.StrokeDash("drift to:N")).properties(width=150, height=170)
        .facet(column=alt.Column("n:O")).resolve_scale(x="independent")
        .properties(title=f"{name}: semantic drift to the own start (dashed) and to the other starts (solid)")
        for name in models])
