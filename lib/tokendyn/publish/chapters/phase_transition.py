"""Chapter 3's claim rows and the texts its two pages glue, assembled from their tables.

The pages measure (:mod:`tokendyn.analysis.experiments`, :mod:`tokendyn.mcmc.diagnostics`) and
the rules judge (:func:`~tokendyn.publish.verdicts.claim_4`, :func:`~tokendyn.publish.verdicts.claim_5`);
this module only puts their numbers into the rows of the claims table and the sentences of the
pages, so each notebook stays data -> call -> table. Page 3.1 (``03_phase_transition``: anchors,
coupling survey, drift) calls :func:`survey_rule_texts` and :func:`anchor_finding`; page 3.2
(``03_phase_transition_crossover``: scaling, ``tau*``, claims 4 and 5) calls the rest.

The tables it reads are the chapter's DataFrames: ``cross`` (one row per source, model, budget and
length: :attr:`~tokendyn.mcmc.diagnostics.CrossoverSurvey.rows`), ``sens`` (the same at every
mixing threshold: ``by_blowup``), ``fits`` (:func:`~tokendyn.mcmc.diagnostics.scaling_table`'s fits).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ...core.stats import Estimate, kolmogorov_band
from ...mcmc.diagnostics import ShapeComparison, plateau, shape_words
from .. import claims, verdicts
from . import default
from ..book import fmt, interval

__all__ = ["survey_rule_texts", "rule_texts", "shape_finding", "crossover_finding", "anchor_finding", "crossover_texts", "shape_texts",
           "size_texts"]

Shapes = Mapping[str, Mapping[float, ShapeComparison]]



def survey_rule_texts() -> dict[str, str]:
    """The thresholds page 3.1's definitions state, read from the code that applies them: the drift
    plateau's relative tolerance (:func:`~tokendyn.mcmc.diagnostics.plateau`) and the cloze-probe
    floor of a model that uses its context (:data:`~tokendyn.models.shipped.CONTEXT_TOP5`)."""
    from ...models.shipped import CONTEXT_TOP5

    return {"plateau_tol": f"{default(plateau, 'rel_tol'):.0%}", "context_floor": f"{CONTEXT_TOP5:g}"}


def rule_texts() -> dict[str, str]:
    """The thresholds page 3.2's definitions state, read from the rules that apply them: claim 4's
    likelihood level, lengths, span and lowest temperature (:func:`~tokendyn.publish.verdicts.claim_4`),
    claim 5's band and rise level (:func:`~tokendyn.publish.verdicts.claim_5`)."""
    level = default(verdicts.claim_4, "level")
    band = default(verdicts.claim_5, "band")
    return {"claim4_level": f"ln {math.exp(level):.0f} ≈ {level:.1f}",
            "claim4_lengths": f"{default(verdicts.claim_4, 'min_lengths')}",
            "claim4_span": f"{default(verdicts.claim_4, 'min_span'):g}x",
            "claim4_hot": f"{default(verdicts.claim_4, 'hot'):g}",
            "claim5_band": f"[{band[0]:g}, {band[1]:g}]",
            "claim5_rise": f"{default(verdicts.claim_5, 'rise_level'):.1%}"}


def shape_finding(shapes: Shapes, *, source: str, ns: Sequence[int], pairs: int, budget: float) -> claims.Finding:
    """Claim 4's row: per model and temperature, the censored log likelihood ratio of ``C n ln n``
    over ``C n^1.5`` and the free exponent ``p`` (``shapes``, from
    :func:`~tokendyn.mcmc.diagnostics.shapes_by_model` on run ``source``), judged by
    :func:`~tokendyn.publish.verdicts.claim_4`."""
    return claims.finding(
        4, "; ".join(f"{m}: {shape_words(sh)}" for m, sh in shapes.items()) or "fewer than 3 lengths",
        verdicts.claim_4(shapes),
        basis=f"{source}: n in {list(ns)}, {pairs} pairs a cell, budget {budget:g} n ln n; log LR: the censored "
              "log-normal likelihood of C n ln n over C n^1.5 (positive favours n ln n); p: the exponent of C n^p",
        headline="; ".join(f"{m}: log LR of n ln n over n^1.5 " + ", ".join(f"{s.log_lr:+.0f} at tau={t:g}" for t, s in sh.items())
                           + f" over n = {ns[0]}-{ns[-1]}" for m, sh in shapes.items()))


