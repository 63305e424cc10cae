"""Glauber kernels: exact law, independence of chains, couplings, precision, determinism."""

import math

import pytest
import torch

from tokendyn.mcmc import glauber as G
from tokendyn.mcmc import sampling as S
from tokendyn.mcmc import toy


def _empirical(states, q):
    n = states.shape[1]
    return torch.bincount(toy.state_index(states, q), minlength=q ** n).double() / len(states)


@pytest.mark.slow
@pytest.mark.parametrize("scan,steps", [("random", 48), ("systematic", 24)])
def test_sample_matches_exact_gibbs_law(scan, steps):
    m = toy.potts_chain(3, 3, coupling=1.0, seed=3)
    tau, N = 0.8, 6000
    pi = m.gibbs_law(tau)
    # Start far from equilibrium; exact kernel says how close `steps` steps get.
    x0 = torch.zeros(N, 3, dtype=torch.long)
    P = toy.transition_matrix(m, tau, "random")
    bias = 0.5 * ((torch.linalg.matrix_power(P, 48)[0] - pi).abs().sum())
    assert bias < 1e-3
    out = G.sample(m, x0, steps=steps, tau=tau, seed=11, scan=scan).tokens
    emp = _empirical(out, 3)
    # chi-square against the exact law, 26 degrees of freedom: 99.9% quantile is 54.05
    chi2 = (N * (emp - pi) ** 2 / pi).sum().item()
    assert chi2 < 54.05
    assert 0.5 * (emp - pi).abs().sum() < 0.03


def test_seeded_runs_reproduce_bit_for_bit_and_golden():
    m = toy.potts_chain(6, 4, seed=0)
    x0 = torch.zeros(8, 6, dtype=torch.long)
    a = G.sample(m, x0, steps=30, tau=1.0, seed=5, record_every=10)
    b = G.sample(m, x0, steps=30, tau=1.0, seed=5, record_every=10)
    c = G.sample(m, x0, steps=30, tau=1.0, seed=6)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.trajectory, b.trajectory)
    assert not torch.equal(a.tokens, c.tokens)
    assert a.trajectory.shape == (4, 8, 6) and a.steps_recorded.tolist() == [0, 10, 20, 30]
    assert torch.equal(a.trajectory[0], x0) and torch.equal(a.trajectory[-1], a.tokens)
    # whole seeded trajectories (every chain, every step) are checked in test_golden.py


def test_each_chain_gets_its_own_site():
    u = toy.uniform(16, 50)
    x0 = torch.zeros(64, 16, dtype=torch.long)
    s, info = G.step(u, G.init(x0), torch.Generator().manual_seed(0), tau=1.0)
    assert torch.equal(s.tokens[torch.arange(64), info.sites], info.values) and not info.no_mass.any()
    changed = (s.tokens != x0).float().argmax(1)[(s.tokens != x0).any(1)]
    assert len(set(changed.tolist())) > 8  # one shared site would give a single value
    assert ((s.tokens != x0).sum(1) <= 1).all() and s.t == 1


def test_systematic_scan_updates_site_t_mod_n():
    u = toy.uniform(4, 1000)
    st = G.init(torch.zeros(16, 4, dtype=torch.long))
    g = torch.Generator().manual_seed(0)
    for t in range(6):
        new, info = G.step(u, st, g, tau=1.0, scan=G.systematic_scan)
        assert info.sites.tolist() == [t % 4] * 16
        diff = (new.tokens != st.tokens).any(0).nonzero().flatten().tolist()
        assert diff == [t % 4]
        st = new


