"""Chapter 7's two pages, assembled from their tables: claim rows, summaries and glued words.

Page 7.1 (``book/07_escapes.ipynb``: re-injection and the commitment ablation, claims 13 and 14) calls
:func:`recorded_ode_sde`, :func:`claim14_inputs`, :func:`findings`, :func:`rule_texts`,
:func:`claim14_position`, :func:`reading`, :func:`ode_sde_metrics` and :func:`ladder_metrics`. Page 7.2
(``book/07_escapes_decoders.ipynb``: decoder interventions and the theory check, claim 15 and the
stiffness law) calls :func:`decoder_findings`, :func:`decoder_rule_texts`, :func:`why_texts`,
:func:`decoder_reading` and :func:`record_interventions`.

``rec_gen`` is the recorded ODE/SDE table keyed ``(generator, K, sampler)`` (sampler ``"ODE"``,
``"SDE"``, ``"matched"`` for the ratio at equal entropy, or ``"REAL"`` for held-out text at K = 0);
``w`` is the readout-intervention table (the recorded one when there is one) indexed by readout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ...core.paths import data_dir
from ...core.stats import Estimate
from ...latent import interfaces
from ...latent.contextual import SHIPPED_FLOW
from .. import claims, verdicts
from . import default
from ..book import sig
from ..results import load_rows, save_rows

__all__ = ["INTERVENTIONS", "Claim14", "recorded_ode_sde", "claim14_inputs", "findings", "reading", "rule_texts",
           "claim14_position", "ode_sde_metrics", "ladder_metrics", "decoder_findings", "decoder_reading",
           "decoder_rule_texts", "why_texts", "record_interventions"]

INTERVENTIONS = ("label smoothing", "hinge", "2-layer MLP")
"""The readout interventions claim 15 judges, against the retrained-CE control."""

SHIPPED = SHIPPED_FLOW
"""The shipped contextual flow's name in the recorded runs (defined once, in :mod:`tokendyn.latent.contextual`)."""


def recorded_ode_sde(rel: str | None, ladder_rel: str | None) -> tuple[dict | None, dict | None, list[str]]:
    """The recorded ODE/SDE runs under ``data/`` (``rel``, and the generator ladder's ``ladder_rel``;
    ``None``: none): ``(rec_gen, meta, lines)``, the lines saying what was read (command, commit, and
    every generator's perplexities and diversity with their intervals). ``(None, None, lines)`` when
    ``rel`` is missing."""
    path = data_dir() / rel if rel else None
    if path is None or not path.is_file():
        return None, None, [f"recorded run {rel}: not in data/, skipped"]
    rows, meta = load_rows(path)
    rec = {(r["generator"], r["K"], r["sampler"]): r for r in rows}
    op = meta["provenance"]
    lines = [f"recorded: {op['params']['seeds']} seeds x {op['params']['per_seed']} windows per sampler and K "
             f"(commit {(op.get('git_commit') or '?')[:10]}); made by: {meta['command']}"]
    lad = data_dir() / ladder_rel if ladder_rel else None
    if lad is not None and lad.is_file():
        lad_rows, lad_meta = load_rows(lad)
        rec.update({(r["generator"], r["K"], r["sampler"]): r for r in lad_rows})
        lines.append(f"recorded ladder: commit {(lad_meta['provenance'].get('git_commit') or '?')[:10]}; "
                     f"made by: {lad_meta['command']}")
    real = rec[("real text", 0, "REAL")]
    lines.append(f"real text: judge PPL {real['ppl']:.0f} [{real['ppl_lo']:.0f}, {real['ppl_hi']:.0f}], "
                 f"entropy {real['entropy']:.2f} nats")
    for (g, k, smp), r in rec.items():
        if smp == "matched":
            lines.append(f"{g}, K={k}: at equal entropy ODE {r['ode_ppl']:.0f} [{r['ode_lo']:.0f}, {r['ode_hi']:.0f}] vs "
                         f"SDE {r['sde_ppl']:.0f} [{r['sde_lo']:.0f}, {r['sde_hi']:.0f}]: ratio {r['ratio']:.2f} "
                         f"[{r['ratio_lo']:.2f}, {r['ratio_hi']:.2f}]")
        elif g != "real text":
            lines.append(f"{g}, K={k}, {smp}: judge PPL {r['ppl']:.0f} [{r['ppl_lo']:.0f}, {r['ppl_hi']:.0f}], entropy "
                         f"{r['entropy']:.2f} [{r['entropy_lo']:.2f}, {r['entropy_hi']:.2f}], repetition "
                         f"{r['repetition']:.3f}, distinct-2 {r['distinct2']:.3f} ({r['n_texts']} windows)")
    return rec, meta, lines


