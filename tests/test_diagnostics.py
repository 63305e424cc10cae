"""Exact cases for the diagnostics (Kaplan-Meier, drift, hitting times, scaling), the toys' exact
anchors and the checkpointed experiment grids."""

import math

import pytest
import torch

from tokendyn.mcmc import diagnostics, glauber, toy
from tokendyn.analysis import experiments
from tokendyn.core.checkpoint import Store


def test_survival_without_censoring_is_the_empirical_tail():
    s = diagnostics.survival([1, 2, 2, 5], [False] * 4, [0, 1, 2, 3, 4, 5, 6])
    assert s.surv.tolist() == [1.0, 0.75, 0.25, 0.25, 0.25, 0.0, 0.0]
    assert s.known.all() and s.n_censored == 0
    assert s.median() == 2.0


def test_survival_kaplan_meier_with_censoring():
    # times 1, 3(censored), 4, 6(censored): S(1)=3/4; at 4 two at risk, one dies: 3/4*1/2=3/8
    s = diagnostics.survival([1, 3, 4, 6], [False, True, False, True], [0, 1, 2, 3, 4, 5, 6, 7])
    assert torch.allclose(s.surv, torch.tensor([1, .75, .75, .75, .375, .375, .375, .375],
                                               dtype=torch.float64))
    # beyond the last (censored) observation only an upper bound is known
    assert s.known.tolist() == [True] * 6 + [False, False]
    assert s.median() == 4.0


def test_survival_all_censored_at_budget_never_drops():
    s = diagnostics.survival([100] * 3, [True] * 3, [0, 50, 99, 100, 200])
    assert s.surv.tolist() == [1.0] * 5
    assert s.known.tolist() == [True, True, True, False, False]
    assert s.median() == math.inf


def test_survival_rejects_bad_input():
    with pytest.raises(ValueError, match="censored"):
        diagnostics.survival([1, 2], [False], [0, 1])
    with pytest.raises(ValueError, match="ascending"):
        diagnostics.survival([1, 2], [False, False], [2, 1])
    with pytest.raises(ValueError, match="censored"):
        diagnostics.survival([1, math.inf], [False, False], [0, 1])


def test_drift_is_one_minus_cosine():
    e0 = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    et = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 3.0], [1.0, 1.0]]])  # [T=2, B=2, d=2]
    d = diagnostics.drift(et, e0)
    assert d.shape == (2, 2)
    assert torch.allclose(d, torch.tensor([[0.0, 0.0], [1.0, 1 - 1 / math.sqrt(2)]],
                                          dtype=torch.float64))
    with pytest.raises(ValueError, match="emb_t"):
        diagnostics.drift(et[0], e0)


def test_plateau_and_hitting_times():
    t = torch.arange(8.0)
    # chain 0 rises to 1 at t=2; chain 1 rises slowly and reaches 0.9 only at t=6
    d = torch.tensor([[0, 0], [.5, .1], [1, .2], [1, .4], [1, .6], [1, .8], [1, .95], [1, .95]])
    level, reached = diagnostics.plateau(d, tail=0.25)
    assert level == pytest.approx((1 + 1 + .95 + .95) / 4)
    assert reached is True
    times, cens = diagnostics.hitting_times(d, t, level=0.9)
    assert times.tolist() == [2.0, 6.0] and cens.tolist() == [False, False]
    times, cens = diagnostics.hitting_times(d, t, level=0.99)
    assert times.tolist() == [2.0, 7.0] and cens.tolist() == [False, True]
    # an unreached plateau censors the whole group at the last recorded time
    times, cens = diagnostics.hitting_times(d, t, level=0.5, reached=False)
    assert times.tolist() == [7.0, 7.0] and cens.all()


def test_plateau_detects_a_still_rising_curve():
    d = torch.linspace(0, 1, 40)[:, None].expand(40, 5)
    _, reached = diagnostics.plateau(d)
    assert reached is False
    with pytest.raises(ValueError, match="tail"):
        diagnostics.plateau(d, tail=0.7)


def test_scaling_fit_recovers_an_exact_n_log_n_law():
    ns = [8, 16, 32, 64]
    fit = diagnostics.scaling_fit(ns, [2.5 * n * math.log(n) for n in ns])
    assert fit.C == pytest.approx(2.5)
    assert fit.slope == pytest.approx(0.0, abs=1e-12)
    # T ~ n^2 gives a ratio growing like n / ln n: a clearly positive slope
    steep = diagnostics.scaling_fit(ns, [float(n * n) for n in ns])
    assert steep.slope > 0.5
    cens = diagnostics.scaling_fit(ns, [10.0, 20.0, math.inf, math.inf])
    assert cens.C == math.inf and cens.ratios[2] == math.inf
    with pytest.raises(ValueError, match="n="):
        diagnostics.scaling_fit([1, 4], [1.0, 2.0])