def test_low_and_high_temperature_are_finite_and_exact():
    logits = torch.tensor([[0.0, 2.0, float("-inf"), 1.0]])
    for tau in (0.05, 100.0):
        p = S.probabilities(logits, tau)
        assert torch.isfinite(p).all() and p[0, 2] == 0 and abs(p.sum().item() - 1) < 1e-12
    p05 = S.probabilities(logits, 0.05)[0]
    assert p05[3].item() == pytest.approx(math.exp(-20) / (1 + math.exp(-20) + math.exp(-40)), rel=1e-9)
    u = torch.rand(100000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    draws = S.inverse_cdf(S.probabilities(logits, 100.0).expand(100000, 4), u)
    freq = torch.bincount(draws, minlength=4).double() / 1e5
    assert freq[2] == 0
    torch.testing.assert_close(freq[[0, 1, 3]], S.probabilities(logits, 100.0)[0, [0, 1, 3]],
                               atol=0.005, rtol=0)


def test_inverse_cdf_never_picks_zero_weight():
    w = torch.tensor([[0.0, 1.0, 0.0, 0.0, 3.0, 0.0]]).expand(5, 6).double()
    u = torch.tensor([0.0, 0.2499, 0.25, 0.9999999, 1 - 1e-16], dtype=torch.float64)
    assert S.inverse_cdf(w, u).tolist() == [1, 1, 4, 4, 4]


def test_maximal_coupling_agrees_with_probability_one_minus_tv():
    p = torch.tensor([[0.5, 0.3, 0.2, 0.0]], dtype=torch.float64).expand(100000, 4)
    q = torch.tensor([[0.1, 0.3, 0.2, 0.4]], dtype=torch.float64).expand(100000, 4)
    g = torch.Generator().manual_seed(1)
    u1 = torch.rand(100000, generator=g, dtype=torch.float64)
    u2 = torch.rand(100000, generator=g, dtype=torch.float64)
    x, y = G.coupled_draw(p, q, u1, u2, "maximal")
    assert (x == y).double().mean().item() == pytest.approx(0.6, abs=0.005)  # 1 - TV = 0.6
    torch.testing.assert_close(torch.bincount(x, minlength=4).double() / 1e5, p[0], atol=0.005, rtol=0)
    torch.testing.assert_close(torch.bincount(y, minlength=4).double() / 1e5, q[0], atol=0.005, rtol=0)
    xc, yc = G.coupled_draw(p, q, u1, u2, "crn")
    assert (xc == yc).double().mean() < 0.6  # crn is not maximal here


@pytest.mark.slow
@pytest.mark.parametrize("coupling", ["maximal", "crn"])
def test_uniform_model_coupling_is_coupon_collector(coupling):
    n, N = 8, 1500
    u = toy.uniform(n, 30)
    x0 = torch.arange(n).repeat(N, 1)
    res = G.coupling_times(u, x0, x0 + 15, tau=1.0, max_steps=400, seed=2, coupling=coupling,
                           check_every=8)
    assert not res.times.censored.any() and res.times.cap == 400
    mean, se = res.times.times.double().mean().item(), res.times.times.double().std().item() / math.sqrt(N)
    assert abs(mean - toy.coupon_collector_mean(n)) < 4 * se  # n H_n = 21.74


def test_censored_rows_are_kept_and_marked():
    m = toy.potts_chain(8, 3, coupling=3.0, seed=0)
    x0 = torch.zeros(6, 8, dtype=torch.long)
    y0 = torch.full((6, 8), 2)
    res = G.coupling_times(m, x0, y0, tau=0.2, max_steps=5, seed=0).times
    assert res.times.shape == (6,) and res.censored.all()
    assert (res.times == 5).all() and res.cap == 5  # censored at the last step watched
    same = G.coupling_times(m, x0, x0, tau=1.0, max_steps=5, seed=0).times
    assert (same.times == 0).all() and not same.censored.any() and same.cap == 5


@pytest.mark.slow
def test_maximal_couples_faster_than_crn_on_a_potts_chain():
    m = toy.potts_chain(6, 5, coupling=0.5, seed=4)
    x0 = torch.zeros(400, 6, dtype=torch.long)
    y0 = torch.full((400, 6), 4)
    tm = G.coupling_times(m, x0, y0, tau=1.0, max_steps=2000, seed=0, coupling="maximal",
                            check_every=8).times.times
    tc = G.coupling_times(m, x0, y0, tau=1.0, max_steps=2000, seed=0, coupling="crn",
                            check_every=8).times.times
    assert tm.double().mean() < tc.double().mean()


def test_greedy_fixed_point_is_all_argmax():
    m = toy.potts_chain(6, 3, coupling=1.0, seed=5)
    x0 = torch.randint(3, (5, 6), generator=torch.Generator().manual_seed(0))
    x, conv = G.greedy_fixed_point(m, x0)
    assert conv.all()
    for i in range(6):
        assert torch.equal(m.site_logits(x, torch.full((5,), i)).argmax(-1), x[:, i])


def test_bad_arguments_fail_before_compute():
    m = toy.potts_chain(3, 2)
    x0 = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="tau"):
        G.sample(m, x0, steps=1, tau=0.0, seed=0)
    with pytest.raises(ValueError, match="steps"):
        G.sample(m, x0, steps=-1, tau=1.0, seed=0)
    with pytest.raises(ValueError, match="scan"):
        G.sample(m, x0, steps=1, tau=1.0, seed=0, scan="sweep")
    with pytest.raises(ValueError, match="x0"):
        G.sample(m, x0 + 5, steps=1, tau=1.0, seed=0)
    with pytest.raises(ValueError, match="coupling"):
        G.coupling_times(m, x0, x0, tau=1.0, max_steps=3, seed=0, coupling="reflection")
    with pytest.raises(ValueError, match="same shape"):
        G.coupling_times(m, x0, x0[:1], tau=1.0, max_steps=3, seed=0)


