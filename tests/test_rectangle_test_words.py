"""Chapter 2's glued words (tokendyn.publish.chapters.rectangle_test) on a constructed ladder: every
number is the ladder's or the rule's, a rung inside the paper's range is named as such, and each of the
chapter's two pages gets its own claim rows, words and metrics."""

from __future__ import annotations

import pandas as pd
import pytest

from tokendyn.core.stats import Estimate
from tokendyn.publish.chapters import rectangle_test as words

RUNGS = [{"model": f"ladder-{e}-l{k}", "encoder": e, "layers": k, "params": p}
         for e, k, p in (("minilm", 1, 13.9e6), ("minilm", 6, 22.7e6), ("mpnet", 2, 38.6e6), ("mpnet", 12, 109.5e6))]
RAW = {"ladder-minilm-l1": Estimate(0.46, 0.40, 0.52, 512), "ladder-minilm-l6": Estimate(0.70, 0.66, 0.74, 512),
       "ladder-mpnet-l2": Estimate(0.60, 0.55, 0.65, 512), "ladder-mpnet-l12": Estimate(1.11, 1.01, 1.22, 512),
       "mpnet-base-mlm": Estimate(1.10, 0.99, 1.23, 512)}


def test_ladder_and_family_words_are_the_rows():
    meta = {"provenance": {"params": {"n_rect": 512}}}
    w = words.ladder_texts(RUNGS, meta)
    assert w["ladder_range"] == "14M to 110M" and w["ladder_span"] == "7.9x" and w["ladder_rect"] == "512"
    assert w["ladder_cuts"] == ("all-MiniLM-L6-v2 cut to 1 and 6 layers (13.9M to 22.7M parameters) and "
                                "all-mpnet-base-v2 cut to 2 and 12 layers (38.6M to 109.5M parameters)")
    assert w["backbone_spans"] == "1.6x (MiniLM) and 2.8x (MPNet)"
    f = words.family_texts({"d2": 15.6, "d3": 17.4, "d4": 19.2}, {"d2": 2, "d3": 3, "d4": 4}, ["d2", "d3", "d4"])
    assert f == {"fam_depths": "2, 3 and 4", "fam_span": "15.6M to 19.2M parameters, 1.2x"}


def test_summary_names_what_lies_inside_the_range():
    gap = pd.DataFrame({"model": ["m"] * 2, "gap": [1, 12], "mean delta": [2.0, 0.25]})
    judged = {"ladder-minilm-l6 (recorded)": RAW["ladder-minilm-l6"], "small": Estimate(0.3, 0.2, 0.4, 256)}
    w = words.summary_texts(judged=judged, paper_range=(0.64, 0.80), raw=RAW, base="mpnet-base-mlm", top="ladder-mpnet-l12",
                            paired={"pppl_vs_default": Estimate(0.78, 0.69, 0.86, 50)}, gap_df=gap,
                            verdicts_={"c1_verdict": "partly"})
    assert w == {"inside_range": "ladder-minilm-l6", "base_delta": "1.10 [0.99, 1.23]", "top_delta": "1.11 [1.01, 1.22]",
                 "pppl_vs_default": "0.78 [0.69, 0.86]", "gap_fall": "8- to 8-fold", "gap_max": "12", "c1_verdict": "partly"}
    s = words.size_summary_texts(judged=judged, paper_range=(0.64, 0.80), rungs=RUNGS, raw=RAW, top="ladder-mpnet-l12",
                                 slopes={"slope_within": Estimate(0.5, 0.42, 0.59, 512)}, sizes={"a": 4.4, "b": 22.7},
                                 verdicts_={"c3_verdict": "partly"})
    assert s == {"inside_sizes": "ladder-minilm-l6 (23M)", "above_sizes": "110M", "minilm_range": "0.46-0.70",
                 "top_rung": "1.11 at 110M", "slope_within": "+0.50 [+0.42, +0.59]", "live_sizes": "4-23M",
                 "c3_verdict": "partly"}
    assert words.rule_texts() == {"c1_factor": "2x"} and words.size_rule_texts() == {"c3_floor": "0.32", "c3_span": "7x"}