def test_crossover_brackets_the_first_mixing_temperature():
    r = {0.5: math.inf, 1.0: 40.0, 1.5: 5.0, 2.0: 2.0, 5.0: 1.5}
    assert diagnostics.crossover(r, blowup=3.0) == (1.5, 2.0)  # 5.0 > 3 * 1.5
    assert diagnostics.crossover(r, blowup=4.0) == (1.0, 1.5)
    assert diagnostics.crossover(r, blowup=30.0) == (0.5, 1.0)
    lo, hi = diagnostics.crossover({1.0: 1.0, 2.0: 1.0})
    assert math.isnan(lo) and hi == 1.0
    lo, hi = diagnostics.crossover({1.0: math.inf, 2.0: math.inf})
    assert lo == 2.0 and math.isnan(hi)


def test_coupon_collector_exact_law():
    s = toy.coupon_collector_survival(2, 4)
    # n=2: first draw covers one site; then each draw covers the other with prob 1/2
    assert torch.allclose(s, torch.tensor([1, 1, .5, .25, .125], dtype=torch.float64))
    n = 8
    s = toy.coupon_collector_survival(n, 2000)
    assert float(s.sum()) == pytest.approx(toy.coupon_collector_mean(n), rel=1e-9)  # E T = sum P(T>t)


def test_coupon_collector_survival_matches_simulation():
    g = torch.Generator().manual_seed(0)
    n, runs = 6, 4000
    draws = torch.randint(n, (runs, 200), generator=g)
    seen = torch.zeros(runs, n, dtype=torch.bool)
    T = torch.full((runs,), -1)
    for t in range(200):
        seen[torch.arange(runs), draws[:, t]] = True
        T = torch.where((T < 0) & seen.all(1), torch.tensor(t + 1), T)
    emp = diagnostics.survival(T.double(), torch.zeros(runs, dtype=torch.bool), torch.arange(41.0))
    exact = toy.coupon_collector_survival(n, 40)
    assert (emp.surv - exact).abs().max() < 0.03


def test_pair_tv_and_mixing_time_on_a_two_state_chain():
    a, b = 0.2, 0.3
    P = torch.tensor([[1 - a, a], [b, 1 - b]], dtype=torch.float64)
    tv = toy.pair_tv(P, 0, 1, 5)
    assert torch.allclose(tv, (1 - a - b) ** torch.arange(6, dtype=torch.float64))
    assert diagnostics.mixing_time(tv, 0.26) == 2.0  # 0.5^2 = 0.25
    assert diagnostics.mixing_time(tv, 0.01) == math.inf
    with pytest.raises(ValueError, match="iy"):
        toy.pair_tv(P, 0, 2, 3)


def test_coupling_grid_on_the_uniform_model_is_the_coupon_collector(tmp_path):
    n, pairs = 4, 1500
    model = toy.uniform(n, 3)
    x0 = torch.zeros(pairs, n, dtype=torch.long)
    y0 = torch.ones(pairs, n, dtype=torch.long)
    store = Store(tmp_path)
    res = experiments.coupling_grid(model, x0, y0, taus=[1.0], max_steps=60, seed=3, store=store,
                               tag={"model": "uniform"})
    cell = res[1.0]
    assert not cell.censored.any() and cell.cap == 60
    assert float(cell.times.double().mean()) == pytest.approx(toy.coupon_collector_mean(n), rel=0.05)
    emp = diagnostics.survival(cell.times, cell.censored, torch.arange(30.0))
    assert (emp.surv - toy.coupon_collector_survival(n, 29)).abs().max() < 0.05
    again = experiments.coupling_grid(model, x0, y0, taus=[1.0], max_steps=60, seed=3, store=store,
                                 tag={"model": "uniform"})  # read back from the store: the cap is its max_steps
    assert torch.equal(again[1.0].times, cell.times) and again[1.0].cap == 60 and len(list(tmp_path.iterdir())) == 1


def test_coupling_grid_censors_at_the_budget():
    # a sharply peaked Potts chain at low tau starting from two different ground-ish states
    model = toy.potts_chain(6, 2, coupling=4.0, field=0.0, seed=0)
    x0 = torch.zeros(8, 6, dtype=torch.long)
    y0 = torch.ones(8, 6, dtype=torch.long)
    cell = experiments.coupling_grid(model, x0, y0, taus=[0.2], max_steps=30, seed=0)[0.2]
    assert cell.censored.all() and (cell.times == 30).all() and cell.cap == 30


def test_forgotten_drift_is_the_mean_distance_to_the_other_starts():
    e0 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    et = e0[None].clone()  # at t = 0 every chain sits on its own start
    f = diagnostics.forgotten_drift(et, e0)
    c = 1 / math.sqrt(2)
    assert torch.allclose(f[0], torch.tensor([1 - (0 + c) / 2, 1 - (0 + c) / 2, 1 - c],
                                             dtype=torch.float64))
    with pytest.raises(ValueError, match="2 chains"):
        diagnostics.forgotten_drift(et[:, :1], e0[:1])


