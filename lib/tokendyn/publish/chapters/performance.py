"""The performance appendix's words, tables and record, read from the files ``make bench`` wrote
(``benchmarks/results/glauber-<device>.json``): the targets and the sizes it timed, the bf16 rows,
the base-size rows and the metrics the page saves.

A benchmark file (``cpu`` below) holds ``glauber_step`` (the default model's (a)-(d) step, with its
``bf16`` block where bf16 was timed, and that block's ``compiled`` step (c')), ``targets``,
``bf16_targets``, ``bf16_cpu`` (the CPU's bf16 flags and probe), ``base_size`` (the base-size model's
record and step) and ``bf16_roofline_goal`` (per model); older files lack some of these, and each
function says what it prints then.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from ..figures.performance import fraction_text, goal_text, roofline_value, target_text

__all__ = ["target_texts", "load_bench", "bf16_cpu_text", "bf16_table", "compiled_bf16_text", "timed_models",
           "base_size_text", "base_size_table", "metrics"]

# One timed model: (its record, the state timed, its (a)-(d) step, its bf16 step or None).
Timed = tuple[Mapping[str, Any], Any, Mapping[str, Any], Mapping[str, Any] | None]


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


def load_bench(folder: str | Path) -> dict[str, dict[str, Any]]:
    """The benchmark files in ``folder``: ``{"cpu": ..., "gpu": ...}`` for each of
    ``glauber-cpu.json`` and ``glauber-gpu.json`` that exists (in that order). Raises
    ``FileNotFoundError`` where the CPU file is missing: the page renders nothing without it."""
    files = {dev: Path(folder) / f"glauber-{dev}.json" for dev in ("cpu", "gpu")}
    bench = {dev: json.loads(p.read_text()) for dev, p in files.items() if p.is_file()}
    if "cpu" not in bench:
        raise FileNotFoundError(f"results_folder={str(folder)!r} holds no glauber-cpu.json: run `make bench` first")
    return bench


def bf16_cpu_text(cpu: Mapping[str, Any]) -> str:
    """What the CPU's bf16 is (native kernels or not, its flags, the probe's fp32 and bf16 matmul
    rates; absent from files that predate the probe) and how (c) ran in bf16, or why it was not
    timed: one line each."""
    lines = []
    bf, bf_cpu = cpu["glauber_step"].get("bf16"), cpu.get("bf16_cpu")
    if bf_cpu is not None:
        lines.append(f"bf16 on this CPU: native kernels {'yes' if bf_cpu['native'] else 'NO'} "
                     f"(flags: {', '.join(bf_cpu['native_flags']) or 'no avx512_bf16 / amx_bf16'}; AVX-512: {bf_cpu['avx512f']}); "
                     f"probe matmul {bf_cpu['probe_matmul_size']}^3: fp32 {bf_cpu['probe_gflops']['fp32']:.3g}, "
                     f"bf16 {bf_cpu['probe_gflops']['bf16']:.2g} GFLOP/s")
    if bf is None:
        lines.append(f"(c) in bf16 was not timed: {cpu.get('bf16_not_timed', 'this benchmark file predates the bf16 rows')}")
    else:
        lines.append(f"(c) in bf16 runs with {bf.get('attn_implementation', 'sdpa')} attention; (a) and (b) stay in fp32, "
                     "as the public samplers run")
    return "\n".join(lines)


def bf16_table(cpu: Mapping[str, Any]) -> pd.DataFrame:
    """(c) in bf16 against its CPU targets, one row per quantity (``quantity``, ``measured`` as
    printed, ``target``, ``met``; "–" where a row has no target): its rate, its speed-ups over (c)
    fp32, (b) and (a), its fraction of the bf16 roofline beside (c) fp32's of the fp32 one, and the
    ratio of the two ceilings. A failed roofline fraction meets no target. Needs the ``bf16`` block."""
    gs = cpu["glauber_step"]
    bf, bt = gs["bf16"], cpu["bf16_targets"]
    # (quantity, measured as printed, value against the target, target)
    rows = [("(c) bf16 chain-steps/s", f"{bf['chain_steps_per_s']:.1f}", None, None),
            ("speed-up of (c) bf16 over (c) fp32", f"{bf['speedup_over_fp32_ours']:.3f}",
             bf["speedup_over_fp32_ours"], bt["speedup_over_fp32_ours"]),
            ("(c) bf16 effective FLOP rate / best bf16 dense matmul (bf16 roofline)", fraction_text(bf, ".3f"),
             roofline_value(bf), bt["roofline_fraction"]),
            ("(c) fp32 effective FLOP rate / best fp32 dense matmul (fp32 roofline)", fraction_text(gs, ".3f"),
             roofline_value(gs), cpu["targets"]["roofline_fraction"]),
            ("speed-up of (c) bf16 over (b) fp32", f"{bf['speedup_vs_shared_site_full_head']:.3f}",
             bf["speedup_vs_shared_site_full_head"], bt["speedup_vs_shared_site_full_head"]),
            ("speed-up of (c) bf16 over (a) fp32", f"{bf['speedup_vs_one_chain']:.3f}",
             bf["speedup_vs_one_chain"], bt["speedup_vs_one_chain"]),
            ("bf16 matmul ceiling / fp32 matmul ceiling (best shape of each round)", f"{bf['matmul_bf16_over_fp32']:.3f}",
             None, None)]
    return pd.DataFrame([{"quantity": q, "measured": m, "target": "–" if t is None else f"{t:g}",
                          "met": "–" if t is None else target_text(v, t)} for q, m, v, t in rows])


def compiled_bf16_text(cpu: Mapping[str, Any]) -> str:
    """The compiled bf16 step (c'): its rate, its gain over (c) bf16, its roofline fraction against
    the bf16 target, its compile time, and its logits' fidelity on the benchmark's own rows (two
    lines); one line saying it is missing where the file predates it. Needs the ``bf16`` block."""
    bfc = cpu["glauber_step"]["bf16"].get("compiled")
    if bfc is None:
        return "(c') compiled bf16 step: not in this benchmark file (it predates it)"
    target, fid = cpu["bf16_targets"]["roofline_fraction"], bfc["fidelity"]
    return (f"(c') compiled bf16: {bfc['chain_steps_per_s']:.1f} chain-steps/s, {bfc['speedup_over_eager_bf16']:.2f}x (c) bf16, "
            f"bf16 roofline fraction {fraction_text(bfc, '.3f')} (target {target:g}: "
            f"{target_text(roofline_value(bfc), target)}); compiled in {bfc['compile_s']:.0f} s\n"
            f"(c') fidelity on the benchmark's {fid['rows']} rows: KL(fp32 || bf16) {fid['kl_fp32_to_eager_bf16']:.1e} nats "
            f"eager, {fid['kl_fp32_to_compiled_bf16']:.1e} compiled; compiled against eager bf16: KL "
            f"{fid['kl_eager_to_compiled_bf16']:.1e}, largest logit gap {fid['max_abs_logit_gap_compiled_vs_eager_bf16']:.3f}, "
            f"argmax agrees on {fid['argmax_agree_compiled_vs_eager_bf16']:.0%} of rows")


def timed_models(cpu: Mapping[str, Any]) -> dict[str, Timed]:
    """Each model the benchmark timed, by name: the default model, then the base-size one where the
    file has it, each as (its record, the state timed, its (a)-(d) step, its bf16 step or None)."""
    m, gs = cpu["model"], cpu["glauber_step"]
    # files written before ``timed`` named the state by its weights
    state = m.get("timed", "trained" if m.get("weights") == "shipped default MLM" else m.get("weights"))
    sized: dict[str, Timed] = {m["name"]: (m, state, gs, gs.get("bf16"))}
    base = cpu.get("base_size")
    if base is not None:
        bs = base["glauber_step"]
        sized[base["model"]["name"]] = (base["model"], base["model"]["timed"], bs, bs.get("bf16"))
    return sized


def base_size_text(cpu: Mapping[str, Any]) -> str:
    """Every timed model's rates and fractions, one line each for fp32, bf16 and compiled bf16 (c')
    where timed, and its bf16 goal's verdict (with the rounds' range and (c')'s status where
    recorded); a line saying the file predates the base-size rows where it has none."""
    if cpu.get("base_size") is None:
        return "This benchmark file predates the base-size rows: run `make bench` to add them."
    lines, goal = [], cpu["bf16_roofline_goal"]
    for name, (_, state, s, b16) in timed_models(cpu).items():
        r = s["chain_steps_per_s"]
        lines.append(f"{name} ({state}), batch {s['batch']}, n = {s['n']}, fp32: (a) {r['one_chain']:.2f}, "
                     f"(b) {r['shared_site_full_head']:.2f}, (c) {r['ours']:.2f} chain-steps/s; (c) {s['speedup_vs_shared_site_full_head']:.2f}x (b), "
                     f"{s['speedup_vs_one_chain']:.2f}x (a); fp32 ceiling {s['effective_gflops']['dense_matmul']:.1f} GFLOP/s, "
                     f"fraction {fraction_text(s, '.3f')}")
        if b16 is not None:
            lines.append(f"{name} bf16 ({b16['attn_implementation']} attention): (c) {b16['chain_steps_per_s']:.2f} chain-steps/s, "
                         f"{b16['speedup_over_fp32_ours']:.2f}x (c) fp32, {b16['speedup_vs_shared_site_full_head']:.2f}x (b), "
                         f"{b16['speedup_vs_one_chain']:.2f}x (a); bf16 ceiling {b16['dense_matmul_gflops']:.1f} GFLOP/s, "
                         f"fraction {fraction_text(b16, '.3f')}")
            if "compiled" in b16:
                c16 = b16["compiled"]
                lines.append(f"{name} bf16 compiled (c'): {c16['chain_steps_per_s']:.2f} chain-steps/s, "
                             f"{c16['speedup_over_eager_bf16']:.2f}x (c) bf16, fraction {fraction_text(c16, '.3f')}")
        g = goal[name]
        lines.append(f"{name} bf16 goal (at least {g['target']:g} of the bf16 ceiling): " + goal_text(g, b16)
                     + (f" (rounds {g['rounds_range'][0]:.2f}-{g['rounds_range'][1]:.2f})" if "rounds_range" in g else "")
                     + (f"; compiled (c'): {g['compiled']['status']}" if "compiled" in g else ""))
    return "\n".join(lines)


def _bf16_column(name: str, b16: Mapping[str, Any] | None, goal: Mapping[str, Any]) -> dict[str, str]:
    """One model's bf16 rows of :func:`base_size_table`: "not timed" where bf16 was not."""
    if not b16:
        return {"(c) ours, bf16 (chain-steps/s)": "not timed", "speed-up of (c) bf16 over (b), over (a) (both fp32)": "not timed",
                "speed-up of (c) bf16 over (c) fp32": "not timed", "bf16 matmul ceiling: fraction (c) reaches": "not timed",
                "(c') ours compiled, bf16 (chain-steps/s)": "not timed", "bf16 matmul ceiling: fraction (c') reaches": "not timed",
                "bf16 goal": goal[name]["status"]}
    c16 = b16.get("compiled")
    return {"(c) ours, bf16 (chain-steps/s)": f"{b16['chain_steps_per_s']:.1f}",
            "speed-up of (c) bf16 over (b), over (a) (both fp32)":
                f"{b16['speedup_vs_shared_site_full_head']:.2f}x, {b16['speedup_vs_one_chain']:.2f}x",
            "speed-up of (c) bf16 over (c) fp32": f"{b16['speedup_over_fp32_ours']:.2f}x",
            "bf16 matmul ceiling: fraction (c) reaches": f"{b16['dense_matmul_gflops']:.0f} GFLOP/s: {fraction_text(b16)}",
            "(c') ours compiled, bf16 (chain-steps/s)": "not timed" if c16 is None else f"{c16['chain_steps_per_s']:.1f}",
            "bf16 matmul ceiling: fraction (c') reaches":
                "not timed" if c16 is None else f"{b16['dense_matmul_gflops']:.0f} GFLOP/s: {fraction_text(c16)}",
            "bf16 goal": (f"{goal_text(goal[name], b16)} by (c) (target {goal[name]['target']:g})"
                          + (f"; {goal[name]['compiled']['status']} by (c')" if "compiled" in goal[name] else ""))}