def test_per_chain_temperature_is_each_rows_own_softmax():
    logits = torch.tensor([[2.0, 0.0, -1.0, -math.inf]]).expand(3, 4)
    taus = torch.tensor([0.05, 1.0, 100.0])
    p = S.probabilities(logits, taus)
    for k, tau in enumerate(taus.tolist()):
        torch.testing.assert_close(p[k], S.probabilities(logits[:1], tau)[0], rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"tau"):
        G.sample(toy.uniform(3, 4), torch.zeros(3, 3, dtype=torch.long), steps=1,
                 tau=torch.tensor([1.0, 0.0, 1.0]), seed=0)
    with pytest.raises(ValueError, match=r"shape \[3\]"):
        G.sample(toy.uniform(3, 4), torch.zeros(3, 3, dtype=torch.long), steps=1,
                 tau=torch.tensor([1.0, 2.0]), seed=0)


def test_probabilities_leave_the_callers_logits_alone():
    """The division by tau is done in place on a copy, never on the caller's tensor (float64
    logits would otherwise be the same storage)."""
    for dtype in (torch.float64, torch.float32):
        logits = torch.tensor([[2.0, 0.0, -1.0, -math.inf], [0.5, 0.5, 3.0, 1.0]], dtype=dtype)
        before = logits.clone()
        p = S.probabilities(logits, 0.5)
        assert torch.equal(logits, before)
        torch.testing.assert_close(p, torch.softmax(before.double() / 0.5, -1), rtol=0, atol=0)
    flat = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)  # one row of logits, tau per chain
    p = S.probabilities(flat, torch.tensor([1.0, 2.0]))
    assert p.shape == (2, 3) and torch.equal(flat, torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))


@pytest.mark.slow
def test_mixed_temperature_batch_gives_each_temperatures_exact_law():
    m = toy.potts_chain(3, 3, coupling=1.0, seed=3)
    N = 5000
    taus = [0.6, 2.0]
    tau = torch.tensor(taus).repeat_interleave(N)
    out = G.sample(m, torch.zeros(2 * N, 3, dtype=torch.long), steps=60, tau=tau, seed=5).tokens
    for k, t in enumerate(taus):
        emp = _empirical(out[k * N:(k + 1) * N], 3)
        pi = m.gibbs_law(t)
        chi2 = float(((emp - pi) ** 2 / pi).sum() * N)
        assert chi2 < 54.05  # 26 degrees of freedom, 99.9% quantile
    # the two temperatures really differ: the cold law is more concentrated
    assert m.gibbs_law(0.6).max() > m.gibbs_law(2.0).max() + 0.05


