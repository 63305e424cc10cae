"""Chapter 2's glued words (tokendyn.publish.chapters.rectangle_test) on a constructed ladder: every
number is the ladder's or the rule's, and a rung inside the paper's range is named as such."""

from __future__ import annotations

import pandas as pd

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
    slope = Estimate(0.5, 0.42, 0.59, 512)
    w = words.summary_texts(judged={"ladder-minilm-l6 (recorded)": RAW["ladder-minilm-l6"], "small": Estimate(0.3, 0.2, 0.4, 256)},
                            paper_range=(0.64, 0.80), rungs=RUNGS, raw=RAW, base="mpnet-base-mlm", top="ladder-mpnet-l12",
                            slopes={"slope_within": slope}, paired={"pppl_vs_default": Estimate(0.78, 0.69, 0.86, 50)},
                            sizes={"a": 4.4, "b": 22.7}, gap_df=gap, verdicts_={"c1_verdict": "partly"})
    assert w["inside_range"] == "ladder-minilm-l6" and w["inside_sizes"] == "ladder-minilm-l6 (23M)"
    assert w["above_sizes"] == "110M" and w["minilm_range"] == "0.46-0.70" and w["top_rung"] == "1.11 at 110M"
    assert w["slope_within"] == "+0.50 [+0.42, +0.59]" and w["pppl_vs_default"] == "0.78 [0.69, 0.86]"
    assert w["live_sizes"] == "4-23M" and w["gap_fall"] == "8- to 8-fold" and w["gap_max"] == "12"
    assert words.rule_texts() == {"c1_factor": "2x", "c3_floor": "0.32", "c3_span": "7x"}
