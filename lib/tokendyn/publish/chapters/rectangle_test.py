"""Chapter 2's glued words: the size ladder, the depth family and the summary's numbers, from the
chapter's tables and the recorded ladder (``scripts/record_size_ladder.py`` rows, as
:func:`tokendyn.publish.results.load_ladder` reads them)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ...core.stats import Estimate
from .. import verdicts
from . import default

__all__ = ["BACKBONES", "rule_texts", "family_texts", "ladder_texts", "summary_texts"]

BACKBONES = {"minilm": "all-MiniLM-L6-v2", "mpnet": "all-mpnet-base-v2"}
"""The frozen encoders the size ladder cuts, by the ``encoder`` field of its rows."""
SHORT = {"minilm": "MiniLM", "mpnet": "MPNet"}



def _m(params: float) -> str:
    return f"{params / 1e6:.0f}M"


def _m_range(params: Sequence[float]) -> str:
    lo, hi = _m(min(params)), _m(max(params))
    return lo if lo == hi else f"{lo}-{hi}"


def _list(values: Sequence[Any]) -> str:
    vs = [str(v) for v in values]
    return vs[0] if len(vs) == 1 else ", ".join(vs[:-1]) + " and " + vs[-1]


def rule_texts() -> dict[str, str]:
    """The thresholds the page states, from the rules' defaults: claim 1's factor around the paper's
    range (``c1_factor``), claim 3's floor (``c3_floor``) and the span one backbone must cover
    (``c3_span``)."""
    return {"c1_factor": f"{default(verdicts.claim_1, 'factor'):g}x",
            "c3_floor": f"{default(verdicts.claim_3, 'floor'):g}",
            "c3_span": f"{default(verdicts.claim_3, 'min_span'):g}x"}


def family_texts(sizes: Mapping[str, float], depths: Mapping[str, int], family: Sequence[str]) -> dict[str, str]:
    """The depth family in words: its depths (``fam_depths``) and its span in parameters
    (``fam_span``; ``sizes`` in millions)."""
    if not family:
        return dict.fromkeys(("fam_depths", "fam_span"), "not loaded")
    lo, hi = min(sizes[m] for m in family), max(sizes[m] for m in family)
    return {"fam_depths": _list([depths[m] for m in family]), "fam_span": f"{lo:.1f}M to {hi:.1f}M parameters, {hi / lo:.1f}x"}


def ladder_texts(rungs: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> dict[str, str]:
    """The size ladder in words: its range (``ladder_range``), each backbone's cuts with their sizes
    (``ladder_cuts``), the pooled span (``ladder_span``), each backbone's own span
    (``backbone_spans``) and the recorded rectangles a rung (``ladder_rect``)."""
    by = {e: sorted((r for r in rungs if r["encoder"] == e), key=lambda r: r["params"]) for e in BACKBONES}
    params = [r["params"] for r in rungs]
    return {"ladder_range": f"{_m(min(params))} to {_m(max(params))}",
            "ladder_cuts": " and ".join(f"{BACKBONES[e]} cut to {_list([r['layers'] for r in rs])} layers "
                                        f"({rs[0]['params'] / 1e6:.1f}M to {rs[-1]['params'] / 1e6:.1f}M parameters)"
                                        for e, rs in by.items() if rs),
            "ladder_span": f"{max(params) / min(params):.1f}x",
            "backbone_spans": " and ".join(f"{rs[-1]['params'] / rs[0]['params']:.1f}x ({SHORT[e]})"
                                           for e, rs in by.items() if rs),
            "ladder_rect": f"{meta['provenance']['params']['n_rect']}"}


def summary_texts(*, judged: Mapping[str, Estimate], paper_range: tuple[float, float], rungs: Sequence[Mapping[str, Any]],
                  raw: Mapping[str, Estimate], base: str, top: str, slopes: Mapping[str, Estimate],
                  paired: Mapping[str, Estimate], sizes: Mapping[str, float], gap_df: pd.DataFrame,
                  verdicts_: Mapping[str, str]) -> dict[str, str]:
    """The summary's numbers: the models claim 1 judged that lie inside the paper's range
    (``inside_range``, with sizes: ``inside_sizes``) and the rungs above it (``above_sizes``), the
    base-size model's and the top rung's delta (``base_delta``, ``top_delta``), the MiniLM cuts'
    range (``minilm_range``), the slopes (``slope_within``, ``slope_mpnet``, ``slope_pooled``,
    ``slope_norm_within``), the paired comparisons (``copy_vs_top``, ``top5_vs_default``,
    ``pppl_vs_default``), the live models' sizes (``live_sizes``, millions), how far delta falls from
    neighbouring sites to the longest gap (``gap_fall``) and the verdict words (``c1_verdict``,
    ``c3_verdict``)."""
    lo, hi = paper_range
    params = {r["model"]: r["params"] for r in rungs}
    inside = [m for m, e in judged.items() if verdicts.inside(e, lo, hi)]
    above = [r for r in rungs if raw[r["model"]].value > hi]
    minilm = [raw[r["model"]].value for r in rungs if r["encoder"] == "minilm"]
    by_gap = gap_df.pivot_table(index="model", columns="gap", values="mean delta")
    fall = by_gap[by_gap.columns.min()] / by_gap[by_gap.columns.max()]
    plain = {m.removesuffix(" (recorded)"): m for m in inside}
    return {"inside_range": ", ".join(plain) or "none",
            "inside_sizes": _list([f"{m} ({_m(params[m])})" for m in plain if m in params]) or "none of the rungs",
            "above_sizes": _m_range([r["params"] for r in above]) if above else "no rung",
            "base_delta": raw[base].fmt(".2f"), "top_delta": raw[top].fmt(".2f"),
            "minilm_range": f"{min(minilm):.2f}-{max(minilm):.2f}" if minilm else "no MiniLM rung",
            "top_rung": f"{raw[top].value:.2f} at {_m(params[top])}",
            **{k: e.fmt("+.2f") for k, e in slopes.items()}, **{k: e.fmt(".2f" if k == "pppl_vs_default" else "+.2f")
                                                                for k, e in paired.items()},
            "live_sizes": f"{min(sizes.values()):.0f}-{max(sizes.values()):.0f}M",
            "gap_fall": f"{math.floor(fall.min())}- to {math.ceil(fall.max())}-fold",
            "gap_max": f"{int(by_gap.columns.max())}",
            **verdicts_}
