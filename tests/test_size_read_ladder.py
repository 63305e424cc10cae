"""A whole ladder record read at once (tokendyn.analysis.size.read_ladder) on constructed rows whose
slopes, spans, probe scores and paired differences are known exactly."""

from __future__ import annotations

import math

import pytest

from tokendyn.analysis import size


def _probe(hits: int, n: int = 20, copies: int = 0) -> list[dict]:
    """``n`` probe sentences, the first ``hits`` answered among the top five, the first ``copies``
    with a best word already in the sentence."""
    return [{"text": f"s{i} the [MASK] word", "answers": ["a"],
             "top": (["word"] if i < copies else ["z"]) + (["a"] if i < hits else ["b"])} for i in range(n)]


def ladder_rows() -> list[dict]:
    """Two backbones, two rungs each at e^0..e^3 M parameters; every rectangle of a rung has the same
    delta, so each mean is exact: MiniLM 1.0, 1.5, MPNet 3.0, 3.5 (within-backbone slope 0.5 per
    e-fold, pooled 0.9); normalized delta 0.5 everywhere but the top rung (0.6). The first rung is
    below a 0.25 probe bar. A base-size model and a reference sit beside the ladder."""
    def rung(model, enc, k, delta, norm, hits, rung=True, **kw):
        return {"model": model, "encoder": enc, "layers": k + 1, "params": round(1e6 * math.e ** k),
                "params_nonembedding": round(1e5 * 2 ** k), "delta": [delta] * 4, "normalized": [norm] * 4,
                "probe_items": _probe(hits), "rung": rung, "copy_rate": 0.1, "pseudo_perplexity": 50.0,
                "passage_nll": [10.0, 20.0, 30.0], "passage_tokens": [10, 10, 10], "git_commit": "abc1234567890", **kw}
    return [rung("ladder-minilm-l1", "minilm", 0, 1.0, 0.5, 2), rung("ladder-minilm-l2", "minilm", 1, 1.5, 0.5, 6),
            rung("minilm-mlm", "minilm", 1, 0.4, 0.5, 8, rung=False, passage_nll=[20.0, 30.0, 40.0]),
            rung("ladder-mpnet-l3", "mpnet", 2, 3.0, 0.5, 8), rung("ladder-mpnet-l4", "mpnet", 3, 3.5, 0.6, 12),
            rung("mpnet-base-mlm", "mpnet", 3, 3.4, 0.6, 14, rung=False, probe_items=_probe(14, copies=4))]


def test_read_ladder_splits_the_rows_and_reads_each_statistic():
    lad = size.read_ladder(ladder_rows(), base="mpnet-base-mlm", bar=0.25, alone="mpnet")
    assert [r["model"] for r in lad.rungs] == ["ladder-minilm-l1", "ladder-minilm-l2", "ladder-mpnet-l3", "ladder-mpnet-l4"]
    assert (lad.base["model"], lad.reference["model"], lad.top["model"]) == ("mpnet-base-mlm", "minilm-mlm", "ladder-mpnet-l4")
    assert [r["model"] for r in lad.alone] == ["ladder-mpnet-l3", "ladder-mpnet-l4"]
    # every rung and the base model carry both statistics (the reference has no rectangles here)
    assert list(lad.est) == ["raw delta", "normalized delta"]
    assert list(lad.est["raw delta"]) == [r["model"] for r in lad.rungs] + ["mpnet-base-mlm"]
    assert lad.est["raw delta"]["ladder-mpnet-l3"].value == pytest.approx(3.0)
    assert lad.est["normalized delta"]["mpnet-base-mlm"].value == pytest.approx(0.6)
    assert lad.within["raw delta"].value == pytest.approx(0.5, rel=1e-6)
    assert lad.pooled["raw delta"].value == pytest.approx(0.9, rel=1e-6)
    assert lad.alone_slope["raw delta"].value == pytest.approx(0.5, rel=1e-6)
    assert lad.alone_slope["normalized delta"].value == pytest.approx(0.1, rel=1e-6)
    assert lad.span == pytest.approx(math.e ** 3, rel=1e-6) and lad.span_alone == pytest.approx(math.e, rel=1e-6)
    assert lad.span_nonembedding == pytest.approx(8.0)
    assert lad.params["ladder-mpnet-l4"] == round(1e6 * math.e ** 3)


def test_read_ladder_reads_the_probe_bar_and_the_paired_comparisons():
    lad = size.read_ladder(ladder_rows(), base="mpnet-base-mlm", bar=0.25)
    assert lad.probe["ladder-minilm-l1"].value == pytest.approx(0.1) and lad.probe["minilm-mlm"].value == pytest.approx(0.4)
    assert lad.reading == ["ladder-minilm-l2", "ladder-mpnet-l3", "ladder-mpnet-l4", "mpnet-base-mlm", "minilm-mlm"]
    assert [r["model"] for r in lad.at_bar] == ["ladder-minilm-l2", "ladder-mpnet-l3", "ladder-mpnet-l4"]
    # the three rungs at the bar: pooled over e^1..e^3, within backbones only MPNet's pair informs the slope
    assert lad.at_bar_within["raw delta"].value == pytest.approx(0.5, rel=1e-6)
    assert lad.at_bar_pooled["raw delta"].value == pytest.approx(1.0, rel=1e-6)
    # base 14 of 20 hits and 4 copies; reference 8 hits, no copies; top rung 12 hits
    assert lad.top5_vs_reference.value == pytest.approx(0.3) and lad.n_probe_reference == 20
    assert lad.copy_vs_reference.value == pytest.approx(0.2)
    assert lad.top5_vs_top.value == pytest.approx(0.1) and lad.copy_vs_top.value == pytest.approx(0.2)
    assert lad.pppl_vs_reference.value == pytest.approx(math.exp(-1.0))  # 60 vs 90 nats over 30 tokens


def test_read_ladder_names_a_missing_base_or_reference():
    rows = ladder_rows()
    with pytest.raises(ValueError, match="base: 'bert-base'"):
        size.read_ladder(rows, base="bert-base", bar=0.25)
    with pytest.raises(ValueError, match="reference row"):
        size.read_ladder([r for r in rows if r["model"] != "minilm-mlm"], base="mpnet-base-mlm", bar=0.25)