# The rows of base_size_table, in the order the page shows them.
_BASE_ROWS = ("model state timed", "layers, hidden size", "batch, n", "(a) one chain, fp32 (chain-steps/s)",
              "(b) shared site, fp32 (chain-steps/s)", "(c) ours, fp32 (chain-steps/s)", "(c) ours, bf16 (chain-steps/s)",
              "speed-up of (c) fp32 over (b), over (a)", "speed-up of (c) bf16 over (b), over (a) (both fp32)",
              "speed-up of (c) bf16 over (c) fp32", "fp32 matmul ceiling: fraction (c) reaches",
              "bf16 matmul ceiling: fraction (c) reaches", "(c') ours compiled, bf16 (chain-steps/s)",
              "bf16 matmul ceiling: fraction (c') reaches", "bf16 goal")


def base_size_table(cpu: Mapping[str, Any]) -> pd.DataFrame:
    """The default and the base-size model side by side: a ``quantity`` column and one column per
    timed model (:func:`timed_models`), its shape, rates, speed-ups, ceiling fractions and bf16
    goal as text ("not timed" where bf16 or (c') was not). Needs the file's ``base_size``."""
    goal, cols = cpu["bf16_roofline_goal"], {}
    for name, (m, state, s, b16) in timed_models(cpu).items():
        r = s["chain_steps_per_s"]
        col = {"model state timed": state,
               "layers, hidden size": f"{m['config']['num_hidden_layers']}, {m['config']['hidden_size']}",
               "batch, n": f"{s['batch']}, {s['n']}",
               "(a) one chain, fp32 (chain-steps/s)": f"{r['one_chain']:.2f}",
               "(b) shared site, fp32 (chain-steps/s)": f"{r['shared_site_full_head']:.1f}",
               "(c) ours, fp32 (chain-steps/s)": f"{r['ours']:.1f}",
               "speed-up of (c) fp32 over (b), over (a)": f"{s['speedup_vs_shared_site_full_head']:.2f}x, {s['speedup_vs_one_chain']:.2f}x",
               "fp32 matmul ceiling: fraction (c) reaches": f"{s['effective_gflops']['dense_matmul']:.0f} GFLOP/s: {fraction_text(s)}",
               **_bf16_column(name, b16, goal)}
        cols[name] = {k: col[k] for k in _BASE_ROWS}
    return pd.DataFrame(cols).rename_axis("quantity").reset_index()