# --- the ladder's reading, table, metrics and claim rows, on a constructed record --------------------------

def _ladder():
    """Two backbones, two rungs each (e^0..e^3 M parameters, one delta per rung: MiniLM 0.5, 0.7, MPNet
    0.72, 1.1); the first rung below the 0.25 probe bar; a base-size model and the default beside them."""
    import math

    from tokendyn.analysis import size

    def probe(hits):
        return [{"text": f"s{i} the [MASK] word", "answers": ["a"], "top": ["z", "a" if i < hits else "b"]} for i in range(20)]

    def row(model, enc, k, delta, hits, rung=True):
        return {"model": model, "encoder": enc, "layers": k + 1, "params": round(1e6 * math.e ** (k + 2)),
                "params_nonembedding": round(1e5 * 2 ** k), "delta": [delta] * 4, "normalized": [0.6] * 4,
                "probe_items": probe(hits), "rung": rung, "copy_rate": 0.125, "pseudo_perplexity": 42.25,
                "passage_nll": [10.0, 20.0], "passage_tokens": [10, 10], "git_commit": "abc1234567890"}
    rows = [row("ladder-minilm-l1", "minilm", 0, 0.5, 2), row("ladder-minilm-l2", "minilm", 1, 0.7, 6),
            row("minilm-mlm", "minilm", 1, 0.4, 8, rung=False), row("ladder-mpnet-l3", "mpnet", 2, 0.72, 8),
            row("ladder-mpnet-l4", "mpnet", 3, 1.1, 12), row("mpnet-base-mlm", "mpnet", 3, 1.05, 14, rung=False)]
    meta = {"command": "record it", "provenance": {"params": {"n_rect": 4, "n_tokens": 16}, "git_commit": "abc1234567890"}}
    return size.read_ladder(rows, base="mpnet-base-mlm", bar=0.25, seed=0), meta


def test_ladder_lines_table_and_frame_are_the_reading():
    lad, meta = _ladder()
    lines = words.ladder_lines(lad, meta)
    assert lines[0] == "recorded: 4 rectangles a rung, n = 16 (commit abc1234567); made by: record it"
    assert lines[1].startswith("rows computed at commit abc1234567 (6 rows) (a row is kept")
    assert lines[2] == ("ladder-minilm-l1 (minilm, 1 layer, 7.4M, 0.1M non-embedding): probe top-5 0.10 [0.03, 0.30] "
                        "(below the bar); raw delta 0.500 [0.500, 0.500], normalized 0.600 [0.600, 0.600]")
    assert lines[6].startswith("rungs: 4 (2 MPNet, 2 MiniLM), of which 3 reach the probe bar, spanning 20.1x in parameters "
                               "and 8.0x in non-embedding parameters (MPNet alone 2.7x)")
    assert lines[7].startswith("the 3 rungs at or above the bar span 7.4x; their raw-delta slope, pooled +0.200")
    assert lines[8].startswith("raw delta: slope per e-fold of parameters, pooled ") and "MPNet alone +0.380" in lines[8]
    assert lines[10].startswith("mpnet-base-mlm (base-size model, head and layer 12 trained; not a rung): probe top-5 0.70")
    assert "copy rate 0.125, pseudo-perplexity 42.2" in lines[10] and len(lines) == 13
    assert lines[11].startswith("mpnet-base-mlm vs minilm-mlm on the 20 probe sentences both cover: top-5 +0.300")
    assert lines[12].startswith("mpnet-base-mlm vs ladder-mpnet-l4 (same encoder, head only) on 20 probe sentences: top-5 +0.100")
    df, caption = words.ladder_table(lad, meta)
    assert list(df["model"]) == [r["model"] for r in lad.rungs] + ["mpnet-base-mlm", "minilm-mlm"]
    ref = df.iloc[-1]
    assert ref["raw δ [95% CI]"] == "–" and ref["probe top-5 [95% CI]"].endswith("]")  # no "(below the bar)" off the ladder
    assert df.iloc[0]["probe top-5 [95% CI]"].endswith("(below the bar)") and df.iloc[0]["parameters (M)"] == "7.4"
    assert caption.startswith("The size ladder (recorded, 4 rectangles a rung") and "over the 4 rungs" in caption
    frame = words.ladder_frame(lad)
    assert len(frame) == 8 and set(frame["statistic"]) == {"raw delta", "normalized delta"}
    assert frame.iloc[3][["model", "value"]].tolist() == ["ladder-mpnet-l4", 1.1]