@pytest.mark.slow
def test_dropping_coupled_pairs_keeps_the_coupon_collector_law():
    n, N = 8, 1500
    u = toy.uniform(n, 30)
    x0 = torch.arange(n).repeat(2 * N, 1)
    tau = torch.tensor([0.5, 5.0]).repeat_interleave(N)  # the uniform model ignores tau
    res = G.coupling_times(u, x0, x0 + 15, tau=tau, max_steps=400, seed=2, check_every=4,
                           drop_coupled=True).times
    assert not res.censored.any() and res.times.shape == (2 * N,)
    for half in (res.times[:N], res.times[N:]):
        mean, se = half.double().mean().item(), half.double().std().item() / math.sqrt(N)
        assert abs(mean - toy.coupon_collector_mean(n)) < 4 * se


def test_dropping_coupled_pairs_keeps_censored_rows_in_place():
    m = toy.potts_chain(6, 2, coupling=4.0, seed=0)
    x0 = torch.zeros(4, 6, dtype=torch.long)
    y0 = torch.cat([torch.zeros(2, 6, dtype=torch.long), torch.ones(2, 6, dtype=torch.long)])
    res = G.coupling_times(m, x0, y0, tau=torch.tensor([1.0, 1.0, 0.1, 0.1]), max_steps=40, seed=0,
                           check_every=4, drop_coupled=True).times
    assert res.times[:2].tolist() == [0, 0] and not res.censored[:2].any()
    assert res.censored[2:].all() and (res.times[2:] == 40).all()


def test_coupling_records_the_first_chain_as_an_exact_glauber_trajectory():
    m = toy.potts_chain(4, 3, coupling=1.0, seed=1)
    x0 = torch.zeros(5, 4, dtype=torch.long)
    y0 = torch.full((5, 4), 2)
    res = G.coupling_times(m, x0, y0, tau=1.0, max_steps=40, seed=3, record_every=7, record_steps=30,
                           drop_coupled=True, check_every=2)
    assert res.steps_recorded.tolist() == [0, 7, 14, 21, 28]
    assert res.trajectory.shape == (5, 5, 4) and torch.equal(res.trajectory[0], x0)
    # each recorded state differs from the one before in at most (steps between records) sites
    assert ((res.trajectory[1:] != res.trajectory[:-1]).sum(-1) <= 7).all()
    with pytest.raises(ValueError, match="record_steps"):
        G.coupling_times(m, x0, y0, tau=1.0, max_steps=10, seed=0, record_every=2, record_steps=11)


@pytest.mark.slow
def test_recorded_coupling_chain_has_the_exact_gibbs_law():
    m = toy.potts_chain(3, 3, coupling=1.0, seed=3)
    N, tau = 5000, 0.8
    x0 = torch.zeros(N, 3, dtype=torch.long)
    res = G.coupling_times(m, x0, torch.full((N, 3), 2), tau=tau, max_steps=60, seed=4,
                           record_every=60)
    emp = _empirical(res.trajectory[-1], 3)
    pi = m.gibbs_law(tau)
    assert float(((emp - pi) ** 2 / pi).sum() * N) < 54.05  # chi-square, 26 dof, 99.9%


# --- bad input gets a clear error, never a silent wrong result ----------------------

def _tiny_cond():
    from tokendyn.mcmc.conditional import MLMConditional
    from tokendyn.models.tiny import build_tiny

    return MLMConditional(build_tiny("bert", seed=0, pad_vocab=3))


