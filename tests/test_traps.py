"""Perfect traps, exact leave probabilities, the exp(1/tau) law, kinetic Monte Carlo, approximate
traps and repetition statistics, on cases whose answers are known exactly."""

import math

import pytest
import torch

from tokendyn.mcmc import glauber, toy
from tokendyn.analysis import influence, traps


def field_model(h):
    """Independent sites: logits h[i] whatever the rest (a PairwiseConditional with A = 0)."""
    h = torch.as_tensor(h, dtype=torch.float64)
    n, q = h.shape
    return toy.PairwiseConditional(h, torch.zeros(n, n, q, q))


def all_logits(model, x):
    return influence.all_site_logits(model, x)


def test_margins_and_perfect_traps_by_hand():
    m = field_model([[2.0, 0.5, 0.0], [0.0, 0.0, 1.0]])
    x = torch.tensor([[0, 2], [1, 2], [0, 0]])
    mg = traps.margins(all_logits(m, x), x)
    assert torch.allclose(mg, torch.tensor([[1.5, 1.0], [-1.5, 1.0], [1.5, -1.0]], dtype=torch.float64))
    assert traps.is_perfect_trap(mg).tolist() == [True, False, False]
    tie = field_model([[1.0, 1.0], [0.0, 2.0]])
    xt = torch.tensor([[0, 1]])
    assert not bool(traps.is_perfect_trap(traps.margins(all_logits(tie, xt), xt))[0])   # a tie is no trap


def test_greedy_traps_match_the_glauber_fixed_points_and_verify():
    potts = toy.potts_chain(6, 3, coupling=1.2, field=0.8, seed=2)
    x0 = torch.randint(3, (40, 6), generator=torch.Generator().manual_seed(0))
    ours = traps.greedy_traps(potts, x0, max_sweeps=30)
    ref, conv = glauber.greedy_fixed_point(potts, x0, max_sweeps=30)
    assert torch.equal(ours.tokens, ref) and torch.equal(ours.converged, conv)
    assert bool(ours.converged.all()) and int(ours.sweeps.min()) >= 1
    perfect, mmin = traps.verify_traps(potts, ours.tokens)
    assert bool(perfect.all()) and bool((mmin > 0).all())
    # every single-site change of a perfect trap lowers that site's logit: it is a local maximum
    L = all_logits(potts, ours.tokens)
    assert bool((L.argmax(-1) == ours.tokens).all())
    recs = traps.trap_records("potts", ours.tokens[:2], traps.margins(L[:2], ours.tokens[:2]), ["a", "b"])
    assert recs[0].to_dict()["ids"] == ours.tokens[0].tolist() and recs[1].text == "b"
    assert recs[0].min_margin == round(float(mmin[0]), 4)


def test_leave_probability_is_one_minus_the_exact_kernel_diagonal():
    model = toy.incompatible_ising(4, coupling=0.7, skew=0.3, field=0.4, seed=1)
    S = toy.all_states(4, 2)
    for tau in (0.3, 1.0, 2.5):
        P = toy.transition_matrix(model, tau)
        lq = traps.log_leave_probability(all_logits(model, S), S, tau)
        assert torch.allclose(lq.exp(), 1 - P.diagonal(), atol=1e-12)
    taus = torch.tensor([0.3, 1.0] * 8, dtype=torch.float64)             # per-state temperatures
    lq = traps.log_leave_probability(all_logits(model, S), S, taus)
    for tau in (0.3, 1.0):
        P = toy.transition_matrix(model, tau)
        sel = taus == tau
        assert torch.allclose(lq[sel].exp(), (1 - P.diagonal())[sel], atol=1e-12)


