"""Exact toy models: known joints, known incompatibility, exact kernels."""

import pytest
import torch

from tokendyn.mcmc import toy


def test_potts_conditionals_are_energy_differences():
    m = toy.potts_chain(5, 3, coupling=1.2, seed=1)
    assert m.compatible
    x = torch.tensor([[0, 2, 1, 1, 0]])
    for i in range(5):
        lg = m.site_logits(x, torch.tensor([i]))[0]
        e = []
        for v in range(3):
            y = x.clone()
            y[0, i] = v
            e.append(m.energy(y)[0])
        e = torch.stack(e)
        torch.testing.assert_close(lg - lg[0], e - e[0])


@pytest.mark.parametrize("scan", ["random", "systematic"])
@pytest.mark.parametrize("tau", [0.3, 1.0, 5.0])
def test_gibbs_law_is_stationary(scan, tau):
    m = toy.potts_chain(4, 3, coupling=1.0, seed=2)
    P = toy.transition_matrix(m, tau, scan)
    torch.testing.assert_close(P.sum(1), torch.ones(81, dtype=torch.float64))
    pi = m.gibbs_law(tau)
    torch.testing.assert_close(pi @ P, pi, atol=1e-13, rtol=0)
    torch.testing.assert_close(toy.stationary(P), pi, atol=1e-12, rtol=0)


def test_incompatible_ising_known_delta():
    m = toy.incompatible_ising(4, coupling=0.7, skew=0.3)
    assert not m.compatible
    with pytest.raises(ValueError, match="incompatible"):
        m.energy(torch.zeros(1, 4, dtype=torch.long))
    one = torch.ones(1, dtype=torch.long)
    zero = torch.zeros(1, dtype=torch.long)
    d_bond = m.exact_delta(torch.tensor([1]), torch.tensor([2]), zero, zero, one, one)
    d_far = m.exact_delta(torch.tensor([0]), torch.tensor([2]), zero, zero, one, one)
    torch.testing.assert_close(d_bond, torch.tensor([8 * 0.3], dtype=torch.float64))
    assert d_far.item() == 0.0


def test_uniform_and_states():
    u = toy.uniform(3, 4)
    lg = u.site_logits(torch.zeros(2, 3, dtype=torch.long), torch.tensor([0, 2]))
    assert torch.equal(lg, torch.zeros(2, 4, dtype=torch.float64))
    S = toy.all_states(3, 4)
    assert S.shape == (64, 3) and S[5].tolist() == [0, 1, 1]
    assert torch.equal(toy.state_index(S, 4), torch.arange(64))
    assert toy.coupon_collector_mean(3) == pytest.approx(5.5)
    with pytest.raises(ValueError, match="MAX_STATES"):
        toy.all_states(30, 3)


def test_tv_to_stationarity_decreases_to_zero():
    m = toy.potts_chain(3, 2, coupling=1.0, seed=0)
    P = toy.transition_matrix(m, 1.0)
    d = toy.tv_to_stationarity(P, m.gibbs_law(1.0), 200)
    assert d[0] > 0.5 and d[-1] < 1e-6
    assert bool((d[1:] <= d[:-1] + 1e-15).all())  # d(t) is non-increasing


def test_bad_arguments():
    with pytest.raises(ValueError, match="tau"):
        toy.potts_chain(3, 2).gibbs_law(0.0)
    with pytest.raises(ValueError, match="scan"):
        toy.transition_matrix(toy.potts_chain(3, 2), 1.0, "sweep")
    with pytest.raises(ValueError, match="q"):
        toy.potts_chain(3, 1)
    with pytest.raises(ValueError, match="sites"):
        toy.potts_chain(3, 2).site_logits(torch.zeros(2, 4, dtype=torch.long), torch.zeros(2, dtype=torch.long))