def test_step_validates_its_arguments():
    m = toy.potts_chain(3, 2)
    st = G.init(torch.zeros(2, 3, dtype=torch.long))
    g = torch.Generator().manual_seed(0)
    for tau in (0.0, float("nan"), -1.0, torch.tensor([1.0, float("nan")]), torch.tensor([0.0, 1.0])):
        with pytest.raises(ValueError, match="tau"):
            G.step(m, st, g, tau=tau)
    with pytest.raises(ValueError, match="state.tokens"):
        G.step(m, G.init(torch.tensor([[0, -1, 0], [0, 0, 0]])), g, tau=1.0)
    with pytest.raises(ValueError, match="scan"):
        G.step(m, st, g, tau=1.0, scan="sweep")
    with pytest.raises(ValueError, match="scan"):
        G.step(m, st, g, tau=1.0, scan=lambda *a: None)
    with pytest.raises(TypeError, match="gen"):
        G.step(m, st, 0, tau=1.0)
    # before the fix a nan tau ran and filled the chain with id 0 ([PAD] on BERT)
    cond = _tiny_cond()
    x = torch.full((4, 6), 20, dtype=torch.long)
    with pytest.raises(ValueError, match="tau"):
        G.step(cond, G.init(x), g, tau=float("nan"))
    # checked and unchecked steps draw the same chain
    a, _ = G.step(m, st, torch.Generator().manual_seed(3), tau=0.7)
    b, _ = G.step(m, st, torch.Generator().manual_seed(3), tau=0.7, check=False)
    assert torch.equal(a.tokens, b.tokens) and a.t == b.t == 1


def test_inverse_cdf_refuses_rows_without_finite_positive_mass():
    u = torch.full((2,), 0.5, dtype=torch.float64)
    good = torch.tensor([[0.0, 1.0, 3.0]], dtype=torch.float64)
    for bad in ([0.0, 0.0, 0.0], [float("nan"), 1.0, 1.0], [float("inf"), 1.0, 0.0]):
        w = torch.cat([good, torch.tensor([bad], dtype=torch.float64)])
        with pytest.raises(ValueError, match=r"weights: row\(s\) \[1\]"):
            S.inverse_cdf(w, u)
    with pytest.raises(ValueError, match="negative"):
        S.inverse_cdf(torch.tensor([[2.0, -1.0, 0.5]], dtype=torch.float64), u[:1])
    with pytest.raises(ValueError, match="u must"):
        S.inverse_cdf(good, torch.tensor([1.0], dtype=torch.float64))
    p = S.probabilities(torch.full((1, 3), -math.inf), 1.0)  # every logit -inf: softmax is nan
    with pytest.raises(ValueError, match="p: row"):
        G.coupled_draw(p, p, u[:1], u[:1], "maximal")


class _NanAt:
    """A toy model whose conditional at site 2 is nan (a broken model, an fp16 overflow)."""

    def __init__(self, base):
        self.base, self.vocab_size = base, base.vocab_size

    def site_logits(self, tokens, sites):
        out = self.base.site_logits(tokens, sites).clone()
        out[sites == 2] = float("nan")
        return out


def test_loops_refuse_a_model_that_returns_nan_logits():
    m = _NanAt(toy.potts_chain(4, 3, seed=0))
    x0 = torch.zeros(3, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="no finite probability mass"):
        G.sample(m, x0, steps=20, tau=1.0, seed=0)
    with pytest.raises(ValueError, match="no finite probability mass"):
        G.coupling_times(m, x0, x0 + 1, tau=1.0, max_steps=20, seed=0, check_every=5)
    with pytest.raises(ValueError, match="no finite probability mass"):
        G.coupling_times(m, x0, x0 + 1, tau=1.0, max_steps=20, seed=0, coupling="crn")