def test_closest_leave_temperature_is_the_log_nearest_grid_point():
    m = toy.potts_chain(4, 3, coupling=1.0, seed=1)
    x = toy.all_states(4, 3)[:1]
    L = all_logits(m, x)
    taus = [0.2, 0.5, 1.0, 2.0]
    qs = [float(traps.log_leave_probability(L, x, t)[0].exp()) for t in taus]
    for target in (qs[1], qs[2] * 1.01, 1e-3, 0.99):
        tau, q = traps.closest_leave_temperature(L, x, taus, target)
        k = min(range(len(qs)), key=lambda k: abs(math.log(qs[k] / target)))
        assert (tau, q) == (taus[k], qs[k])
    with pytest.raises(ValueError, match="one state"):
        traps.closest_leave_temperature(all_logits(m, toy.all_states(4, 3)[:2]), toy.all_states(4, 3)[:2], taus, 0.1)


def test_leave_probability_stays_exact_far_below_float_resolution():
    # two sites, margins 20 and 30 over one alternative each: q = (e^{-20/tau} + e^{-30/tau}) / 2
    m = field_model([[20.0, 0.0], [30.0, 0.0]])
    x = torch.tensor([[0, 0]])
    tau = 0.05
    exact = math.log((math.exp(-400) + math.exp(-600)) / (1 + math.exp(-400)) / 2)
    lq = float(traps.log_leave_probability(all_logits(m, x), x, tau)[0])
    assert abs(lq - exact) < 1e-9 * abs(exact)
    p_stay = torch.softmax(all_logits(m, x).double() / tau, -1).gather(-1, x.unsqueeze(-1)).squeeze(-1)
    assert float((1 - p_stay).mean()) == 0.0   # the linear form 1 - p_stay has rounded away


def test_arrhenius_slope_tends_to_minus_the_smallest_margin():
    m = field_model([[1.3, 0.0, -5.0], [2.0, 0.4, 0.0], [0.9 + 1.3, 0.9, 0.0]])  # margins 1.3, 1.6, 1.3
    x = torch.tensor([[0, 0, 0]])
    L = all_logits(m, x)
    slope, icpt = traps.arrhenius_asymptote(L, x)
    assert abs(float(slope[0]) + 1.3) < 1e-12 and abs(float(icpt[0]) - math.log(2 / 3)) < 1e-12
    taus = [0.02, 0.025, 0.03]
    fit = traps.arrhenius_fit(taus, traps.leave_curve(L, x, taus))
    assert abs(float(fit.slope[0]) + 1.3) < 1e-4 and abs(float(fit.intercept[0]) - math.log(2 / 3)) < 1e-3
    # an exact line is recovered exactly
    ts = [0.1, 0.2, 0.5, 1.0]
    line = torch.tensor([[-3.0 - 2.0 / t, 1.0 - 0.5 / t] for t in ts], dtype=torch.float64)
    f = traps.arrhenius_fit(ts, line)
    assert torch.allclose(f.slope, torch.tensor([-2.0, -0.5], dtype=torch.float64))
    assert torch.allclose(f.intercept, torch.tensor([-3.0, 1.0], dtype=torch.float64))
    # the uniform-margin bound holds at every tau, and tau_for_dwell inverts q
    for tau in (0.05, 0.3, 1.0, 3.0):
        lq = float(traps.log_leave_probability(L, x, tau)[0])
        assert lq <= traps.log_margin_bound(1.3, 3, tau)
    t1000 = float(traps.tau_for_dwell(L, x, 1000.0, iters=40)[0])
    assert abs(float(traps.log_leave_probability(L, x, t1000)[0]) + math.log(1000)) < 1e-5
    with pytest.raises(ValueError, match="two distinct"):
        traps.arrhenius_fit([0.1, 0.1], torch.zeros(2, 1))