@dataclass(frozen=True)
class Claim14:
    """What claim 14 reads: each sampler's judge perplexity and entropy (``ode``, ``sde``: objects with
    ``ppl`` and ``entropy`` :class:`Estimate`), the ratio at equal entropy (``matched``, ``None`` without
    the recorded run), the sample in words (``sample``) and real text's perplexity and entropy."""

    ode: Any
    sde: Any
    matched: Estimate | None
    sample: str
    real: tuple[float, float]


@dataclass(frozen=True)
class _Scores:
    ppl: Estimate
    entropy: Estimate


def claim14_inputs(rec_gen: Mapping | None, meta: Mapping | None, reference_k: int, *, live_ode: Any, live_sde: Any,
                   live_real: Any, live_sample: str) -> Claim14:
    """Claim 14's inputs from the recorded run when it has the shipped flow at ``reference_k`` (it
    has the power), else from this run (``live_*``, described by ``live_sample``)."""
    key = (SHIPPED, reference_k)
    if rec_gen is None or (*key, "ODE") not in rec_gen:
        return Claim14(live_ode, live_sde, None, live_sample, (live_real.ppl.value, live_real.entropy.value))
    o, s, m = (rec_gen[(*key, x)] for x in ("ODE", "SDE", "matched"))
    seeds = meta["provenance"]["params"]["seeds"]
    real = rec_gen[("real text", 0, "REAL")]
    return Claim14(_Scores(Estimate.from_columns(o, "ppl", n="n_texts"), Estimate.from_columns(o, "entropy", n=seeds)),
                   _Scores(Estimate.from_columns(s, "ppl", n="n_texts"), Estimate.from_columns(s, "entropy", n=seeds)),
                   Estimate.from_columns(m, "ratio", n=o["n_texts"] + s["n_texts"]),
                   f"{seeds} seeds x {meta['provenance']['params']['per_seed']} windows", (real["ppl"], real["entropy"]))


def _ladder_ratio(rec_gen: Mapping, g: str, k: int) -> Estimate:
    r = rec_gen[(g, k, "matched")]
    return Estimate(r["ratio"], r["ratio_lo"], r["ratio_hi"], rec_gen[(g, k, "ODE")]["n_texts"])


