"""The performance appendix's glued words (tokendyn.publish.chapters.performance) are the benchmark
file's targets and sizes, and say "not judged" where the benchmark judged none; its bf16 and
base-size rows, tables and record read a constructed benchmark file as the page prints them."""

from __future__ import annotations

import json

import pytest

from tokendyn.publish.chapters import performance


def _cpu(verdicts):
    return {"glauber_step": {"flops_per_chain_step": {"flop_ratio_shared_site_over_ours": 2.0}},
            "targets": {"speedup_vs_shared_site_full_head": 1.9, "speedup_vs_one_chain": 5.0, "roofline_fraction": 0.75},
            "verdicts": verdicts,
            "base_size": {"model": {"config": {"num_hidden_layers": 12, "hidden_size": 768}}}}


def test_target_texts_read_the_benchmark_file():
    w = performance.target_texts(_cpu({"m: bf16 step >= 0.6 of the bf16 ceiling": {"target": 0.6},
                                       "m: draw <= 0.1 of the bf16 step": {"target": 0.1}}))
    assert w == {"tgt_flop_share": "0.95", "tgt_one_chain": "5x", "tgt_fp32": "0.75", "tgt_bf16": "0.6",
                 "tgt_draw": "0.1", "flop_ratio": "2.0x", "base_shape": "12 layers, hidden size 768"}


def test_a_target_the_cpu_could_not_show_is_not_judged():
    w = performance.target_texts(_cpu({}))
    assert w["tgt_bf16"] == "not judged" and w["tgt_draw"] == "not judged"


# --- the bf16 rows, the base-size rows and the record, on a constructed benchmark file ---


def _step(ours, *, fraction=0.5, bf16=None):
    """A glauber_step record (or its bf16 block's fields) with the rates the page prints."""
    s = {"chain_steps_per_s": {"one_chain": ours / 8, "shared_site_full_head": ours / 2, "ours": ours},
         "speedup_vs_shared_site_full_head": 2.0, "speedup_vs_one_chain": 8.0, "batch": 4, "n": 8,
         "effective_gflops": {"dense_matmul": 100.0}, "roofline_fraction": fraction}
    if bf16 is not None:
        s["bf16"] = bf16
    return s


def _bf16(ours, *, fraction=0.2, compiled=True):
    b = {"chain_steps_per_s": ours, "speedup_over_fp32_ours": 2.5, "speedup_vs_shared_site_full_head": 5.0,
         "speedup_vs_one_chain": 20.0, "dense_matmul_gflops": 400.0, "roofline_fraction": fraction,
         "attn_implementation": "eager", "matmul_bf16_over_fp32": 4.0, "roofline_failed": None}
    if compiled:
        b["compiled"] = {"chain_steps_per_s": ours * 1.1, "speedup_over_eager_bf16": 1.1, "roofline_fraction": 0.25,
                         "compile_s": 12.4, "fidelity": {"rows": 4, "kl_fp32_to_eager_bf16": 2e-4,
                                                         "kl_fp32_to_compiled_bf16": 1e-4, "kl_eager_to_compiled_bf16": 3e-4,
                                                         "max_abs_logit_gap_compiled_vs_eager_bf16": 0.1875,
                                                         "argmax_agree_compiled_vs_eager_bf16": 0.75}}
    return b


def _bench_cpu(*, base=True, bf16=True):
    cpu = {"model": {"name": "small", "weights": "shipped default MLM", "config": {"num_hidden_layers": 6, "hidden_size": 384}},
           "glauber_step": _step(100.0, bf16=_bf16(250.0) if bf16 else None),
           "targets": {"speedup_vs_shared_site_full_head": 1.5, "speedup_vs_one_chain": 10.0, "roofline_fraction": 0.6},
           "bf16_targets": {"speedup_over_fp32_ours": 2.0, "roofline_fraction": 0.6,
                            "speedup_vs_shared_site_full_head": 3.0, "speedup_vs_one_chain": 10.0},
           "bf16_cpu": {"native": True, "native_flags": ["amx_bf16"], "avx512f": True, "probe_matmul_size": 256,
                        "probe_gflops": {"fp32": 300.0, "bf16": 1000.0}},
           "speedup_vs_shared_site_full_head": 2.0, "speedup_vs_one_chain": 8.0, "roofline_fraction": 0.5,
           "provenance": {"written_at": "then"}, "loadavg_before": [1.0, 1.0, 1.0]}
    if not bf16:
        cpu["bf16_not_timed"] = "emulated bf16"
    if base:
        cpu["base_size"] = {"model": {"name": "big", "timed": "untrained head", "config": {"num_hidden_layers": 12, "hidden_size": 768}},
                            "glauber_step": _step(10.0, fraction=None)}
        cpu["bf16_roofline_goal"] = {
            "small": {"target": 0.6, "status": "not met", "rounds_range": [0.15, 0.25], "compiled": {"status": "not met"}},
            "big": {"target": 0.6, "status": "not evaluated (bf16 not timed)"}}
    return cpu