def test_restricted_mean_and_dwell_check_on_real_chains():
    assert abs(traps.restricted_mean_geometric(0.2, 10) - sum(0.8 ** t for t in range(11))) < 1e-12
    assert traps.restricted_mean_geometric(1.0, 5) == 1.0
    potts = toy.potts_chain(5, 3, coupling=1.5, field=0.5, seed=0)
    trap = traps.greedy_traps(potts, torch.zeros(1, 5, dtype=torch.long)).tokens
    tau = 0.6
    q = float(traps.log_leave_probability(all_logits(potts, trap), trap, tau).exp()[0])
    steps = 25
    run = glauber.sample(potts, trap.repeat(600, 1), steps=steps, tau=tau, seed=3, record_every=1)
    t, e = traps.first_exit_times(run.trajectory)
    ok = traps.dwell_check(t, e, q, steps)
    assert ok.consistent, ok
    wrong = traps.dwell_check(t, e, min(1.0, 2 * q), steps)     # a factor of two in q is caught
    assert not wrong.consistent
    with pytest.raises(ValueError, match="times must lie"):
        traps.dwell_check(t + 100, e, q, steps)


def test_trap_census_keeps_each_distinct_perfect_trap_at_its_first_start():
    potts = toy.potts_chain(6, 3, coupling=1.2, field=0.8, seed=2)
    x0 = torch.randint(3, (40, 6), generator=torch.Generator().manual_seed(0))
    c = traps.trap_census(potts, x0, max_sweeps=30)
    g = traps.greedy_traps(potts, x0, max_sweeps=30)
    assert torch.equal(c.greedy.tokens, g.tokens)
    m_all = traps.margins(all_logits(potts, g.tokens), g.tokens)
    assert torch.equal(c.perfect, traps.is_perfect_trap(m_all))
    ends = [tuple(r) for r in g.tokens[c.perfect].tolist()]
    assert len(c.tokens) == len(set(ends)) >= 2                   # distinct, none missing
    assert len({tuple(r) for r in c.tokens.tolist()}) == len(c.tokens)
    for k, i in enumerate(c.keep.tolist()):                        # each at the first start that found it
        first = min(j for j in range(len(x0)) if bool(c.perfect[j]) and torch.equal(g.tokens[j], c.tokens[k]))
        assert i == first
    assert c.keep.tolist() == sorted(c.keep.tolist())
    assert torch.equal(c.logits, all_logits(potts, c.tokens))
    assert torch.equal(c.margins, m_all[c.keep]) and torch.equal(c.min_margin, m_all[c.keep].min(-1).values)
    small = traps.trap_census(potts, x0, max_sweeps=30, chunk=3)  # the chunking changes nothing
    assert torch.equal(small.tokens, c.tokens) and torch.equal(small.logits, c.logits)
    none = traps.trap_census(field_model([[1.0, 1.0], [1.0, 1.0]]), torch.zeros(3, 2, dtype=torch.long))
    assert len(none.tokens) == 0 and len(none.min_margin) == 0 and not bool(none.perfect.any())   # ties only


def test_dwell_check_with_one_q_per_chain():
    t = torch.tensor([1, 3, 6, 6, 2, 6])
    e = t < 6
    one = traps.dwell_check(t, e, 0.3, 5)
    same = traps.dwell_check(t, e, torch.full((6,), 0.3, dtype=torch.float64), 5)
    assert (one.predicted, one.max_gap, one.observed, one.q) == (same.predicted, same.max_gap, same.observed, same.q)
    q = torch.tensor([0.1, 0.1, 0.1, 0.5, 0.5, 1.0], dtype=torch.float64)
    mix = traps.dwell_check(t, e, q, 5)
    want = sum(traps.restricted_mean_geometric(float(v), 5) for v in q) / 6
    assert abs(mix.predicted - want) < 1e-12 and abs(mix.q - float(q.mean())) < 1e-15
    grid = torch.arange(6, dtype=torch.float64)
    geo = torch.stack([(1 - float(v)) ** grid for v in q]).mean(0)       # 0^0 = 1 for the q = 1 chain
    obs = (t.double()[None, :] > grid[:, None]).double().mean(1)
    assert abs(mix.max_gap - float((obs - geo).abs().max())) < 1e-12
    with pytest.raises(ValueError, match="holds 2 values"):
        traps.dwell_check(t, e, q[:2], 5)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        traps.dwell_check(t, e, q - 0.1, 5)


