"""Chapter 2's page assembly, for its two pages: 2.1 the rectangle test (``02_rectangle_test``: the
controls, the live models, delta against distance, temperature and depth; claims 1 and 2) and 2.2
size and the K x K grid (``02_rectangle_test_size``: the size ladder and the Arnold-Press grids;
claim 3). The glued words on the size ladder, the depth family and each page's summary, the
ladder's printed reading, table and figure frame, each page's results metrics and claim rows, from
the chapter's tables and the recorded ladder (``scripts/record_size_ladder.py`` rows, as
:func:`tokendyn.publish.results.load_ladder` reads them and :func:`tokendyn.analysis.size.read_ladder`
reads them into a :class:`~tokendyn.analysis.size.LadderReading`).

``boot`` / ``norm_boot`` are the chapter's raw and normalized delta per ``(model, protocol)`` with
their bootstrap intervals (:func:`tokendyn.core.stats.group_summary`); ``summary`` /
``norm_summary`` the matching distribution tables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from ...analysis.rectangle import NORMALIZED_INDEPENDENT
from ...analysis.size import LadderReading, span
from ...core.stats import Estimate
from .. import claims, verdicts
from ..book import below
from . import default, join_words

__all__ = ["BACKBONES", "rule_texts", "size_rule_texts", "family_texts", "ladder_texts", "summary_texts",
           "size_summary_texts", "ladder_lines", "ladder_table", "ladder_frame", "claim1_points", "control_metrics",
           "live_metrics", "arnold_press_metrics", "ladder_metrics", "findings", "size_findings", "summary_words",
           "size_summary_words"]

BACKBONES = {"minilm": "all-MiniLM-L6-v2", "mpnet": "all-mpnet-base-v2"}
"""The frozen encoders the size ladder cuts, by the ``encoder`` field of its rows."""
SHORT = {"minilm": "MiniLM", "mpnet": "MPNet"}



def _m(params: float) -> str:
    return f"{params / 1e6:.0f}M"


def _m_range(params: Sequence[float]) -> str:
    lo, hi = _m(min(params)), _m(max(params))
    return lo if lo == hi else f"{lo}-{hi}"


def rule_texts() -> dict[str, str]:
    """The threshold page 2.1 states, from the rule's default: claim 1's factor around the paper's
    range (``c1_factor``)."""
    return {"c1_factor": f"{default(verdicts.claim_1, 'factor'):g}x"}


def size_rule_texts() -> dict[str, str]:
    """The thresholds page 2.2 states, from the rule's defaults: claim 3's floor (``c3_floor``) and the
    span one backbone must cover (``c3_span``)."""
    return {"c3_floor": f"{default(verdicts.claim_3, 'floor'):g}",
            "c3_span": f"{default(verdicts.claim_3, 'min_span'):g}x"}


def family_texts(sizes: Mapping[str, float], depths: Mapping[str, int], family: Sequence[str]) -> dict[str, str]:
    """The depth family in words: its depths (``fam_depths``) and its span in parameters
    (``fam_span``; ``sizes`` in millions)."""
    if not family:
        return dict.fromkeys(("fam_depths", "fam_span"), "not loaded")
    lo, hi = min(sizes[m] for m in family), max(sizes[m] for m in family)
    return {"fam_depths": join_words([depths[m] for m in family]), "fam_span": f"{lo:.1f}M to {hi:.1f}M parameters, {hi / lo:.1f}x"}


def ladder_texts(rungs: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> dict[str, str]:
    """The size ladder in words: its range (``ladder_range``), each backbone's cuts with their sizes
    (``ladder_cuts``), the pooled span (``ladder_span``), each backbone's own span
    (``backbone_spans``) and the recorded rectangles a rung (``ladder_rect``)."""
    by = {e: sorted((r for r in rungs if r["encoder"] == e), key=lambda r: r["params"]) for e in BACKBONES}
    params = [r["params"] for r in rungs]
    return {"ladder_range": f"{_m(min(params))} to {_m(max(params))}",
            "ladder_cuts": " and ".join(f"{BACKBONES[e]} cut to {join_words([r['layers'] for r in rs])} layers "
                                        f"({rs[0]['params'] / 1e6:.1f}M to {rs[-1]['params'] / 1e6:.1f}M parameters)"
                                        for e, rs in by.items() if rs),
            "ladder_span": f"{max(params) / min(params):.1f}x",
            "backbone_spans": " and ".join(f"{rs[-1]['params'] / rs[0]['params']:.1f}x ({SHORT[e]})"
                                           for e, rs in by.items() if rs),
            "ladder_rect": f"{meta['provenance']['params']['n_rect']}"}


def summary_texts(*, judged: Mapping[str, Estimate], paper_range: tuple[float, float], raw: Mapping[str, Estimate],
                  base: str, top: str, paired: Mapping[str, Estimate], gap_df: pd.DataFrame,
                  verdicts_: Mapping[str, str]) -> dict[str, str]:
    """Page 2.1's summary numbers: the models claim 1 judged that lie inside the paper's range
    (``inside_range``), the base-size model's and the top rung's delta (``base_delta``,
    ``top_delta``; ``raw``: the ladder's raw delta per model), the paired comparisons
    (``copy_vs_top``, ``top5_vs_default``, ``pppl_vs_default``), how far delta falls from
    neighbouring sites to the longest gap (``gap_fall``, ``gap_max``; ``gap_df``: ``model, gap, mean
    delta``) and the verdict words (``c1_verdict``)."""
    lo, hi = paper_range
    inside = [m for m, e in judged.items() if verdicts.inside(e, lo, hi)]
    by_gap = gap_df.pivot_table(index="model", columns="gap", values="mean delta")
    fall = by_gap[by_gap.columns.min()] / by_gap[by_gap.columns.max()]
    plain = {m.removesuffix(" (recorded)"): m for m in inside}
    return {"inside_range": ", ".join(plain) or "none",
            "base_delta": raw[base].fmt(".2f"), "top_delta": raw[top].fmt(".2f"),
            **{k: e.fmt(".2f" if k == "pppl_vs_default" else "+.2f") for k, e in paired.items()},
            "gap_fall": f"{math.floor(fall.min())}- to {math.ceil(fall.max())}-fold",
            "gap_max": f"{int(by_gap.columns.max())}",
            **verdicts_}


def size_summary_texts(*, judged: Mapping[str, Estimate], paper_range: tuple[float, float],
                       rungs: Sequence[Mapping[str, Any]], raw: Mapping[str, Estimate], top: str,
                       slopes: Mapping[str, Estimate], sizes: Mapping[str, float],
                       verdicts_: Mapping[str, str]) -> dict[str, str]:
    """Page 2.2's summary numbers: the rungs claim 1 judged (``judged``) that lie inside the paper's
    range, with sizes (``inside_sizes``), the rungs above it (``above_sizes``), the MiniLM cuts'
    range (``minilm_range``), the top rung (``top_rung``), the slopes (``slope_within``,
    ``slope_mpnet``, ``slope_pooled``, ``slope_norm_within``), the live models' sizes (``live_sizes``,
    millions) and the verdict words (``c3_verdict``)."""
    lo, hi = paper_range
    params = {r["model"]: r["params"] for r in rungs}
    inside = [m.removesuffix(" (recorded)") for m, e in judged.items() if verdicts.inside(e, lo, hi)]
    above = [r for r in rungs if raw[r["model"]].value > hi]
    minilm = [raw[r["model"]].value for r in rungs if r["encoder"] == "minilm"]
    return {"inside_sizes": join_words([f"{m} ({_m(params[m])})" for m in inside if m in params]) or "none of the rungs",
            "above_sizes": _m_range([r["params"] for r in above]) if above else "no rung",
            "minilm_range": f"{min(minilm):.2f}-{max(minilm):.2f}" if minilm else "no MiniLM rung",
            "top_rung": f"{raw[top].value:.2f} at {_m(params[top])}",
            **{k: e.fmt("+.2f") for k, e in slopes.items()},
            "live_sizes": f"{min(sizes.values()):.0f}-{max(sizes.values()):.0f}M",
            **verdicts_}


def ladder_lines(lad: LadderReading, meta: Mapping[str, Any]) -> list[str]:
    """The recorded ladder's reading as the page prints it: what was recorded and by which command
    (``meta``, :func:`~tokendyn.publish.results.load_ladder`'s), the commits its rows were computed
    at, each rung's size, probe top-5 and deltas, the spans, the slopes (every rung, and the rungs
    at or above the probe bar), the base-size model and its paired comparisons."""
    rp = meta["provenance"]
    base, ref, top, raw, norm = lad.base["model"], lad.reference["model"], lad.top["model"], "raw delta", "normalized delta"
    alone = {r["encoder"] for r in lad.alone}
    others = " and ".join(SHORT[e] for e in BACKBONES if e not in alone)
    by_commit = pd.Series([(r.get("git_commit") or "?")[:10] for r in lad.rows]).value_counts(sort=False)
    lines = [f"recorded: {rp['params']['n_rect']} rectangles a rung, n = {rp['params']['n_tokens']} (commit "
             f"{(rp.get('git_commit') or '?')[:10]}{', uncommitted changes in the tree' if rp.get('git_dirty') else ''}); "
             f"made by: {meta['command']}",
             "rows computed at commit " + ", ".join(f"{k} ({v} rows)" for k, v in by_commit.items())
             + " (a row is kept while its model weights are unchanged: tokendyn.publish.results.recorded_rows_to_keep)"]
    for r in lad.rungs:
        m = r["model"]
        lines.append(f"{m} ({r['encoder']}, {r['layers']} layer{'s' if r['layers'] > 1 else ''}, {r['params'] / 1e6:.1f}M, "
                     f"{r['params_nonembedding'] / 1e6:.1f}M non-embedding): probe top-5 {lad.probe[m].fmt('.2f')}"
                     f"{'' if m in lad.reading else ' (below the bar)'}; raw delta {lad.est[raw][m].fmt('.3f')}, "
                     f"normalized {lad.est[norm][m].fmt('.3f')}")
    a_short = " and ".join(SHORT[e] for e in sorted(alone))
    lines += [f"rungs: {len(lad.rungs)} ({len(lad.alone)} {a_short}, {len(lad.rungs) - len(lad.alone)} {others}), of which "
              f"{sum(r['model'] in lad.reading for r in lad.rungs)} reach the probe bar, spanning {lad.span:.1f}x in "
              f"parameters and {lad.span_nonembedding:.1f}x in non-embedding parameters ({a_short} alone {lad.span_alone:.1f}x)",
              f"the {len(lad.at_bar)} rungs at or above the bar span {span(lad.at_bar):.1f}x; their raw-delta slope, pooled "
              f"{lad.at_bar_pooled[raw].fmt('+.3f')}, within backbones {lad.at_bar_within[raw].fmt('+.3f')}"]
    lines += [f"{s}: slope per e-fold of parameters, pooled {lad.pooled[s].fmt('+.3f')}; within backbones "
              f"{lad.within[s].fmt('+.3f')}; {a_short} alone {lad.alone_slope[s].fmt('+.3f')}" for s in lad.est]
    b = lad.base
    return lines + [
        f"{base} (base-size model, head and layer 12 trained; not a rung): probe top-5 {lad.probe[base].fmt('.2f')}, "
        f"copy rate {b['copy_rate']:.3f}, pseudo-perplexity {b['pseudo_perplexity']:.1f}; "
        f"raw delta {lad.est[raw][base].fmt('.3f')}, normalized {lad.est[norm][base].fmt('.3f')}",
        f"{base} vs {ref} on the {lad.n_probe_reference} probe sentences both cover: top-5 "
        f"{lad.top5_vs_reference.fmt('+.3f')}, copy rate {lad.copy_vs_reference.fmt('+.3f')}; pseudo-perplexity ratio on "
        f"{lad.pppl_vs_reference.n} held-out passages {lad.pppl_vs_reference.fmt('.3f')}",
        f"{base} vs {top} (same encoder, head only) on {lad.n_probe_top} probe sentences: top-5 "
        f"{lad.top5_vs_top.fmt('+.3f')}, copy rate {lad.copy_vs_top.fmt('+.3f')}"]


def ladder_table(lad: LadderReading, meta: Mapping[str, Any]) -> tuple[pd.DataFrame, str]:
    """The ladder's table and its caption: every rung, then the base-size model and the reference,
    with size, probe top-5 (a rung below the bar marked), copy rate, pseudo-perplexity and the
    deltas (a dash for the reference, which has no rectangles here); the caption gives the slopes."""
    raw, norm = lad.est["raw delta"], lad.est["normalized delta"]
    df = pd.DataFrame([{"model": r["model"], "encoder": r["encoder"], "layers": r["layers"],
                        "parameters (M)": f"{r['params'] / 1e6:.1f}", "non-embedding (M)": f"{r['params_nonembedding'] / 1e6:.1f}",
                        "probe top-5 [95% CI]": lad.probe[r["model"]].fmt(".2f")
                        + ("" if r["model"] in lad.reading or not r["rung"] else " (below the bar)"),
                        "copy rate": f"{r['copy_rate']:.2f}", "pseudo-perplexity": f"{r['pseudo_perplexity']:.1f}",
                        "raw δ [95% CI]": raw[r["model"]].fmt(".3f") if r["model"] in raw else "–",
                        "normalized δ [95% CI]": norm[r["model"]].fmt(".3f") if r["model"] in raw else "–"}
                       for r in lad.rungs + [lad.base, lad.reference]])
    caption = (f"The size ladder (recorded, {meta['provenance']['params']['n_rect']} rectangles a rung, model protocol), "
               f"then {lad.base['model']}, the base-size model (not a rung: its top layer trained with the head), and "
               f"{lad.reference['model']}, the book's default, for its quality; slope of the mean raw δ per e-fold of "
               f"parameters over the {len(lad.rungs)} rungs {lad.pooled['raw delta'].fmt('+.3f')} pooled, "
               f"{lad.within['raw delta'].fmt('+.3f')} within backbones; of the normalized δ "
               f"{lad.pooled['normalized delta'].fmt('+.3f')} pooled, {lad.within['normalized delta'].fmt('+.3f')} "
               "within backbones")
    return df, caption


def ladder_frame(lad: LadderReading) -> pd.DataFrame:
    """The size-ladder figure's rows: one per statistic and rung, with its parameters (millions),
    backbone, mean and interval (``model, encoder, parameters (M), statistic, value, lo, hi``)."""
    return pd.DataFrame([{"model": r["model"], "encoder": r["encoder"], "parameters (M)": r["params"] / 1e6, "statistic": s,
                          "value": est[r["model"]].value, "lo": est[r["model"]].lo, "hi": est[r["model"]].hi}
                         for s, est in lad.est.items() for r in lad.rungs])


def claim1_points(boot: Mapping[tuple[str, str], Estimate], context: Sequence[str],
                  lad: LadderReading) -> dict[str, Estimate]:
    """The points claim 1 judges: each live model that uses its context (model protocol), then the
    recorded rungs at or above the probe bar and the base-size model, marked "(recorded)"."""
    return ({m: boot[m, "model"] for m in context}
            | {f"{r['model']} (recorded)": lad.est["raw delta"][r["model"]] for r in lad.at_bar + [lad.base]})


def control_metrics(delta_compatible: torch.Tensor, delta_ar: torch.Tensor, delta_incompatible: torch.Tensor,
                    norm_incompatible: torch.Tensor, *, skew: float, coupling: float, zero_level: float) -> dict[str, float]:
    """The controls for the results record: the compatible toy's and the AR joint's largest delta,
    the incompatible toy's mean raw and normalized delta beside their known values (``8 skew`` and
    ``skew / coupling``), and the rounding level. Each tensor is ``[rectangles]``."""
    return {"compatible_toy_max": float(delta_compatible.max()), "ar_max": float(delta_ar.max()),
            "incompatible_toy_mean": float(delta_incompatible.mean()), "incompatible_toy_known": 8 * skew,
            "incompatible_toy_normalized_mean": float(norm_incompatible.mean()),
            "incompatible_toy_normalized_known": skew / coupling, "zero_level": zero_level}


def live_metrics(*, probe: Mapping[str, float | None], context: Sequence[str], summary: pd.DataFrame,
                 boot: Mapping[tuple[str, str], Estimate], norm_summary: pd.DataFrame,
                 norm_boot: Mapping[tuple[str, str], Estimate], undefined: pd.Series, family: Sequence[str],
                 depths: Mapping[str, int], layers: Mapping[str, int], sizes: Mapping[str, float], gap_df: pd.DataFrame,
                 tau_slopes: Mapping[tuple[str, str], Estimate]) -> dict[str, Any]:
    """The live models' part of the results record: context use (``probe``: cloze top-5 per model,
    in the models' order), raw and normalized delta per ``model|protocol`` (``undefined``: 0/0
    rectangles per ``(model, protocol)``), the depth family (``depths``: family depth, ``sizes`` in
    millions), delta by gap (``gap_df``: ``model, gap, mean delta, lo, hi``) and the temperature slopes
    per ``(model, kind)``."""
    norm_by = norm_summary.set_index(["model", "protocol"])
    return {
        "context_use": {m: {"probe_top5": probe[m], "uses_context": m in context} for m in probe},
        "delta": {f"{r['model']}|{r['protocol']}": {"mean": r["mean"], "median": r["median"], "q25": r["q25"], "q75": r["q75"]}
                  for _, r in summary.iterrows()},
        "delta_ci": {f"{m}|{p}": e.__dict__ for (m, p), e in boot.items()},
        "normalized_delta": {f"{m}|{p}": {"mean": e.value, "lo": e.lo, "hi": e.hi, "level": e.level,
                                          "median": float(norm_by.loc[(m, p), "median"]), "n": e.n,
                                          "n_undefined": int(undefined[m, p])} for (m, p), e in norm_boot.items()},
        "family": {m: {"depth": depths[m], "layers": layers[m], "n_params": round(sizes[m] * 1e6),
                       "raw": {"mean": boot[m, "model"].value, "lo": boot[m, "model"].lo, "hi": boot[m, "model"].hi},
                       "normalized": {"mean": norm_boot[m, "model"].value, "lo": norm_boot[m, "model"].lo,
                                      "hi": norm_boot[m, "model"].hi}, "protocol": "model", "n": boot[m, "model"].n}
                   for m in family},
        "delta_by_gap": {f"{r['model']}|{r['gap']}": r["mean delta"] for _, r in gap_df.iterrows()},
        "delta_by_gap_ci": {f"{r['model']}|{r['gap']}": {"mean": r["mean delta"], "lo": r["lo"], "hi": r["hi"]}
                            for _, r in gap_df.iterrows()},
        "tau_slope": {f"{m}|{k}": e.value for (m, k), e in tau_slopes.items()},
        "tau_slope_ci": {f"{m}|{k}": {"value": e.value, "lo": e.lo, "hi": e.hi, "n": e.n} for (m, k), e in tau_slopes.items()},
    }


def arnold_press_metrics(ap_df: pd.DataFrame, ap_vs_single: Mapping[str, tuple[float, float]]) -> dict[str, Any]:
    """The Arnold-Press grids for page 2.2's results record (``arnold_press``): per model the median
    residual RMS and largest delta over its grids (``ap_df``: one row per grid, ``model, residual RMS,
    max delta on the grid``) and the RMS delta over the grids' minors and over single rectangles
    (``ap_vs_single``: model -> the two)."""
    return {"arnold_press": {m: {"median_rms": float(g["residual RMS"].median()),
                                 "median_max_delta": float(g["max delta on the grid"].median()),
                                 "rms_delta_minors": ap_vs_single[m][0], "rms_delta_single": ap_vs_single[m][1]}
                             for m, g in ap_df.groupby("model")}}


def ladder_metrics(lad: LadderReading, *, recorded: str, command: str) -> dict[str, Any]:
    """The recorded ladder's part of the results record: every rung and the base-size model
    (``size_ladder``), the slopes with the rungs and spans behind them (``size_slope``; ``recorded``:
    the record's path under ``data/``, ``command``: what made it) and the base-size model against the
    reference (``mpnet_vs_default``)."""
    raw, norm = lad.est["raw delta"], lad.est["normalized delta"]
    return {
        "size_ladder": {r["model"]: {"params": r["params"], "params_nonembedding": r["params_nonembedding"],
                                     "encoder": r["encoder"], "layers": r["layers"], "reads_context": r["model"] in lad.reading,
                                     "probe_top5": lad.probe[r["model"]].__dict__, "delta": raw[r["model"]].value,
                                     "delta_ci": raw[r["model"]].__dict__, "normalized": norm[r["model"]].value,
                                     "normalized_ci": norm[r["model"]].__dict__, "rung": r["rung"]}
                        for r in lad.rungs + [lad.base]},
        "size_slope": {"raw": lad.pooled["raw delta"].__dict__, "normalized": lad.pooled["normalized delta"].__dict__,
                       "within_backbone": {"raw": lad.within["raw delta"].__dict__,
                                           "normalized": lad.within["normalized delta"].__dict__},
                       "mpnet_alone": {"raw": lad.alone_slope["raw delta"].__dict__,
                                       "normalized": lad.alone_slope["normalized delta"].__dict__, "span": lad.span_alone},
                       "rungs": [r["model"] for r in lad.rungs], "span": lad.span, "span_nonembedding": lad.span_nonembedding,
                       "per": "e-fold of parameters", "recorded": recorded, "command": command},
        "mpnet_vs_default": {"top5_diff": lad.top5_vs_reference.__dict__, "copy_diff": lad.copy_vs_reference.__dict__,
                             "probe_sentences": lad.n_probe_reference, "pppl_ratio": lad.pppl_vs_reference.__dict__},
    }


def findings(*, judged: Mapping[str, Estimate], normalized: Mapping[str, Estimate], lad: LadderReading,
             meta: Mapping[str, Any], paper_range: tuple[float, float], delta_ar: torch.Tensor,
             delta_compatible: torch.Tensor, norm_compatible: torch.Tensor, n_rect: int, n_tokens: int, ar_name: str,
             n_ar: int) -> list[claims.Finding]:
    """Page 2.1's claim rows: claim 1 on the points ``judged`` (:func:`claim1_points`), sized by the
    ladder's within-backbone slope; claim 2 on the AR joint's largest delta (``delta_ar``
    ``[n_ar]``); the normalized delta of the live models that use their context (``normalized``)
    against the compatible toy's rounding level (``norm_compatible`` ``[rectangles]``, NaN where its
    sites do not interact); and the compatible toy's zero (``delta_compatible`` ``[500]``)."""
    n_rec, within = meta["provenance"]["params"]["n_rect"], lad.within
    ar_max, toy_max = float(delta_ar.max()), float(delta_compatible.max())
    return [
        claims.finding(1, "; ".join(f"{m}: {e.fmt('.2f')}" for m, e in judged.items()),
                       verdicts.claim_1(judged, paper_range, size=within["raw delta"]),
                       basis=f"models at or above the probe bar, model protocol, {n_rect} rectangles, n = {n_tokens}; "
                             f"the size ladder's rungs at or above the bar and {lad.base['model']} (110M, head and top "
                             f"layer trained), recorded ({n_rec} rectangles); size: the ladder's slope within backbones"),
        claims.finding(2, f"max {below(ar_max, 1e-9)}", verdicts.claim_2(ar_max),
                       basis=f"{ar_name}, {n_ar} rectangles; zero by construction (an identity)"),
        claims.finding("Normalized delta of the models that use context (0 if compatible, whatever the logits' scale)",
                       "; ".join(f"{m}: {e.fmt('.2f')}" for m, e in normalized.items()),
                       verdicts.all_above(normalized, 10 * float(norm_compatible[~norm_compatible.isnan()].max()) + 1e-6),
                       basis=f"model protocol, mean over {n_rect} rectangles, against the compatible toy's float-rounding "
                             f"level; unrelated views would give {NORMALIZED_INDEPENDENT:.2f}",
                       paper_value="not in the paper; > 0 if incompatible"),
        claims.finding("A compatible model gives delta = 0 through the masked-logit path (Potts toy)",
                       below(toy_max, 1e-12), verdicts.identity(toy_max, 1e-12, "max delta of the compatible toy"),
                       basis="500 rectangles, float64", paper_value="0"),
    ]


