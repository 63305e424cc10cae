"""Chapter 3's claim rows and reading words (tokendyn.publish.phase_transition), on constructed runs
whose crossover, shape and size comparison are known by construction."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from tokendyn.mcmc import diagnostics
from tokendyn.mcmc.censored import CensoredTimes
from tokendyn.publish.chapters import phase_transition as phase
from tokendyn.publish import results

TAUS = [1.0, 1.5, 2.0, 3.0, 5.0]


def _cells(ns, cut):
    """32 pairs a cell: every temperature at or above cut[n] couples at once (n ln n-like times),
    the colder ones never do within 10 n ln n."""
    cells = {}
    for n in ns:
        budget = diagnostics.budget_steps(10.0, n)
        for k, tau in enumerate(TAUS):
            fast = tau >= cut[n]
            T = torch.full((32,), round(diagnostics.n_log_n(n)) + k if fast else budget)
            cells[("m", n, tau)] = CensoredTimes(T, torch.full((32,), not fast, dtype=torch.bool), cap=budget)
    return cells


@pytest.fixture(scope="module")
def survey():
    cells = _cells([8, 16, 32], {8: 1.5, 16: 2.0, 32: 3.0})  # tau* rises with n by construction
    sources = {"rec": (cells, ["m"], [8, 16, 32], TAUS)}
    s = diagnostics.crossover_survey(sources, [5.0, 10.0], blowup=3.0, blowups=[2.0, 3.0, 5.0], n_boot=100, seed=0)
    return sources, s


def test_crossover_finding_reads_the_rule_and_quotes_every_threshold(survey):
    sources, s = survey
    cross, sens = pd.DataFrame(s.rows), pd.DataFrame(s.by_blowup)
    f, quotes = phase.crossover_finding(cross, sens, s.rises, source="rec", models=["m"], pairs=32, grid=TAUS,
                                        lengths=[8, 16, 32], budget_factors=[5.0, 10.0], blowup=3.0,
                                        blowups=[2.0, 3.0, 5.0], top=5.0, size="")
    assert f.claim == 5 and f.rule == "claim_5"
    assert f.ours == "m: n=8: 1.5 [1.5, 1.5], n=16: 2 [2, 2], n=32: 3 [3, 3]"
    # in the band at n = 8 and 16 at every threshold, rising in every resample: the rule's reproduced
    assert f.verdict == "reproduced", f.reason
    assert "rising from n=8 to n=32 beyond the noise: m yes (100% of resamples)" in f.basis
    assert "tau* at blowup 2: n=8: 1.5, n=16: 2, n=32: 3" in f.basis
    assert quotes == {}  # no other run to quote


def test_crossover_and_shape_texts_are_the_tables_numbers(survey):
    sources, s = survey
    cross, sens = pd.DataFrame(s.rows), pd.DataFrame(s.by_blowup)
    words = phase.crossover_texts(cross, sens, s.rises, source="rec", model="m", budget=10.0, blowups=[2.0, 5.0])
    assert words == {"grid_tau_star": "1.5, 2, 3 at n = 8, 16, 32", "grid_rise": "100%",
                     "grid_by_blowup": "1.5, 2, 3 at blowup 2; 1.5, 2, 3 at blowup 5"}
    assert set(phase.shape_texts(pd.DataFrame(), {}, ns=[8], taus=[5.0], budget=10.0).values()) == {
        "not measured (fewer than 3 lengths)"}


def test_shape_finding_and_texts_on_an_exact_n_log_n_law():
    ns = [8, 16, 32, 64]
    gen = torch.Generator().manual_seed(0)
    cells = {}
    for tau in (1.5, 5.0):
        for n in ns:  # log-normal around 2 n ln n: the n log n law with C = 2
            T = (2 * diagnostics.n_log_n(n) * torch.exp(0.2 * torch.randn(64, generator=gen))).round().long()
            cells[("m", n, tau)] = CensoredTimes(T, torch.zeros(64, dtype=torch.bool), cap=diagnostics.budget_steps(30.0, n))
    shapes = diagnostics.shapes_by_model(cells, ["m"], [1.5, 5.0])
    f = phase.shape_finding(shapes, source="rec", ns=ns, pairs=64, budget=30.0)
    assert f.claim == 4 and f.verdict == "reproduced", f.reason
    fits, _ = diagnostics.scaling_table(cells, ["m"], ns, [1.5, 5.0], n_boot=100, seed=0)
    words = phase.shape_texts(pd.DataFrame(fits), shapes, ns=ns, taus=[1.5, 5.0], budget=30.0)
    assert words["shape_top"].startswith("τ = 5: log LR = +") and "(m, n = 8 to 64)" in words["shape_top"]
    assert words["shape_local_exponent"] == "1.48 at n = 8 to 1.24 at n = 64"
    assert words["slope_15"] == "1.01 at n = 8 to 1.21 at n = 64"  # 1.5 / (1 + 1 / ln n)


def test_size_texts_read_both_runs_and_the_hotter_threshold():
    rows = [{"model": m, "params": p, "n": n, "tau_star": t, "lo": t, "hi": t}
            for m, p, ts in (("small", 22.7e6, (1.5, 2.0)), ("large", 109.5e6, (2.0, 3.0))) for n, t in zip((8, 16), ts)]
    ratios = [{"model": "large", "n": 16, "tau": t, "T / (n ln n)": r, "censored": c}
              for t, r, c in ((8.0, 1.35, False), (5.0, 1.5, False), (3.0, 2.98, False), (2.0, 10.0, True))]
    ratios += [{"model": m, "n": n, "tau": t, "T / (n ln n)": 2.0, "censored": False}
               for m in ("small", "large") for n in (8, 16) for t in (2.0, 5.0) if not (m == "large" and n == 16)]
    w = phase.size_texts(rows, ratios, {8: 0.97, 16: 0.997}, {8: 0.0, 16: 0.0}, small="small", large="large",
                         top=5.0, blowup=3.0, budget=10.0)
    assert w["size_small"] == "small (22.7M parameters)" and w["size_large"] == "large (109.5M parameters)"
    assert w["size_tau_star"] == "large (109.5M): 2 [2, 2] at n = 8, 3 [3, 3] at n = 16; small (22.7M): 1.5 [1.5, 1.5] at n = 8, 2 [2, 2] at n = 16"
    assert w["size_higher"] == "97.0% at n = 8, 99.7% at n = 16 (lower in 0.0%, 0.0%)"
    assert w["size_at_probe"] == "τ = 2 is, for large, 2.00 at n = 8, past the budget of 10 at n = 16; for small, 2.00 at n = 8, 2.00 at n = 16"
    assert w["size_at_top"] == "τ = 5 it is 2.00, 1.50 for large; 2.00, 2.00 for small (n = 8, 16)"
    # 3 x 1.35 = 4.05: tau = 5 and 3 still mix, tau = 2 (censored) does not, and the list stops there
    assert w["size_hotter"] == ("at n = 16 its median at τ = 8 (1.35) would put the threshold at 4.05, where "
                                "τ = 5 (1.50) mixes and τ = 3 (2.98) mixes and τ = 2 (censored) does not")
    assert phase.size_texts([], [], {}, {}, small="s", large="l", top=5.0, blowup=3.0, budget=10.0) == {}


def test_rule_texts_are_the_rules_defaults():
    words = phase.rule_texts()  # page 3.2's: claims 4 and 5
    assert words["claim4_level"] == "ln 20 ≈ 3.0" and words["claim4_span"] == "8x" and words["claim4_hot"] == "1.5"
    assert words["claim5_band"] == "[1.5, 2]" and words["claim5_rise"] == "97.5%" and "plateau_tol" not in words
    survey = phase.survey_rule_texts()  # page 3.1's: the drift plateau and the context floor
    assert survey == {"plateau_tol": "5%", "context_floor": "0.25"}


def test_run_words_say_a_recorded_run_in_one_line():
    assert results.values_words([1.0, 1.25, 1.5, 1.75, 2.0, 5.0]) == "1 to 2 in steps of 0.25, and 5"
    assert results.values_words([2.0, 5.0, 10.0]) == "2, 5, and 10"
    assert results.values_words([3.0]) == "3"
    meta = {"provenance": {"params": {"mlm_names": ["m"], "ns": [8, 16], "taus": [1.5, 2.0, 3.0, 5.0], "n_pairs": 32,
                                      "budget_factors": [2.0, 30.0]}}}
    assert results.run_words(meta) == "m; n = 8, 16; τ = 1.5, 2, 3, and 5; 32 pairs a cell; budgets up to 30 n ln n"


def test_crossover_by_size_pairs_two_runs_length_by_length():
    from tokendyn.analysis import size
    small = _cells([8, 16], {8: 1.5, 16: 2.0})
    large = {("L", n, t): v for (_, n, t), v in _cells([8, 16, 32], {8: 2.0, 16: 3.0, 32: 3.0}).items()}
    s = {m: diagnostics.crossover_survey({m: (c, [name], sorted({k[1] for k in c}), TAUS)}, [10.0], blowup=3.0,
                                         n_boot=100, seed=0).draws[(m, name, 10.0)]
         for m, c, name in (("small", small, "m"), ("large", large, "L"))}
    rows, higher, lower = size.crossover_by_size(s, {"small": 1e6, "large": 1e8})
    assert [(r["model"], r["n"], r["tau_star"]) for r in rows] == [("small", 8, 1.5), ("large", 8, 2.0),
                                                                  ("small", 16, 2.0), ("large", 16, 3.0)]  # n = 32: one run only
    assert higher == {8: 1.0, 16: 1.0} and lower == {8: 0.0, 16: 0.0}
    with pytest.raises(ValueError, match="exactly two"):
        size.crossover_by_size({"small": s["small"]}, {"small": 1e6})
    ratios = diagnostics.ratios_at(large, "L", 5.0, n_boot=100, seed=0)  # re-censored at 5 n ln n: the cold cells
    assert len(ratios) == 3 * len(TAUS) and all(r["T / (n ln n)"] == 5.0 for r in ratios if r["censored"])
    assert {r["tau"] for r in ratios if r["censored"]} == {1.0, 1.5, 2.0}  # below each length's cut