@pytest.mark.slow  # parses the 10,033-paragraph Wikipedia file
def test_start_states_are_real_different_passages():
    from tokendyn.mcmc.conditional import content_ids
    from tokendyn.core.data import passages
    from tokendyn.models.tiny import build_tiny

    L = build_tiny("bert")
    x = experiments.start_states(L, 12, 4, topics=("health", "sports"), seed=0)
    y = experiments.start_states(L, 12, 4, topics=("politics", "science"), seed=0)
    assert x.shape == y.shape == (4, 12) and x.dtype == torch.long
    assert not torch.equal(x, y)
    # row 0 is the first health passage with >= 12 tokens, cut to its first 12
    first = next(p for p in passages("health", n=40, seed=0)
                 if len(L.tokenizer(p, add_special_tokens=False)["input_ids"]) >= 12)
    assert torch.equal(x[0], content_ids(L, [first], 12)[0])
    with pytest.raises(ValueError, match="count"):
        experiments.start_states(L, 12, 0, topics=("health",))


def test_coupling_grid_splits_a_mixed_batch_back_per_tau():
    model = toy.potts_chain(6, 2, coupling=4.0, field=0.0, seed=0)
    x0 = torch.zeros(8, 6, dtype=torch.long)
    y0 = torch.ones(8, 6, dtype=torch.long)
    res = experiments.coupling_grid(model, x0, y0, taus=[0.2, 50.0], max_steps=300, seed=0)
    assert list(res) == [0.2, 50.0]
    assert res[0.2].censored.all()            # cold: stuck in the two ground states, censored
    assert not res[50.0].censored.any()       # hot: near-uniform conditionals couple fast
    assert float(res[50.0].times.double().mean()) < 60


def test_coupling_drift_grid_reads_drift_off_the_coupled_chains(tmp_path):
    model = toy.potts_chain(5, 4, coupling=0.5, seed=2)
    x0 = torch.zeros(3, 5, dtype=torch.long)
    y0 = torch.full((3, 5), 3)

    def decode(tokens):
        return [" ".join(map(str, row.tolist())) for row in tokens]

    def embed(texts):
        return torch.stack([torch.bincount(torch.tensor([int(w) for w in t.split()]), minlength=4)
                            .float() for t in texts])

    times, runs = experiments.coupling_drift_grid(model, x0, y0, taus=[0.5, 3.0], max_steps=200,
                                             drift_steps=40, records=4, seed=2, decode=decode,
                                             embed=embed, store=Store(tmp_path))
    assert list(times) == list(runs) == [0.5, 3.0]
    for tau in (0.5, 3.0):
        assert times[tau].times.shape == times[tau].censored.shape == (3,) and times[tau].cap == 200
        r = runs[tau]
        assert r.t.tolist() == [0, 10, 20, 30, 40] and torch.equal(r.trajectory[0], x0)
        counts = torch.nn.functional.one_hot(r.trajectory, 4).sum(2).double()
        assert torch.allclose(r.drift, diagnostics.drift(counts, counts[0]))
    # the same pairs alone, without recording: the same coupling law (hot pairs couple fast)
    assert float(times[3.0].times.double().mean()) < 200
    again = experiments.coupling_drift_grid(model, x0, y0, taus=[0.5, 3.0], max_steps=200, drift_steps=40,
                                       records=4, seed=2, decode=decode, embed=lambda _: 1 / 0,
                                       store=Store(tmp_path))
    assert torch.equal(again[1][3.0].drift, runs[3.0].drift)
    with pytest.raises(ValueError, match="drift_steps"):
        experiments.coupling_drift_grid(model, x0, y0, taus=[1.0], max_steps=20, drift_steps=40, records=4,
                                   seed=0, decode=decode, embed=embed)


def test_shape_slope_is_one_for_n_log_n_and_two_for_its_square():
    ns = [8, 16, 32, 64]
    assert diagnostics.shape_slope(ns, [3.0 * n * math.log(n) for n in ns]) == pytest.approx(1.0, abs=1e-12)
    assert diagnostics.shape_slope(ns, [(n * math.log(n)) ** 2 for n in ns]) == pytest.approx(2.0, abs=1e-12)
    # n^2 grows faster than n ln n but slower than its square
    assert 1.0 < diagnostics.shape_slope(ns, [float(n * n) for n in ns]) < 2.0
    assert diagnostics.shape_slope(ns, [10.0, 20.0, math.inf, 40.0]) == math.inf
    with pytest.raises(ValueError, match="two distinct"):
        diagnostics.shape_slope([8, 8], [1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        diagnostics.shape_slope([8, 16], [0.0, 2.0])