def size_findings(*, lad: LadderReading, meta: Mapping[str, Any]) -> list[claims.Finding]:
    """Page 2.2's claim row: claim 3 on the recorded ladder (every rung's raw delta, the slopes pooled
    and within backbones; ``meta``: :func:`~tokendyn.publish.results.load_ladder`'s)."""
    raw, params, n_rec = lad.est["raw delta"], lad.params, meta["provenance"]["params"]["n_rect"]
    pooled, within = lad.pooled, lad.within
    return [
        claims.finding(3, "; ".join(f"{m} ({p / 1e6:.0f}M): {raw[m].fmt('.2f')}" for m, p in params.items())
                       + f"; slope per e-fold of parameters: raw {pooled['raw delta'].fmt('+.3f')} pooled, "
                       f"{within['raw delta'].fmt('+.3f')} within backbones; normalized {pooled['normalized delta'].fmt('+.3f')} "
                       f"pooled, {within['normalized delta'].fmt('+.3f')} within backbones",
                       verdicts.claim_3({m: raw[m] for m in params}, params, {r["model"]: r["encoder"] for r in lad.rungs},
                                        slope=pooled["raw delta"], within=within["raw delta"]),
                       headline=f"slope of the mean delta per e-fold of parameters {pooled['raw delta'].fmt('+.3f')} over "
                                f"{lad.span:.1f}x",
                       basis=f"size ladder: {len(lad.rungs)} rungs of one head recipe on two frozen backbones "
                             f"(all-MiniLM-L6-v2 cut to 2-6 layers, all-mpnet-base-v2 to 2-12), {n_rec} rectangles each, "
                             f"model protocol; {lad.span_nonembedding:.1f}x in non-embedding parameters; the rungs are heads "
                             "on frozen encoders, so only depth changes within a backbone; the verdict needs every rung at "
                             "or above 0.32 (half the paper's lower end) and a 7x span within one backbone"),
    ]