def findings(*, effects13: Mapping, com_rows: Sequence[Mapping], com_meta: Mapping | None, live13: str, live13_basis: str,
             c14: Claim14, reference_k: int, live14: str, rec_gen: Mapping | None, rec_gens: Sequence[str],
             ladder_ordered: bool) -> list[claims.Finding]:
    """Page 7.1's rows: claim 13 (the recorded long-text ablation, else the live one in ``live13``),
    claim 14 (:class:`Claim14`; the live run quoted in ``live14``) and claim 14 along the generator
    ladder (when the recorded ladder is there and ordered by chapter 5's flow loss)."""
    fmt = (lambda e: e.fmt(".2f")) if c14.matched is not None else (lambda e: "n/a")
    o, s = c14.ode, c14.sde
    rows = [
        claims.finding(13, (f"recorded, {len(com_rows[0]['texts'])} texts x {com_meta['provenance']['params']['tokens']} tokens: "
                            + "; ".join(f"{g} perplexity {sig(e.ppl[0].value, 2):g} -> {sig(e.ppl[1].value, 2):g} "
                                        f"(judge {e.judge}), seq-rep-4 {e.rep[0].value:.2f} -> {e.rep[1].value:.2f}"
                                        for g, e in effects13.items())) if effects13 else live13,
                       verdicts.claim_13(effects13),
                       basis=("committed -> ablated, same draws, intervals over texts; each generator judged by another model"
                              if effects13 else live13_basis)),
        claims.finding(14, (f"K = {reference_k}, recorded ({c14.sample}): ODE {sig(o.ppl.value, 2):g} "
                            f"[{sig(o.ppl.lo, 2):g}, {sig(o.ppl.hi, 2):g}] vs SDE {sig(s.ppl.value, 2):g} "
                            f"[{sig(s.ppl.lo, 2):g}, {sig(s.ppl.hi, 2):g}]; at equal entropy ODE/SDE "
                            f"{fmt(c14.matched)}; entropy {o.entropy.value:.1f} vs "
                            f"{s.entropy.value:.1f} nats (real text {sig(c14.real[0], 2):g}, {c14.real[1]:.1f})"),
                       verdicts.claim_14(c14.matched),
                       headline=(f"K = {reference_k}: ODE {sig(o.ppl.value, 2):g} vs SDE {sig(s.ppl.value, 2):g}; "
                                 f"at equal entropy ODE/SDE {fmt(c14.matched)}"),
                       basis=f"contextual flow, SmolLM2-135M judge, float32, {c14.sample}; lower SDE perplexity "
                             + ("with" if s.entropy.value >= o.entropy.value - 0.1 else "but lower") + f" entropy; {live14}"),
    ]
    if ladder_ordered and all((g, reference_k, "matched") in rec_gen for g in rec_gens):
        ratios = " → ".join(f"{rec_gen[(g, reference_k, 'matched')]['ratio']:.2f}" for g in rec_gens)
        rows.append(claims.finding(
            "Claim 14 along the generator ladder: a better flow moves the ODE/SDE gap toward the paper's", ratios,
            verdicts.toward_paper([(g, _ladder_ratio(rec_gen, g, reference_k)) for g in rec_gens], (294 / 50, 294 / 50),
                                  log=True, what=f"ODE/SDE at equal entropy, K = {reference_k}"),
            basis=f"recorded, generators from the highest held-out flow loss to the lowest ({', '.join(rec_gens)}); "
                  "the paper's 294/50 is a raw ratio, ours is at equal per-text entropy",
            paper_value="ODE/SDE 294/50 = 5.9 (ELF-B, raw)", headline=ratios))
    return rows


def decoder_findings(*, w: pd.DataFrame, src: str, recovered: Sequence[str], reference_k: int,
                     stiffness: tuple[float, float], line_slope: float, m_range: tuple[int, int],
                     n_mc: int) -> list[claims.Finding]:
    """Page 7.2's rows: claim 15 (the intervention table ``w``, read from ``src``, against its
    retrained-CE control; ``recovered``: the interventions below the control's interval) and the
    stiffness law (``stiffness``: the band of S/sqrt(ln M) over ``m_range``; ``line_slope``: the
    line's log-log slope; ``n_mc`` Monte Carlo points per M)."""

    def est(n: str, col: str, **kw: str) -> Estimate:
        return Estimate.from_columns(w.loc[n], col, n="tokens", **kw)

    return [
        claims.finding(15, "; ".join(f"{n} {w.loc[n, 'flip']:.1%}" for n in w.index),
                       verdicts.claim_15({n: est(n, "flip", lo="lo", hi="hi") for n in INTERVENTIONS},
                                         est("CE, retrained", "flip", lo="lo", hi="hi"),
                                         {n: float(w.loc[n, "changed"]) for n in INTERVENTIONS},
                                         {n: est(n, "ode_ppl") for n in INTERVENTIONS}, est("CE, retrained", "ode_ppl")),
                       basis=f"K = {reference_k} oracle roll-in, {int(w['tokens'].iloc[0])} tokens, {src}; against retrained "
                             f"CE, recovered: {', '.join(recovered) or 'none'}"),
        claims.finding("Stiffness Theta(sqrt(log M)) at dimension Omega(log M)",
                       f"S/sqrt(ln M) in [{stiffness[0]:.2f}, {stiffness[1]:.2f}] for M = {m_range[0]}-{m_range[1]}; "
                       f"line slope {line_slope:.2f}",
                       verdicts.stiffness_scaling(stiffness, line_slope),
                       paper_value="Theta(sqrt(log M)); linear in M on a line", basis=f"Monte Carlo, {n_mc} points per M"),
    ]


