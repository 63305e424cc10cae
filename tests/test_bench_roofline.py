"""benchmarks/run.py's roofline: the ceiling is the best matmul shape of each round, and a (c) rate
above it is a failed measurement, never a fraction. Tiny models built in code, a few seconds on a CPU."""

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

from tokendyn.models.tiny import build_tiny

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run", RUN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ceiling_is_the_best_shape_of_each_round(bench):
    r = bench.roofline([40e9, 60e9, 30e9], {"square": [100e9, 80e9, 50e9], "head": [90e9, 120e9, 60e9]})
    assert r["dense_matmul"]["per_round_ceiling_gflops"] == pytest.approx([100, 120, 60])
    assert r["dense_matmul"]["ceiling_gflops"] == pytest.approx(100)
    assert r["dense_matmul"]["gflops_by_shape"] == pytest.approx({"square": 80, "head": 90})
    assert r["dense_matmul"]["best_shape"] == "head"
    assert r["roofline_fraction"] == pytest.approx(0.5)  # median of 0.4, 0.5, 0.5
    assert r["roofline_failed"] is False and "roofline_failed_reason" not in r


def test_fraction_above_one_is_a_failed_measurement(bench):
    r = bench.roofline([120e9, 130e9], {"square": [100e9, 100e9], "head": [50e9, 100e9]})
    assert r["roofline_fraction"] is None
    assert r["roofline_failed"] is True
    assert "1.25x" in r["roofline_failed_reason"]
    assert r["dense_matmul"]["ceiling_gflops"] == pytest.approx(100)
    exact = bench.roofline([100e9], {"square": [100e9]})  # exactly at the ceiling is still a fraction
    assert exact["roofline_fraction"] == pytest.approx(1.0) and not exact["roofline_failed"]


def test_goal_is_met_not_met_or_not_evaluated(bench):
    assert bench.judge(0.7, 0.6)["status"] == "met" and bench.judge(0.7, 0.6)["met"] is True
    assert bench.judge(0.5, 0.6)["met"] is False
    failed = bench.judge(None, 0.6)
    assert failed["met"] is None and failed["status"] == "not evaluated: the measurement failed"
    assert bench.judge(None, 0.6, why_none="not timed")["status"] == "not evaluated: not timed"
    assert not bench._met(None, 0.6) and bench._met(0.6, 0.6)


def test_glauber_bench_on_a_tiny_bert(bench):
    tiny = build_tiny("bert", hidden=32, layers=2)
    loaded = bench._Loaded(tiny.name, tiny.model, tiny.tokenizer, {})
    loaded16 = bench.bf16_copy(loaded)
    assert loaded16.model.dtype == torch.bfloat16 and loaded16.info["attn_implementation"] == "eager"
    assert tiny.model.dtype == torch.float32  # a copy: the fp32 model is untouched
    gs = bench.glauber_bench(loaded, batch=4, n=6, device="cpu", dtype=torch.float32, rounds=1,
                             one_chain_chains=2, loaded_bf16=loaded16)
    tokens, hidden, inner, vocab = 4 * 8, 32, 64, tiny.model.config.vocab_size
    comp = gs["bf16"]["compiled"]
    assert comp["chain_steps_per_s"] > 0 and comp["compile_s"] >= 0
    fid = comp["fidelity"]
    # bf16 rounding, not a different model: the compiled step stays as close to fp32 as eager bf16
    assert fid["rows"] == 4 and 0 <= fid["kl_fp32_to_compiled_bf16"] < 1e-2
    assert 0 <= fid["kl_eager_to_compiled_bf16"] < 1e-2
    if comp["roofline_failed"]:
        assert comp["roofline_fraction"] is None and comp["roofline_failed_reason"]
    else:
        assert 0 < comp["roofline_fraction"] <= 1
    goal = bench.bf16_goal(gs)
    assert goal["measured"] == gs["bf16"]["roofline_fraction"] and goal["compiled"]["measured"] == comp["roofline_fraction"]
    lo, hi = goal["rounds_range"]
    assert lo <= hi and len(gs["bf16"]["per_round_fraction"]) == 1
    assert bench.bf16_goal({})["met"] is None
    for step in (gs, gs["bf16"]):
        dense = step["dense_matmul"]
        assert {k: v for k, v in dense["shapes"].items() if k != "square"} == {
            "projection": [tokens, hidden, hidden], "feed_forward": [tokens, hidden, inner],
            "vocab_head": [tokens, hidden, vocab]}
        # one round: the ceiling is exactly the best shape's rate
        assert dense["ceiling_gflops"] == pytest.approx(max(dense["gflops_by_shape"].values()))
        if step["roofline_failed"]:
            assert step["roofline_fraction"] is None and step["roofline_failed_reason"]
        else:
            assert 0 < step["roofline_fraction"] <= 1
    assert gs["effective_gflops"]["dense_matmul"] == gs["dense_matmul"]["ceiling_gflops"]
    assert gs["dense_matmul_size"] == gs["dense_matmul"]["shapes"]["square"][0]


def test_the_appendix_reads_a_failed_fraction_as_a_failure():
    from tokendyn.figures.performance import fraction_text, goal_text, roofline_value, target_text

    assert roofline_value({"roofline_fraction": 0.82}) == 0.82
    assert roofline_value({"roofline_fraction": None, "roofline_failed": True}) is None
    assert roofline_value({"roofline_fraction": 1.14}) is None  # a file from before the rule
    assert fraction_text({"roofline_fraction": 0.8234}) == "0.82"
    assert fraction_text({"roofline_fraction": None, "roofline_failed_reason": "no ceiling"}) == \
        "failed measurement (no ceiling)"
    assert "1.14" in fraction_text({"roofline_fraction": 1.14})
    assert target_text(0.63, 0.6) == "met" and target_text(0.48, 0.6) == "not met"
    assert target_text(None, 0.6) == "not met (failed measurement)"
    # a goal entry reads its step's fraction again: a pre-rule 1.14 is a failure, not "met"
    goal = {"target": 0.6, "status": "met"}
    assert goal_text(goal, {"roofline_fraction": 0.61}) == "met"
    assert goal_text(goal, {"roofline_fraction": 0.59}) == "not met"
    assert goal_text(goal, {"roofline_fraction": 1.14}) == "not met (failed measurement)"
    assert goal_text({"target": 0.6, "status": "not evaluated: no bf16"}, None) == "not evaluated: no bf16"
