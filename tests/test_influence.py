"""Influence, Dobrushin bound, margins, leave probability and dwell times."""

import math

import pytest
import torch

from tokendyn.analysis import influence as I
from tokendyn.mcmc import toy
from tokendyn.mcmc.conditional import MLMConditional, content_ids
from tokendyn.models.tiny import build_tiny

TAUS = [0.25, 0.5, 1.0, 2.0, 4.0]


def test_exact_influence_of_an_ising_pair():
    # Two Ising spins, coupling J, no field: p(s_0 = + | s_1) = sigmoid(2 J s_1 / tau), so
    # c_01 = |sigmoid(2J/tau) - sigmoid(-2J/tau)| = tanh(J / tau).
    J = 0.7
    s = torch.tensor([-1.0, 1.0], dtype=torch.float64)
    A = torch.zeros(2, 2, 2, 2, dtype=torch.float64)
    A[0, 1] = A[1, 0] = J * torch.outer(s, s)
    m = toy.PairwiseConditional(torch.zeros(2, 2), A)
    c = I.exact_influence(m, TAUS)
    for t, tau in enumerate(TAUS):
        assert c[t, 0, 1].item() == pytest.approx(math.tanh(J / tau), abs=1e-12)
        assert c[t, 0, 0] == 0


def test_estimate_is_a_lower_bound_and_exact_with_all_contexts():
    m = toy.potts_chain(4, 3, coupling=1.5, seed=0)
    exact = I.exact_influence(m, TAUS)
    est = I.estimate_influence(m, toy.all_states(4, 3)[::7], TAUS, n_alt=2, seed=0)
    assert (est.c_max <= exact + 1e-12).all() and (est.c_mean <= est.c_max + 1e-12).all()
    full = I.estimate_influence(m, toy.all_states(4, 3), TAUS, n_alt=2, seed=0)  # every y_j
    torch.testing.assert_close(full.c_max, exact)
    torch.testing.assert_close(full.alpha_hat, I.alpha(exact))
    assert bool((I.alpha(exact)[1:] < I.alpha(exact)[:-1]).all())  # influence falls with tau


@pytest.mark.slow
def test_estimate_runs_on_an_mlm_and_is_seeded():
    loaded = build_tiny("bert", seed=0)
    mlm = MLMConditional(loaded)
    x = content_ids(loaded, ["the capital of the city was used for the theme song"], 5)
    a = I.estimate_influence(mlm, x, [0.5, 2.0], n_alt=1, seed=3)
    b = I.estimate_influence(mlm, x, [0.5, 2.0], n_alt=1, seed=3)
    assert torch.equal(a.c_max, b.c_max) and a.c_max.shape == (2, 5, 5)
    assert (a.c_max.diagonal(dim1=1, dim2=2) == 0).all() and a.c_max[0].sum() > a.c_max[1].sum()


def test_dobrushin_bound_and_crossing():
    assert I.dobrushin_bound(0.5, 10, 0.25) == pytest.approx(10 * math.log(40) / 0.5)
    assert I.dobrushin_bound(1.0, 10) == math.inf
    taus = torch.tensor([0.5, 1.0, 2.0, 4.0])
    assert I.crossing(taus, torch.tensor([3.0, 2.0, 0.5, 0.2])) == pytest.approx(
        math.exp(math.log(1.0) + (2.0 - 1.0) / 1.5 * math.log(2)))
    assert math.isnan(I.crossing(taus, torch.tensor([0.9, 0.5, 0.2, 0.1])))
    with pytest.raises(ValueError, match="eps"):
        I.dobrushin_bound(0.5, 10, 0.0)