def rule_texts() -> dict[str, str]:
    """The thresholds page 7.1 states, read from the rules that apply them: claim 13's sample
    (``c13_texts``, ``c13_tokens``) and repetition rise (``c13_rise``), and claim 14's factor and
    weaker gap (``c14_factor``, ``c14_weaker``, ``c14_band_lo``: the paper's ratio over the factor)."""
    factor, paper = default(verdicts.claim_14, "factor"), default(verdicts.claim_14, "paper")
    return {"c13_texts": f"{default(verdicts.claim_13, 'min_texts')}",
            "c13_tokens": f"{default(verdicts.claim_13, 'min_tokens')}",
            "c13_rise": f"{default(verdicts.claim_13, 'rise'):.2f}",
            "c14_factor": f"{factor:g}x", "c14_weaker": f"{default(verdicts.claim_14, 'weaker'):g}",
            "c14_band_lo": f"{paper / factor:.1f}"}


def decoder_rule_texts() -> dict[str, str]:
    """The thresholds page 7.2 states: claim 15's least share of changed decodes (``c15_changed``)
    and the share of the mass the theory check's tube holds (``tube_share``,
    :func:`~tokendyn.latent.interfaces.argmax_partition_measure`)."""
    return {"c15_changed": f"{default(verdicts.claim_15, 'min_changed'):.0%}",
            "tube_share": f"{default(interfaces.argmax_partition_measure, 'tube'):.0%}"}


def why_texts(w: pd.DataFrame, meta: Mapping | None, *, control: str = "CE, retrained") -> dict[str, str]:
    """The words of page 7.2's "why our numbers differ" on the interventions: how the recorded run was
    trained (``iv_training``), the share of clean decodes each intervention changed (``iv_changed``)
    and the hinge's ODE judge perplexity against the control's (``iv_hinge_ppl``)."""
    changed = [float(w.loc[n, "changed"]) for n in INTERVENTIONS]
    words = {"iv_changed": f"{min(changed):.0%}-{max(changed):.0%}",
             "iv_hinge_ppl": (f"{w.loc['hinge', 'ode_ppl']:.0f} [{w.loc['hinge', 'ode_ppl_lo']:.0f}, "
                              f"{w.loc['hinge', 'ode_ppl_hi']:.0f}] against {w.loc[control, 'ode_ppl']:.0f} "
                              f"[{w.loc[control, 'ode_ppl_lo']:.0f}, {w.loc[control, 'ode_ppl_hi']:.0f}]")}
    if meta is not None:
        p = meta["provenance"]["params"]
        words["iv_training"] = f"{p['retrain_steps']:,} steps of {p['retrain_batch']} tokens on {p['n_train']:,} windows"
    else:
        words["iv_training"] = "this run's retraining (no recorded run)"
    return words