def test_dwell_law_in_traps_of_known_q():
    # Independent sites: the leave probability of the all-argmax state is known in closed form.
    h = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.2, 0.0], [0.0, 0.0, 0.7]], dtype=torch.float64)
    model = field_model(h)
    x = torch.tensor([[0, 1, 2]])
    L = all_logits(model, x)
    taus = [0.3, 0.5, 1.0]
    laws = traps.dwell_law(model, x, L, taus, chains=800, steps=30, seed=0)
    assert list(laws) == taus
    for tau, law in laws.items():
        p_stay = torch.softmax(h / tau, -1).diagonal()          # site i's own token is x_i = i
        q = float((1 - p_stay).mean())
        assert abs(float(law.q[0]) - q) < 1e-12 and abs(law.check.q - q) < 1e-12
        assert law.check.consistent, (tau, law.check)
        assert law.ratio.lo <= 1 <= law.ratio.hi
        assert law.times.shape == (1, 800) and law.traps == 1 and law.chains == 800
        assert abs(law.ratio.value * law.check.predicted - law.check.observed.value) < 1e-9
    # distinct traps of a Potts chain, pooled: consistent; against a q twice too large, not
    potts = toy.potts_chain(6, 3, coupling=1.2, field=0.8, seed=2)
    c = traps.trap_census(potts, torch.randint(3, (40, 6), generator=torch.Generator().manual_seed(0)), max_sweeps=30)
    two = traps.dwell_law(potts, c.tokens, c.logits, [0.8], chains=300, steps=30, seed=2)[0.8]
    K = len(c.tokens)
    assert K >= 2 and two.times.shape == (K, 300) and len(set(two.q.tolist())) == K
    assert two.check.consistent, two.check
    wrong = traps.dwell_check(two.times.flatten(), two.exited.flatten(), (2 * two.q).clamp(max=1).repeat_interleave(300), 30)
    assert not wrong.consistent
    with pytest.raises(ValueError, match="K chains >= 2"):
        traps.dwell_law(model, x, L, [0.5], chains=1, steps=5, seed=0)


def test_basin_exit_times_have_the_exact_mean_of_the_absorbing_chain():
    # Exit from the Hamming ball of radius h around a centre: the exact mean is the absorbing
    # chain's (I - Q)^-1 1 over the ball's states, from the transition matrix of the toy.
    model = toy.potts_chain(4, 3, coupling=1.0, field=0.6, seed=1)
    S = toy.all_states(4, 3)
    tau, h = 0.7, 1
    centre = torch.tensor([0, 0, 1, 2])
    inside = (S != centre).sum(-1) <= h
    P = toy.transition_matrix(model, tau)
    Q = P[inside][:, inside]
    mean = torch.linalg.solve(torch.eye(len(Q), dtype=torch.float64) - Q, torch.ones(len(Q), dtype=torch.float64))
    exact = float(mean[int(inside[:toy.state_index(centre, 3)].sum())])
    t, e = traps.basin_exit_times(model, centre.repeat(3000, 1), tau=tau, steps=10_000, h=h, seed=3)
    assert bool(e.all()) and t.dtype == torch.long and t.shape == (3000,)
    se = float(t.double().std()) / math.sqrt(len(t))
    assert abs(float(t.double().mean()) - exact) < 4 * se, (float(t.double().mean()), exact, se)
    assert exact > 3 and abs(float(t.double().mean()) - 2 * exact) > 4 * se    # the test could fail
    # h = 0 is the exact state's Geometric(q) dwell, the one the dwell law uses
    t0, _ = traps.basin_exit_times(model, centre.repeat(3000, 1), tau=tau, steps=10_000, h=0, seed=3)
    assert float(t0.double().mean()) < float(t.double().mean())
    # censoring: a cap below the dwell leaves chains at steps + 1
    tc, ec = traps.basin_exit_times(model, centre.repeat(50, 1), tau=0.05, steps=3, h=h, seed=0)
    assert bool((tc[~ec] == 4).all()) and bool((tc[ec] <= 3).all()) and int((~ec).sum()) > 0
    with pytest.raises(ValueError, match="h="):
        traps.basin_exit_times(model, centre[None], tau=tau, steps=5, h=4, seed=0)