def _verdict(rows: Sequence[claims.Finding], claim: int) -> str:
    return next(f.verdict for f in rows if f.claim == claim)


def summary_words(lad: LadderReading, *, judged: Mapping[str, Estimate], paper_range: tuple[float, float],
                  gap_df: pd.DataFrame, rows: Sequence[claims.Finding]) -> dict[str, str]:
    """:func:`summary_texts` read off the ladder (its base-size model, top rung and paired
    comparisons) and page 2.1's claim rows (``rows``, :func:`findings`: claim 1 gives the verdict)."""
    return summary_texts(
        judged=judged, paper_range=paper_range, raw=lad.est["raw delta"], base=lad.base["model"], top=lad.top["model"],
        paired={"copy_vs_top": lad.copy_vs_top, "top5_vs_default": lad.top5_vs_reference,
                "pppl_vs_default": lad.pppl_vs_reference},
        gap_df=gap_df, verdicts_={"c1_verdict": _verdict(rows, 1)})


def size_summary_words(lad: LadderReading, *, paper_range: tuple[float, float], sizes: Mapping[str, float],
                       rows: Sequence[claims.Finding]) -> dict[str, str]:
    """:func:`size_summary_texts` read off the ladder (the rungs claim 1 judges, its slopes) and page
    2.2's claim row (``rows``, :func:`size_findings`: claim 3 gives the verdict); ``sizes``: the live
    models' parameters (millions)."""
    raw, norm = "raw delta", "normalized delta"
    return size_summary_texts(
        judged={r["model"]: lad.est[raw][r["model"]] for r in lad.at_bar}, paper_range=paper_range, rungs=lad.rungs,
        raw=lad.est[raw], top=lad.top["model"],
        slopes={"slope_within": lad.within[raw], "slope_mpnet": lad.alone_slope[raw], "slope_pooled": lad.pooled[raw],
                "slope_norm_within": lad.within[norm]},
        sizes=sizes, verdicts_={"c3_verdict": _verdict(rows, 3)})