def _tau_star(r: Any, top: float) -> str:
    return fmt(r.tau_star, "g", nan=">" + format(top, "g"))


def crossover_finding(cross: pd.DataFrame, sens: pd.DataFrame, rises: Mapping[tuple[str, str, float], float], *,
                      source: str, models: Sequence[str], pairs: int, grid: Sequence[float], lengths: Sequence[int],
                      budget_factors: Sequence[float], blowup: float, blowups: Sequence[float], top: float,
                      size: str) -> tuple[claims.Finding, dict[tuple[str, str], str]]:
    """Claim 5's row, read on run ``source`` (its ``models`` that use their context, ``pairs`` a cell,
    temperature ``grid``, ``lengths``) at the largest budget, with ``tau*`` at the other thresholds of
    ``blowups`` and the size comparison's words (``size``), judged by
    :func:`~tokendyn.publish.verdicts.claim_5`. The basis also quotes every other run's ``tau*`` and
    rise share at that budget; those quotes are returned too, keyed ``(source, model)``, so a checked
    output can leave out the live run's (its rise share has no s.e. of its own)."""
    big = max(budget_factors)
    at_big = cross[(cross.source == source) & (cross.budget_factor == big)]
    at_b = {b: sens[(sens.source == source) & (sens.blowup == b)] for b in blowups}
    ctx = [m for m in models if (source, m, big) in rises]  # no tau grid, no crossover

    def estimates(rows: pd.DataFrame, m: str) -> list[Estimate]:
        return [Estimate(r.tau_star, r.lo, r.hi, pairs) for r in rows[rows.model == m].itertuples()]

    (band_lo, band_hi), rise_level = default(verdicts.claim_5, "band"), default(verdicts.claim_5, "rise_level")
    meets = {m: bool(((at_big.model == m) & (at_big.lo <= band_hi) & (at_big.hi >= band_lo)).any()) for m in ctx}
    rising = {m: rises[(source, m, big)] >= rise_level for m in ctx}
    second = sorted(budget_factors)[-2] if len(budget_factors) > 1 else None
    stable = {m: bool((cross[(cross.source == source) & (cross.model == m) & (cross.budget_factor == second)]
                       .tau_star.values == at_big[at_big.model == m].tau_star.values).all()) if second is not None else False
              for m in ctx}
    quotes = {(s, m): f"; {s} at {big:g} n ln n: " + ", ".join(
                  f"n={r.n}: {_tau_star(r, top)}"
                  for r in cross[(cross.source == s) & (cross.model == m) & (cross.budget_factor == big)].itertuples())
              + f", rise over its lengths in {p:.0%} of resamples"
              for (s, m, bf), p in rises.items() if s != source and bf == big}
    verdict = verdicts.claim_5({m: estimates(at_big, m) for m in ctx}, {m: rises[(source, m, big)] for m in ctx},
                               by_blowup={b: {m: estimates(at_b[b], m) for m in ctx} for b in blowups if b != blowup},
                               size=size)
    ours = "; ".join(f"{m}: " + ", ".join(f"n={r.n}: " + interval(r.tau_star, r.lo, r.hi, "g", nan=">" + format(top, "g"),
                                                                   inf="above")
                                          for r in at_big[at_big.model == m].itertuples()) for m in ctx)
    basis = (f"{source}: budget {big:g} n ln n, {pairs} pairs a cell, tau grid {list(grid)}; interval meets the band: "
             + ", ".join(f"{m} {'yes' if meets[m] else 'no'}" for m in ctx)
             + f"; rising from n={lengths[0]} to n={lengths[-1]} beyond the noise: "
             + ", ".join(f"{m} {'yes' if rising[m] else 'no'} ({rises[(source, m, big)]:.0%} of resamples)" for m in ctx)
             + "; same tau* at the two largest budgets: " + ", ".join(f"{m} {'yes' if stable[m] else 'no'}" for m in ctx)
             + "; tau* at blowup " + "; ".join(
                 f"{b:g}: " + ", ".join(f"n={r.n}: {_tau_star(r, top)}" for r in at_b[b].itertuples()) for b in blowups)
             + "".join(quotes.values()))
    return claims.finding(5, ours, verdict, basis=basis), quotes