def test_basin_dwell_summarises_each_trap_by_its_chains_median():
    potts = toy.potts_chain(6, 3, coupling=1.2, field=0.8, seed=2)
    c = traps.trap_census(potts, torch.randint(3, (40, 6), generator=torch.Generator().manual_seed(0)), max_sweeps=30)
    K = len(c.tokens)
    d = traps.basin_dwell(potts, c.tokens, [0.5, 2.0], h=1, chains=9, steps=500, seed=0)
    assert list(d) == [0.5, 2.0] and K >= 2
    for tau, b in d.items():
        assert b.times.shape == (K, 9) and b.per_trap.shape == (K,) and b.h == 1 and b.steps == 500
        assert torch.equal(b.per_trap, b.times.double().sort(1).values[:, 4])   # 9 chains: the 5th time
        assert b.median.lo <= b.median.value <= b.median.hi
    assert d[0.5].median.value > d[2.0].median.value      # colder holds longer
    with pytest.raises(ValueError, match="K >= 2 traps"):
        traps.basin_dwell(potts, c.tokens[:1], [0.5], h=1, chains=2, steps=5, seed=0)


def test_kinetic_sample_has_the_exact_law_of_the_plain_chain():
    model = toy.incompatible_ising(3, coupling=0.9, skew=0.4, field=0.7, seed=4)
    S = toy.all_states(3, 2)
    tau, t_end, B = 0.7, 6, 6000
    start = 0
    P = toy.transition_matrix(model, tau)
    exact = torch.linalg.matrix_power(P, t_end)[start]
    x0 = S[start].repeat(B, 1)
    run = traps.kinetic_sample(model, x0, tau=tau, moves=t_end, seed=0, max_steps=t_end)
    xt, known = traps.state_at(run, t_end)
    assert bool(known.all())
    freq = torch.bincount(toy.state_index(xt, 2), minlength=len(S)).double() / B
    assert 0.5 * float((freq - exact).abs().sum()) < 0.03
    # without a budget, the holding time of the start state has mean 1/q ...
    q = 1 - float(P[start, start])
    one = traps.kinetic_sample(model, x0, tau=tau, moves=1, seed=1)
    assert abs(float(one.times[1].mean()) * q - 1) < 0.05
    # ... and the first jump goes to y with probability P(x, y) / q
    first = torch.bincount(toy.state_index(one.states[1], 2), minlength=len(S)).double() / B
    jump = P[start].clone()
    jump[start] = 0
    assert 0.5 * float((first - jump / q).abs().sum()) < 0.03
    # seeded: the same run twice; per-chain temperatures accepted
    again = traps.kinetic_sample(model, x0[:50], tau=tau, moves=4, seed=0)
    assert torch.equal(again.states, traps.kinetic_sample(model, x0[:50], tau=tau, moves=4, seed=0).states)
    taus = torch.full((50,), tau, dtype=torch.float64)
    assert torch.equal(again.times, traps.kinetic_sample(model, x0[:50], tau=taus, moves=4, seed=0).times)


def test_kinetic_sample_stops_at_the_budget_and_state_at_reads_the_path():
    potts = toy.potts_chain(4, 3, coupling=2.0, field=0.5, seed=1)
    trap = traps.greedy_traps(potts, torch.zeros(1, 4, dtype=torch.long)).tokens
    run = traps.kinetic_sample(potts, trap.repeat(20, 1), tau=0.2, moves=50, seed=1, max_steps=300)
    assert bool((run.times[-1] <= 300).all()) and bool((run.times[1:] >= run.times[:-1]).all())
    assert bool(((run.observed_until == 300) | (run.times[-1] == run.observed_until)).all())
    k = 3
    x, known = traps.state_at(run, float(run.times[k, 0]))
    assert bool(known[0]) and torch.equal(x[0], run.states[k, 0])
    with pytest.raises(ValueError, match="moves"):
        traps.kinetic_sample(potts, trap, tau=0.2, moves=-1, seed=0)
    with pytest.raises(ValueError, match="tau"):
        traps.kinetic_sample(potts, trap, tau=0.0, moves=1, seed=0)


