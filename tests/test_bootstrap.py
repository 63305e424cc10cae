"""Bootstrap intervals on coupling-time medians, C(tau) and tau*; re-censoring at a smaller budget."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tokendyn.mcmc import diagnostics, toy
from tokendyn.analysis import experiments
from tokendyn.mcmc.censored import CensoredTimes
from tokendyn.mcmc.diagnostics import bootstrap as bs


def _cell(n: int, budget: int, seed: int) -> CensoredTimes:
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(1, 2 * budget, (n,), generator=g)
    c = t >= budget
    return CensoredTimes(torch.where(c, budget, t), c, cap=budget)


def test_bootstrap_median_of_the_full_sample_is_the_kaplan_meier_median():
    # a resample that is the sample itself must give median_times' value, censored or not
    for seed in range(20):
        t, c = _cell(7 + seed, 30, seed)
        km = diagnostics.median_times({"a": (t, c)})["a"]
        x = np.where(c.numpy(), np.inf, t.numpy())
        assert np.sort(x)[math.ceil(len(x) / 2) - 1] == km


def test_bootstrap_medians_are_seeded_and_cover_the_median():
    t, c = _cell(40, 50, 1)
    a = bs.bootstrap_medians({"x": (t, c)}, n_boot=500, seed=3)["x"]
    b = bs.bootstrap_medians({"x": (t, c)}, n_boot=500, seed=3)["x"]
    assert np.array_equal(a, b)
    lo, hi = bs.median_draws_interval(a)
    assert lo <= diagnostics.median_times({"x": (t, c)})["x"] <= hi


def test_bootstrap_refuses_unequal_budgets():
    with pytest.raises(ValueError, match="one shared budget"):
        bs.bootstrap_medians({"x": (torch.tensor([5.0, 9.0]), torch.tensor([True, False]))})


def test_censor_at_is_the_prefix_of_a_longer_run():
    # the exact claim: a run with budget B is the longer run re-censored at B
    uni = toy.uniform(6, 3)
    x, y = torch.zeros(64, 6, dtype=torch.long), torch.ones(64, 6, dtype=torch.long)
    long, = experiments.coupling_grid(uni, x, y, taus=[1.0], max_steps=40, seed=5).values()
    short, = experiments.coupling_grid(uni, x, y, taus=[1.0], max_steps=12, seed=5).values()
    T_cut, c_cut = bs.censor_at(long.times, long.censored, 12)
    assert torch.equal(c_cut, short.censored)
    assert torch.equal(T_cut, short.times)
    with pytest.raises(ValueError, match="budget=41"):
        bs.censor_at(long.times, long.censored, 41) if bool(long.censored.any()) else bs.censor_at(
            long.times, torch.ones_like(long.censored), 41)
    # every cell of a run at once, at budget_factor n ln n: the run that budget gives, capped there
    budget = diagnostics.budget_steps(1.0, 6)  # 6 ln 6 = 10.75 -> 11 steps
    cut = bs.censor_cells({("u", 6, 1.0): long}, 1.0)[("u", 6, 1.0)]
    at, = experiments.coupling_grid(uni, x, y, taus=[1.0], max_steps=budget, seed=5).values()
    assert budget == 11 and cut.cap == at.cap == 11
    assert torch.equal(cut.times, at.times) and torch.equal(cut.censored, at.censored) and bool(at.censored.any())


def test_coupon_collector_median_is_exact():
    assert toy.coupon_collector_median(1) == 1
    # n = 2: T = 1 + Geometric(1/2); P(T > 1) = 1, P(T > 2) = 1/2 -> median 2
    assert toy.coupon_collector_median(2) == 2
    s = toy.coupon_collector_survival(10, 200)
    m = toy.coupon_collector_median(10)
    assert s[m] <= 0.5 < s[m - 1]


def test_crossover_draws_and_rise_probability():
    # a chain that couples fast only above tau = 2 at n = 8 and above tau = 3 at n = 16
    taus = [1.0, 2.0, 3.0, 5.0]
    cells = {}
    for n, cut in ((8, 2.0), (16, 3.0)):
        budget = int(10 * diagnostics.n_log_n(n))
        for k, tau in enumerate(taus):
            if tau >= cut:
                t = torch.full((32,), float(n * 3 + k)), torch.zeros(32, dtype=torch.bool)
            else:
                t = torch.full((32,), float(budget)), torch.ones(32, dtype=torch.bool)
            cells[(n, tau)] = t
    draws = bs.bootstrap_medians(cells, n_boot=200)
    med = diagnostics.median_times(cells)
    cr = {n: bs.crossover_draws({t: med[(n, t)] for t in taus}, {t: draws[(n, t)] for t in taus}, n)
          for n in (8, 16)}
    assert (cr[8].tau_below, cr[8].tau_star) == (1.0, 2.0)
    assert (cr[16].lo, cr[16].hi) == (3.0, 3.0)
    assert bs.rise_probability(cr[8], cr[16]) == 1.0
    assert bs.rise_probability(cr[16], cr[8]) == 0.0


def test_crossover_survey_is_every_source_budget_and_threshold_from_one_bootstrap():
    """Chapter 3's survey: tau* per run, model, budget and length, the rise over lengths, and tau* at
    other mixing thresholds; a recorded run on too few temperatures is skipped, the live one never."""
    taus = [1.0, 2.0, 3.0, 5.0]
    cells = {}
    for n, cut in ((8, 2.0), (16, 3.0)):
        budget = int(round(10 * diagnostics.n_log_n(n)))
        for k, tau in enumerate(taus):
            fast = tau >= cut
            cells[("m", n, tau)] = CensoredTimes(torch.full((32,), n * 3 + k if fast else budget),
                                                 torch.full((32,), not fast, dtype=torch.bool), cap=budget)
    sources = {"live": (cells, ["m"], [8, 16], taus), "short": (cells, ["m"], [8, 16], taus[-2:])}
    survey = bs.crossover_survey(sources, [2.0, 10.0], blowup=3.0, blowups=[2.0, 3.0, 5.0], n_boot=200, seed=0)
    rows, rises, draws = survey.rows, survey.rises, survey.draws
    assert {r["source"] for r in rows} == {"live"} and len(rows) == 2 * 2           # 2 budgets x 2 lengths
    big = {r["n"]: r for r in rows if r["budget_factor"] == 10.0}
    assert (big[8]["tau_below"], big[8]["tau_star"], big[16]["tau_star"]) == (1.0, 2.0, 3.0)
    assert rises[("live", "m", 10.0)] == 1.0 and set(draws[("live", "m", 10.0)]) == {8, 16}
    assert draws[("live", "m", 10.0)][16].lo == big[16]["lo"]
    sens = survey.by_blowup  # at the largest budget only, from the same draws
    assert [(r["blowup"], r["n"]) for r in sens] == [(b, n) for b in (2.0, 3.0, 5.0) for n in (8, 16)]
    at3 = [r for r in sens if r["blowup"] == 3.0]
    assert [(r["tau_star"], r["lo"], r["hi"]) for r in at3] == [(big[n]["tau_star"], big[n]["lo"], big[n]["hi"]) for n in (8, 16)]
    # a looser threshold lets a colder temperature mix: tau* never rises with blowup
    by_n = {n: [r["tau_star"] for r in sens if r["n"] == n] for n in (8, 16)}
    assert all(a >= b for v in by_n.values() for a, b in zip(v, v[1:]))
    alone = bs.crossover_survey(sources, [10.0], blowup=2.0, n_boot=200, seed=0)  # the same draws, read at 2
    assert [r["tau_star"] for r in alone.rows] == [r["tau_star"] for r in sens if r["blowup"] == 2.0]


def test_scaling_C_interval_brackets_the_fit():
    ns = [8, 16, 32]
    cells = {n: _cell(64, int(6 * diagnostics.n_log_n(n)), n) for n in ns}
    med = diagnostics.median_times(cells)
    fit = diagnostics.scaling_fit(ns, [med[n] for n in ns])
    lo, hi = bs.scaling_C_interval(ns, bs.bootstrap_medians(cells, n_boot=300))
    assert lo <= fit.C <= hi


def test_shape_slope_interval_brackets_the_slope_and_sees_a_steeper_law():
    ns = [8, 16, 32, 64]
    law = {n: _cell(64, int(6 * diagnostics.n_log_n(n)), n) for n in ns}
    med = diagnostics.median_times(law)
    b = diagnostics.shape_slope(ns, [med[n] for n in ns])
    lo, hi = bs.shape_slope_interval(ns, bs.bootstrap_medians(law, n_boot=300))
    assert lo <= b <= hi and lo < 1.25 and hi > 0.75
    steep = {n: _cell(64, int(0.05 * diagnostics.n_log_n(n) ** 2), n) for n in ns}
    lo2, _ = bs.shape_slope_interval(ns, bs.bootstrap_medians(steep, n_boot=300))
    assert lo2 > 1.5


def test_scaling_table_matches_its_parts_and_caps_censored_ratios():
    ns, taus = [8, 16, 32], [1.0, 5.0]
    cells = {("m", n, t): _cell(48, int((6 if t == 5.0 else 40) * diagnostics.n_log_n(n)), n + int(t))
             for n in ns for t in taus}
    fits, ratios = bs.scaling_table(cells, ["m"], ns, taus, n_boot=200, seed=0, cap=10.0)
    assert [(r["model"], r["tau"]) for r in fits] == [("m", 1.0), ("m", 5.0)]
    med = diagnostics.median_times(cells)
    top = fits[1]
    assert top["C"] == pytest.approx(diagnostics.scaling_fit(ns, [med[("m", n, 5.0)] for n in ns]).C)
    assert top["b"] == pytest.approx(diagnostics.shape_slope(ns, [med[("m", n, 5.0)] for n in ns]))
    assert top["b_lo"] <= top["b"] <= top["b_hi"]
    assert len(ratios) == len(ns) * len(taus)
    # tau = 1: the budget is 40 n ln n and the times run to twice that, so the median sits near 40 -> capped at 10
    assert all(r["T / (n ln n)"] <= 10.0 and r["hi"] <= 10.0 for r in ratios)
    one = bs.scaling_table({k: v for k, v in cells.items() if k[1] == 8}, ["m"], [8], taus, n_boot=100)[0]
    assert all(math.isnan(r["b"]) for r in one)


def test_an_estimate_is_stored_as_the_dict_a_record_reads_back():
    from tokendyn.core.stats import Estimate

    e = Estimate(1.5, 1.0, 2.0, 40, 0.9)
    assert e.to_dict() == {"value": 1.5, "lo": 1.0, "hi": 2.0, "n": 40}
    assert Estimate(**e.to_dict()) == Estimate(1.5, 1.0, 2.0, 40)   # the level is the default's, 0.95


def test_the_exact_anchors_of_chapter_3_hold():
    """The uniform model couples like the coupon collector, and the Potts toy's coupling survival
    stays above the exact pair TV (the coupling inequality), at chapter 3's sizes."""
    budget = {n: int(round(10 * diagnostics.n_log_n(n))) for n in (4, 8)}
    rows = experiments.coupon_anchor([4, 8], budget, 300, seed=0, n_boot=200)
    assert [r["n"] for r in rows] == [4, 8] and all(r["censored"] == 0 for r in rows)
    assert all(r["median_lo"] <= r["exact_median"] <= r["median_hi"] for r in rows)
    assert all(r["max_abs_gap_survival"] < 1.63 / math.sqrt(300) for r in rows)   # 99% Kolmogorov band
    potts = experiments.potts_anchor(300, seed=0)
    assert potts.violations == 0 and potts.pair_tv.shape == potts.d.shape == (301,)
    assert 0 < potts.t_mix < 300 and bool((potts.pair_tv <= 2 * potts.d + 1e-12).all())   # triangle inequality
