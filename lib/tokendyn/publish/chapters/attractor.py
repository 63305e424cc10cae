"""Chapter 4.3's glued words, tables, claim rows and record: the political attractor and the
corpus ablation, from the page's labelled frames, the recorded attractor run and the model cards.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from ...analysis import size, topics, traps
from ...core.stats import Estimate
from .. import claims, verdicts
from . import count_words, default, join_words, range_words

__all__ = ["attractor_texts", "corpus_texts", "attractor_md", "ablation_md", "frames_table", "visits_table", "claim8", "ablation_claim", "region_metrics", "ablation_metrics"]


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
            + " (the null-text shares are printed above). Sinks belong to classifiers, so a label-based attractor "
            f"claim needs its own null. The live chains of this page ({live_chains} a temperature, "
            f"{range_words(min(live_steps), max(live_steps), ',')} steps) "
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
             + join_words([f"`{m}`" for m in run.models]) + ", the same measurement). There the gated politics excess "
             "against its null, the control region with the largest excess, is "
             + "; ".join(f"`{m}` at τ = {t:g}: {r.excess.fmt('+.2f')} against {r.null.fmt('+.2f')} ({r.null_region})"
                         for (m, t), r in gated.items()) + ". Politics beats its null "
             + (f"{join_words(above)} and nowhere else" if above and len(above) < len(beats) else
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
             f"{count_words(len(models_ok))} model{'s' if len(models_ok) != 1 else ''} of {count_words(len(run.models))}, so the "
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
        return text + " The recorded run is not in `data/`; the live ablation above is too small to read."
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
            + f". The live ablation above, on {live_chains} chains, sits on its threshold and its sign moves with "
            "the {term}`float order`; the claims table reads the recorded run, which is the same on every machine.")


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
