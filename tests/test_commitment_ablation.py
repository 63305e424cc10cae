"""Claim 13's statistics and rule on constructed texts, and scripts/record_commitment.py's resume
and parameter errors (no model is loaded)."""

import numpy as np
import pytest

from tokendyn.publish import verdicts as V
from tokendyn.evaluation.ablation import commitment_effect, commitment_effects
from tokendyn.evaluation.generation import seq_rep
from tokendyn.core.stats import Estimate
from script_runs import killed_then_resumed, load_script


def test_seq_rep_counts_repeated_four_grams_at_any_distance():
    assert seq_rep([[1, 2, 3, 4, 5, 6]]).tolist() == [0.0]
    # 1 2 3 4 1 2 3 4: five 4-grams, four distinct ((1,2,3,4) twice)
    assert seq_rep([[1, 2, 3, 4, 1, 2, 3, 4]]).tolist() == [pytest.approx(1 - 4 / 5)]
    assert seq_rep([[7] * 10]).tolist() == [pytest.approx(1 - 1 / 7)]
    assert seq_rep([[1, 2], [3, 3, 3]], n=2).tolist() == [0.0, pytest.approx(0.5)]
    with pytest.raises(ValueError, match="token_lists\\[0\\] has 3 tokens"):
        seq_rep([[1, 2, 3]])


def texts(rng, n, length, loop=None):
    """``n`` token lists: random ids from 1000, or a loop of ``loop`` ids repeated."""
    if loop is None:
        return [rng.integers(0, 1000, length).tolist() for _ in range(n)]
    return [(rng.integers(0, 1000, loop).tolist() * length)[:length] for _ in range(n)]


def variant(rng, toks, nll_per_token):
    count = np.full(len(toks), 128.0)
    return {"tokens": toks, "count": count, "nll": count * nll_per_token * rng.uniform(0.9, 1.1, len(toks))}


def test_a_collapse_into_loops_is_reproduced_and_each_part_is_needed():
    rng = np.random.default_rng(0)
    good = variant(rng, texts(rng, 64, 128), np.log(50))
    looped = variant(rng, texts(rng, 64, 128, loop=8), np.log(500))
    e = commitment_effect("gen", "judge", good, looped)
    assert e.n_texts == 64 and e.min_tokens == 128 and not e.judged_by_itself
    assert e.ppl[0].value == pytest.approx(50, rel=0.1) and e.ppl[1].lo > 2 * e.ppl[0].hi
    assert e.rep[0].hi < 0.01 and e.rep[1].lo > 0.9          # a loop of 8 repeats almost every 4-gram
    assert e.entropy[1].hi < e.entropy[0].lo
    assert V.claim_13({"a": e, "b": e}).verdict == V.REPRODUCED
    # the same loops at the same perplexity: no collapse, so not even partly
    flat = commitment_effect("gen", "judge", good, variant(rng, texts(rng, 64, 128, loop=8), np.log(50)))
    assert V.claim_13({"a": flat}).verdict == V.NOT
    # perplexity collapses but the texts do not loop: partly
    noise = commitment_effect("gen", "judge", good, variant(rng, texts(rng, 64, 128), np.log(500)))
    assert V.claim_13({"a": e, "b": noise}).verdict == V.PARTLY


def E(v, lo, hi):
    return Estimate(v, lo, hi, 64)


def effect(**kw):
    from tokendyn.evaluation.ablation import CommitmentEffect

    base = dict(generator="g", judge="j", judged_by_itself=False, n_texts=64, min_tokens=128,
                ppl=(E(50, 45, 55), E(300, 250, 350)), rep=(E(0.02, 0.01, 0.03), E(0.30, 0.25, 0.35)),
                entropy=(E(4.0, 3.9, 4.1), E(3.0, 2.9, 3.1)))
    return CommitmentEffect(**{**base, **kw})


def test_claim_13_needs_the_sample_and_the_size():
    assert V.claim_13({"g": effect()}).verdict == V.REPRODUCED
    for small in (dict(n_texts=63), dict(min_tokens=32), dict(judged_by_itself=True)):
        assert V.claim_13({"g": effect(**small)}).verdict == V.NOT_MEASURED
    # repetition up, but by less than 0.10 above the committed interval: not 'takes over'
    assert V.claim_13({"g": effect(rep=(E(0.02, 0.01, 0.03), E(0.12, 0.10, 0.14)))}).verdict == V.PARTLY
    # perplexity up 1.9x of the upper end only: no collapse
    assert V.claim_13({"g": effect(ppl=(E(50, 45, 55), E(110, 104, 120)))}).verdict == V.NOT
    assert V.claim_13({"g": effect(entropy=(E(4.0, 3.9, 4.1), E(3.95, 3.8, 4.1)))}).verdict == V.PARTLY
    assert V.claim_13({}).verdict == V.NOT_MEASURED