def test_a_loop_over_the_kinetic_init_and_step_draws_exactly_kinetic_sample():
    """The kinetic sampler is an init/step pair over an explicit state, like the Glauber kernel."""
    from tokendyn.mcmc.glauber import make_generator
    from tokendyn.analysis.traps import kinetic
    potts = toy.potts_chain(4, 3, coupling=2.0, field=0.5, seed=1)
    x0 = torch.randint(0, 3, (6, 4), generator=torch.Generator().manual_seed(0))
    run = traps.kinetic_sample(potts, x0, tau=0.5, moves=7, seed=3, max_steps=40)
    state, gen = kinetic.init(x0), make_generator(3, "cpu")
    for k in range(1, 8):
        state = kinetic.step(potts, state, gen, tau=0.5, max_steps=40)
        assert torch.equal(state.tokens, run.states[k]) and torch.equal(state.t, run.times[k])
    assert torch.equal(torch.where(state.stopped, state.until, state.t), run.observed_until)


def test_hamming_dwell_and_approximate_traps_on_a_hand_built_path():
    # one chain, n = 4, records at steps 0, 2, 5, 9, 10; the path wanders one site at a time
    states = torch.tensor([[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]])[:, None, :]
    times = torch.tensor([0.0, 2.0, 5.0, 9.0, 10.0])[:, None]
    until = torch.tensor([12.0])
    d0, c0 = traps.hamming_dwell(states, times, until, 0)
    assert d0[:, 0].tolist() == [2.0, 3.0, 4.0, 1.0, 2.0] and c0[:, 0].tolist() == [False] * 4 + [True]
    d1, c1 = traps.hamming_dwell(states, times, until, 1)
    # from step 0 the chain is within distance 1 until step 5 (distance 2 at record 2)
    assert d1[:, 0].tolist() == [5.0, 7.0, 5.0, 3.0, 2.0] and c1[:, 0].tolist() == [False, False, False, True, True]
    held = traps.approximate_traps(states, times, until, h=1, min_dwell=6)
    assert int(held.index[0]) == 1 and float(held.dwell[0]) == 7.0 and bool(held.held[0])
    assert held.tokens[0].tolist() == [1, 0, 0, 0]
    d, _ = traps.hamming_dwell(states, times, until, 1, centres=torch.tensor([3]))
    assert d[0, 0] == 3.0
    assert traps.durations(times, until)[:, 0].tolist() == [2.0, 3.0, 4.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="h=5 is out of range"):
        traps.hamming_dwell(states, times, until, 5)


def test_repetition_statistics_by_hand():
    x = torch.tensor([[5, 5, 5, 2], [1, 2, 3, 4], [7, 8, 7, 8]])
    assert traps.dominance(x).tolist() == [0.75, 0.25, 0.5]
    assert traps.dominant_token(x).tolist() == [5, 1, 7]
    assert traps.window_repeat(x).tolist() == [0.75, 0.0, 1.0]
    # first guesses 9, 5, 2, 2 on x = 5 4 3 2: 9 is absent, 5 is at site 0, 2 is at site 3,
    # and site 3's guess 2 is its own token, not a copy from elsewhere
    logits = torch.full((1, 4, 10), -1.0)
    for i, v in enumerate([9, 5, 2, 2]):
        logits[0, i, v] = 1.0
    xh = torch.tensor([[5, 4, 3, 2]])
    assert traps.head_repeat(logits, xh).tolist() == [0.5]
    assert traps.fraction_estimate(torch.tensor([True, False, True])) == (2, 3)