def test_states_outside_the_support_are_refused():
    cond = _tiny_cond()
    V, tok = cond.vocab_size, cond.tokenizer
    ok = torch.full((2, 6), 20, dtype=torch.long)
    for bad_id, shown in ((tok.mask_token_id, "[MASK]"), (tok.cls_token_id, "[CLS]"), (V - 1, str(V - 1))):
        x = ok.clone()
        x[1, 3] = bad_id
        with pytest.raises(ValueError, match=r"x0 holds 1 token id\(s\) outside the model's support") as err:
            G.sample(cond, x, steps=1, tau=1.0, seed=0)
        assert shown in str(err.value)
        # two equal starts holding [MASK] counted as coupled at t=0 before the fix
        with pytest.raises(ValueError, match="x0 holds"):
            G.coupling_times(cond, x, x.clone(), tau=1.0, max_steps=5, seed=0)
        with pytest.raises(ValueError, match="y0 holds"):
            G.coupling_times(cond, ok, x, tau=1.0, max_steps=5, seed=0)
        with pytest.raises(ValueError, match="state.tokens holds"):
            G.step(cond, G.init(x), torch.Generator(), tau=1.0)
        with pytest.raises(ValueError, match="support"):
            G.coupled_step(cond, G.init_coupled(ok, x), torch.Generator(), tau=1.0)
        with pytest.raises(ValueError, match="x0 holds"):
            G.greedy_fixed_point(cond, x)
    assert G.coupling_times(cond, ok, ok.clone(), tau=1.0, max_steps=5, seed=0).times.times.tolist() == [0, 0]


def test_run_drives_plain_and_coupled_chains_like_the_step_functions():
    """One driver: a hand loop over step / coupled_step gives the same chains as run."""
    m = toy.potts_chain(5, 3, coupling=0.8)
    x0 = torch.zeros(6, 5, dtype=torch.long)
    y0 = torch.full((6, 5), 2, dtype=torch.long)
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    st = G.init(x0)
    for _ in range(25):
        st, _ = G.step(m, st, g1, tau=0.8)
    r = G.run(m, G.init(x0), g2, steps=25, tau=0.8)
    assert torch.equal(st.tokens, r.state.tokens) and r.state.t == st.t == 25
    g1, g2 = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    cs = G.init_coupled(x0, y0)
    times, apart = torch.full((6,), 30), torch.ones(6, dtype=torch.bool)
    for t in range(30):
        cs, info = G.coupled_step(m, cs, g1, tau=0.8, coupling=G.crn_coupling)
        now = (cs.x == cs.y).all(1) & apart
        times, apart = torch.where(now, t + 1, times), apart & ~now
        assert info.values_y is not None
    r = G.run(m, G.init_coupled(x0, y0), g2, steps=30, tau=0.8, coupling="crn", check_every=1000)
    assert torch.equal(r.state.x, cs.x) and torch.equal(r.state.y, cs.y)
    assert torch.equal(r.times.times, times) and torch.equal(r.times.censored, apart) and r.times.cap == 30


def test_run_keeps_every_row_of_dropped_pairs_in_its_final_state():
    u = toy.uniform(4, 3)
    x0 = torch.zeros(32, 4, dtype=torch.long)
    r = G.run(u, G.init_coupled(x0, x0 + 1), torch.Generator().manual_seed(0), steps=200, tau=1.0,
              check_every=2, drop_coupled=True)
    assert not r.times.censored.any() and r.state.x.shape == (32, 4)
    assert torch.equal(r.state.x, r.state.y)  # a coupled pair stays equal, dropped or not


def test_run_and_coupled_step_refuse_bad_input():
    m = toy.potts_chain(3, 2)
    x0 = torch.zeros(2, 3, dtype=torch.long)
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="coupling"):
        G.coupled_step(m, G.init_coupled(x0, x0), g, tau=1.0, coupling="reflection")
    with pytest.raises(ValueError, match="same shape"):
        G.init_coupled(x0, x0[:1])
    with pytest.raises(ValueError, match="steps"):
        G.run(m, G.init(x0), g, steps=-1, tau=1.0)
    with pytest.raises(ValueError, match="record_steps"):
        G.run(m, G.init(x0), g, steps=3, tau=1.0, record_steps=2)
    with pytest.raises(TypeError, match="state"):
        G.run(m, x0, g, steps=3, tau=1.0)
