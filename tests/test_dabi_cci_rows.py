"""Chapter 6's assembly (tokendyn.publish.chapters.dabi_cci) on constructed decoders, tables and
records: the taxonomy's calls follow their thresholds, the recorded run is read only at the page's
reference norm, and the words are the decoders' own sizes."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import torch

from tokendyn.core.stats import Estimate
from tokendyn.latent import decoders
from tokendyn.publish import results
from tokendyn.publish.chapters import dabi_cci

TEXTS = ["16-d word readout", "contextual readout", "minilm-mlm head", "SmolLM2 head"]
IMAGES = ["digits AE", "faces AE"]


def _ref_df(dabi: float = 5.0) -> pd.DataFrame:
    rows = [{"decoder": n, "along": a, "DABI": dabi, "lo": dabi - 1, "hi": dabi + 1, "n": 100, "rms": 0.5}
            for n in IMAGES + TEXTS for a in ("residual", "sharpest")]
    return pd.DataFrame(rows).set_index(["decoder", "along"])


def _flips(k: int) -> SimpleNamespace:
    return SimpleNamespace(structured=Estimate(k / 100, 0.0, 1.0, 100))


def test_taxonomy_calls_each_flow_by_its_threshold():
    cci = {"minilm-mlm masked diffusion": SimpleNamespace(value=1.0), "SmolLM2 autoregressive": SimpleNamespace(value=1.0)}
    f = dabi_cci.IMAGE_ERROR_FACTOR
    image = {"digits AE": {"structured": f * 0.1 - 1e-6, "isotropic": 0.1},   # just under: holds
             "faces AE": {"structured": f * 0.1, "isotropic": 0.1}}           # at the factor: flips
    k = round(dabi_cci.TEXT_FLIP_FAILS * 100)
    text = {"16-d word flow": _flips(k - 1), "contextual flow": _flips(k)}    # one under the share, and at it
    tax = dabi_cci.taxonomy(_ref_df(), image, text, cci).set_index("system")
    assert tax.loc["digits AE flow", "few-step works"] == "K = 4 step holds"
    assert tax.loc["faces AE flow", "few-step works"] == "K = 4 step flips"
    assert tax.loc["16-d word flow", "few-step works"] == "K = 4 step holds"
    assert tax.loc["contextual flow", "few-step works"] == "K = 4 step flips"
    assert (tax[tax.source == "paper"].DABI >= 1.0).all() and tax.loc["ELF (paper)", "DABI"] == 508.0


def test_recorded_curves_are_read_only_at_the_reference_norm(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYN_DATA", str(tmp_path))
    monkeypatch.setenv("TOKENDYN_RECORD_DIRTY", "1")  # a scratch record: the checkout may have edits
    rows = [{"decoder": "digits AE", "along": "residual", "norm": s, "DABI": 1.0 + s, "lo": 0.5, "hi": 2.5,
             "cpu_seconds": 120.0} for s in (0.5, 1.0)]
    (tmp_path / "runs").mkdir()
    results.save_rows(tmp_path / "runs" / "curves.json", rows, kind="dabi-curves", command="record it",
                      params={"reference": 1.0, "tokens": 8192, "digits": 180, "faces": 10, "n_iso": 16}, seed=0,
                      models=["image-latent"])
    df, meta, lines = dabi_cci.recorded_curves("runs/curves.json", 1.0)
    assert list(df.norm) == [0.5, 1.0] and meta["command"] == "record it"
    assert lines[0].startswith("recorded: 8,192 token latents per text decoder, 180 digits, 10 faces")
    assert lines[1] == "digits AE            residual s=0.5: 1.5 [0.5, 2.5]; s=1: 2 [0.5, 2.5]"
    threads = meta["provenance"]["threads"]
    assert dabi_cci.recorded_texts(meta, df) == {"rec_words": "8,192 token latents per text decoder, 180 digits and 10 faces",
                                                 "rec_cpu": f"2 CPU minutes on {threads} thread{'s' if threads != 1 else ''}"}
    df2, meta2, lines2 = dabi_cci.recorded_curves("runs/curves.json", 0.3)  # another reference: this run instead
    assert df2 is None and meta2 is None and "not this run's 0.3" in lines2[0]
    assert dabi_cci.recorded_curves("runs/missing.json", 1.0)[2] == [
        "recorded run runs/missing.json: not in data/; the figure and claim 12 use this run"]


def test_cards_and_words_are_the_decoders_sizes():
    g = torch.Generator().manual_seed(0)
    duts = {"16-d word readout": decoders.linear_readout("16-d word readout", torch.randn(50, 16, generator=g),
                                                         torch.zeros(50), torch.randn(8, 16, generator=g),
                                                         torch.randn(8, 16, generator=g)),
            "contextual readout": decoders.linear_readout("contextual readout", torch.randn(300, 24, generator=g),
                                                          torch.zeros(300), torch.randn(8, 24, generator=g))}
    cards = dabi_cci.decoder_cards(duts, list(duts)).set_index("decoder")
    assert cards.loc["16-d word readout", "latents"] == "16-d" and cards.loc["contextual readout", "vocabulary"] == "300"
    assert cards.loc["16-d word readout", "residual"] == "flow's terminal step"
    assert cards.loc["contextual readout", "residual"] == "(no generator)"
    at_ref = pd.DataFrame([{"decoder": n, "along": "sharpest", "rms": r} for n, r in (("16-d word readout", 0.98),
                                                                                     ("contextual readout", 0.19))]
                          ).set_index(["decoder", "along"])
    words = dabi_cci.model_texts(duts, at_ref, image_shapes={"digits_shape": "8x8 images"})
    assert words["word_d"] == "16-d" and words["word_vocab"] == "50" and words["big_vocabs"] == "50- and 300-way"
    assert words["latent_rms"] == "0.98 for the 16-d word readout, 0.19 for the contextual readout"
    assert words["power_steps"] == "30" and words["digits_shape"] == "8x8 images"


def test_findings_judge_claims_12_and_16_and_the_push():
    cci = {n: SimpleNamespace(value=v) for n, v in dabi_cci.CCI_PAPER.items()}
    flips = pd.DataFrame({("rate", "structured"): [0.6, 0.1, 0.5], ("rate", "isotropic"): [0.01, 0.01, 0.02],
                          ("k", "structured"): [600, 100, 500], ("k", "isotropic"): [10, 10, 20],
                          ("n", "structured"): [1000, 1000, 1000]},
                         index=["contextual readout, sharpest", "contextual readout, residual", "minilm-mlm head, sharpest"])
    rows = dabi_cci.findings(_ref_df(), cci, flips, images=IMAGES, texts=TEXTS, anchor_dev=1e-14, anchor_latents=64,
                             n_norms=4, reference_norm=1.0, curves_from="this run")
    assert [r.claim for r in rows[:2]] == [12, 16] and rows[1].verdict != "not reproduced"
    assert rows[2].verdict == "holds by construction" and rows[2].basis == "64 latents, 4 norms"
    assert rows[3].ours.startswith("contextual readout, sharpest: 60% vs 1%")
    assert rows[0].verdict == "not reproduced"  # images and text at the same DABI: no contrast