def test_long_chains_are_segments_that_resume_from_a_checkpoint(tmp_path):
    from tokendyn.core.checkpoint import Store

    potts = toy.potts_chain(5, 3, coupling=1.0, field=0.5, seed=0)
    x0 = torch.randint(3, (6, 5), generator=torch.Generator().manual_seed(0))
    taus = torch.tensor([0.5, 1.0] * 3, dtype=torch.float64)
    plain = traps.long_chains(potts, x0, steps=30, tau=taus, seed=4, record_every=2, segment=10)
    assert plain.trajectory.shape == (16, 6, 5) and plain.steps.tolist() == list(range(0, 31, 2))
    # segment s is glauber.sample from the previous end with seed + s
    a = glauber.sample(potts, x0, steps=10, tau=taus, seed=4, record_every=2)
    b = glauber.sample(potts, a.tokens, steps=10, tau=taus, seed=5, record_every=2)
    assert torch.equal(plain.trajectory[:6], a.trajectory) and torch.equal(plain.trajectory[5:11], b.trajectory)
    store = Store(tmp_path)
    first = traps.long_chains(potts, x0, steps=30, tau=taus, seed=4, record_every=2, segment=10, store=store,
                              tag={"model": "potts"})
    cells = sorted(tmp_path.glob("chains-seg*.safetensors"))
    assert len(cells) == 3 and torch.equal(first.trajectory, plain.trajectory)
    cells[-1].unlink()                     # a run killed during its last segment
    again = traps.long_chains(potts, x0, steps=30, tau=taus, seed=4, record_every=2, segment=10, store=store,
                              tag={"model": "potts"})
    assert torch.equal(again.trajectory, plain.trajectory)
    with pytest.raises(ValueError, match="record_every=3 must divide"):
        traps.long_chains(potts, x0, steps=30, tau=1.0, seed=0, record_every=3, segment=10)


def test_trap_figures_build_valid_specs_with_the_right_rows():
    import pandas as pd

    from tokendyn.publish.figures import basins

    arr = pd.DataFrame([{"model": m, "trap": k, "tau": t, "1/tau": 1 / t, "min margin": 0.3 * (k + 1),
                         "m/tau": 0.3 * (k + 1) / t, "log10 q": -0.3 * (k + 1) / t / math.log(10)}
                        for m in ("a", "b") for k in range(2) for t in (0.1, 0.5, 1.0)])
    spec = basins.arrhenius_lines(arr).to_dict()
    assert len(next(iter(spec["datasets"].values()))) == 12
    spec = basins.arrhenius_collapse(arr, support_size=101, n=4).to_dict()
    guide = [d for d in spec["datasets"].values() if "line" in d[0]][0]
    at0 = {r["line"]: r["log10 q"] for r in guide if r["m/tau"] == 0}
    assert abs(at0["bound (|V|-1) exp(-m/tau)"] - 2.0) < 1e-12
    assert abs(at0["asymptote (1/n) exp(-m/tau)"] + math.log10(4)) < 1e-12
    basins.trap_depth(arr.drop_duplicates(["model", "trap"])).to_dict()
    dwell = pd.DataFrame({"model": "a", "tau": "tau = 0.1", "t": [0, 1, 0, 1],
                          "curve": ["observed"] * 2 + ["Geometric(q)"] * 2,
                          "P(T > t)": [1.0, 0.5, 1.0, 0.6]})
    dash = basins.dwell_vs_geometric(dwell).to_dict()["spec"]["encoding"]["strokeDash"]["scale"]
    assert dict(zip(dash["domain"], dash["range"])) == {"observed": [1, 0], "Geometric(q)": [6, 4]}  # the caption's
    exact = pd.DataFrame([{"model": m, "tau": tau, "trap": k, "exact dwell 1/q": 2.0 * (k + 1) / tau}
                          for m in ("a", "b") for tau in (0.3, 1.0) for k in range(3)])
    law = pd.DataFrame([{"model": m, "tau": tau, "median": 4.0 / tau, "median lo": 2.0 / tau, "median hi": 6.0 / tau,
                         "ratio": 1.0, "ratio lo": 0.9, "ratio hi": 1.1} for m in ("a", "b") for tau in (0.3, 1.0)])
    spec = basins.dwell_law_panels(exact, law).to_dict()
    rows = [r for d in spec["datasets"].values() for r in d]
    assert sum("exact dwell 1/q" in r for r in rows) == 12 and sum("ratio" in r for r in rows) == 4
    with pytest.raises(ValueError, match=r"law lacks columns \['ratio lo'\]"):
        basins.dwell_law_panels(exact, law.drop(columns="ratio lo"))
    basin = pd.DataFrame({"model": "a", "tau": [0.05, 0.1], "trap": [0, 0], "text": "x", "censored": [True, False],
                          "exact": [10.0, 5.0], "stay": [300.0, 40.0]})
    spec = basins.trap_dwells(basin, ["exact", "stay"], "stay").to_dict()
    rows = [r for d in spec["datasets"].values() for r in d]
    assert sum(r["lower bound"] for r in rows) == 1   # only the censored stay is hollow
    with pytest.raises(ValueError, match=r"lacks columns \['text'\]"):
        basins.trap_dwells(basin.drop(columns="text"), ["exact"], "exact")