def reading(*, reference_k: int, live_ode: Any, live_sde: Any, live_real: Any, c14: Claim14, ablation_len: int,
            abl: Mapping[tuple[str, str], Any], effects13: Mapping, com_rows: Sequence[Mapping], com_meta: Mapping | None,
            rec_gen: Mapping | None, rec_gens: Sequence[str], ladder_ordered: bool) -> str:
    """Page 7.1's summary as markdown, every number from the tables: re-injection (live, then the
    recorded run of :class:`Claim14`), the live commitment ablation (``abl``, keyed ``(generator,
    variant)``), the recorded one at claim 13's size, and the generator ladder when it is recorded
    and ordered."""
    ar_c, ar_a = abl[("SmolLM2 autoregressive", "committed")], abl[("SmolLM2 autoregressive", "ablated")]
    md_c, md_a = abl[("minilm-mlm masked diffusion", "committed")], abl[("minilm-mlm masked diffusion", "ablated")]
    o, s, m = c14.ode, c14.sde, c14.matched
    lad_ok = ladder_ordered and all((g, reference_k, x) in rec_gen for g in rec_gens for x in ("ODE", "SDE", "matched"))
    lad_txt = "" if not lad_ok else (
        f"- **Along the generator ladder** (recorded, K = {reference_k}, worst flow first by chapter 5's held-out loss): "
        + "; ".join(f"{g}: ODE {rec_gen[(g, reference_k, 'ODE')]['ppl']:.0f} vs SDE {rec_gen[(g, reference_k, 'SDE')]['ppl']:.0f}, "
                    f"at equal entropy {rec_gen[(g, reference_k, 'matched')]['ratio']:.2f} "
                    f"[{rec_gen[(g, reference_k, 'matched')]['ratio_lo']:.2f}, {rec_gen[(g, reference_k, 'matched')]['ratio_hi']:.2f}]"
                    for g in rec_gens) + ".\n")
    com_txt = "" if not effects13 else (
        f"- **Commitment ablation at the claim's size** (recorded: {len(com_rows[0]['texts'])} texts of "
        f"{com_meta['provenance']['params']['tokens']} tokens a generator and variant, each judged by a model that did not "
        "generate it): " + "; ".join(f"{g} (judge {e.judge}): perplexity {e.ppl[0].fmt('.3g')} against {e.ppl[1].fmt('.3g')} "
                                      f"ablated, seq-rep-4 {e.rep[0].fmt('.3f')} against {e.rep[1].fmt('.3f')}, entropy "
                                      f"{e.entropy[0].fmt('.2f')} against {e.entropy[1].fmt('.2f')} nats" for g, e in effects13.items())
        + f". Claim 13: *{verdicts.claim_13(effects13).verdict}*.\n")
    return f'''
- **Re-injection.** At $K = {reference_k}$ the ODE's judge perplexity is **{live_ode.ppl.value:.0f}**
  [{live_ode.ppl.lo:.0f}, {live_ode.ppl.hi:.0f}] and the SDE's **{live_sde.ppl.value:.0f}** [{live_sde.ppl.lo:.0f},
  {live_sde.ppl.hi:.0f}] (the paper: 294 and 50); real text scores {live_real.ppl.value:.0f}. Unigram entropy:
  ODE {live_ode.entropy.value:.2f}, SDE {live_sde.entropy.value:.2f}, real text {live_real.entropy.value:.2f} nats.
  Recorded at {c14.sample}: ODE **{o.ppl.value:.0f}** [{o.ppl.lo:.0f}, {o.ppl.hi:.0f}] against SDE
  **{s.ppl.value:.0f}** [{s.ppl.lo:.0f}, {s.ppl.hi:.0f}], entropy {o.entropy.value:.2f} against
  {s.entropy.value:.2f} nats; at equal per-text entropy the ODE/SDE perplexity ratio is
  {m.fmt('.2f') if m is not None else 'not measured'}.
- **Commitment ablation, live** ({ablation_len} tokens; SmolLM2 judges both generators). SmolLM2: judge perplexity {ar_c.ppl.value:.0f} committed against
  {ar_a.ppl.value:.0f} ablated, repetition {ar_c.repetition.value:.1%} against {ar_a.repetition.value:.1%},
  distinct-2 {ar_c.distinct2.value:.3f} against {ar_a.distinct2.value:.3f}. Masked diffusion with
  minilm-mlm: {md_c.ppl.value:.0f} against {md_a.ppl.value:.0f}, repetition {md_c.repetition.value:.1%}
  against {md_a.repetition.value:.1%}.
{com_txt}{lad_txt}'''


def decoder_reading(*, reference_k: int, w: pd.DataFrame, src: str, stiffness: tuple[float, float],
                    m_range: tuple[int, int], line_slope: float) -> str:
    """Page 7.2's summary as markdown, every number from the tables: the readout interventions
    (``w``, read from ``src``) and the theory check."""
    return f'''
- **Readout interventions** ({src}). $K = {reference_k}$ terminal flips: {'; '.join(f"{n} {r.flip:.1%}" for n, r in w.iterrows())};
  DABI {', '.join(f"{n} {r.dabi:.0f}" for n, r in w.iterrows())}.
- **Theory.** $S/\\sqrt{{\\ln M}}$ stays in [{stiffness[0]:.2f},
  {stiffness[1]:.2f}] from $M$ = {m_range[0]} to {m_range[1]}; the line's $S$ grows with slope
  {line_slope:.2f} in $M$.
'''