def metrics(bench: Mapping[str, Mapping[str, Any]], fidelity: Mapping[str, Any] | None) -> dict[str, Any]:
    """The metrics the page records: per device its rates, FLOP rates, speed-ups, roofline fraction
    (and why it failed), when and under what load it was measured; on the CPU also the base-size
    model's rates and fractions and the bf16 goals where the file has them; and ``bf16_fidelity``:
    ``fidelity`` (:meth:`tokendyn.analysis.fidelity.FidelitySummary.record`), or, where it is None
    (no native bf16 on the machine running the page), why not and the CPU's bf16 probe."""
    out: dict[str, Any] = {
        dev: {"chain_steps_per_s": r["glauber_step"]["chain_steps_per_s"],
              "effective_gflops": r["glauber_step"]["effective_gflops"],
              "speedup_vs_shared_site_full_head": r["speedup_vs_shared_site_full_head"],
              "speedup_vs_one_chain": r["speedup_vs_one_chain"],
              "roofline_fraction": r["roofline_fraction"], "roofline_failed": r["glauber_step"].get("roofline_failed"),
              "measured_at": r["provenance"]["written_at"], "loadavg_before": r["loadavg_before"]}
        for dev, r in bench.items()}
    cpu = bench["cpu"]
    base = cpu.get("base_size")
    if base is not None:
        bs = base["glauber_step"]
        out["cpu"]["base_size"] = {
            "model": base["model"]["name"], "timed": base["model"]["timed"],
            "chain_steps_per_s": bs["chain_steps_per_s"], "roofline_fraction": bs["roofline_fraction"],
            "bf16": {k: bs["bf16"][k] for k in ("chain_steps_per_s", "roofline_fraction", "roofline_failed")}
                    if "bf16" in bs else None}
        out["cpu"]["bf16_roofline_goal"] = cpu["bf16_roofline_goal"]
    out["bf16_fidelity"] = dict(fidelity) if fidelity is not None else {
        "not_measured": "no native bf16 kernels on this CPU", "bf16_cpu": cpu.get("bf16_cpu")}
    return out
