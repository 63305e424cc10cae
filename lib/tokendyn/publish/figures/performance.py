"""Figures of the sampler benchmarks (``benchmarks/results/glauber-<device>.json``): FLOP rates,
per-round rates, scaling with length and batch, and the kernels side by side; and how a roofline
fraction reads (:func:`roofline_value`, :func:`fraction_text`, :func:`target_text`, :func:`goal_text`: text, not figures,
so they stay out of ``__all__`` and the Performance appendix imports them from this module)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import pandas as pd

__all__ = ["flop_rates", "step_rate_rounds", "scaling_table", "step_rate_scaling", "kernel_rates",
           "breakdown_table", "step_breakdown"]


def flop_rates(table: pd.DataFrame, *, batch: int, n: int) -> alt.LayerChart:
    """Effective GFLOP/s per sampler as labelled bars, in the table's order.

    ``table`` has one row per sampler: columns ``sampler`` and ``effective GFLOP/s``; ``batch`` and
    ``n`` (the benchmark's shape) go in the title.
    """
    bar = alt.Chart(table).mark_bar().encode(
        y=alt.Y("sampler:N", sort=table["sampler"].tolist(), title=None),
        x=alt.X("effective GFLOP/s:Q"), color=alt.Color("sampler:N", legend=None))
    text = bar.mark_text(align="left", dx=3).encode(text=alt.Text("effective GFLOP/s:Q", format=".1f"))
    return (bar + text).properties(title=f"CPU, batch {batch}, n = {n}: effective FLOP rate "
                                   "(median over interleaved rounds)", height=160)


def step_rate_rounds(per_round: Mapping[str, Sequence[float]], labels: Mapping[str, str]) -> alt.Chart:
    """Chain-steps per second of each sampler in every interleaved round (log y).

    ``per_round`` maps a sampler's key -> its rate in each round; ``labels`` maps the key -> its name.
    """
    rounds = pd.DataFrame([{"sampler": labels[k], "round": i + 1, "chain-steps/s": r}
                           for k, v in per_round.items() for i, r in enumerate(v)])
    return alt.Chart(rounds).mark_line(point=True).encode(
        x="round:O", y=alt.Y("chain-steps/s:Q", scale=alt.Scale(type="log")), color="sampler:N"
    ).properties(title="Every round of the CPU run (the spread is the noise from other processes)", height=220)


def scaling_table(bench: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Chain-steps/s against length n and against batch size, one row per (device, axis, x).

    ``bench`` maps a device -> its benchmark record, whose ``scaling`` holds ``by_n`` and
    ``by_batch`` ({x: rate}) and the batch and n held fixed along each.
    """
    rows = []
    for dev, res in bench.items():
        sc = res["scaling"]
        rows += [{"device": dev, "axis": f"length n (batch {sc['batch_for_by_n']})", "x": int(k), "chain-steps/s": v}
                 for k, v in sc["by_n"].items()]
        rows += [{"device": dev, "axis": f"batch (n = {sc['n_for_by_batch']})", "x": int(k), "chain-steps/s": v}
                 for k, v in sc["by_batch"].items()]
    return pd.DataFrame(rows)


def step_rate_scaling(bench: Mapping[str, Mapping[str, Any]]) -> alt.FacetChart:
    """Chain-steps/s against n and against batch (log-log), one panel per axis, one colour per device."""
    return alt.Chart(scaling_table(bench)).mark_line(point=True).encode(
        x=alt.X("x:Q", scale=alt.Scale(type="log", base=2), title=None),
        y=alt.Y("chain-steps/s:Q", scale=alt.Scale(type="log")), color="device:N",
    ).properties(width=260, height=220).facet(column=alt.Column("axis:N", title=None)).resolve_scale(x="independent")


def kernel_rates(kern: pd.DataFrame,
                 kernels: Sequence[str] = ("chain-steps/s of (c)", "coupled pair-steps/s", "rectangles/s")) -> alt.Chart:
    """Bars of each kernel's rate per device. ``kern`` has one row per device: ``device`` and a column per kernel."""
    kern_long = kern.melt(id_vars="device", value_vars=list(kernels), var_name="kernel", value_name="per second")
    return alt.Chart(kern_long).mark_bar().encode(
        y=alt.Y("kernel:N", title=None), x="per second:Q", color="device:N", yOffset="device:N"
    ).properties(title="Glauber step, coupled step and rectangle test on the same model", height=140)


PARTS = ("matmuls", "attention", "draw", "rest")


def breakdown_table(steps: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (step, part of its time): ``steps`` maps a label (model and dtype) -> its
    ``glauber_step`` record (or ``bf16`` block) with a ``breakdown``; columns ``step``, ``part``,
    ``share``, ``ms per step`` and ``ceiling`` (the step's fraction of its matmul ceiling, as text)."""
    rows = []
    for label, st in steps.items():
        bd = st["breakdown"]
        for part in PARTS:
            rows.append({"step": label, "part": part, "share": bd["shares"][part],
                         "ms per step": bd["step_ms"], "ceiling": fraction_text(st)})
    return pd.DataFrame(rows)


def step_breakdown(table: pd.DataFrame) -> alt.Chart:
    """Stacked bars of where one step's time goes (matmuls, attention, the vocabulary draw, the
    rest), one bar per model and dtype, each labelled with the step's fraction of its matmul
    ceiling: what stands between the step and the hardware. ``table`` from :func:`breakdown_table`."""
    t = table.assign(label=table["step"] + ": " + table["ceiling"] + " of ceiling",
                     order=table["part"].map({p: i for i, p in enumerate(PARTS)}))
    return alt.Chart(t).mark_bar().encode(
        y=alt.Y("label:N", title=None, sort=list(dict.fromkeys(t["label"])), axis=alt.Axis(labelLimit=360)),
        x=alt.X("share:Q", stack="normalize", title="share of a step's time", axis=alt.Axis(format="%")),
        color=alt.Color("part:N", sort=list(PARTS), title="part of the step"),
        order=alt.Order("order:Q"),
        tooltip=["step:N", "part:N", alt.Tooltip("share:Q", format=".1%"), alt.Tooltip("ms per step:Q", format=".1f")],
    ).properties(title="Where a Glauber step's time goes (torch profiler, self time per op)", height=36 * t["label"].nunique())


def roofline_value(step: Mapping[str, Any]) -> float | None:
    """``step``'s roofline fraction (a ``glauber_step`` record or its ``bf16`` block), or None where the
    measurement failed: ``make bench`` records null when the model ran faster than its matmul
    reference, and a fraction above 1 in a file written before that rule is the same failure."""
    v = step.get("roofline_fraction")
    return None if v is None or not math.isfinite(v) or v > 1.0 else float(v)


def fraction_text(step: Mapping[str, Any], spec: str = ".2f") -> str:
    """``step``'s roofline fraction formatted by ``spec``, or ``"failed measurement (<reason>)"``."""
    v = roofline_value(step)
    if v is not None:
        return f"{v:{spec}}"
    raw = step.get("roofline_fraction")
    why = step.get("roofline_failed_reason") or (
        f"a fraction of {raw:.2f}: the matmul reference was no ceiling" if raw is not None else "no reason recorded")
    return f"failed measurement ({why})"


def target_text(value: float | None, target: float) -> str:
    """``"met"`` or ``"not met"`` for ``value`` against ``target``; a failed measurement (None or
    nan) meets no target: ``"not met (failed measurement)"``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "not met (failed measurement)"
    return "met" if value >= target else "not met"


def goal_text(goal: Mapping[str, Any], step: Mapping[str, Any] | None) -> str:
    """The verdict of ``goal`` (a ``bf16_roofline_goal`` entry: ``target``, ``status``) on ``step``
    (the ``bf16`` block it judged): :func:`target_text` of the step's fraction, so a failed
    measurement meets nothing; the goal's own status where bf16 was not timed (``step`` None)."""
    return goal["status"] if step is None else target_text(roofline_value(step), goal["target"])
