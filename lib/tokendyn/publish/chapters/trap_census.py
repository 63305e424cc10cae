"""Chapter 4.2's glued words, tables and claim row: the trap census of approximate traps and
repetition basins, from the page's tables (perfect traps as text, kinetic runs, long chains).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from ...analysis import topics, traps
from ...core.stats import wilson
from .. import claims, verdicts
from . import count_words, default, range_words

__all__ = ["rule_texts", "census_md", "fluency_table", "trap_table", "repetition_table", "claim7"]


def rule_texts() -> dict[str, str]:
    """The thresholds of claim 7's rule, from its defaults: examples a kind (``min_examples``) and
    the fluent share (``fluent_level``)."""
    return {"min_examples": f"{default(verdicts.claim_7, 'min_examples')}",
            "fluent_level": f"{default(verdicts.claim_7, 'fluent_level'):g}"}


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
                 + (" or more" if h["censored"] else "") + f" with {count_words(off)} site{'s' if off != 1 else ''} off its "
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
             f"{range_words(head_lo, head_hi, '.1f')} times as often as the text does)")
    if len(others):
        c_lo, c_hi = others["chain / text"].min(), others["chain / text"].max()
        text += (f", while the other models' chains at $\\tau$ = {min_tau:g} end at {range_words(c_lo, c_hi, '.1f')} times the "
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
