"""Chapter 4's words and rows shared by its three pages, and page 4.1's own: perfect traps, the
exp(1/tau) law, the dwell law, the recorded censuses and basin run, and the size ladder's traps
(``data/runs/04_basins-*.json``). Page 4.2's live in :mod:`.trap_census`, page 4.3's in :mod:`.attractor`.

Every function returns ``key -> words`` for ``glue``; the summary's paragraphs are markdown (glued
with ``{glue:md}``), the other values plain text. Where a sentence's wording depends on a number
(a trend, an interval above or below a threshold, a verdict), the wording is chosen here from that
number, so the text stays true when a rerun moves it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from ...analysis import size, traps
from ...core.stats import Estimate, bootstrap
from .. import claims, verdicts
from . import count_words, default, join_words, range_words
from .rectangle_test import ladder_texts as _ladder_words

__all__ = ["run_text", "rule_texts", "census_texts", "basin_texts", "ladder_texts", "metastability_md", "size_md", "setting_md", "ladder_lines", "claim6", "arrhenius_finding", "arrhenius_metrics", "dwell_metrics", "size_metrics"]


def _m(params: float) -> str:
    return f"{params / 1e6:.1f}M" if params < 1e8 else f"{params / 1e6:.0f}M"


def _est(d: Mapping[str, Any]) -> Estimate:
    return Estimate(**d)


def run_text(trap_models: Sequence[str] = (), chain_steps: Mapping[str, int] | None = None,
             chains_per_model: int = 0) -> dict[str, str]:
    """A page header's run in words (``run_models``): how many MLMs the trap search uses
    (``trap_models``) and how many the long chains (``chain_steps``: model -> steps), with the long
    chains per model and their steps; a page names only the runs it makes."""
    parts = [f"{count_words(len(trap_models))} MLMs for the traps"] if trap_models else []
    if chain_steps:
        steps = list(chain_steps.values())
        parts.append(f"{count_words(len(chain_steps))} for the long chains, {chains_per_model} chains each, "
                     f"{range_words(min(steps), max(steps), ',')} steps")
    if not parts:
        raise ValueError("run_text needs trap_models or chain_steps")
    return {"run_models": ", ".join(parts)}


def rule_texts() -> dict[str, str]:
    """The thresholds of claim 6's rule the text states, from its defaults: the dwell mark
    (``dwell_mark``, "1,000") and the low temperature (``rule_tau``)."""
    return {"dwell_mark": f"{default(verdicts.claim_6, 'thousands'):,.0f}",
            "rule_tau": f"{default(verdicts.claim_6, 'paper_tau'):g}"}


def census_texts(meta: Mapping[str, Any] | None, live_traps: Mapping[str, int]) -> dict[str, str]:
    """The recorded census's setting (``meta``: its record's meta; None when it is missing): the
    distinct traps it asked of every model (``rec_min_traps``) and the temperatures of its dwell law
    (``rec_taus``); and this run's distinct traps a model (``live_traps``, model -> count)."""
    counts = list(live_traps.values()) or [0]
    out = {"live_traps": range_words(min(counts), max(counts), "d")}
    if meta is None:
        return {**out, "rec_min_traps": "(not recorded)", "rec_taus": "(not recorded)"}
    p = meta["provenance"]["params"]
    return {**out, "rec_min_traps": f"{p['min_traps']}", "rec_taus": join_words([f"{t:g}" for t in p["taus"]])}


