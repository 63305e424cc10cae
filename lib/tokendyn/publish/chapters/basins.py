"""Chapter 4's glued words: the run's sizes, the recorded runs' settings and the summary, from the
chapter's tables, its parameters, the records it reads (``data/runs/04_basins-*.json``) and the
rules' defaults.

Every function returns ``key -> words`` for ``glue``; the summary's paragraphs are markdown (glued
with ``{glue:md}``), the other values plain text. Where a sentence's wording depends on a number
(a trend, an interval above or below a threshold, a verdict), the wording is chosen here from that
number, so the text stays true when a rerun moves it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from ...analysis import size, topics, traps
from ...core.stats import Estimate, bootstrap, wilson
from .. import claims, verdicts
from . import default
from .rectangle_test import ladder_texts as _ladder_words

__all__ = ["setup_texts", "rule_texts", "census_texts", "basin_texts", "ladder_texts", "attractor_texts",
           "corpus_texts", "metastability_md", "size_md", "census_md", "attractor_md", "ablation_md", "setting_md",
           "ladder_lines", "fluency_table", "trap_table", "repetition_table", "frames_table", "visits_table",
           "claim6", "claim7", "claim8", "ablation_claim", "arrhenius_finding", "arrhenius_metrics", "dwell_metrics",
           "region_metrics", "ablation_metrics", "size_metrics"]

_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")


def _count(n: int) -> str:
    """A small count in words ("two MLMs"), a larger one in digits."""
    return _WORDS[n] if 0 <= n < len(_WORDS) else f"{n:,}"


def _list(values: Sequence[Any]) -> str:
    vs = [str(v) for v in values]
    return "" if not vs else vs[0] if len(vs) == 1 else ", ".join(vs[:-1]) + " and " + vs[-1]


def _span(lo: float, hi: float, spec: str) -> str:
    """``"lo to hi"``, or one value when both print alike."""
    a, b = f"{lo:{spec}}", f"{hi:{spec}}"
    return a if a == b else f"{a} to {b}"


def _m(params: float) -> str:
    return f"{params / 1e6:.1f}M" if params < 1e8 else f"{params / 1e6:.0f}M"


def _est(d: Mapping[str, Any]) -> Estimate:
    return Estimate(**d)


def setup_texts(mlm_names: Sequence[str], attractor_steps: Mapping[str, int], chains_per_model: int) -> dict[str, str]:
    """The page header's run in words (``run_models``): how many MLMs the trap census and the long
    chains use, the long chains per model and their steps (``attractor_steps``: model -> steps)."""
    steps = list(attractor_steps.values())
    return {"run_models": f"{_count(len(mlm_names))} MLMs for the traps, {_count(len(attractor_steps))} for the long "
                          f"chains, {chains_per_model} chains each, {_span(min(steps), max(steps), ',')} steps"}


def rule_texts() -> dict[str, str]:
    """The rules' thresholds the text states, from their defaults: claim 6's dwell mark
    (``dwell_mark``, "1,000") and low temperature (``rule_tau``), claim 7's examples a kind
    (``min_examples``) and fluent share (``fluent_level``)."""
    return {"dwell_mark": f"{default(verdicts.claim_6, 'thousands'):,.0f}",
            "rule_tau": f"{default(verdicts.claim_6, 'paper_tau'):g}",
            "min_examples": f"{default(verdicts.claim_7, 'min_examples')}",
            "fluent_level": f"{default(verdicts.claim_7, 'fluent_level'):g}"}


def census_texts(meta: Mapping[str, Any] | None, live_traps: Mapping[str, int]) -> dict[str, str]:
    """The recorded census's setting (``meta``: its record's meta; None when it is missing): the
    distinct traps it asked of every model (``rec_min_traps``) and the temperatures of its dwell law
    (``rec_taus``); and this run's distinct traps a model (``live_traps``, model -> count)."""
    counts = list(live_traps.values()) or [0]
    out = {"live_traps": _span(min(counts), max(counts), "d")}
    if meta is None:
        return {**out, "rec_min_traps": "(not recorded)", "rec_taus": "(not recorded)"}
    p = meta["provenance"]["params"]
    return {**out, "rec_min_traps": f"{p['min_traps']}", "rec_taus": _list([f"{t:g}" for t in p["taus"]])}


