"""Figures of mixing: distance to stationarity, stationary laws, coupling survival, dwell in a trap."""

from __future__ import annotations

import math
from collections.abc import Mapping

import altair as alt
import pandas as pd
import torch

from ...analysis.fidelity import PairedCoupling
from ...analysis.traps import geometric_survival
from ...mcmc.censored import CensoredTimes
from ...mcmc.diagnostics import Survival, survival
from ...mcmc.toy import coupon_collector_survival
from ._style import tau_palette

__all__ = ["distance_to_stationarity", "stationary_laws", "dwell_survival", "coupling_anchor",
           "survival_grid", "paired_survival"]

UNIFORM = "uniform model (exact)"


def distance_to_stationarity(decay: Mapping[float, torch.Tensor], bounds: pd.DataFrame, *,
                             n: int, q: int) -> alt.LayerChart:
    """Exact ``d(t)`` per temperature on a log axis, with each finite Dobrushin bound as a dashed rule.

    ``decay`` maps tau -> ``d`` [T+1], the exact distance to stationarity at steps 0..T (drawn down
    to 1e-4); ``bounds`` has columns ``tau`` and ``Dobrushin bound`` (inf where alpha >= 1, not
    drawn). ``n`` and ``q`` (sites and tokens of the toy) go in the title.
    """
    curve_df = pd.concat([pd.DataFrame({"t": range(len(d)), "d(t)": d.numpy(), "tau": str(tau)})
                          for tau, d in decay.items()])
    lines = alt.Chart(curve_df[curve_df["d(t)"] >= 1e-4]).mark_line().encode(
        x=alt.X("t:Q", title="step t (random scan)"), y=alt.Y("d(t):Q", scale=alt.Scale(type="log", domain=[1e-4, 1]), title="max_x TV(P^t(x,.), pi)"),
        color=alt.Color("tau:N", title="tau"))
    finite = bounds[bounds["Dobrushin bound"] < math.inf]
    rules = alt.Chart(finite.assign(tau=finite["tau"].astype(str))).mark_rule(strokeDash=[4, 3]).encode(
        x="Dobrushin bound:Q", color="tau:N")
    return (lines + rules).properties(title=f"Potts chain n={n}, q={q}: exact d(t); dashed: Dobrushin bound (alpha < 1 only)")


def stationary_laws(laws: Mapping[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]], *,
                    top: int = 12) -> alt.FacetChart:
    """Bars of the ``top`` likeliest states under the exact law and in the sampled chains, per model.

    ``laws`` maps a model's name -> ``(states [S, n], exact [S], empirical [S])``: every state of
    the toy, its exact stationary probability and its frequency among the sampled chains.
    """
    bars = []
    for name, (states, exact, emp) in laws.items():
        order = exact.argsort(descending=True)[:top]
        bars.append(pd.DataFrame({"model": name, "state": [str(states[k].tolist()) for k in order],
                                  "exact": exact[order].numpy(), "empirical": emp[order].numpy()}))
    df = pd.concat(bars)
    # Bars for the chains, a black tick for the exact law on each bar: a grouped pair of thin bars
    # per state would be too narrow to read at 12 states in half a column.
    x = alt.X("state:N", sort=None, title=f"{top} most likely states", axis=alt.Axis(labelFontSize=9))
    base = alt.Chart().encode(x=x)
    law = alt.Color("law:N", title="law", scale=alt.Scale(domain=["sampled chains", "exact"],
                                                               range=["#4c78a8", "black"]))
    return alt.layer(
        base.transform_calculate(law="'sampled chains'").mark_bar(width={"band": 0.8}).encode(
            y=alt.Y("empirical:Q", title="probability"), color=law, tooltip=["state", "empirical", "exact"]),
        base.transform_calculate(law="'exact'").mark_tick(thickness=2, width=14).encode(y="exact:Q", color=law),
        data=df,
    ).properties(width=260, height=200).facet(column=alt.Column("model:N", title=None)
    ).resolve_scale(x="independent").properties(
        title="Sampler (bars) against the exact stationary law (black ticks)")


def dwell_survival(observed: torch.Tensor, q: float, *, model: str, tau: float, n_chains: int | None = None,
                   level: float = 0.95) -> alt.LayerChart:
    """Observed survival of the dwell in a trap against Geometric(q), with the Kolmogorov band.

    ``observed`` [T+1]: the fraction of chains still in the trap after t = 0..T steps; ``q`` the
    trap's exact per-step leave probability at temperature ``tau``. With ``n_chains`` the band
    Geometric(q) +- eps, eps = sqrt(ln(2 / (1 - level)) / (2 n)) (the Dvoretzky-Kiefer-Wolfowitz
    bound: the observed curve of ``n`` chains leaves it with probability at most 1 - level), is shaded.
    """
    ks = torch.arange(len(observed))
    pred = geometric_survival(q, ks).numpy()
    label = f"Geometric(q={q:.3g})"
    surv = pd.concat([pd.DataFrame({"t": ks.numpy(), "P(T > t)": observed.numpy(), "curve": "observed"}),
                      pd.DataFrame({"t": ks.numpy(), "P(T > t)": pred, "curve": label})])
    x = alt.X("t:Q", title="steps since start in the trap")
    lines = alt.Chart(surv).mark_line().encode(
        x=x, y=alt.Y("P(T > t):Q", title="P(still in the trap state)"),
        color=alt.Color("curve:N", title="curve", sort=[label, "observed"]))
    title = f"{model}: dwell in a perfect trap at τ = {tau:g}"
    if n_chains is None:
        return lines.properties(title=title)
    eps = math.sqrt(math.log(2 / (1 - level)) / (2 * n_chains))
    band_df = pd.DataFrame({"t": ks.numpy(), "lo": (pred - eps).clip(0, 1), "hi": (pred + eps).clip(0, 1)})
    band = alt.Chart(band_df).mark_area(opacity=0.2, color="#4c78a8").encode(x=x, y="lo:Q", y2="hi:Q")
    return (band + lines).properties(
        title=f"{title}; shaded: {level:.0%} Kolmogorov band for {n_chains} chains (±{eps:.2f})")