def test_leave_probability_is_one_minus_the_potts_kernel_diagonal():
    m = toy.potts_chain(4, 3, coupling=1.0, seed=1)
    for tau in (0.2, 1.0):
        P = toy.transition_matrix(m, tau)
        S = toy.all_states(4, 3)
        torch.testing.assert_close(traps.log_leave_probability(all_logits(m, S), S, tau).exp(), 1 - P.diagonal())


@pytest.mark.slow
def test_margin_bound_holds_and_traps_dwell_geometrically():
    m = toy.potts_chain(6, 3, coupling=2.0, seed=2)
    x0 = torch.randint(3, (3, 6), generator=torch.Generator().manual_seed(0))
    trap, conv = glauber.greedy_fixed_point(m, x0)
    marg = traps.margins(all_logits(m, trap), trap)
    assert conv.all() and (marg > 0).all()
    tau = 0.4
    q = traps.log_leave_probability(all_logits(m, trap), trap, tau).exp()
    for r in range(3):
        assert q[r] <= traps.margin_bound(marg[r].min().item(), 3, tau)
    runs = glauber.sample(m, trap[:1].repeat(2000, 1), steps=120, tau=tau, seed=1, record_every=1)
    t, exited = traps.first_exit_times(runs.trajectory)
    # censored runs count as T > 120, so P(T > k) is read directly for k <= 120
    ks = torch.tensor([5, 20, 50, 100])
    observed = (t[None, :] > ks[:, None]).double().mean(1)
    torch.testing.assert_close(observed, traps.geometric_survival(q[0].item(), ks), atol=0.035, rtol=0)


def test_first_exit_times_on_a_handmade_trajectory():
    traj = torch.tensor([[[0, 0], [1, 1]], [[0, 0], [1, 1]], [[0, 1], [1, 1]]])  # [T+1=3, B=2, n=2]
    t, exited = traps.first_exit_times(traj)
    assert t.tolist() == [2, 3] and exited.tolist() == [True, False]
    torch.testing.assert_close(traps.geometric_survival(0.5, torch.tensor([0, 1, 2])),
                               torch.tensor([1.0, 0.5, 0.25], dtype=torch.float64))


def test_basin_vs_exact_draws_one_panel_per_temperature_with_lower_bounds_hollow():
    import pandas as pd
    from tokendyn.publish.figures import basins
    df = pd.DataFrame([{"model": "m", "tau": t, "trap": i, "exact dwell 1/q": 5.0 + i, "basin dwell": 20.0 * (i + 1),
                        "censored": i == 1} for t in (0.5, 1.0) for i in range(2)])
    spec = basins.basin_vs_exact(df).to_dict()
    assert len(spec["hconcat"]) == 2 and spec["hconcat"][0]["title"] == "tau = 0.5"
    assert "condition" in spec["hconcat"][0]["layer"][0]["encoding"]["fill"]