def basin_texts(meta: Mapping[str, Any] | None, rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The recorded basin run's setting (``meta`` and ``rows`` of its record): chains a trap
    (``basin_chains``), temperatures (``basin_taus``), the Hamming radius (``basin_h``), the sites of
    a state (``basin_sites``) and the watch in steps (``basin_watch``)."""
    if meta is None or not rows:
        return dict.fromkeys(("basin_chains", "basin_taus", "basin_h", "basin_sites", "basin_watch"), "(not recorded)")
    p = meta["provenance"]["params"]
    return {"basin_chains": f"{p['chains']}", "basin_taus": _list([f"{t:g}" for t in p["taus"]]),
            "basin_h": _list([str(r) for r in p["radii"]]), "basin_sites": _list(sorted({str(r["n_tokens"]) for r in rows})),
            "basin_watch": f"{p['steps']:,}"}


def ladder_texts(rungs: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> dict[str, str]:
    """The trap ladder (``rungs``: its rows sorted by size; ``meta``: its record's meta) in the words
    chapter 2 uses for the same ladder: each backbone's cuts with their sizes (``tl_cuts``), the
    pooled span (``tl_span``), and the real starts a rung (``tl_starts``)."""
    # chapter 2's words for the ladder; its rectangle count does not apply to a trap census
    words = _ladder_words(rungs, {"provenance": {"params": {"n_rect": None}}})
    return {"tl_cuts": words["ladder_cuts"], "tl_span": words["ladder_span"],
            "tl_starts": f"{meta['provenance']['params']['starts']}"}


def attractor_texts(meta: Mapping[str, Any] | None, run: Any) -> dict[str, str]:
    """The recorded attractor run's setting (``meta``: its record's meta; ``run``: the
    :class:`~tokendyn.analysis.topics.AttractorRun` read from it): chains a start topic
    (``att_per_topic``) and a (model, tau) (``att_chains``), steps (``att_steps``), the embedding
    stride (``att_every``) and the states a model through the fluency gate (``att_fluency``)."""
    keys = ("att_per_topic", "att_chains", "att_steps", "att_every", "att_fluency")
    if meta is None or run is None:
        return dict.fromkeys(keys, "(not recorded)")
    p = meta["provenance"]["params"]
    return {"att_per_topic": f"{p['chains']}", "att_chains": f"{run.chains}", "att_steps": f"{run.steps:,}",
            "att_every": f"{p['embed_every']}", "att_fluency": f"{p['n_fluency']}"}


def corpus_texts(card: Mapping[str, Any]) -> dict[str, str]:
    """The share of State of the Union words in a model's training mix (``sotu_share``), from its card."""
    return {"sotu_share": f"{card['sotu_share']:.0%}" if "sotu_share" in card else "(not recorded)"}


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
            f"{_span(min(e.value for e in ratios), max(e.value for e in ratios), '.2f')} at $\\tau$ = "
            f"{_list(keys)}, " + ("every interval contains 1" if contains else "not every interval contains 1")
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
            + (f", and with every recorded trap of {_count(len(basin_05))} models it is not a question of sample size."
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
    text = (f"**Size, measured.** On the size ladder ({_count(len(rungs))} cuts of {_count(len(by))} frozen encoders "
            f"under one head recipe, {_m(min(params))} to {_m(max(params))} parameters, "
            f"{_span(min(r['n_traps'] for r in rungs), max(r['n_traps'] for r in rungs), 'd')} distinct traps a rung) "
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
        text += (f" MiniLM's {_count(len(mini))} cuts ({size.span(mini):.1f}x) {trend} "
                 f"({_span(min(depth[r['model']].value for r in mini), max(depth[r['model']].value for r in mini), '.2f')} "
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


def census_md(*, default_model: str, fluency: pd.DataFrame, low: pd.DataFrame, approx_chains: int, min_tau: float,
              rep: pd.DataFrame, examples: Sequence[Mapping[str, Any]], steps: Mapping[str, int], chains_per_cell: int,
              n_approx: int, n_rep: int, v7: Any) -> str:
    """The summary's paragraph on claim 7, markdown. ``fluency``: a row per model with ``traps``,
    ``fluent by NLL alone``, ``fluent traps``, ``tautologies``, ``repetition traps``; ``low``: the
    kinetic runs at low temperature (``held``, ``perfect trap``, ``held steps``, ``censored``,
    ``sites below argmax``); ``approx_chains``: long chains held by approximate traps; ``rep``: the
    repetition table (``model``, ``tau``, ``chains``, ``entered``, ``chain / text``, ``head / text``);
    ``examples``: the most repetitive final states (``model``, ``dominance``, ``top token``,
    ``perfect trap``), of which the text quotes the most repetitive;
    ``steps``: model -> chain steps; ``n_approx``, ``n_rep``: what the rule counted; ``v7``: the verdict."""
    level = default(verdicts.claim_7, "fluent_level")
    need = default(verdicts.claim_7, "min_examples")
    fl = fluency.set_index("model")
    d = fl.loc[default_model]
    alone = wilson(int(d["fluent by NLL alone"]), max(int(d["traps"]), 1))
    both = wilson(int(d["fluent traps"]), max(int(d["traps"]), 1))
    where = ("below" if both.hi < level else "above" if both.lo > level else "straddling")
    tautologies = int(fl["tautologies"].sum()) / max(int(fl["traps"].sum()), 1)
    kinds = ("all three kinds exist" if n_approx > 0 and n_rep > 0 and int(fl["traps"].sum()) > 0
             else "not every kind turned up")
    text = (f"**The census (claim 7): {kinds}; the verdict is *{v7.verdict}*.** Perfect traps are "
            + ("mostly" if tautologies > 0.5 else "often") + " tautologies (\"a mental hospital, also known as a mental hospital, is a mental hospital.\"). By perplexity "
            f"alone SmolLM2 finds {alone.fmt('.2f')} of the default model's as fluent as real text, but it scores a "
            "tautology as likely because every repeat is predictable; counted with the tautology gate (no more repeated "
            f"longer words than the real starts' 95th percentile), {int(d['tautologies'])} of the default model's "
            f"{int(d['traps'])} traps are tautologies and the fluent share falls to {both.fmt('.2f')}, an interval "
            f"{where} {level:g} (printed in the fluency cell above).")
    for m, r in fl.iterrows():
        if m != default_model:
            text += f" Of `{m}`'s {int(r['traps'])} traps, {int(r['repetition traps'])} are repetition basins."
    held = low[low["held"] & ~low["perfect trap"]].sort_values("held steps", ascending=False)
    if len(held):
        h = held.iloc[0]
        off = int(h["sites below argmax"])
        text += (" Approximate traps, states held for hundreds of steps although a site is not its argmax, turn up at "
                 f"low temperature (one `{h['model']}` state is held for {h['held steps']:,.0f} steps"
                 + (" or more" if h["censored"] else "") + f" with {_count(off)} site{'s' if off != 1 else ''} off its "
                 f"argmax), and in {approx_chains} of the long chains at $\\tau \\ge$ {min_tau:g} within our budget.")
    else:
        text += (" No approximate trap turned up at low temperature, and "
                 f"{approx_chains} of the long chains at $\\tau \\ge$ {min_tau:g} were held by one.")
    cold = rep[rep["tau"] == min_tau]
    entered = "; ".join(f"`{r['model']}` {int(r['entered'])} of {int(r['chains'])} chains" for _, r in cold.iterrows())
    text += f" Repetition basins: at $\\tau$ = {min_tau:g} the chains that fall into one are {entered}"
    example = max(examples, key=lambda r: r["dominance"]) if examples else None
    if example is not None:
        tok = example["top token"]
        text += (f" (the most repetitive final state, of `{example['model']}`, is \"{tok} {tok} {tok} ...\", "
                 + ("itself a perfect trap" if example["perfect trap"] else "not a perfect trap") + ")")
    others = cold[cold["model"] != default_model]
    head_lo, head_hi = rep["head / text"].min(), rep["head / text"].max()
    text += (f". The head's one-step copying habit is mild for every model (its first guess repeats a window token "
             f"{_span(head_lo, head_hi, '.1f')} times as often as the text does)")
    if len(others):
        c_lo, c_hi = others["chain / text"].min(), others["chain / text"].max()
        text += (f", while the other models' chains at $\\tau$ = {min_tau:g} end at {_span(c_lo, c_hi, '.1f')} times the "
                 "text's rate")
        text += (": **the basin is the dynamics amplifying a mild habit** (every copy makes the next more likely until the "
                 "state is a trap), not the head copying on its own." if c_hi > head_hi else
                 ": the chains repeat no more than the head's own habit predicts.")
    else:
        text += "."
    text += (f" Whether a model that uses its context more strongly (the default) resists it is a comparison of unequal "
             f"runs at the defaults (its chains run {steps[default_model]:,} steps, the others' up to "
             f"{max(steps.values()):,}), so the chapter compares every model over the same first steps of its chains and "
             "says, in the repetition table's caption, where the default's share lies below another's beyond the "
             f"intervals; only such a line carries the comparison, and with {chains_per_cell} chains a cell it rarely does.")
    text += (f" Claim 7's rule (`verdicts.claim_7`) asks for a fluent share of perfect traps above {level:g}, at least "
             f"{need} chains held by approximate traps and {need} in repetition basins: one example shows that a kind "
             f"exists, not that chains fall into it. Here {n_approx} chains were held by approximate traps and {n_rep} "
             f"entered repetition basins, so the verdict is *{v7.verdict}*; the counts are in the claims table.")
    return text


def attractor_md(*, shares: pd.DataFrame, nulls: Sequence[str], live_chains: int, live_steps: Sequence[int], live_excess: Estimate,
                 top_tau: float, run: Any, v8: Any) -> str:
    """The summary's paragraph on claim 8, markdown. ``shares``: the classifier's label shares
    (``text``, ``labels``, ``label``, ``share``), ``nulls``: its null texts, whose most common argmax
    label is the classifier's sink; ``live_chains``, ``live_steps``, ``live_excess``: this run's chains a
    temperature, their steps and the default model's gated politics excess at ``top_tau``; ``run``:
    the recorded :class:`~tokendyn.analysis.topics.AttractorRun` (None: not recorded); ``v8``: the verdict."""
    arg = shares[shares["labels"] == "argmax"]
    sinks = Counter(arg[arg["text"] == g].set_index("label")["share"].idxmax() for g in nulls)
    sink = sinks.most_common(1)[0][0] if sinks else "none"
    text = (f"**The political attractor (claim 8): at the size the rule fixed, {v8.verdict}.** First the classifier: "
            f"its sink is *{sink}*" + (", not politics" if sink != "politics" else "")
            + " (the null-text shares are printed in section 3). Sinks belong to classifiers, so a label-based attractor "
            f"claim needs its own null. The live chains of section 3 ({live_chains} a temperature, "
            f"{_span(min(live_steps), max(live_steps), ',')} steps) "
            + ("point toward politics" if live_excess.lo > 0 else "show at most a direction")
            + f" at $\\tau$ = {top_tau:g} (gated excess {live_excess.fmt('+.2f')}) and cannot show that chains *return*.")
    if run is None:
        return text + " The recorded run is not in `data/`, so the rule has not been applied at its size."
    gated = {(m, t): r for (m, t, lab), r in run.tests.items() if lab == "gated" and m in run.models}
    beats = {k: r.excess.lo > r.null.hi for k, r in gated.items()}
    above = [f"on `{m}` at $\\tau$ = {t:g}" for (m, t), b in beats.items() if b]
    models_ok = sorted({m for (m, _), b in beats.items() if b})
    nulls = Counter(r.null_region for r in gated.values()).most_common(1)[0][0]
    text += (" Claim 8's rule (`verdicts.claim_8`) and the statistics it reads were committed before the recorded run "
             f"({run.chains} chains a (model, τ), {run.steps:,} steps each, on "
             + _list([f"`{m}`" for m in run.models]) + ", the same measurement). There the gated politics excess "
             "against its null, the control region with the largest excess, is "
             + "; ".join(f"`{m}` at τ = {t:g}: {r.excess.fmt('+.2f')} against {r.null.fmt('+.2f')} ({r.null_region})"
                         for (m, t), r in gated.items()) + ". Politics beats its null "
             + (f"{_list(above)} and nowhere else" if above and len(above) < len(beats) else
                "everywhere" if above else "nowhere") + ". The null is not zero: the control with the largest pull is "
             f"most often *{nulls}*" + (", the classifier's sink, which is why an excess over zero alone would have read "
                                        "as an attractor" if nulls == sink else "") + ".")
    if run.politics_fluent is not None:
        salad = run.politics_fluent.hi < run.real_fluent.lo
        text += (" The states labelled politics pass the {term}`fluency gate` at "
                 f"{run.politics_fluent.fmt('.2f')} of {run.politics_fluent.n} sampled (real snippets: "
                 f"{run.real_fluent.fmt('.2f')})" + (": the chains drift into political *words* in word-salad order, not "
                                                     "into political prose." if salad else "."))
    text += (f" *Partly* needs politics above the null on every model at some temperature; it holds on "
             f"{_count(len(models_ok))} model{'s' if len(models_ok) != 1 else ''} of {_count(len(run.models))}, so the "
             f"verdict is *{v8.verdict}*. The paper reports labels and PCA pictures without a null text or a fluency "
             "control, so its measurement may share the confound; we cannot tell from the paper.")
    return text


def ablation_md(*, run: Any, v_abl: Any, live_chains: int) -> str:
    """The summary's paragraph on the corpus ablation, markdown: the recorded paired differences
    (``run.ablation``, tau -> with minus without) in words, whether the with-politics model's
    politics beats its null anywhere, and the verdict ``v_abl``; ``live_chains``: this run's chains a
    temperature."""
    text = f"**Is the basin in the data? {v_abl.verdict.capitalize()}.**"
    if run is None or run.ablation_models is None:
        return text + " The recorded run is not in `data/`; the live ablation of section 3 is too small to read."
    with_, without = run.ablation_models
    diffs = ", ".join(f"{d.fmt('+.3f')} at τ = {t:g}" for t, d in run.ablation.items())
    said = [f"at $\\tau$ = {t:g} " + ("the corpus accounts for a share of the political region" if d.lo > 0 else
                                       "the model without political prose spends more time there" if d.hi < 0 else
                                       "there is no difference to see") for t, d in run.ablation.items()]
    beat = any(r.excess.lo > r.null.hi for (m, t, lab), r in run.tests.items() if lab == "gated" and m == with_)
    return (text + f" In the recorded run, removing political prose from `{with_}`'s training corpus (`{without}`) "
            f"changes the share of time its chains spend in the gated political region by {diffs} (with minus without, "
            "paired chain by chain: same start, same seed). " + "; ".join(said).capitalize()
            + (f", and even with political prose `{with_}`'s political region does not beat its null" if not beat else "")
            + f". The live ablation of section 3, on {live_chains} chains, sits on its threshold and its sign moves with "
            "the {term}`float order`; the claims table reads the recorded run, which is the same on every machine.")


def setting_md(*, sizes: Mapping[str, float], steps: Mapping[str, int], chains_per_tau: int) -> str:
    """The summary's last paragraph, markdown: the live models' sizes (``sizes``, parameters), the
    long chains' steps and chains a temperature at the CPU defaults."""
    return ("**Where our offline setting differs from the paper.** Small MLMs "
            f"({_span(min(sizes.values()) / 1e6, max(sizes.values()) / 1e6, '.1f')} million parameters, trained on CPU "
            "for minutes, not days; the Models appendix has their cards) instead of BERT, RoBERTa and ModernBERT base; "
            "Wikipedia lead paragraphs instead of MS MARCO; all-MiniLM-L6-v2 instead of Jina embeddings; and at the CPU "
            f"defaults {_span(min(steps.values()), max(steps.values()), ',')} steps and {chains_per_tau} chains per "
            "temperature, where the paper runs long chains. The exact parts of the chapter (trap search, $q(\\tau)$, the "
            "Arrhenius law, the dwell law, the kinetic Monte Carlo) do not depend on scale; the chain statistics of "
            "sections 2 and 3 do, and their intervals say by how much.")


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


def fluency_table(gates: Mapping[str, topics.FluencyGate], *, repeat_share: float) -> pd.DataFrame:
    """One row per model of its perfect traps through the fluency gate (``gates``: model ->
    :class:`~tokendyn.analysis.topics.FluencyGate` of its traps against its real starts): the
    median NLLs, the traps that pass the gate, repetition basins (dominance at least
    ``repeat_share``), tautologies, the traps fluent by NLL alone (below the starts' threshold and
    not a repetition basin), and both thresholds."""
    return pd.DataFrame([{"model": name, "real starts: median NLL": float(g.real_nll.median()),
                          "traps: median NLL": float(g.nll.median()) if len(g.nll) else math.nan,
                          "fluent traps": int(g.fluent.sum()), "repetition traps": int((g.dominance >= repeat_share).sum()),
                          "traps": len(g.nll), "threshold": g.nll_limit, "tautologies": int(g.tautology.sum()),
                          "fluent by NLL alone": int(((g.nll <= g.nll_limit) & (g.dominance < repeat_share)).sum()),
                          "word threshold": g.word_limit} for name, g in gates.items()])


def trap_table(records: Sequence[Any], gates: Mapping[str, topics.FluencyGate]) -> pd.DataFrame:
    """Every distinct perfect trap (``records``: :class:`~tokendyn.analysis.traps.TrapRecord` in the
    order of ``gates``' models, each model's traps in its gate's order) with its SmolLM2 NLL,
    dominance and repeated words (2 decimals), its ids joined by spaces."""
    table = pd.DataFrame([r.to_dict() for r in records])
    for col, attr in (("SmolLM2 NLL", "nll"), ("dominance", "dominance"), ("repeated words", "repeats")):
        table[col] = torch.cat([getattr(g, attr) for g in gates.values()]).numpy().round(2)
    table["ids"] = [" ".join(map(str, i)) for i in table["ids"]]
    return table


def repetition_table(chains: Mapping[str, Any], chain_tau: Sequence[float], taus: Sequence[float], *, share: float,
                     common: int, head: Mapping[str, float], text_repeat: float,
                     cards: Mapping[str, Mapping[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Repetition basins in the long chains (``chains``: model -> ``Chains`` with ``trajectory`` and
    ``steps``; ``chain_tau``: each chain's temperature), one row per model and temperature of
    ``taus`` (:func:`~tokendyn.analysis.traps.repetition_basins` at dominance ``share``, entries also
    counted over the first ``common`` steps), beside the head's first-guess repeat on the starts
    (``head``: model -> share), real text's window repeat (``text_repeat``) and the Models appendix's
    measurement (``cards``) -> ``(table, paths)``: the paths are the chains' mean dominance and
    window repeat along the run, for the figure."""
    rows, paths = [], []
    for name, ch in chains.items():
        for tau in taus:
            sel = torch.tensor([t == tau for t in chain_tau])
            r = traps.repetition_basins(ch.trajectory[:, sel], ch.steps, share=share, within=common)
            card = cards[name]
            rows.append({"model": name, "tau": tau, "chains": r.chains, "entered": r.entered, "time in basin": r.time,
                         f"entered in {common} steps": r.entered_within, "chain repeat (second half)": r.late_repeat,
                         "head first-guess repeat on the starts": head[name], "text repeat": text_repeat,
                         "appendix text / first guess": "{:.2f} / {:.2f}".format(
                             card["repetition"]["data"], card["repetition"]["model"])
                         if "repetition" in card else "not measured"})
            paths.append(pd.DataFrame({"model": name, "tau": tau, "step": r.path_steps.numpy(),
                                       "mean dominance": r.path_dominance.numpy(), "window repeat": r.path_repeat.numpy()}))
    table = pd.DataFrame(rows)
    table["chain / text"] = table["chain repeat (second half)"] / table["text repeat"]
    table["head / text"] = table["head first-guess repeat on the starts"] / table["text repeat"]
    return table, pd.concat(paths)


def frames_table(frames: Mapping[str, topics.LabelledFrames], chain_start: Sequence[str], chain_tau: Sequence[float],
                 regions: Sequence[str]) -> pd.DataFrame:
    """One row per labelled frame of every chain (``frames``: model ->
    :class:`~tokendyn.analysis.topics.LabelledFrames`; ``chain_start``/``chain_tau``: each chain's start
    topic and temperature): its step, text, argmax and gated labels, dominance and similarity to each
    region (``sim <region>``). Rows follow the frames' order, so row ``i`` is embedding ``i`` of the
    frames' embeddings concatenated."""
    out = []
    for name, f in frames.items():
        f_, b = f.argmax.shape
        out.append(pd.DataFrame({
            "model": name, "frame": np.repeat(np.arange(f_), b), "step": np.repeat(f.steps.numpy(), b),
            "chain": np.tile(np.arange(b), f_), "start": np.tile(chain_start, f_), "tau": np.tile(chain_tau, f_),
            "text": f.texts, "label": f.label_names, "gated": f.gated_names,
            "dominance": traps.dominance(f.states).flatten().numpy(),
            **{f"sim {t}": f.similarity[..., k].flatten().numpy() for k, t in enumerate(regions)}}))
    return pd.concat(out, ignore_index=True)


def visits_table(frames: Mapping[str, topics.LabelledFrames], chain_start: Sequence[str], chain_tau: Sequence[float], *,
                 regions: Sequence[str], starts: Sequence[str], taus: Sequence[float], default_model: str,
                 seed: int) -> pd.DataFrame:
    """Visits to every region of ``regions`` under both labellings (argmax and gated), one row per
    model, region, labelling and group of chains: the default model's per start topic of ``starts``
    and pooled ("all") at each temperature of ``taus``, the other models' pooled only. Each row holds
    :func:`~tokendyn.analysis.topics.visit_summary`'s statistics (``<stat> value/lo/hi``, seeded) and its
    chain count."""
    rows = []
    for name, f in frames.items():
        groups = ([(s, tau) for s in list(starts) + ["all"] for tau in taus] if name == default_model else
                  [("all", tau) for tau in taus])
        for region in regions:
            k = f.classes.index(region)
            for definition, lab in (("argmax", f.argmax), ("gated", f.gated)):
                for s, tau in groups:
                    sel = torch.tensor([(s in ("all", t0)) and t1 == tau for t0, t1 in zip(chain_start, chain_tau)])
                    summ = topics.visit_summary(topics.region_visits(lab[:, sel] == k, f.steps), seed=seed)
                    rows.append({"model": name, "region": region, "labels": definition, "start": s, "tau": tau,
                                 **{f"{m} {p}": getattr(summ[m], p) for m in summ for p in ("value", "lo", "hi")},
                                 "chains": int(sel.sum())})
    return pd.DataFrame(rows)


# --- the claims rows -------------------------------------------------------------------------------

_ABLATION = "Corpus ablation: removing political prose from training shrinks the political basin"


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


def claim7(*, perfect: Mapping[str, Any], fluency: pd.DataFrame, n_approx: int, n_rep: int, rep: pd.DataFrame,
           min_tau: float, n_starts: int, n_models: int, n_chains: int, h: int, min_dwell: float) -> tuple[claims.Finding, Any]:
    """Claim 7's row and verdict (:func:`~tokendyn.publish.verdicts.claim_7`): per model (``perfect``:
    model -> ``[n_starts]`` bool, the starts that ended in a perfect trap) the share of starts ending
    in a perfect trap and the fluent share of its traps (``fluency``: :func:`fluency_table`), the
    ``n_approx`` chains held by approximate traps and the ``n_rep`` that entered a repetition basin,
    with the repetition table's entries at ``min_tau`` (``rep``: :func:`repetition_table`). The
    basis names the run: ``n_models`` models of ``n_chains`` long chains, ``(h, min_dwell)`` traps.
    -> ``(finding, verdict)``."""
    n_fluent = dict(zip(fluency["model"], fluency["fluent traps"]))
    n_traps = {m: int(k) for m, k in zip(fluency["model"], fluency["traps"])}
    fluent_share = {n: wilson(int(n_fluent.get(n, 0)), max(n_traps[n], 1)) for n in perfect}
    starts = {n: wilson(int(p.sum()), len(p)).fmt(".2f") for n, p in perfect.items()}
    v7 = verdicts.claim_7(fluent_share, n_approx, n_rep)
    return claims.finding(
        7, "; ".join(f"{n}: starts ending in a perfect trap {starts[n]}, fluent {fluent_share[n].fmt('.2f')}" for n in perfect)
        + f"; approximate traps (held, not all argmax) in {n_approx} chains; repetition basins entered at tau = "
        f"{min_tau:g} by " + ", ".join(f"{r['model']} {wilson(int(r['entered']), int(r['chains'])).fmt('.2f')}"
                                        for _, r in rep[rep.tau == min_tau].iterrows()),
        v7, headline="; ".join(f"{n}: perfect trap {starts[n]}" for n in perfect),
        basis=f"{n_starts} starts per model; long chains of {n_models} models, {n_chains} chains each; ({h}, {min_dwell}) "
              "approximate traps"), v7


def claim8(*, run: Any, run_rows: Sequence[Mapping[str, Any]], visits: pd.DataFrame,
           excess: Mapping[tuple[str, float, str], Estimate], fluent: Mapping[str, Estimate], shares: pd.DataFrame,
           nulls: Sequence[str], default_model: str, top_tau: float, taus: Sequence[float], paper_models: Sequence[str],
           steps: Mapping[str, int], chains_per_tau: int, accuracy: Estimate,
           abl_diffs: Mapping[float, Estimate]) -> tuple[claims.Finding, Any]:
    """Claim 8's row and verdict (:func:`~tokendyn.publish.verdicts.claim_8`). With the recorded
    attractor run (``run``: :class:`~tokendyn.analysis.topics.AttractorRun`, ``run_rows`` its rows) the
    rule reads its gated politics excess against the null per claim model and tau, its fluency and
    paired ablation. Without it, this run's chains, below the rule's sample: the gated excess of
    ``paper_models`` at each of ``taus`` (``excess``), the fluent shares (``fluent``, keyed by group),
    the live paired ablation ``abl_diffs``; the row quotes the default model's politics time at
    ``top_tau`` (``visits``), the classifier's ``accuracy`` and the share of each null text of
    ``nulls`` it labels politics (``shares``). -> ``(finding, verdict)``."""
    if run is not None:
        gated = {(m, t): r for (m, t, lab), r in run.tests.items() if lab == "gated" and m in run.models}
        v8 = verdicts.claim_8({k: r.excess for k, r in gated.items()}, {k: r.null for k, r in gated.items()},
                              run.politics_fluent, run.real_fluent, run.ablation, chains=run.chains, steps=run.steps)
        top = max((k[1] for k in gated), default=None)
        return claims.finding(
            8, "; ".join(f"{m}, tau = {t:g}: politics excess {r.excess.fmt('+.3f')} vs null ({r.null_region}) "
                         f"{r.null.fmt('+.3f')} (gated)" for (m, t), r in gated.items())
            + f"; politics-labelled states fluent {run.politics_fluent.fmt('.2f') if run.politics_fluent else 'n/a'} "
            f"vs real snippets {run.real_fluent.fmt('.2f')}; paired ablation "
            + ", ".join(f"tau = {t:g}: {d.fmt('+.3f')}" for t, d in run.ablation.items()),
            v8, headline="; ".join(f"{m}, tau = {t:g}: excess {r.excess.fmt('+.2f')}, null {r.null.fmt('+.2f')}"
                                   for (m, t), r in gated.items() if t == top),
            basis=f"recorded run (scripts/record_attractor.py): {run.chains} chains a (model, tau) x {run.steps:,} "
                  f"steps on {', '.join(run.models)} and {run.ablation_models[1]}; classifier accuracy "
                  f"{Estimate(**run_rows[0]['accuracy']).fmt('.2f')}"), v8
    pol_fluent, real_fluent = fluent.get(f"{default_model} states labelled politics"), fluent["real held-out snippets"]
    v8 = verdicts.claim_8({(m, t): excess[(m, t, "gated")] for m in paper_models for t in taus if (m, t, "gated") in excess},
                          None, pol_fluent, real_fluent, abl_diffs, chains=chains_per_tau,
                          steps=min(steps[m] for m in paper_models))
    rows = visits[(visits.model == default_model) & (visits.start == "all") & (visits.tau == top_tau)].set_index(
        ["labels", "region"])
    p8 = {d: rows.loc[(d, "politics")] for d in ("argmax", "gated")}
    return claims.finding(
        8, f"{default_model}, tau = {top_tau:g}: politics time {p8['argmax']['time_fraction value']:.2f} "
           f"[{p8['argmax']['time_fraction lo']:.2f}, {p8['argmax']['time_fraction hi']:.2f}] (argmax), "
           f"{p8['gated']['time_fraction value']:.2f} [{p8['gated']['time_fraction lo']:.2f}, "
           f"{p8['gated']['time_fraction hi']:.2f}] (gated); excess over the regions not started in "
           f"{excess[(default_model, top_tau, 'argmax')].fmt('+.2f')} (argmax), "
           f"{excess[(default_model, top_tau, 'gated')].fmt('+.2f')} (gated); at tau = {min(taus):g} "
           f"{excess[(default_model, min(taus), 'gated')].fmt('+.2f')} (gated); politics-labelled states "
           f"fluent {pol_fluent.fmt('.2f') if pol_fluent else 'n/a'} vs real snippets {real_fluent.fmt('.2f')}",
        v8, headline=f"{default_model}, tau = {top_tau:g}: politics excess {excess[(default_model, top_tau, 'gated')].fmt('+.2f')} (gated)",
        basis=f"{chains_per_tau} chains at tau = {top_tau:g}, {steps[default_model]} steps; classifier accuracy "
              f"{accuracy.value:.2f}; null text labelled politics " + ", ".join(
                  f"{k} {shares[(shares.text == k) & (shares.labels == 'argmax') & (shares.label == 'politics')]['share'].iloc[0]:.2f}"
                  for k in nulls)), v8


def ablation_claim(*, run: Any, abl_df: pd.DataFrame, excess: Mapping[tuple[str, float, str], Estimate],
                   abl_diffs: Mapping[float, Estimate], ablation: Mapping[str, str], top_tau: float,
                   steps: Mapping[str, int]) -> tuple[claims.Finding, Any]:
    """The corpus ablation's row and verdict (:func:`~tokendyn.publish.verdicts.paired_differences`
    on the paired differences, with minus without political prose): the recorded run's (``run``)
    where there is one, else this run's (``abl_diffs``), quoting the gated politics time at
    ``top_tau`` of both models (``abl_df``; ``ablation``: "with"/"without" -> model) and their excess
    over the regions not started in (``excess``). -> ``(finding, verdict)``."""
    v_abl = verdicts.paired_differences(run.ablation if run is not None else abl_diffs)
    if run is not None:
        return claims.finding(
            _ABLATION, "paired difference in gated politics share (with - without) "
            + ", ".join(f"tau = {t:g}: {d.fmt('+.3f')}" for t, d in run.ablation.items())
            + "; excess over the regions not started in: "
            + ", ".join(f"{m} tau = {t:g} {r.excess.fmt('+.3f')}" for (m, t, lab), r in run.tests.items()
                        if lab == "gated" and m in run.ablation_models),
            v_abl, headline=f"paired difference, tau = {max(run.ablation):g}: {run.ablation[max(run.ablation)].fmt('+.2f')}",
            basis=f"recorded run: {run.ablation_models[0]} vs {run.ablation_models[1]}, one recipe and seed, "
                  f"{run.chains} chains a tau paired by start and seed, {run.steps:,} steps",
            paper_value="(beyond the paper)"), v_abl
    abl = {side: abl_df[(abl_df.model == name) & (abl_df.tau == top_tau) & (abl_df.region == "politics")
                        & (abl_df.labels == "gated")].iloc[0] for side, name in ablation.items()}
    ex = {side: excess[(name, top_tau, "gated")] for side, name in ablation.items()}
    return claims.finding(
        _ABLATION, f"politics time (gated, tau = {top_tau:g}) with {abl['with']['time fraction']:.2f} "
        f"[{abl['with']['lo']:.2f}, {abl['with']['hi']:.2f}], without {abl['without']['time fraction']:.2f} "
        f"[{abl['without']['lo']:.2f}, {abl['without']['hi']:.2f}]; paired difference (with - without) "
        + ", ".join(f"tau = {t:g}: {d.fmt('+.2f')}" for t, d in abl_diffs.items())
        + f"; excess over the regions not started in: with {ex['with'].fmt('+.2f')}, without {ex['without'].fmt('+.2f')}",
        v_abl, headline=f"paired difference, tau = {max(abl_diffs):g}: {abl_diffs[max(abl_diffs)].fmt('+.2f')}",
        basis=f"{ablation['with']} vs {ablation['without']}, one recipe and seed, {steps[ablation['with']]} steps",
        paper_value="(beyond the paper)"), v_abl


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


def _region_cells(visits: pd.DataFrame, model: str, region: str, starts: Sequence[str],
                  taus: Sequence[float]) -> dict[str, Any]:
    return {s: {str(tau): {d: {m: {p: visits[(visits.model == model) & (visits.region == region) & (visits.start == s)
                                             & (visits.tau == tau) & (visits.labels == d)][f"{m} {p}"].iloc[0]
                                   for p in ("value", "lo", "hi")}
                               for m in ("ever", "time_fraction", "returns", "first_entry")}
                           for d in ("argmax", "gated")} for tau in taus} for s in list(starts) + ["all"]}


def region_metrics(visits: pd.DataFrame, default_model: str, *, regions: Sequence[str], starts: Sequence[str],
                   taus: Sequence[float]) -> dict[str, Any]:
    """The default model's visits (``visits``: :func:`visits_table`) to politics (``political``) and
    to every other region (``control_regions``), per start topic of ``starts`` and pooled ("all"),
    temperature of ``taus`` (keyed as text) and labelling: each statistic's value, lo and hi."""
    return {"political": _region_cells(visits, default_model, "politics", starts, taus),
            "control_regions": {r: _region_cells(visits, default_model, r, starts, taus) for r in regions if r != "politics"}}


def ablation_metrics(abl_df: pd.DataFrame, ablation: Mapping[str, str],
                     cards: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Per side of the corpus ablation ("with"/"without" -> model): the model, its card and its rows
    of ``abl_df`` (every region, temperature and labelling)."""
    return {side: {"model": name, "card": cards[name],
                   "regions": abl_df[abl_df.model == name].drop(columns=["corpus", "model"]).to_dict(orient="records")}
            for side, name in ablation.items()}


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