def coupling_anchor(measured: Survival, pair_tv: torch.Tensor, d: torch.Tensor, t_mix: float) -> alt.LayerChart:
    """A toy's measured coupling survival above the exact pair TV and d(t), with a rule at t_mix.

    ``measured`` the Kaplan-Meier survival on steps 0..T; ``pair_tv`` [T+1] the exact TV between
    the two chains' laws; ``d`` [T+1] the exact distance to stationarity; ``t_mix`` where d <= 1/4.
    """
    toy_df = pd.concat([
        pd.DataFrame({"t": range(len(measured.surv)), "value": measured.surv.numpy(),
                      "curve": "measured P(T > t)"}),
        pd.DataFrame({"t": range(len(pair_tv)), "value": pair_tv.numpy(),
                      "curve": "exact pair TV (lower bound)"}),
        pd.DataFrame({"t": range(len(d)), "value": d.numpy(), "curve": "exact d(t)"}),
    ])
    toy_chart = alt.Chart(toy_df).mark_line().encode(
        x=alt.X("t:Q", title="steps t"), y=alt.Y("value:Q", title="probability / TV distance"),
        color=alt.Color("curve:N", title=None, legend=alt.Legend(labelLimit=300)), strokeDash="curve:N",
    ).properties(title=f"Potts toy: measured coupling survival above the exact TV (t_mix(1/4) = {t_mix:.0f})")
    return toy_chart + alt.Chart(pd.DataFrame({"t": [t_mix]})).mark_rule(color="gray").encode(x="t:Q")


def _step_curve(km: Survival) -> torch.Tensor:
    """Where a Kaplan-Meier step curve must be drawn: its change points, its two ends, known part only."""
    change = torch.ones_like(km.known)
    change[1:-1] = (km.surv[1:-1] != km.surv[:-2]) | (km.surv[1:-1] != km.surv[2:])
    return km.known & change


def survival_grid(coupling: Mapping[tuple[str, int, float], CensoredTimes]) -> alt.FacetChart:
    """Coupling survival P(T > t), one panel per model (rows) and length n (columns), one curve per tau.

    ``coupling`` maps (model, n, tau) -> :class:`~tokendyn.mcmc.censored.CensoredTimes`; each curve
    ends at its cap (the step budget). Each panel also shows the exact coupon-collector law of the
    uniform model (black, dashed), the tau -> infinity limit, up to the panel's largest cap.
    """
    rows = []
    for (name, n, tau), cell in coupling.items():
        km = survival(cell.times, cell.censored, torch.arange(cell.cap + 1.0))
        keep = _step_curve(km)   # a step curve is drawn exactly by its change points and its two ends
        rows.append(pd.DataFrame({"model": name, "n": n, "curve": f"tau={tau:g}", "t": km.t[keep].numpy(),
                                  "P(T > t)": km.surv[keep].numpy()}))
    surv_df = pd.concat(rows)
    caps: dict[tuple[str, int], int] = {}
    for (name, n, _), cell in coupling.items():
        caps[(name, n)] = max(caps.get((name, n), 0), cell.cap)
    taus = list(dict.fromkeys(tau for _, _, tau in coupling))
    cc_df = pd.concat([pd.DataFrame({"model": name, "n": n, "curve": UNIFORM,
                                     "t": range(cap + 1),
                                     "P(T > t)": coupon_collector_survival(n, cap).numpy()})
                       .iloc[::max(1, cap // 150)] for (name, n), cap in caps.items()])
    curves = [f"tau={t:g}" for t in taus] + [UNIFORM]
    return alt.Chart(pd.concat([surv_df, cc_df])).mark_line(interpolate="step-after").encode(
        x=alt.X("t:Q", title="steps t"), y=alt.Y("P(T > t):Q"),
        color=alt.Color("curve:N", title=None, sort=curves,
                        scale=alt.Scale(domain=curves, range=tau_palette(len(taus)) + ["black"])),
        strokeDash=alt.condition(alt.datum.curve == UNIFORM, alt.value([4, 3]), alt.value([1, 0])),
    ).properties(width=150, height=150).facet(
        row=alt.Row("model:N", title=None), column=alt.Column("n:O", title="n")
    ).resolve_scale(x="independent").properties(
        title="Coupling survival P(T > t); a curve still above 0 at its right end (the budget) is censored")


def paired_survival(pc: PairedCoupling, labels: tuple[str, str] = ("fp32", "bf16")) -> alt.Chart:
    """Coupling survival of the same pairs under a reference and a test model (``labels``), up to
    the budget ``pc.max_steps``."""
    grid = torch.arange(pc.max_steps + 1.0)
    surv = pd.concat([pd.DataFrame({"t": grid.numpy(), "P(T > t)": survival(cell.times, cell.censored, grid).surv.numpy(),
                                    "model dtype": lab})
                      for lab, cell in ((labels[0], pc.ref), (labels[1], pc.test))])
    return alt.Chart(surv).mark_line(interpolate="step-after").encode(
        x=alt.X("t:Q", title="steps t"), y="P(T > t):Q", color="model dtype:N", strokeDash="model dtype:N"
    ).properties(height=220)
