"""The exact posterior-mean generator of tokendyn.latent.exact, checked against exact answers.

A token Gaussian mixture has a closed-form posterior mean, so the samplers, the oracle roll-in and
the tube law run on a generator whose error is known: the posterior mean against quadrature and
Monte Carlo, the many-step ODE landing on a mode, the tube law's slope from the clean margins, and
the structured/isotropic flip ratio growing with d at matched margins.
"""

import math

import pytest
import torch

from tokendyn.latent import geometry as G
from tokendyn.latent import samplers, tube
from tokendyn.latent.exact import TokenMixture, token_means, token_mixture


def gen(seed):
    return torch.Generator().manual_seed(seed)


@pytest.fixture(autouse=True)
def one_thread():
    """Hundreds of sampler steps on tiny tensors: on a busy machine, handing each op to a second
    intra-op thread cost ~200x (12 s against 0.06 s for a 256-step ODE); one thread, then restored."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_posterior_mean_matches_quadrature_in_one_dimension():
    means = torch.tensor([[-2.0], [0.5], [3.0]], dtype=torch.float64)
    w = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
    f = TokenMixture(means, 0.6, w)
    grid = torch.linspace(-9, 10, 400_001, dtype=torch.float64)
    prior = sum(wi * torch.exp(-(grid - mi) ** 2 / (2 * 0.36)) for wi, mi in zip(w, means[:, 0]))
    for x, t in [(-1.0, 0.2), (0.3, 0.5), (1.7, 0.8), (2.5, 0.97), (0.9, 0.0)]:
        lik = torch.exp(-(x - t * grid) ** 2 / (2 * (1 - t) ** 2))
        p = prior * lik
        want = float(torch.trapezoid(grid * p, grid) / torch.trapezoid(p, grid))
        xt = torch.tensor([[[x]]], dtype=torch.float64)
        assert float(f.posterior_mean(xt, t)) == pytest.approx(want, abs=1e-8)
        # The velocity is (E[x1 | x_t] - x_t) / (1 - t), and the samplers' posterior mean agrees.
        v = f(xt, torch.tensor([t], dtype=torch.float64))
        assert float(v) == pytest.approx((want - x) / (1 - t), abs=1e-7)
        assert float(samplers.posterior_mean(f, xt, t)) == pytest.approx(want, abs=1e-8)
    # t = 0: the posterior mean is the mixture mean; t = 1: the velocity is x itself, finite.
    x = torch.randn(2, 3, 1, generator=gen(0), dtype=torch.float64)
    assert torch.allclose(f.posterior_mean(x, 0.0), (w @ means).expand(2, 3, 1))
    assert torch.equal(f(x, torch.ones(2, dtype=torch.float64)), x)


def test_posterior_mean_matches_importance_sampling_in_three_dimensions():
    f = token_mixture(3, 4, spacing=2.5, sigma=0.6, seed=3)
    x1, _ = f.sample((400_000,), gen(1))
    for t in (0.3, 0.6):
        xt = torch.tensor([[[0.4, -0.3, 0.8]]], dtype=torch.float64)
        logw = -((xt[0, 0] - t * x1) ** 2).sum(1) / (2 * (1 - t) ** 2)
        wts = torch.softmax(logw, 0)
        want = (wts[:, None] * x1).sum(0)
        ess = 1 / float((wts ** 2).sum())
        assert ess > 1000
        spread = float(((wts[:, None] * (x1 - want) ** 2).sum(0)).sqrt().max())
        assert torch.allclose(f.posterior_mean(xt, t)[0, 0], want, atol=5 * spread / math.sqrt(ess))


def test_float32_in_float32_out_and_shape_checks():
    f = token_mixture(4, 3, seed=0)
    x = torch.randn(2, 5, 4, generator=gen(0))
    v = f(x, torch.full((2,), 0.5))
    assert v.dtype == torch.float32 and v.shape == x.shape
    with pytest.raises(ValueError, match="d = 4"):
        f(torch.zeros(2, 5, 3), torch.full((2,), 0.5))
    with pytest.raises(ValueError, match="t"):
        f(x, torch.full((3,), 0.5))


@pytest.mark.parametrize("kwargs, name", [({"d": 0}, "d"), ({"M": 1}, "M"), ({"sigma": 0.0}, "sigma"),
                                          ({"spacing": -1.0}, "spacing"), ({"seed": -1}, "seed"),
                                          ({"sigma": math.inf}, "sigma"),
                                          ({"d": 2, "M": 4, "arrangement": "simplex"}, "M"),
                                          ({"arrangement": "grid"}, "arrangement")])
def test_parameters_are_validated(kwargs, name):
    args = {"d": 3, "M": 3, **kwargs}
    with pytest.raises(ValueError, match=name):
        token_mixture(args.pop("d"), args.pop("M"), **args)


def test_weights_are_validated():
    means = torch.zeros(2, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="weights"):
        TokenMixture(means, 1.0, torch.tensor([0.5, 0.6]))
    with pytest.raises(ValueError, match="weights"):
        TokenMixture(means, 1.0, torch.tensor([1.0, 0.0]))


def test_simplex_means_are_equidistant_and_centred():
    m = token_means(7, 5, spacing=3.0, seed=2, arrangement="simplex")
    dist = torch.cdist(m, m)
    assert torch.allclose(dist[~torch.eye(5, dtype=torch.bool)], torch.full((20,), 3.0, dtype=torch.float64))
    assert torch.allclose(m.sum(0), torch.zeros(7, dtype=torch.float64), atol=1e-12)
    r = token_means(64, 200, spacing=3.0, seed=2)
    d2 = torch.cdist(r, r)[~torch.eye(200, dtype=torch.bool)] ** 2
    assert float(d2.mean().sqrt()) == pytest.approx(3.0, rel=0.03)  # rms pairwise distance = spacing


def test_readout_is_the_bayes_classifier_and_a_linear_readout():
    f = token_mixture(5, 6, spacing=3.0, sigma=0.8, seed=1, weights=torch.tensor([0.1, 0.3, 0.1, 0.2, 0.2, 0.1]))
    x1, ids = f.sample((64, 32), gen(4))
    assert x1.shape == (64, 32, 5) and ids.shape == (64, 32)
    head = f.readout()
    # The posterior over tokens of a clean latent is the mixture's responsibility at t = 1.
    assert torch.equal(head.decode(x1), f.responsibilities(x1, 1.0).argmax(-1))
    assert torch.equal(head.decode(x1), f.decode(x1))
    assert float((f.decode(x1) == ids).double().mean()) > 0.6  # overlapping tokens, mostly read right
    freq = torch.bincount(ids.flatten(), minlength=6).double() / ids.numel()
    assert torch.allclose(freq, f.weights, atol=0.03)  # 2048 draws: SE <= 0.011


def test_many_step_ode_lands_on_a_mode_and_one_step_on_the_mean():
    f = token_mixture(8, 4, spacing=4.0, sigma=0.05, seed=0)
    x0 = torch.randn(64, 16, 8, generator=gen(2), dtype=torch.float64)
    out = samplers.ode_sample(f, x0, 0.0, 256)
    dist = torch.cdist(out.reshape(-1, 8), f.means).min(1).values
    assert float(dist.max()) < 0.1 * 4.0
    # The exact flow carries N(0, I) onto the mixture: a mode's own spread sigma^2 per coordinate.
    assert float((dist ** 2).mean() / 8) == pytest.approx(0.05 ** 2, rel=0.15)
    share = torch.bincount(torch.cdist(out.reshape(-1, 8), f.means).argmin(1), minlength=4).double() / 1024
    assert torch.allclose(share, f.weights, atol=0.06)
    # One posterior-mean step from pure noise averages every token: the mixture mean, exactly.
    one = samplers.ode_sample(f, x0, 0.0, 1)
    assert torch.allclose(one, (f.weights @ f.means).expand_as(one), atol=1e-12)
    # The SDE and the float32 generate() run on it unchanged and commit too.
    sde = samplers.sde_sample(f, x0, 0.0, 64, generator=gen(3))
    assert float(torch.cdist(sde.reshape(-1, 8), f.means).min(1).values.max()) < 0.1 * 4.0
    g32 = samplers.generate(f, (8, 4, 8), 64, "ode", seed=0)
    assert g32.dtype == torch.float32
    assert float(torch.cdist(g32.double().reshape(-1, 8), f.means).min(1).values.max()) < 0.1 * 4.0


def test_tube_law_slope_from_the_clean_margins():
    # s << sigma: the posterior mean is x1 + s eps (1 + O(s^2 / sigma^2)), an isotropic residual, so a
    # token flips when s g > m (g its normal noise): P = E[Phi_bar(m / s)] ~ F'(0) s E[g+] = F(s / sqrt(2 pi)).
    f = token_mixture(8, 4, spacing=2.5, sigma=1.0, seed=0)
    x1, _ = f.sample((256, 512), gen(1))
    ref = f.decode(x1)
    weight, bias = f.readout_weights()
    margins = tube.readout_margins(weight, bias, x1)
    rows = tube.terminal_flips(f.decode, f, x1, ref, [81, 41, 21], seed=0, n_boot=200)
    s = [r.s for r in rows]
    assert s == pytest.approx([1 / 80, 1 / 40, 1 / 20])
    flips = [r.structured.value for r in rows]
    slope, r2 = tube.slope_through_origin(s, flips)
    assert r2 > 0.99
    assert max(fl / si for fl, si in zip(flips, s)) / min(fl / si for fl, si in zip(flips, s)) < 1.2
    r0 = 0.05
    f_prime = float(tube.tube_mass(margins, [r0])[0]) / r0  # F(r) / r at small r: the tube's density
    assert slope == pytest.approx(f_prime / math.sqrt(2 * math.pi), rel=0.1)
    assert tube.fit_tube_constant(margins, s, flips) == pytest.approx(1 / math.sqrt(2 * math.pi), rel=0.15)
    # In this regime the exact residual is isotropic: structured and isotropic flips agree.
    assert 0.8 < rows[-1].ratio.value < 1.25


def test_structured_over_isotropic_ratio_grows_with_dimension():
    # Two simplex tokens: margins do not depend on d, nor do the posterior's token odds; the part of the
    # residual that mixes the means lies along the boundary normal, the within-token part is isotropic.
    ratios, structured = {}, {}
    for d in (4, 16, 64):
        f = token_mixture(d, 2, spacing=4.0, sigma=0.5, seed=0, arrangement="simplex")
        x1, _ = f.sample((128, 256), gen(1))
        (row,) = tube.terminal_flips(f.decode, f, x1, f.decode(x1), [2], seed=0, n_boot=200)  # s = 1
        ratios[d], structured[d] = row.ratio.value, row.structured.value
        assert row.k_isotropic > 20  # a ratio, not a bound
    assert max(structured.values()) / min(structured.values()) < 1.15  # matched flip levels
    assert ratios[4] < ratios[16] < ratios[64]
    assert ratios[64] / ratios[4] > 2  # measured 4.6 (5.2, 12.2, 23.7); it levels off near 25-30 by d = 256


def test_exact_residual_alignment_and_competitor_direction():
    # For the Bayes readout the boundary normal is the direction between the two means, so the
    # residual's component towards the competitor's mean equals its component along the normal.
    f = token_mixture(16, 3, spacing=4.0, sigma=0.5, seed=1, arrangement="simplex")
    x1, _ = f.sample((64, 64), gen(2))
    x_hat, _ = tube.oracle_terminal(f, x1, 2, gen(3))
    al = G.alignment(x1, x_hat, f.readout(), class_means=f.means, n_boot=200)
    assert torch.allclose(al.geometry.toward_competitor, al.geometry.along, atol=1e-10)
    assert al.mean_cos.lo > 0  # aimed towards the boundary on average
    assert al.energy_along.lo > 2 * al.isotropic_energy
