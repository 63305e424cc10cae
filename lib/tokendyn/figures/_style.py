"""Colours shared by the figures."""

from __future__ import annotations

VIRIDIS = ["#440154", "#46327e", "#365c8d", "#277f8e", "#1fa187", "#4ac16d", "#a0da39", "#fde725"]


def tau_palette(k: int) -> list[str]:
    """``k`` viridis colours from dark to light, one per temperature of a grid (low tau dark)."""
    return [VIRIDIS[round(j * 7 / max(1, k - 1))] for j in range(k)]