def ode_sde_metrics(gen_scores: Mapping[tuple[int, str], Any], steps: Sequence[int]) -> dict[int, dict[str, Any]]:
    """The live ODE/SDE scores per K for the results record: perplexities with intervals, entropies,
    repetition and distinct-2 (``gen_scores[(K, "ode" | "sde")]``)."""
    out = {}
    for k in steps:
        o, s = gen_scores[(k, "ode")], gen_scores[(k, "sde")]
        out[int(k)] = {"ode_ppl": o.ppl.value, "sde_ppl": s.ppl.value, "ode_entropy": o.entropy.value,
                       "sde_entropy": s.entropy.value, "ode_ppl_interval": [o.ppl.lo, o.ppl.hi],
                       "sde_ppl_interval": [s.ppl.lo, s.ppl.hi], "ode_repetition": o.repetition.value,
                       "sde_repetition": s.repetition.value, "ode_distinct2": o.distinct2.value,
                       "sde_distinct2": s.distinct2.value}
    return out


def ladder_metrics(rec_gen: Mapping | None) -> dict[str, Any] | None:
    """The recorded ODE/SDE runs per generator and K for the results record (value, lo, hi of each
    perplexity, entropy and the ratio at equal entropy); ``None`` without a recorded run."""
    if rec_gen is None:
        return None

    def cols(r: Mapping, *names: str) -> list[float]:
        return [r[n] for n in names]

    out: dict[str, Any] = {}
    for (g, k, smp) in rec_gen:
        if smp != "ODE":
            continue
        o, s, m = (rec_gen[(g, k, x)] for x in ("ODE", "SDE", "matched"))
        out.setdefault(g, {})[int(k)] = {
            "ode_ppl": cols(o, "ppl", "ppl_lo", "ppl_hi"), "sde_ppl": cols(s, "ppl", "ppl_lo", "ppl_hi"),
            "ode_entropy": cols(o, "entropy", "entropy_lo", "entropy_hi"),
            "sde_entropy": cols(s, "entropy", "entropy_lo", "entropy_hi"),
            "matched_ode_over_sde": cols(m, "ratio", "ratio_lo", "ratio_hi")}
    return out


def claim14_position(matched: Estimate | None) -> str:
    """Where the ODE/SDE ratio at equal entropy sits against claim 14's thresholds, in words: its
    interval, then above or below the weaker gap and the band's lower edge (the paper's ratio over
    the rule's factor)."""
    if matched is None:
        return "not measured (no recorded run)"
    paper, factor, weaker = (default(verdicts.claim_14, k) for k in ("paper", "factor", "weaker"))
    edge = paper / factor
    where = ("inside the band" if matched.lo >= edge else
             f"above {weaker:g} and below {edge:.1f}" if matched.lo > weaker else f"not above {weaker:g}")
    return f"{matched.fmt('.2f')}, {where}"


def record_interventions(rel: str, table: pd.DataFrame, params: Mapping[str, Any], *, setup: Any = None,
                         models: Sequence[str] = ("context-latent", "smollm2-135m")) -> Path:
    """Record the readout-intervention table (indexed by readout, as
    :func:`tokendyn.training.readout.measure_readouts` returns it) under ``data/`` at ``rel``, with
    the papermill command that reruns page 7.2 with the same ``params`` (the section's
    parameters, ``seed`` among them) and records again; returns the written path."""
    command = ("papermill book/07_escapes_decoders.ipynb out.ipynb --cwd book " + " ".join(f"-p {k} {v}" for k, v in params.items())
               + f" -p record_to {rel}")
    return save_rows(data_dir() / rel, table.reset_index().to_dict("records"), kind="readout_interventions",
                     command=command, params=dict(params), seed=params["seed"], models=list(models), setup=setup)