def basin_texts(meta: Mapping[str, Any] | None, rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The recorded basin run's setting (``meta`` and ``rows`` of its record): chains a trap
    (``basin_chains``), temperatures (``basin_taus``), the Hamming radius (``basin_h``), the sites of
    a state (``basin_sites``) and the watch in steps (``basin_watch``)."""
    if meta is None or not rows:
        return dict.fromkeys(("basin_chains", "basin_taus", "basin_h", "basin_sites", "basin_watch"), "(not recorded)")
    p = meta["provenance"]["params"]
    return {"basin_chains": f"{p['chains']}", "basin_taus": join_words([f"{t:g}" for t in p["taus"]]),
            "basin_h": join_words([str(r) for r in p["radii"]]), "basin_sites": join_words(sorted({str(r["n_tokens"]) for r in rows})),
            "basin_watch": f"{p['steps']:,}"}


def ladder_texts(rungs: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> dict[str, str]:
    """The trap ladder (``rungs``: its rows sorted by size; ``meta``: its record's meta) in the words
    chapter 2 uses for the same ladder: each backbone's cuts with their sizes (``tl_cuts``), the
    pooled span (``tl_span``), and the real starts a rung (``tl_starts``)."""
    # chapter 2's words for the ladder; its rectangle count does not apply to a trap census
    words = _ladder_words(rungs, {"provenance": {"params": {"n_rect": None}}})
    return {"tl_cuts": words["ladder_cuts"], "tl_span": words["ladder_span"],
            "tl_starts": f"{meta['provenance']['params']['starts']}"}


def metastability_md(*, slope_ratio: float, looseness_log10: float, below_bound: bool,
                     rec_rows: Sequence[Mapping[str, Any]], rec_meta: Mapping[str, Any] | None, rule_key: str,
                     kmc: Estimate, kmc_tau: float, kmc_h: int, basin_rows: Sequence[Mapping[str, Any]],
                     basin_meta: Mapping[str, Any] | None, v6: Any) -> str:
    """The summary's paragraph on claim 6, markdown. ``slope_ratio``: the median fitted Arrhenius slope
    over -m (this run); ``looseness_log10``: the median of log10(bound / q) over the grid;
    ``below_bound``: every q under the bound; ``rec_rows``/``rec_meta``: the recorded census (its
    ``exact_dwell``, ``dwell_law``, ``median_margin``, ``tau_1000`` per model); ``rule_key``: the
    recorded temperature the rule reads ("0.5"); ``kmc``: this run's median stay near the default
    model's traps at ``kmc_tau`` within Hamming ``kmc_h``; ``basin_rows``/``basin_meta``: the
    recorded basin run (per model, the median dwell near a trap at each temperature and its
    censored chains); ``v6``: claim 6's verdict."""
    mark = default(verdicts.claim_6, "thousands")
    law = ("the fitted Arrhenius slope divided by minus its smallest margin is "
           f"{slope_ratio:.2f} at the median, and every $q(\\tau)$ sits "
           + ("under" if below_bound else "not always under") + " the uniform-margin bound, which is about "
           f"$10^{{{round(looseness_log10)}}}$ times too loose because it counts every token of the vocabulary as a "
           "way out while in fact one or two are")
    head = (f"**Metastability (claim 6): {v6.verdict}. The $\\exp(1/\\tau)$ law holds exactly; the temperature scale "
            f"does not.** Every trap obeys the law: {law}.")
    if not rec_rows or rec_meta is None:
        return head + " The recorded census is not in `data/`, so the dwell law at low temperatures is not quoted here."
    p = rec_meta["provenance"]["params"]
    keys = list(rec_rows[0]["exact_dwell"])
    ratios = [_est(r["dwell_law"][k]["ratio"]) for r in rec_rows for k in keys]
    contains = all(e.lo <= 1 <= e.hi for e in ratios)
    inside = all(r["dwell_law"][k]["consistent"] for r in rec_rows for k in keys)
    traps = " and ".join(f"{r['n_traps']} of `{r['model']}`" for r in rec_rows)
    depth = " and ".join(f"{_est(r['median_margin']).value:.2f} (`{r['model']}`)" for r in rec_rows)
    t1000 = " and ".join(_est(r["tau_1000"]).fmt(".3f") for r in rec_rows)
    at_rule = " and ".join(f"{_est(r['exact_dwell'][rule_key]).fmt('.1f')} (`{r['model']}`)" for r in rec_rows)
    def _at(k: str) -> str:  # one value for every model reads "2 for both", not "2 and 2"
        vs = [f"{_est(r['exact_dwell'][k]).value:.0f}" for r in rec_rows]
        return (f"{vs[0]} for {'both' if len(vs) == 2 else 'each'}" if len(vs) > 1 and len(set(vs)) == 1
                else " and ".join(vs)) + f" at $\\tau$ = {k}"
    others = "; ".join(_at(k) for k in keys if k != rule_key)
    text = (head + " The dwell in the exact state is Geometric($q$) as predicted, and at the census's low temperatures "
            f"too: in the recorded census ({traps} distinct perfect traps, from {p['starts']} real starts each, "
            f"{p['chains']} plain chains started in every trap), the mean exit time over its Geometric prediction is "
            f"{range_words(min(e.value for e in ratios), max(e.value for e in ratios), '.2f')} at $\\tau$ = "
            f"{join_words(keys)}, " + ("every interval contains 1" if contains else "not every interval contains 1")
            + ", and the pooled survival curves stay " + ("inside" if inside else "not always inside")
            + f" the Kolmogorov band. What differs from the paper is the depth: the median trap is {depth} nats deep, "
            f"so the exact dwell $1/q$ reaches {mark:,.0f} steps only at $\\tau$ = {t1000}, and at $\\tau$ = {rule_key} "
            f"the median trap holds the chain {at_rule} steps ({others}).")
    near = (f" Near a trap the chain stays longer than in it (it flips a token and flips it back): at $\\tau$ = "
            f"{kmc_tau:g} kinetic Monte Carlo holds the default model's chains within Hamming distance {kmc_h} of its "
            f"traps for a median of {kmc.fmt(',.0f')} steps (this run, few traps). Claim 6's rule (`verdicts.claim_6`, "
            f"committed before its run) reads the generous measure, the dwell *near* a trap, at $\\tau$ = {rule_key}, a "
            "low temperature fixed before the census (the paper gives none for its traps), because at a small enough "
            f"$\\tau$ every perfect trap holds for thousands of steps (an identity of the softmax, like the Arrhenius "
            "slope, which the claims table marks *holds by construction*).")
    if not basin_rows or basin_meta is None:
        return text + near + " The recorded basin run is not in `data/`."
    bp = basin_meta["provenance"]["params"]
    at = {r["model"]: r["basin_dwell"][str(bp["radii"][0])][rule_key] for r in basin_rows}
    basin_05 = {m: _est(b["median"]) for m, b in at.items()}
    low = all(e.hi < mark for e in basin_05.values())
    basin = "; ".join(f"`{m}` {_est(b['median']).fmt(',.0f')} steps ({b['censored']} of {b['chains']} chains still near "
                      f"after {bp['steps']:,})" for m, b in at.items())
    return (text + near + f" In the recorded basin run ({bp['chains']} chains in every trap, watched "
            f"{bp['steps']:,} steps) the median dwell within Hamming distance {bp['radii'][0]} of a trap at $\\tau$ = "
            f"{rule_key} is {basin}: "
            + (f"a longer tail than the exact state's, but at the median far from the rule's {mark:,.0f} steps"
               if low else f"the rule's mark is {mark:,.0f} steps")
            + f", so the verdict is *{v6.verdict}*"
            + (f", and with every recorded trap of {count_words(len(basin_05))} models it is not a question of sample size."
               if low else "."))


def size_md(*, rungs: Sequence[Mapping[str, Any]], base: Sequence[Mapping[str, Any]], depth: Mapping[str, Estimate],
            tau1000: Mapping[str, Estimate], dwell: Mapping[str, Estimate], within: Mapping[str, Estimate],
            pooled: Mapping[str, Estimate], rule_tau: float, seed: int = 0) -> str:
    """The summary's paragraph on the size ladder, markdown. ``rungs``: the ladder's rows sorted by
    size (``model``, ``encoder``, ``params``, ``n_traps``, ``traps``); ``base``: the base-size
    model's rows beside it; ``depth``, ``tau1000``, ``dwell``: model -> median trap depth,
    tau_1000 and exact dwell at ``rule_tau``; ``within``, ``pooled``: the slopes per e-fold of
    parameters keyed ``"depth"`` and ``"tau"``. MiniLM's own depth slope is computed here (seeded)."""
    mark = default(verdicts.claim_6, "thousands")
    by = {e: [r for r in rungs if r["encoder"] == e] for e in dict.fromkeys(r["encoder"] for r in rungs)}
    mp, mini = by.get("mpnet", []), by.get("minilm", [])
    top = rungs[-1]["model"]
    params = [r["params"] for r in rungs]
    deepen = within["depth"].lo > 0
    text = (f"**Size, measured.** On the size ladder ({count_words(len(rungs))} cuts of {count_words(len(by))} frozen encoders "
            f"under one head recipe, {_m(min(params))} to {_m(max(params))} parameters, "
            f"{range_words(min(r['n_traps'] for r in rungs), max(r['n_traps'] for r in rungs), 'd')} distinct traps a rung) "
            + ("traps deepen with size within a backbone" if deepen else "traps do not measurably deepen with size "
               "within a backbone"))
    if mp:
        a, b = mp[0]["model"], mp[-1]["model"]
        text += (f": on MPNet the median depth goes from {depth[a].value:.2f} nats at {_m(mp[0]['params'])} parameters to "
                 f"{depth[b].fmt('.2f')} at {_m(mp[-1]['params'])}, and $\\tau_{{1000}}$ from {tau1000[a].value:.3f} to "
                 f"{tau1000[b].fmt('.3f')}")
    text += (f"; the slope within backbones is {within['depth'].fmt('+.2f')} nats and {within['tau'].fmt('+.3f')} in "
             "$\\tau_{1000}$ per {term}`e-fold` of parameters.")
    if len(mini) >= 2:
        ms = size.slope(mini, "traps.min_margin", np.median, seed=seed)
        trend = ("deepen too" if ms.lo > 0 else "grow shallower" if ms.hi < 0 else "show no trend")
        text += (f" MiniLM's {count_words(len(mini))} cuts ({size.span(mini):.1f}x) {trend} "
                 f"({range_words(min(depth[r['model']].value for r in mini), max(depth[r['model']].value for r in mini), '.2f')} "
                 f"nats; slope {ms.fmt('+.2f')} per e-fold)")
        text += (", so the slope pooled over both backbones is "
                 + ("flatter" if pooled["tau"].value < within["tau"].value else "steeper")
                 + f" ({pooled['tau'].fmt('+.3f')} in $\\tau_{{1000}}$).")
    gap = rule_tau - tau1000[top].value
    if within["tau"].value > 0 and within["tau"].hi > 0 and gap > 0:
        steep = gap / within["tau"].hi
        reach = (f" and if $\\tau_{{1000}}$ stayed linear in log parameters it would take about "
                 f"{gap / within['tau'].value:.0f} more e-folds at the within-backbone slope, and {steep:.1f} (some "
                 f"{float(f'{math.exp(steep):.2g}'):,.0f} times BERT-base's parameters) even at the steepest slope its "
                 f"interval allows, to reach {rule_tau:g} (printed with the ladder)")
    else:
        reach = f"; at the within-backbone slope $\\tau_{{1000}}$ would not reach {rule_tau:g}"
    text += (" So size moves claim 6 toward the paper, but slowly:" if within["tau"].lo > 0 else
             " So the ladder does not show size moving claim 6 toward the paper:")
    text += (f" at BERT-base size (`{top}`) the median trap holds the chain {dwell[top].fmt('.1f')} steps at "
             f"$\\tau$ = {rule_tau:g},{reach}.")
    for r in base:
        m = r["model"]
        same = depth[top].lo <= depth[m].value <= depth[top].hi and tau1000[top].lo <= tau1000[m].value <= tau1000[top].hi
        longer = dwell[m].lo > dwell[top].hi
        text += (f" The base-size `{m}`, whose top layer trains with its head, has traps "
                 + ("about as deep" if same else "of another depth")
                 + f" (median {depth[m].fmt('.2f')} nats and $\\tau_{{1000}}$ {tau1000[m].fmt('.3f')}, "
                 + ("inside" if same else "not inside") + " the head-only rung's intervals); at "
                 f"$\\tau$ = {rule_tau:g} its median trap holds the chain {dwell[m].fmt('.1f')} steps against "
                 f"{dwell[top].value:.1f}. A better-trained top layer "
                 + ("lengthens the dwell" if longer else "lengthens the dwell a little, within the intervals,"
                    if dwell[m].value > dwell[top].value else "does not lengthen the dwell")
                 + (f" and does not close the gap to {mark:,.0f} steps." if dwell[m].hi < mark else "."))
    return text + (" \"Our models are small\" explains the direction of the gap, not its size (the ladder's head is "
                   "trained for minutes on a frozen sentence encoder, so this is a statement about such models, not "
                   "about BERT).")


def setting_md(*, sizes: Mapping[str, float], steps: Mapping[str, int] | None = None, chains_per_tau: int = 0) -> str:
    """A page summary's last paragraph, markdown: the live models' sizes (``sizes``, parameters)
    and, on a page with long chains, their steps (``steps``: model -> steps) and chains a
    temperature at the CPU defaults."""
    text = ("**Where our offline setting differs from the paper.** Small MLMs "
            f"({range_words(min(sizes.values()) / 1e6, max(sizes.values()) / 1e6, '.1f')} million parameters, trained on CPU "
            "for minutes, not days; the Models appendix has their cards) instead of BERT, RoBERTa and ModernBERT base; "
            "Wikipedia lead paragraphs instead of MS MARCO")
    if steps:
        return text + ("; all-MiniLM-L6-v2 instead of Jina embeddings; and at the CPU defaults "
                       f"{range_words(min(steps.values()), max(steps.values()), ',')} steps and {chains_per_tau} chains per "
                       "temperature, where the paper runs long chains. These chain statistics depend on scale, and "
                       "their intervals say by how much.")
    return text + (". The exact parts of the chapter on this page (trap search, $q(\\tau)$, the Arrhenius law, the "
                   "dwell law, the kinetic Monte Carlo) do not depend on scale; the chain statistics of pages 4.2 and "
                   "4.3 do, and their intervals say by how much.")


# --- the page's tables: trap fluency, repetition basins, labelled frames and visits -----------------


def ladder_lines(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any], *, rungs: Sequence[Mapping[str, Any]],
                 base: Sequence[Mapping[str, Any]], est: Mapping[str, Mapping[str, Estimate]], dwell: Mapping[str, Estimate],
                 pooled: Mapping[str, Estimate], within: Mapping[str, Estimate], mpnet: Mapping[str, Estimate],
                 mpnet_rows: Sequence[Mapping[str, Any]], tau_key: str,
                 depth_key: str = "median trap depth m (nats)") -> list[str]:
    """The recorded trap ladder in lines: its provenance (``meta``; the commit of each of its
    ``rows``), each rung (``rungs``, sorted by size) and base-size model (``base``) with its starts,
    traps, median depth and ``tau_1000`` (``est``: statistic -> model -> :class:`Estimate`, keyed
    ``depth_key`` and ``tau_key``) and exact dwell at tau = 0.5 (``dwell``); per statistic the slope
    per e-fold of parameters ``pooled``, ``within`` backbones and on MPNet alone (``mpnet``, over
    ``mpnet_rows``); how far the top rung's ``tau_1000`` is from 0.5 in e-folds at the within slope
    and at the steepest its interval allows; and each base-size model against the top rung."""
    p = meta["provenance"]
    lines = [f"recorded: {p['params']['starts']} real starts a rung (commit {(p.get('git_commit') or '?')[:10]}"
             f"{', uncommitted changes in the tree' if p.get('git_dirty') else ''}); made by: {meta['command']}"]
    by_commit = pd.Series([(r.get("git_commit") or "?")[:10] for r in rows]).value_counts(sort=False)
    lines.append("rows computed at commit " + ", ".join(f"{k} ({v} rows)" for k, v in by_commit.items())
                 + " (a row is kept while its model weights are unchanged: tokendyn.publish.results.recorded_rows_to_keep)")
    for r in list(rungs) + list(base):
        m = r["model"]
        lines.append(f"{m} ({r['encoder']}, {r['params'] / 1e6:.1f}M{'' if r in rungs else ', base-size model, not a rung'}): "
                     f"{r['perfect']} of {r['starts']} starts end in a perfect trap, {r['n_traps']} distinct; median depth "
                     f"{est[depth_key][m].fmt('.3f')} nats; tau_1000 {est[tau_key][m].fmt('.4f')}; exact dwell at tau = 0.5 "
                     f"{dwell[m].fmt('.2f')} steps")
    for s in pooled:
        lines.append(f"{s}: slope per e-fold of parameters over {size.span(rungs):.1f}x, pooled {pooled[s].fmt('+.4f')}; "
                     f"within backbones {within[s].fmt('+.4f')}; MPNet alone ({size.span(mpnet_rows):.1f}x) {mpnet[s].fmt('+.4f')}")
    top = rungs[-1]["model"]   # the rungs are sorted by parameters
    gap = 0.5 - est[tau_key][top].value
    lines.append(f"to bring tau_1000 from {top}'s {est[tau_key][top].value:.3f} to 0.5, if it stays linear in ln(parameters): "
                 f"{gap / within[tau_key].value:.1f} more e-folds at the within-backbone slope, {gap / within[tau_key].hi:.1f} "
                 f"(x{math.exp(gap / within[tau_key].hi):,.0f} the parameters) at the steepest slope its interval allows")
    for r in base:  # same encoder and size as the top rung; its top layer trained with the head
        m = r["model"]
        lines.append(f"{m} against {top} (same encoder, layer 12 trained too): median depth "
                     f"{est[depth_key][m].fmt('.3f')} vs {est[depth_key][top].fmt('.3f')} nats, "
                     f"tau_1000 {est[tau_key][m].fmt('.4f')} vs {est[tau_key][top].fmt('.4f')}")
    return lines


def claim6(*, rec_traps: Mapping[str, Mapping[str, Any]], rec_keys: Sequence[str], rec_meta: Mapping[str, Any] | None,
           basin_rows: Sequence[Mapping[str, Any]], basin_meta: Mapping[str, Any] | None, basin_h: str | None,
           rule_key: str, ladder: Sequence[Mapping[str, Any]], base: Sequence[Mapping[str, Any]],
           ladder_tau: Mapping[str, Estimate], ladder_dwell: Mapping[str, Estimate], within: Estimate, pooled: Estimate,
           kmc: Mapping[str, Estimate], kmc_tau: float, t1000: Mapping[str, Any], live_dwell: Mapping[str, Any],
           depth: Mapping[str, Estimate], h: int, basin_traps: int, basin_moves: int, seed: int) -> tuple[claims.Finding, Any]:
    """Claim 6's row and verdict (:func:`~tokendyn.publish.verdicts.claim_6`).

    The rule reads the dwell near the traps at tau = ``rule_key`` from the recorded basin run
    (``basin_rows``/``basin_meta``, Hamming radius ``basin_h``) and quotes the exact dwell 1/q from
    the recorded census (``rec_traps``: model -> row, its temperatures ``rec_keys``; ``rec_meta``)
    and the size ladder's within-backbone slope of ``tau_1000`` (``within``; ``pooled``,
    ``ladder``/``base`` rows, ``ladder_tau`` and ``ladder_dwell`` per model in the basis). Without the
    recorded census it reads this run: the median kinetic stay within Hamming ``h`` at ``kmc_tau``
    (``kmc``: model -> estimate), each trap's ``tau_1000`` (``t1000``: model -> tensor) and exact dwell
    at tau = 0.5 (``live_dwell``: model -> tensor over traps; medians torch's, intervals seeded
    bootstraps), the traps' median ``depth``, and the kinetic run's size (``basin_traps``, ``basin_moves``).
    -> ``(finding, verdict)``."""
    if rec_traps and rule_key in rec_keys:
        dwell = {n: Estimate(**r["exact_dwell"][rule_key]) for n, r in rec_traps.items()}
    else:
        dwell = {n: bootstrap(live_dwell[n].numpy(), np.median, seed=seed) for n in kmc
                 if n in live_dwell and len(live_dwell[n]) >= 2}
    near = {r["model"]: Estimate(**r["basin_dwell"][basin_h][rule_key]["median"]) for r in basin_rows
            if rule_key in r["basin_dwell"][basin_h]}
    watched = basin_meta["provenance"]["params"]["steps"] if basin_meta else 0
    v6 = verdicts.claim_6(near, watched=watched, h=int(basin_h or 0), paper_tau=float(rule_key), exact_dwell=dwell,
                          size=within)
    if not (rec_traps and rule_key in rec_keys):
        exact = {n: float(live_dwell[n].median()) for n in kmc if n in live_dwell}
        t1000_words = {n: bootstrap(t1000[n].numpy(), np.median, seed=seed).fmt(".3f") for n in kmc}
        return claims.finding(
            6, "; ".join(f"{n}: stay within Hamming {h} of a trap at tau = {kmc_tau:g}: median {e.fmt(',.0f')} steps; "
                         f"exact dwell 1/q = 1,000 at tau = {t1000_words[n]}; at tau = 0.5 it is "
                         f"{exact.get(n, math.nan):.0f} steps" for n, e in kmc.items()),
            v6, headline="; ".join(f"{n}: tau_1000 = {t1000_words[n]}" for n in kmc),
            basis=f"{basin_traps} traps per model followed by kinetic Monte Carlo ({basin_moves} moves), exact q "
                  f"of {sum(len(t) for t in t1000.values())} traps from their logits; median trap depth "
                  + ", ".join(f"{n} {e.value:.2f}" for n, e in depth.items()) + " nats"), v6
    rp = rec_meta["provenance"]["params"]
    ours = ((f"median dwell within Hamming {basin_h} of a trap at tau = {rule_key}: "
             + ", ".join(f"{n} {e.fmt(',.0f')}" for n, e in near.items()) + " steps; " if near else "")
            + "; ".join(f"{n} ({r['n_traps']} traps): median exact dwell 1/q at tau = "
                        + ", ".join(f"{k}: {Estimate(**r['exact_dwell'][k]).fmt('.1f')}" for k in rec_keys)
                        + f" steps; observed / Geometric mean dwell at tau = {rule_key}: "
                        f"{Estimate(**r['dwell_law'][rule_key]['ratio']).fmt('.2f')}; exact dwell 1/q = 1,000 at tau = "
                        f"{Estimate(**r['tau_1000']).fmt('.3f')}; median depth {Estimate(**r['median_margin']).fmt('.2f')} nats"
                        for n, r in rec_traps.items()))
    basis = ((f"recorded basin run (scripts/record_basin_dwell.py, {basin_meta['provenance']['params']['chains']} chains a "
              f"trap watched up to {watched:,} steps); " if basin_meta else "")
             + f"recorded census (scripts/record_traps.py, {rp['starts']} real starts a model): exact q of every distinct "
             f"perfect trap from its logits; dwell law from {rp['chains']} chains a trap per tau; size ladder "
             f"({len(ladder)} rungs, {size.span(ladder):.1f}x): tau_1000 "
             + ", ".join(f"{r['model']} {ladder_tau[r['model']].fmt('.3f')}" for r in ladder)
             + f"; slope per e-fold {within.fmt('+.4f')} within backbones, {pooled.fmt('+.4f')} pooled"
             + "".join(f"; base-size {r['model']} (top layer trained too) tau_1000 {ladder_tau[r['model']].fmt('.3f')}, "
                       f"dwell at 0.5 {ladder_dwell[r['model']].fmt('.1f')} steps" for r in base))
    head = ("; ".join(f"{n}: near a trap {e.fmt(',.0f')} steps at tau = {rule_key}" for n, e in near.items())
            + "; in it (1/q) " + ", ".join(f"{n} {dwell[n].fmt('.1f')}" for n in rec_traps))
    return claims.finding(6, ours, v6, headline=head, basis=basis), v6


def arrhenius_finding(fits: pd.DataFrame, cold: Sequence[float]) -> claims.Finding:
    """The Arrhenius row: each model's median fitted slope over -m (``fits``: a row per trap with
    ``model`` and ``slope / limit``, fitted on the temperatures ``cold``), judged by
    :func:`~tokendyn.publish.verdicts.arrhenius_limit` on the median over every trap."""
    return claims.finding("Arrhenius law: log q against 1/tau has slope minus the smallest margin",
                          "median fitted slope / (-m) " + ", ".join(f"{name} {g['slope / limit'].median():.2f}"
                                                                    for name, g in fits.groupby("model", sort=False)),
                          verdicts.arrhenius_limit(float(fits["slope / limit"].median())),
                          basis=f"{len(fits)} traps, fitted on tau in {cold}; the softmax forces it as tau -> 0",
                          paper_value="-m (the low-temperature bound's exponent)")


# --- the results record ----------------------------------------------------------------------------


def arrhenius_metrics(fits: pd.DataFrame, cold: Sequence[float]) -> dict[str, Any]:
    """Per model: the median fitted slope, intercept and exact limit slope, slope / limit's median,
    smallest and largest, the fit's temperatures ``cold`` and every trap's margin and fit."""
    return {name: {"slope": float(g["slope"].median()), "intercept": float(g["intercept"].median()),
                   "limit_slope": float(g["limit slope"].median()),
                   "slope_over_limit": {"median": float(g["slope / limit"].median()),
                                        "min": float(g["slope / limit"].min()), "max": float(g["slope / limit"].max())},
                   "fit_taus": cold, "per_trap": g[["min margin", "slope", "intercept"]].to_dict(orient="records")}
            for name, g in fits.groupby("model")}


def dwell_metrics(checks: Mapping[tuple[str, float], Any], rec_traps: Mapping[str, Mapping[str, Any]],
                  rec_meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """This run's dwell checks (``checks``: (model, tau) -> :class:`~tokendyn.analysis.traps.DwellCheck`),
    keyed ``model|tau``, and the recorded census's exact dwell and dwell law per model with its command
    and commit (``None`` without the record)."""
    return {"dwell_checks": {f"{n}|{t:.4f}": {"q": c.q, "observed": c.observed.__dict__, "predicted": c.predicted,
                                              "max_gap": c.max_gap, "band": c.band, "consistent": c.consistent}
                             for (n, t), c in checks.items()},
            "dwell_law_recorded": ({"command": rec_meta["command"], "git_commit": rec_meta["provenance"].get("git_commit"),
                                    **{n: {"exact_dwell": r["exact_dwell"], "dwell_law": r["dwell_law"], "starts": r["starts"]}
                                       for n, r in rec_traps.items()}} if rec_traps else None)}


def size_metrics(*, rungs: Sequence[Mapping[str, Any]], base: Sequence[Mapping[str, Any]],
                 est: Mapping[str, Mapping[str, Estimate]], dwell: Mapping[str, Estimate], pooled: Mapping[str, Estimate],
                 within: Mapping[str, Estimate], mpnet: Mapping[str, Estimate], mpnet_rows: Sequence[Mapping[str, Any]],
                 tau_key: str, recorded: str, command: str,
                 depth_key: str = "median trap depth m (nats)") -> dict[str, Any]:
    """The trap ladder for the record (arguments as :func:`ladder_lines`; ``recorded``: its path
    under ``data/``, ``command``: what made it): per model its size, traps, median depth,
    ``tau_1000`` and exact dwell at tau = 0.5 (``trap_depth_by_size``), and the slopes per e-fold of
    parameters, pooled, within backbones and on MPNet alone, with the spans (``trap_size_slope``)."""
    return {"trap_depth_by_size": {r["model"]: {"params": r["params"], "encoder": r["encoder"], "n_traps": r["n_traps"],
                                                "rung": r in rungs, "starts": r["starts"],
                                                "median_margin": est[depth_key][r["model"]].__dict__,
                                                "tau_1000": est[tau_key][r["model"]].__dict__,
                                                "exact_dwell_tau_0.5": dwell[r["model"]].__dict__}
                                   for r in list(rungs) + list(base)},
            "trap_size_slope": {"median_margin": pooled[depth_key].__dict__, "tau_1000": pooled[tau_key].__dict__,
                                "within_backbone": {"median_margin": within[depth_key].__dict__,
                                                    "tau_1000": within[tau_key].__dict__},
                                "mpnet_alone": {"median_margin": mpnet[depth_key].__dict__,
                                                "tau_1000": mpnet[tau_key].__dict__, "span": size.span(mpnet_rows)},
                                "span": size.span(rungs), "per": "e-fold of parameters", "recorded": recorded,
                                "command": command}}
