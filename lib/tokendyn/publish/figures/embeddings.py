"""Figures of sentence embeddings: passages on their principal components, similarity between topics."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd
import torch

__all__ = ["topic_map", "topic_similarity"]


def topic_map(scores: torch.Tensor, labels: Sequence[str], texts: Sequence[str]) -> alt.Chart:
    """Passages on their first two principal components, coloured by topic; the legend picks a topic.

    ``scores`` [N, 2] principal-component scores, ``labels`` N topic names, ``texts`` N passages
    (their first 90 characters show on hover).
    """
    pts = pd.DataFrame({"PC1": scores[:, 0], "PC2": scores[:, 1], "topic": list(labels),
                        "passage": [t[:90] + "…" for t in texts]})
    pick = alt.selection_point(fields=["topic"], bind="legend")
    return alt.Chart(pts, title="Passages on the first two principal components (scroll to zoom, click the legend)").mark_circle(size=70).encode(
        x=alt.X("PC1:Q"), y=alt.Y("PC2:Q"),
        color=alt.Color("topic:N"),
        opacity=alt.condition(pick, alt.value(0.9), alt.value(0.1)),
        tooltip=["topic", "passage"],
    ).add_params(pick).interactive()


def topic_similarity(cosine: torch.Tensor, labels: Sequence[str], topics: Sequence[str]) -> alt.Chart:
    """Heatmap of the mean cosine similarity between the passages of each pair of topics.

    ``cosine`` [N, N] cosine similarities of N passages, ``labels`` their N topics, ``topics`` the
    topics to show, in order.
    """
    rows = {t: [i for i, lab in enumerate(labels) if lab == t] for t in topics}
    sim = pd.DataFrame([{"topic A": a, "topic B": b, "mean cosine": cosine[rows[a]][:, rows[b]].mean().item()}
                        for a in topics for b in topics])
    return alt.Chart(sim, title="Mean cosine similarity between topics").mark_rect().encode(
        x="topic A:N", y="topic B:N", color=alt.Color("mean cosine:Q", scale=alt.Scale(scheme="viridis")),
        tooltip=["topic A", "topic B", alt.Tooltip("mean cosine:Q", format=".3f")],
    )
