"""The performance appendix's glued words: the benchmark's targets and the sizes it timed, read from
the file ``make bench`` wrote (``benchmarks/results/glauber-cpu.json``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["target_texts"]


def _verdict_target(cpu: Mapping[str, Any], what: str) -> str:
    """The target of the first verdict whose name holds ``what`` (the verdicts are named
    ``"<model>: <what> <target> ..."``), or "not judged" where the benchmark judged none."""
    return next((f"{v['target']:g}" for k, v in cpu["verdicts"].items() if what in k), "not judged")


def target_texts(cpu: Mapping[str, Any]) -> dict[str, str]:
    """The targets the benchmark judged and what it timed, in words: the share of the FLOP ratio (b)
    must reach (``tgt_flop_share``), the speed-up over one chain (``tgt_one_chain``), the fp32 and
    bf16 ceiling fractions (``tgt_fp32``, ``tgt_bf16``), the draw's largest share of a bf16 step
    (``tgt_draw``), the FLOP ratio of (b) over ours (``flop_ratio``) and the base-size model's layers
    and width (``base_shape``)."""
    step = cpu["glauber_step"]
    ratio = step["flops_per_chain_step"]["flop_ratio_shared_site_over_ours"]
    tg = cpu["targets"]
    words = {"tgt_flop_share": f"{tg['speedup_vs_shared_site_full_head'] / ratio:.2f}",
             "tgt_one_chain": f"{tg['speedup_vs_one_chain']:g}x", "tgt_fp32": f"{tg['roofline_fraction']:g}",
             "tgt_bf16": _verdict_target(cpu, "bf16 step >="), "tgt_draw": _verdict_target(cpu, "draw <="),
             "flop_ratio": f"{ratio:.1f}x"}
    base = cpu.get("base_size")
    if base is not None:
        c = base["model"]["config"]
        words["base_shape"] = f"{c['num_hidden_layers']} layers, hidden size {c['hidden_size']}"
    return words
