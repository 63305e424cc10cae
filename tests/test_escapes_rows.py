"""Chapter 7's assembly (tokendyn.publish.chapters.escapes) on constructed records and tables: claim
14 reads the recorded run when it has the shipped flow, its position is said against the rule's own
thresholds, the intervention words are the table's numbers, and each page (7.1, 7.2) gets its own
rows, thresholds and summary."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from tokendyn.core.stats import Estimate
from tokendyn.publish import results
from tokendyn.publish.chapters import escapes


def _row(g, k, smp, **kw):
    return {"generator": g, "K": k, "sampler": smp, **kw}


def _scores(ppl, lo, hi, ent, ent_lo, ent_hi, n=1280):
    return dict(ppl=ppl, ppl_lo=lo, ppl_hi=hi, entropy=ent, entropy_lo=ent_lo, entropy_hi=ent_hi, n_texts=n,
                repetition=0.01, distinct2=0.9)


ROWS = [_row("real text", 0, "REAL", **_scores(60, 55, 66, 5.0, 5.0, 5.0)),
        _row(escapes.SHIPPED, 4, "ODE", **_scores(620, 580, 660, 4.4, 4.3, 4.5)),
        _row(escapes.SHIPPED, 4, "SDE", **_scores(300, 280, 320, 4.0, 3.9, 4.1)),
        _row(escapes.SHIPPED, 4, "matched", ode_ppl=600, ode_lo=560, ode_hi=640, sde_ppl=410, sde_lo=380, sde_hi=440,
             ratio=1.45, ratio_lo=1.35, ratio_hi=1.57)]


def test_recorded_ode_sde_and_claim14_read_the_record(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYN_DATA", str(tmp_path))
    monkeypatch.setenv("TOKENDYN_RECORD_DIRTY", "1")  # a scratch record: the checkout may have edits
    (tmp_path / "runs").mkdir()
    results.save_rows(tmp_path / "runs" / "ode.json", ROWS, kind="ode_sde", command="record it",
                      params={"seeds": 5, "per_seed": 256}, seed=0, models=["context-latent"])
    rec, meta, lines = escapes.recorded_ode_sde("runs/ode.json", None)
    assert lines[1] == "real text: judge PPL 60 [55, 66], entropy 5.00 nats"
    assert lines[-1].endswith("at equal entropy ODE 600 [560, 640] vs SDE 410 [380, 440]: ratio 1.45 [1.35, 1.57]")
    c14 = escapes.claim14_inputs(rec, meta, 4, live_ode=None, live_sde=None, live_real=None, live_sample="live")
    assert c14.sample == "5 seeds x 256 windows" and c14.real == (60, 5.0)
    assert (c14.matched.value, c14.matched.n) == (1.45, 2560) and c14.ode.ppl.value == 620 and c14.sde.entropy.n == 5
    live = SimpleNamespace(ppl=Estimate(1.0, 0.5, 2.0, 8), entropy=Estimate(4.0, 3.9, 4.1, 3))
    at_k8 = escapes.claim14_inputs(rec, meta, 8, live_ode=live, live_sde=live, live_real=live, live_sample="live")
    assert at_k8.matched is None and at_k8.sample == "live"  # no recorded shipped flow at K = 8: the live run
    assert escapes.recorded_ode_sde("runs/missing.json", None)[:2] == (None, None)


@pytest.mark.parametrize("ratio, words", [((1.45, 1.35, 1.57), "above 1.15 and below 2.9"),
                                          ((1.1, 1.0, 1.2), "not above 1.15"),
                                          ((4.0, 3.0, 5.0), "inside the band")])
def test_claim14_position_reads_the_rules_thresholds(ratio, words):
    assert escapes.claim14_position(Estimate(*ratio, 100)).endswith(words)


def test_why_texts_quote_the_intervention_table():
    w = pd.DataFrame({"changed": [0.0, 0.074, 0.119, 0.07, 0.096], "ode_ppl": [548, 807, 1141, 336, 2128],
                      "ode_ppl_lo": [494, 721, 999, 306, 1886], "ode_ppl_hi": [606, 904, 1302, 372, 2381]},
                     index=["shipped (CE)", "CE, retrained", *escapes.INTERVENTIONS])
    meta = {"provenance": {"params": {"retrain_steps": 1200, "retrain_batch": 256, "n_train": 4096}}}
    assert escapes.why_texts(w, meta) == {"iv_changed": "7%-12%", "iv_hinge_ppl": "336 [306, 372] against 807 [721, 904]",
                                          "iv_training": "1,200 steps of 256 tokens on 4,096 windows"}


def test_each_page_states_its_own_rules_thresholds():
    assert escapes.rule_texts() == {"c13_texts": "64", "c13_tokens": "128", "c13_rise": "0.10", "c14_factor": "2x",
                                    "c14_weaker": "1.15", "c14_band_lo": "2.9"}
    assert escapes.decoder_rule_texts() == {"c15_changed": "5%", "tube_share": "2%"}


IV = pd.DataFrame({"flip": [0.112, 0.099, 0.193, 0.100, 0.107], "lo": [0.106, 0.093, 0.184, 0.094, 0.101],
                   "hi": [0.119, 0.106, 0.201, 0.106, 0.114], "tokens": [16384] * 5,
                   "changed": [0.0, 0.074, 0.119, 0.07, 0.096], "dabi": [380.4, 510.0, 360.0, 670.0, 550.0],
                   "ode_ppl": [548, 807, 1141, 336, 2128], "ode_ppl_lo": [494, 721, 999, 306, 1886],
                   "ode_ppl_hi": [606, 904, 1302, 372, 2381]},
                  index=["shipped (CE)", "CE, retrained", *escapes.INTERVENTIONS])


def test_decoder_findings_are_claim_15_and_the_stiffness_law():
    f15, stiff = escapes.decoder_findings(w=IV, src="the recorded run", recovered=[], reference_k=4, stiffness=(0.85, 0.94),
                                          line_slope=1.03, m_range=(64, 1024), n_mc=20000)
    assert f15.claim == 15 and f15.verdict == "partly"   # powered, nothing recovered, the hinge's text better
    assert f15.ours == "shipped (CE) 11.2%; CE, retrained 9.9%; label smoothing 19.3%; hinge 10.0%; 2-layer MLP 10.7%"
    assert f15.basis == "K = 4 oracle roll-in, 16384 tokens, the recorded run; against retrained CE, recovered: none"
    assert stiff.ours == "S/sqrt(ln M) in [0.85, 0.94] for M = 64-1024; line slope 1.03" and stiff.verdict == "reproduced"


def test_decoder_reading_quotes_the_table_and_the_theory_check():
    text = escapes.decoder_reading(reference_k=4, w=IV.loc[["shipped (CE)", "hinge"]], src="the recorded run",
                                   stiffness=(0.851, 0.94), m_range=(64, 1024), line_slope=1.031)
    assert "(the recorded run). $K = 4$ terminal flips: shipped (CE) 11.2%; hinge 10.0%;" in text
    assert "DABI shipped (CE) 380, hinge 670." in text and "stays in [0.85,\n  0.94] from $M$ = 64 to 1024" in text
    assert "slope\n  1.03 in $M$" in text


def test_ladder_metrics_keep_every_generator_and_k():
    rec = {(r["generator"], r["K"], r["sampler"]): r for r in ROWS}
    out = escapes.ladder_metrics(rec)
    assert list(out) == [escapes.SHIPPED] and out[escapes.SHIPPED][4]["matched_ode_over_sde"] == [1.45, 1.35, 1.57]
    assert escapes.ladder_metrics(None) is None


def test_record_interventions_writes_the_table_and_the_command_that_remakes_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYN_DATA", str(tmp_path))
    monkeypatch.setenv("TOKENDYN_RECORD_DIRTY", "1")  # a scratch record: the checkout may have edits
    table = pd.DataFrame({"readout": ["shipped (CE)", "hinge"], "flip": [0.11, 0.10], "predicted": [0.11, float("nan")]}
                         ).set_index("readout")
    path = escapes.record_interventions("runs/iv.json", table, {"seed": 3, "retrain_steps": 1200})
    rows, meta = results.load_rows(path)
    assert path == tmp_path / "runs" / "iv.json" and meta["kind"] == "readout_interventions"
    assert [r["readout"] for r in rows] == ["shipped (CE)", "hinge"] and rows[0]["flip"] == 0.11
    assert meta["command"] == ("papermill book/07_escapes_decoders.ipynb out.ipynb --cwd book -p seed 3 -p retrain_steps 1200 "
                               "-p record_to runs/iv.json")
    assert meta["provenance"]["params"]["retrain_steps"] == 1200 and meta["provenance"]["seed"] == 3