def anchor_finding(anchor_rows: Sequence[Mapping[str, Any]], pairs: int) -> claims.Finding:
    """The exactness check of the coupling code: the uniform model's measured median coupling time
    has the coupon-collector median inside its bootstrap interval, and the survival curve stays
    inside the 99% Kolmogorov band (:func:`~tokendyn.core.stats.kolmogorov_band`) of the exact law, at every length
    (``anchor_rows`` from :func:`~tokendyn.analysis.experiments.coupon_anchor`)."""
    band = kolmogorov_band(pairs, 0.99)
    return claims.finding(
        "Coupling times of the uniform model follow the coupon-collector law (median, and largest survival gap)",
        ", ".join(f"n={r['n']}: {r['measured_median']:.0f} vs {r['exact_median']}, gap {r['max_abs_gap_survival']:.2f}"
                  for r in anchor_rows),
        verdicts.exact_match(all(r["max_abs_gap_survival"] < band and r["median_lo"] <= r["exact_median"] <= r["median_hi"]
                                 for r in anchor_rows), "exact median inside the interval, gap inside the 99% band"),
        basis=f"{pairs} pairs; exact median inside the bootstrap interval, gap inside the 99% "
              f"Kolmogorov band {band:.2f}", paper_value="exact")


def crossover_texts(cross: pd.DataFrame, sens: pd.DataFrame, rises: Mapping[tuple[str, str, float], float], *,
                    source: str, model: str, budget: float, blowups: Sequence[float]) -> dict[str, str]:
    """The reading's words on run ``source``'s crossover for ``model`` at budget ``budget``: its
    ``tau*`` per length (``grid_tau_star``), its rise share (``grid_rise``) and its ``tau*`` at
    each threshold (``grid_by_blowup``)."""
    rows = cross[(cross.source == source) & (cross.model == model) & (cross.budget_factor == budget)]
    at_b = {b: sens[(sens.source == source) & (sens.model == model) & (sens.blowup == b)] for b in blowups}
    return {"grid_tau_star": ", ".join(fmt(r.tau_star, "g") for r in rows.itertuples())
                             + f" at n = {', '.join(str(r.n) for r in rows.itertuples())}",
            "grid_rise": f"{rises[(source, model, budget)]:.0%}",
            "grid_by_blowup": "; ".join(f"{', '.join(fmt(r.tau_star, 'g') for r in at_b[b].itertuples())} at blowup {b:g}"
                                        for b in blowups)}


def shape_texts(fits: pd.DataFrame, shapes: Shapes, *, ns: Sequence[int], taus: Sequence[float],
                budget: float) -> dict[str, str]:
    """The reading's words on the shape run (the first model of ``shapes``, its ``fits`` over lengths
    ``ns`` and temperatures ``taus``, censored at ``budget`` n ln n): the top temperature's log LR,
    ``C`` and ``p`` (``shape_top``), every lower one's (``shape_rest``), ``n ln n``'s own local
    exponent over the run's lengths (``shape_local_exponent``) and the local slope of the rival law
    against ``n ln n`` there (``slope_15``). With no shape (fewer than three
    lengths) each says so."""
    if not shapes:
        return dict.fromkeys(("shape_top", "shape_rest", "shape_local_exponent", "slope_15"),
                             "not measured (fewer than 3 lengths)")
    m = next(iter(shapes))
    hot = max(taus)
    fit, sh = fits[(fits.model == m) & (fits.tau == hot)].iloc[0], shapes[m][hot]
    return {"shape_top": f"τ = {hot:g}: log LR = {sh.log_lr:+.1f}, with C = {interval(fit.C, fit.C_lo, fit.C_hi)} "
                         f"and free exponent p = {interval(sh.p, sh.p_lo, sh.p_hi)} ({m}, n = {min(ns)} to {max(ns)})",
            "shape_rest": "; ".join(f"τ = {t:g}: log LR {s.log_lr:+.1f}, p = {s.p:.2f}"
                                    + ("" if s.medians_finite else f", a median censored at {budget:g} n ln n")
                                    for t, s in sorted(shapes[m].items(), reverse=True) if t != hot),
            "shape_local_exponent": f"{1 + 1 / math.log(min(ns)):.2f} at n = {min(ns)} to "
                                    f"{1 + 1 / math.log(max(ns)):.2f} at n = {max(ns)}",
            # the local slope of C n^power against n ln n: power / (1 + 1 / ln n)
            "slope_15": f"{sh.power / (1 + 1 / math.log(min(ns))):.2f} at n = {min(ns)} to "
                        f"{sh.power / (1 + 1 / math.log(max(ns))):.2f} at n = {max(ns)}"}


