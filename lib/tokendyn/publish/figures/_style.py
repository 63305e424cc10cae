"""Colours and input checks shared by the figures."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

VIRIDIS = ["#440154", "#46327e", "#365c8d", "#277f8e", "#1fa187", "#4ac16d", "#a0da39", "#fde725"]


def tau_palette(k: int) -> list[str]:
    """``k`` viridis colours from dark to light, one per temperature of a grid (low tau dark)."""
    return [VIRIDIS[round(j * 7 / max(1, k - 1))] for j in range(k)]


def need_columns(df: pd.DataFrame, cols: Sequence[str], name: str) -> None:
    """Raise ``ValueError`` naming ``name``, the columns it lacks and those it needs."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{name} lacks columns {missing}; needs {list(cols)}")