def test_commitment_effects_reads_each_generators_named_judge():
    rng = np.random.default_rng(1)
    rows = []
    for variant_, nll in (("committed", 3.0), ("ablated", 6.0)):
        toks = texts(rng, 8, 16)
        rows.append({"generator": "g", "variant": variant_, "judge": "j", "tokens": toks,
                     "judges": {"j": {"nll": [nll * 16] * 8, "count": [16] * 8},
                                "g": {"nll": [1.0] * 8, "count": [16] * 8}}})
    e = commitment_effects(rows)["g"]
    assert e.judge == "j" and e.ppl[0].value == pytest.approx(np.exp(3.0)) and e.ppl[1].value == pytest.approx(np.exp(6.0))
    with pytest.raises(ValueError, match="need both"):
        commitment_effects(rows[:1])


def load():
    return load_script("scripts/record_commitment.py")


def test_record_commitment_resumes_batch_by_batch_and_records_its_command(tmp_path, monkeypatch):
    rc = load()
    monkeypatch.setattr(rc, "Models", lambda args: None)

    def decoded(m, kind, variant, seed, args):
        judges = {"smollm2-135m": {"nll": [1.0, 2.0], "count": [3, 4]}}
        if kind == rc.AR:
            judges["mpnet-base-mlm"] = {"nll": [5.0, 6.0], "count": [3, 4]}
        return {"texts": ["a", "b"], "tokens": [[1, 2], [3, 4]], "cci": 1.0, "precision": "float32",
                "judges": judges, "seconds": 1.0}

    out = tmp_path / "rec.json"
    argv = ["--seeds", "2", "--per-seed", "2", "--tokens", "8", "--diffusion-steps", "4", "--out", str(out)]
    calls, rec = killed_then_resumed(rc, "batch", decoded, argv, out, tmp_path, monkeypatch,
                                     kill_at=3, kept="commitment/*.json", n_kept=2)
    assert len(calls) == 3 + 6                # the two kept batches are not decoded again
    assert [(r["generator"], r["variant"], r["judge"]) for r in rec["rows"]] == [
        ("smollm2-135m", "committed", "mpnet-base-mlm"), ("smollm2-135m", "ablated", "mpnet-base-mlm"),
        ("minilm-mlm", "committed", "smollm2-135m"), ("minilm-mlm", "ablated", "smollm2-135m")]
    assert rec["rows"][0]["seeds"] == [0, 1] and len(rec["rows"][0]["texts"]) == 4
    assert rec["rows"][0]["judges"]["mpnet-base-mlm"]["nll"] == [5.0, 6.0, 5.0, 6.0]
    assert "--seeds 2 --per-seed 2 --tokens 8" in rec["command"] and rec["kind"] == "commitment ablation on long texts"
    assert rec["provenance"]["params"]["tokens"] == 8 and "git_commit" in rec["provenance"]


@pytest.mark.parametrize("argv, match", [(["--seeds", "0"], "seeds"), (["--per-seed", "1"], "per_seed"),
                                         (["--tokens", "600"], "tokens"), (["--diffusion-steps", "200"], "diffusion_steps"),
                                         (["--tau", "0"], "tau"), (["--ar-judge", "minilm-mlm"], "ar-judge")])
def test_record_commitment_names_a_bad_parameter_before_any_compute(argv, match, monkeypatch):
    rc = load()
    monkeypatch.setattr(rc, "Models", lambda *a: pytest.fail("loaded a model before checking"))
    with pytest.raises((ValueError, SystemExit), match=match):
        rc.main(argv)


def test_an_effect_gives_its_rows_in_the_long_format_the_figure_draws():
    rows = effect().rows()
    assert len(rows) == 6 and {r["variant"] for r in rows} == {"committed", "ablated"}
    ppl = [r for r in rows if r["score"] == "judge perplexity"]
    assert [(r["variant"], r["value"], r["lo"], r["hi"]) for r in ppl] == [("committed", 50, 45, 55), ("ablated", 300, 250, 350)]
