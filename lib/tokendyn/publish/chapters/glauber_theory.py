"""Chapter 1's claim rows: the sampled Dobrushin crossing on the MLMs, and the three exact checks
(the stationary law, the Dobrushin bound, the dwell in a perfect trap), from the chapter's tables."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ...core.stats import kolmogorov_band
from .. import claims, verdicts
from ..book import fmt

__all__ = ["findings"]


def findings(toy_rows: Sequence[Mapping[str, Any]], law_rows: Sequence[Mapping[str, Any]],
             crossings: Mapping[str, float], crossing_ci: Mapping[str, tuple[float, float]],
             brackets: Mapping[str, tuple[float, float]], *, n_contexts: int, n_tokens: int, n_chains_toy: int,
             gap_max: float, dwell_chains: int, tau_dwell: float) -> list[claims.Finding]:
    """The chapter's four rows.

    - ``crossings`` / ``crossing_ci`` / ``brackets``: per model that uses its context, where the
      sampled lower bound ``alpha_hat(tau)`` falls through 1, its interval over resampled contexts
      (``n_contexts`` of ``n_tokens`` tokens), and the grid bracket of the crossing (``hi = inf``:
      no crossing on the grid), judged by :func:`~tokendyn.publish.verdicts.dobrushin_crossing`;
    - ``law_rows``: the sampler's TV to the exact law of each toy beside an exact sample's of the
      same size (``n_chains_toy``); it passes within twice that noise floor;
    - ``toy_rows``: per temperature the exact ``alpha``, ``t_mix`` and the Dobrushin bound, which
      must sit at or above ``t_mix`` wherever ``alpha < 1``;
    - ``gap_max``: the largest gap between the observed dwell survival of ``dwell_chains`` chains at
      ``tau_dwell`` and Geometric(q), inside the 95% :func:`~tokendyn.core.stats.kolmogorov_band`.
    """
    law_ok = all(r["TV(empirical, exact)"] <= 2 * r["TV of an exact sample"] for r in law_rows)
    bound_ok = all(r["Dobrushin bound"] >= r["t_mix exact"] for r in toy_rows if r["alpha"] < 1)
    band = kolmogorov_band(dwell_chains)
    crossing_words = "; ".join(
        f"{m}: alpha_hat falls through 1 at tau {crossings[m]:.2g} [{fmt(crossing_ci[m][0], '.2g', inf='above')}, "
        f"{fmt(crossing_ci[m][1], '.2g', inf='above')}]" if hi < math.inf else f"{m}: alpha_hat >= 1 on the whole grid"
        for m, (lo, hi) in brackets.items())
    return [
        claims.finding("A sampled lower bound on Dobrushin's alpha falls through 1 at high temperature", crossing_words,
                       verdicts.dobrushin_crossing({m: hi < math.inf for m, (lo, hi) in brackets.items()}),
                       basis=f"sampled lower bound on alpha, {n_contexts} contexts (interval: contexts resampled), "
                             f"n = {n_tokens}; a sufficient condition's bound, not a mixing rate (claim 4 is Chapter 3's)",
                       paper_value="alpha < 1 gives O(n log n) mixing"),
        claims.finding("The sampler reproduces the exact stationary law (also the emergent one of an incompatible chain)",
                       " / ".join(f"TV {r['TV(empirical, exact)']:.2f} vs noise {r['TV of an exact sample']:.2f}"
                                  for r in law_rows),
                       verdicts.exact_match(law_ok, "TV to the exact law within twice an exact sample's"),
                       basis=f"{n_chains_toy} chains, exact toys", paper_value="exact law"),
        claims.finding("Where alpha < 1 the Dobrushin bound holds and is loose (exact toy)",
                       " / ".join(f"tau={r['tau']:g}: {r['Dobrushin bound']:.0f} vs {r['t_mix exact']}"
                                  for r in toy_rows if r["alpha"] < 1),
                       verdicts.exact_match(bound_ok, "the bound at or above the exact t_mix wherever alpha < 1"),
                       basis="bound vs exact t_mix(eps)", paper_value="bounds loose in practice"),
        claims.finding("The dwell in an exact trap state is Geometric(q)", f"max survival gap {gap_max:.2f} vs band {band:.2f}",
                       verdicts.exact_match(gap_max <= band, "largest survival gap inside the 95% Kolmogorov band"),
                       basis=f"{dwell_chains} chains at tau = {tau_dwell:g}", paper_value="Geometric(q)"),
    ]