def test_claim_rows_and_metrics_read_the_ladder_and_the_controls():
    import numpy as np
    import torch

    lad, meta = _ladder()
    boot = {("small", "model"): Estimate(0.3, 0.2, 0.4, 256), ("small", "uniform"): Estimate(0.9, 0.8, 1.0, 256)}
    cmp = words.claim1_points(boot, ["small"], lad)
    assert list(cmp) == ["small", "ladder-minilm-l2 (recorded)", "ladder-mpnet-l3 (recorded)", "ladder-mpnet-l4 (recorded)",
                         "mpnet-base-mlm (recorded)"]
    rows = words.findings(judged=cmp, normalized={"small": Estimate(0.6, 0.55, 0.65, 256)}, lad=lad, meta=meta,
                          paper_range=(0.64, 0.80), delta_ar=torch.tensor([1e-12, 3e-12]),
                          delta_compatible=torch.tensor([0.0, 1e-15]), norm_compatible=torch.tensor([float("nan"), 0.01]),
                          n_rect=256, n_tokens=16, ar_name="ar", n_ar=2)
    assert [f.claim for f in rows][:2] == [1, 2] and len(rows) == 4
    assert rows[0].ours.startswith("small: 0.30 [0.20, 0.40]; ladder-minilm-l2 (recorded): 0.70") and rows[0].verdict == "not reproduced"
    assert rows[1].ours == "max < 1e-9" and rows[1].verdict == "holds by construction"
    # the level is ten times the toy's largest defined normalized delta (0.01; its NaN left out), plus 1e-6
    assert rows[2].verdict == "reproduced" and rows[2].reason == "intervals reaching 0.100001: none"
    assert rows[3].ours == "< 1e-12"
    [row3] = words.size_findings(lad=lad, meta=meta)
    assert row3.claim == 3 and row3.ours.startswith("ladder-minilm-l1 (7M): 0.50 [0.50, 0.50]; ladder-minilm-l2 (20M): 0.70")
    assert "size ladder: 4 rungs" in row3.basis and "8.0x in non-embedding parameters" in row3.basis
    m = words.ladder_metrics(lad, recorded="runs/x.json", command="record it")
    assert m["size_slope"]["mpnet_alone"]["span"] == pytest.approx(np.e) and m["size_slope"]["recorded"] == "runs/x.json"
    assert list(m["size_ladder"]) == [r["model"] for r in lad.rungs] + ["mpnet-base-mlm"]
    assert m["size_ladder"]["ladder-minilm-l1"]["reads_context"] is False and m["mpnet_vs_default"]["probe_sentences"] == 20
    c = words.control_metrics(torch.tensor([0.0, 2e-15]), torch.tensor([1e-12]), torch.tensor([2.0, 2.8]),
                              torch.tensor([0.2, 0.4]), skew=0.3, coupling=1.0, zero_level=1e-6)
    assert c["incompatible_toy_mean"] == pytest.approx(2.4) and c["incompatible_toy_known"] == pytest.approx(2.4)
    assert c["incompatible_toy_normalized_mean"] == pytest.approx(0.3) and c["compatible_toy_max"] == pytest.approx(2e-15)
    gap = pd.DataFrame({"model": ["m"] * 2, "gap": [1, 12], "mean delta": [2.0, 0.25], "lo": [1.5, 0.2], "hi": [2.5, 0.3]})
    w = words.summary_words(lad, judged=cmp, paper_range=(0.64, 0.80), gap_df=gap, rows=rows)
    assert w["c1_verdict"] == "not reproduced" and w["base_delta"] == "1.05 [1.05, 1.05]"
    assert w["inside_range"] == "ladder-minilm-l2, ladder-mpnet-l3" and w["copy_vs_top"] == "+0.00 [+0.00, +0.00]"
    assert "c3_verdict" not in w and "inside_sizes" not in w
    s = words.size_summary_words(lad, paper_range=(0.64, 0.80), sizes={"small": 4.4}, rows=[row3])
    assert s["c3_verdict"] == row3.verdict and s["top_rung"] == "1.10 at 148M" and s["live_sizes"] == "4-4M"
    # the rungs claim 1 judges (at or above the bar) inside the paper's range, with their sizes
    assert s["inside_sizes"] == "ladder-minilm-l2 (20M) and ladder-mpnet-l3 (55M)" and "c1_verdict" not in s