def size_texts(size_rows: Sequence[Mapping[str, Any]], ratio_rows: Sequence[Mapping[str, Any]],
               higher: Mapping[int, float], lower: Mapping[int, float], *, small: str, large: str,
               top: float, blowup: float, budget: float, probe: float = 2.0) -> dict[str, str]:
    """The reading's words on the two sizes: each model with its parameters (``size_small``,
    ``size_large``), each model's ``tau*`` per length
    (``size_tau_star``), the shares of resamples in which the larger model's ``tau*`` is higher
    (``size_higher``), both models' median ``T / (n ln n)`` at ``probe`` and at ``top``
    (``size_at_probe``, ``size_at_top``), and, where the larger model's run has a temperature above
    ``top``, what reading ``tau*`` against it instead would give (``size_hotter``). Empty when the
    size runs are missing."""
    if not size_rows:
        return {}

    def ratio(m: str, n: int, t: float) -> str:
        r = next((r for r in ratio_rows if r["model"] == m and r["n"] == n and r["tau"] == t), None)
        return "not run" if r is None else f"past the budget of {budget:g}" if r["censored"] else f"{r['T / (n ln n)']:.2f}"

    ns = sorted({r["n"] for r in size_rows})
    params = {m: next(r["params"] for r in size_rows if r["model"] == m) for m in (small, large)}
    words = {
        "size_small": f"{small} ({params[small] / 1e6:.1f}M parameters)",
        "size_large": f"{large} ({params[large] / 1e6:.1f}M parameters)",
        "size_tau_star": "; ".join(
            f"{m} ({params[m] / 1e6:.1f}M): "
            + ", ".join(f"{interval(r['tau_star'], r['lo'], r['hi'], 'g', nan='above the grid', inf='above')} at n = {r['n']}"
                        for r in size_rows if r["model"] == m) for m in (large, small)),
        "size_higher": ", ".join(f"{higher[n]:.1%} at n = {n}" for n in ns if n in higher)
                       + f" (lower in {', '.join(f'{lower[n]:.1%}' for n in ns if n in lower)})",
        "size_at_probe": f"τ = {probe:g} is, for " + "; for ".join(
            f"{m}, " + ", ".join(f"{ratio(m, n, probe)} at n = {n}" for n in ns) for m in (large, small)),
        "size_at_top": f"τ = {top:g} it is " + "; ".join(
            f"{', '.join(ratio(m, n, top) for n in ns)} for {m}" for m in (large, small)) + f" (n = {', '.join(map(str, ns))})",
    }
    hotter = sorted({r["tau"] for r in ratio_rows if r["model"] == large and r["tau"] > top})
    if hotter:
        t8, n = hotter[-1], ns[-1]
        ref = next(r for r in ratio_rows if r["model"] == large and r["n"] == n and r["tau"] == t8)
        line = sorted((r for r in ratio_rows if r["model"] == large and r["n"] == n and r["tau"] < t8),
                      key=lambda r: -r["tau"])
        mixing = []
        for r in line:  # down from the top until the first temperature that does not mix
            mixes = not r["censored"] and r["T / (n ln n)"] <= blowup * ref["T / (n ln n)"]
            mixing.append(f"τ = {r['tau']:g} ({'censored' if r['censored'] else format(r['T / (n ln n)'], '.2f')}) "
                          + ("mixes" if mixes else "does not"))
            if not mixes:
                break
        words["size_hotter"] = (f"at n = {n} its median at τ = {t8:g} ({ref['T / (n ln n)']:.2f}) would put the "
                                f"threshold at {blowup * ref['T / (n ln n)']:.2f}, where " + " and ".join(mixing))
    return words
