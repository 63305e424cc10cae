"""The performance appendix's glued words (tokendyn.publish.chapters.performance) are the benchmark
file's targets and sizes, and say "not judged" where the benchmark judged none."""

from __future__ import annotations

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