def test_live_metrics_key_every_model_and_protocol():
    e = Estimate(0.5, 0.4, 0.6, 256)
    summary = pd.DataFrame({"model": ["a", "a"], "protocol": ["model", "uniform"], "mean": [0.5, 0.9], "median": [0.4, 0.8],
                            "q25": [0.2, 0.5], "q75": [0.7, 1.1]})
    norm_summary = summary.assign(median=[0.55, 0.65])
    undefined = pd.Series([3, 0], index=pd.MultiIndex.from_tuples([("a", "model"), ("a", "uniform")]))
    boot = {("a", "model"): e, ("a", "uniform"): Estimate(0.9, 0.8, 1.0, 256)}
    m = words.live_metrics(probe={"a": 0.4, "b": None}, context=["a"], summary=summary, boot=boot, norm_summary=norm_summary,
                           norm_boot=boot, undefined=undefined, family=["a"], depths={"a": 2}, layers={"a": 2},
                           sizes={"a": 15.6}, gap_df=pd.DataFrame({"model": ["a"], "gap": [1], "mean delta": [0.7],
                                                                  "lo": [0.6], "hi": [0.8]}),
                           tau_slopes={("a", "drawn at tau"): Estimate(-0.8, -0.9, -0.7, 64)})
    assert m["context_use"] == {"a": {"probe_top5": 0.4, "uses_context": True}, "b": {"probe_top5": None, "uses_context": False}}
    assert m["delta"]["a|uniform"] == {"mean": 0.9, "median": 0.8, "q25": 0.5, "q75": 1.1}
    assert m["normalized_delta"]["a|model"]["median"] == 0.55 and m["normalized_delta"]["a|model"]["n_undefined"] == 3
    assert m["family"]["a"]["n_params"] == 15_600_000 and m["family"]["a"]["raw"] == {"mean": 0.5, "lo": 0.4, "hi": 0.6}
    assert m["delta_by_gap_ci"] == {"a|1": {"mean": 0.7, "lo": 0.6, "hi": 0.8}} and m["tau_slope"] == {"a|drawn at tau": -0.8}
    assert m["delta_ci"]["a|model"] == e.__dict__ and "arnold_press" not in m


def test_arnold_press_metrics_are_medians_over_each_models_grids():
    ap = pd.DataFrame({"model": ["a", "a", "a", "b"], "residual RMS": [0.1, 0.3, 0.2, 0.5],
                       "max delta on the grid": [1.0, 3.0, 2.0, 4.0]})
    m = words.arnold_press_metrics(ap, {"a": (0.7, 0.68), "b": (0.9, 0.8)})
    assert m == {"arnold_press": {"a": {"median_rms": 0.2, "median_max_delta": 2.0, "rms_delta_minors": 0.7, "rms_delta_single": 0.68},
                                  "b": {"median_rms": 0.5, "median_max_delta": 4.0, "rms_delta_minors": 0.9, "rms_delta_single": 0.8}}}