def test_load_bench_reads_the_cpu_file_first_and_needs_it(tmp_path):
    (tmp_path / "glauber-gpu.json").write_text(json.dumps({"d": "gpu"}))
    with pytest.raises(FileNotFoundError, match="holds no glauber-cpu.json"):
        performance.load_bench(tmp_path)
    (tmp_path / "glauber-cpu.json").write_text(json.dumps({"d": "cpu"}))
    assert performance.load_bench(str(tmp_path)) == {"cpu": {"d": "cpu"}, "gpu": {"d": "gpu"}}
    assert list(performance.load_bench(tmp_path)) == ["cpu", "gpu"]


def test_bf16_cpu_text_says_how_c_ran_or_why_it_did_not():
    assert performance.bf16_cpu_text(_bench_cpu()).splitlines() == [
        "bf16 on this CPU: native kernels yes (flags: amx_bf16; AVX-512: True); probe matmul 256^3: fp32 300, bf16 1e+03 GFLOP/s",
        "(c) in bf16 runs with eager attention; (a) and (b) stay in fp32, as the public samplers run"]
    cpu = _bench_cpu(bf16=False)
    cpu["bf16_cpu"].update(native=False, native_flags=[])
    assert performance.bf16_cpu_text(cpu).splitlines() == [
        "bf16 on this CPU: native kernels NO (flags: no avx512_bf16 / amx_bf16; AVX-512: True); probe matmul 256^3: fp32 300, bf16 1e+03 GFLOP/s",
        "(c) in bf16 was not timed: emulated bf16"]
    del cpu["bf16_cpu"], cpu["bf16_not_timed"]  # a file older than both
    assert performance.bf16_cpu_text(cpu) == "(c) in bf16 was not timed: this benchmark file predates the bf16 rows"


def test_bf16_table_judges_each_target_and_a_failed_fraction_meets_none():
    cpu = _bench_cpu()
    cpu["glauber_step"]["roofline_fraction"] = 1.3  # (c) fp32 faster than its reference: a failed measurement
    t = performance.bf16_table(cpu).set_index("quantity")
    assert list(t.columns) == ["measured", "target", "met"] and len(t) == 7
    assert t.loc["(c) bf16 chain-steps/s"].tolist() == ["250.0", "–", "–"]
    assert t.loc["speed-up of (c) bf16 over (c) fp32"].tolist() == ["2.500", "2", "met"]
    assert t.loc["(c) bf16 effective FLOP rate / best bf16 dense matmul (bf16 roofline)"].tolist() == ["0.200", "0.6", "not met"]
    fp32 = t.loc["(c) fp32 effective FLOP rate / best fp32 dense matmul (fp32 roofline)"]
    assert fp32["measured"].startswith("failed measurement (a fraction of 1.30") and fp32["met"] == "not met (failed measurement)"
    assert t.loc["speed-up of (c) bf16 over (b) fp32", "met"] == "met" and t.loc["speed-up of (c) bf16 over (a) fp32", "met"] == "met"


def test_compiled_bf16_text_prints_rate_verdict_and_fidelity():
    cpu = _bench_cpu()
    assert performance.compiled_bf16_text(cpu).splitlines() == [
        "(c') compiled bf16: 275.0 chain-steps/s, 1.10x (c) bf16, bf16 roofline fraction 0.250 (target 0.6: not met); compiled in 12 s",
        "(c') fidelity on the benchmark's 4 rows: KL(fp32 || bf16) 2.0e-04 nats eager, 1.0e-04 compiled; compiled against "
        "eager bf16: KL 3.0e-04, largest logit gap 0.188, argmax agrees on 75% of rows"]
    del cpu["glauber_step"]["bf16"]["compiled"]
    assert performance.compiled_bf16_text(cpu) == "(c') compiled bf16 step: not in this benchmark file (it predates it)"


def test_timed_models_name_the_state_timed_and_add_the_base_size():
    cpu = _bench_cpu()
    sized = performance.timed_models(cpu)
    assert list(sized) == ["small", "big"]
    assert sized["small"][1] == "trained" and sized["small"][3] is cpu["glauber_step"]["bf16"]
    assert sized["big"][1] == "untrained head" and sized["big"][3] is None
    cpu["model"]["timed"] = "random weights"  # a file that names the state wins over the weights' rule
    assert list(performance.timed_models(_bench_cpu(base=False))) == ["small"]
    assert performance.timed_models(cpu)["small"][1] == "random weights"


def test_base_size_text_has_a_line_per_dtype_and_the_goal():
    lines = performance.base_size_text(_bench_cpu()).splitlines()
    assert [line.split(" (")[0].split(":")[0] for line in lines] == [
        "small", "small bf16", "small bf16 compiled", "small bf16 goal", "big", "big bf16 goal"]
    assert lines[0] == ("small (trained), batch 4, n = 8, fp32: (a) 12.50, (b) 50.00, (c) 100.00 chain-steps/s; (c) 2.00x (b), "
                        "8.00x (a); fp32 ceiling 100.0 GFLOP/s, fraction 0.500")
    assert lines[3] == "small bf16 goal (at least 0.6 of the bf16 ceiling): not met (rounds 0.15-0.25); compiled (c'): not met"
    assert lines[4].endswith("fraction failed measurement (no reason recorded)")
    assert lines[5] == "big bf16 goal (at least 0.6 of the bf16 ceiling): not evaluated (bf16 not timed)"
    assert performance.base_size_text(_bench_cpu(base=False)) == (
        "This benchmark file predates the base-size rows: run `make bench` to add them.")


def test_base_size_table_puts_models_side_by_side_and_says_not_timed():
    t = performance.base_size_table(_bench_cpu()).set_index("quantity")
    assert list(t.columns) == ["small", "big"] and len(t) == 15 and t.index[0] == "model state timed"
    assert t.loc["layers, hidden size"].tolist() == ["6, 384", "12, 768"]
    assert t.loc["(c) ours, bf16 (chain-steps/s)"].tolist() == ["250.0", "not timed"]
    assert t.loc["bf16 matmul ceiling: fraction (c') reaches", "small"] == "400 GFLOP/s: 0.25"
    assert t.loc["bf16 goal"].tolist() == ["not met by (c) (target 0.6); not met by (c')", "not evaluated (bf16 not timed)"]
    assert t.loc["fp32 matmul ceiling: fraction (c) reaches", "big"] == "100 GFLOP/s: failed measurement (no reason recorded)"


def test_metrics_record_every_device_the_base_size_and_the_fidelity_or_why_not():
    cpu = _bench_cpu()
    m = performance.metrics({"cpu": cpu, "gpu": _bench_cpu(base=False)}, None)
    assert list(m) == ["cpu", "gpu", "bf16_fidelity"]
    assert m["cpu"]["chain_steps_per_s"]["ours"] == 100.0 and m["cpu"]["measured_at"] == "then"
    assert m["cpu"]["base_size"] == {"model": "big", "timed": "untrained head", "chain_steps_per_s": cpu["base_size"]["glauber_step"]["chain_steps_per_s"],
                                     "roofline_fraction": None, "bf16": None}
    assert m["cpu"]["bf16_roofline_goal"] is cpu["bf16_roofline_goal"] and "base_size" not in m["gpu"]
    assert m["bf16_fidelity"] == {"not_measured": "no native bf16 kernels on this CPU", "bf16_cpu": cpu["bf16_cpu"]}
    assert performance.metrics({"cpu": cpu}, {"kl": {}})["bf16_fidelity"] == {"kl": {}}
