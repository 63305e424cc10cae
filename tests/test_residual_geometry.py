"""The residual's geometry (tokendyn.latent.geometry) against hand-computed and exact answers."""

import math

import pytest
import torch

from tokendyn.latent import geometry as G
from tokendyn.latent.contextual import LinearReadout
from tokendyn.latent.tube import readout_margins


def gen(seed):
    return torch.Generator().manual_seed(seed)


@pytest.fixture(autouse=True)
def one_thread():
    """Small tensors: a second intra-op thread only adds hand-offs on a busy machine; restored after."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def line_readout(d):
    """Two tokens split by the hyperplane z_0 = 0: token 0 for z_0 > 0, normal -e_0 towards it."""
    w = torch.zeros(2, d, dtype=torch.float64)
    w[0, 0], w[1, 0] = 1.0, -1.0
    return w, torch.zeros(2, dtype=torch.float64)


def test_two_dimensional_decomposition_is_exact():
    w, b = line_readout(2)
    x1 = torch.tensor([[0.5, 0.2], [0.5, -1.0], [0.5, 3.0], [-0.7, 0.1], [0.4, 0.4]], dtype=torch.float64)
    r = torch.tensor([[-0.2, 0.0], [0.0, 0.3], [0.1, 0.1], [0.3, 0.4], [0.0, 0.0]], dtype=torch.float64)
    means = torch.tensor([[1.0, 0.0], [-1.0, 2.0]], dtype=torch.float64)
    geo = G.residual_geometry(x1, x1 + r, (w, b), class_means=means)
    assert geo.token.tolist() == [0, 0, 0, 1, 0] and geo.competitor.tolist() == [1, 1, 1, 0, 1]
    assert geo.margin.tolist() == pytest.approx([0.5, 0.5, 0.5, 0.7, 0.4])
    assert torch.allclose(geo.normal, torch.tensor([[-1.0, 0]] * 3 + [[1.0, 0]] + [[-1.0, 0]], dtype=torch.float64))
    # Along the normal: cos 1; orthogonal: cos 0; away from the boundary at 45 degrees; a zero residual: 0.
    assert geo.cos.tolist() == pytest.approx([1.0, 0.0, -1 / math.sqrt(2), 0.6, 0.0])
    assert geo.along.tolist() == pytest.approx([0.2, 0.0, -0.1, 0.3, 0.0])
    assert geo.orthogonal.tolist() == pytest.approx([0.0, 0.3, 0.1, 0.4, 0.0])
    assert geo.norm.tolist() == pytest.approx([0.2, 0.3, math.sqrt(0.02), 0.5, 0.0])
    # Towards the competitor's mean: (-1, 1)/sqrt(2) from token 0, (1, -1)/sqrt(2) from token 1.
    h = 1 / math.sqrt(2)
    assert geo.toward_competitor.tolist() == pytest.approx([0.2 * h, 0.3 * h, 0.0, -0.1 * h, 0.0])
    # The same readout as an nn.Linear or a LinearReadout, and [B, L, d] latents, give the same split.
    head = LinearReadout(2, 2).double()
    with torch.no_grad():
        head.readout.weight.copy_(w)
        head.readout.bias.copy_(b)
    for readout in (head, head.readout):
        again = G.residual_geometry(x1[:4].reshape(2, 2, 2), (x1 + r)[:4].reshape(2, 2, 2), readout)
        assert torch.equal(again.cos, geo.cos[:4]) and again.batch_shape == (2, 2)


def test_checks_name_the_bad_argument():
    w, b = line_readout(2)
    x = torch.zeros(3, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="share a shape"):
        G.residual_geometry(x, torch.zeros(3, 3, dtype=torch.float64), (w, b))
    with pytest.raises(ValueError, match="3-d"):
        G.residual_geometry(torch.zeros(3, 3), torch.zeros(3, 3), (w, b))
    with pytest.raises(TypeError, match="readout"):
        G.residual_geometry(x, x, object())
    with pytest.raises(ValueError, match="class_means"):
        G.residual_geometry(x + 1, x + 1, (w, b), class_means=torch.zeros(3, 2))
    with pytest.raises(ValueError, match="y must"):
        G.residual_geometry(x + 1, x + 1, (w, b), y=torch.zeros(2, dtype=torch.long))


def test_sphere_constants_are_exact():
    assert G.isotropic_abs_cos(1) == pytest.approx(1.0)
    assert G.isotropic_abs_cos(2) == pytest.approx(2 / math.pi)
    assert G.isotropic_abs_cos(3) == pytest.approx(0.5)
    assert G.small_norm_ratio(2) == pytest.approx(math.pi)
    assert G.small_norm_ratio(4) == pytest.approx(3 * math.pi / 2)
    assert G.small_norm_ratio(400) / math.sqrt(2 * math.pi * 400) == pytest.approx(1.0, abs=0.01)


def test_halfspace_probability_is_exact_in_low_dimensions():
    a = torch.tensor([-0.5, 0.0, 0.3, 0.9, 1.0, 2.0], dtype=torch.float64)
    one = torch.ones_like(a)
    # d = 3 (Archimedes): u1 is uniform on [-1, 1]; d = 2: u1 = cos(theta), theta uniform.
    want3 = ((1 - a.clamp(-1, 1)) / 2).tolist()
    assert G.halfspace_flip_probability(a, one, 3).tolist() == pytest.approx(want3, abs=1e-12)
    want2 = (torch.arccos(a.clamp(-1, 1)) / math.pi).tolist()
    assert G.halfspace_flip_probability(a, one, 2).tolist() == pytest.approx(want2, abs=1e-12)
    assert G.halfspace_flip_probability(a, one, 1).tolist() == [0.5, 0.5, 0.5, 0.5, 0.0, 0.0]  # u1 = +-1
    assert G.halfspace_flip_probability(-a, one, 1).tolist() == [0.5, 0.5, 0.5, 0.5, 0.5, 1.0]
    # A zero norm never flips a token inside its cell.
    assert G.halfspace_flip_probability(torch.tensor([0.1]), torch.tensor([0.0]), 5).tolist() == [0.0]


def test_alignment_of_aimed_and_unaimed_residuals():
    g = gen(0)
    w, b = torch.randn(12, 16, generator=g, dtype=torch.float64), torch.randn(12, generator=g, dtype=torch.float64)
    x1 = 3 * torch.randn(40, 50, 16, generator=g, dtype=torch.float64)
    geo = G.residual_geometry(x1, x1, (w, b))
    aimed = x1 + 0.05 * geo.normal.reshape(x1.shape)
    al = G.alignment(x1, aimed, (w, b), n_boot=200)
    assert (al.mean_cos.value, al.mean_cos.lo, al.mean_cos.hi) == pytest.approx((1.0, 1.0, 1.0))
    assert al.energy_along.value == pytest.approx(1.0)
    assert al.mean_cos.n == 40  # resampled by sequence
    iso = x1 + 0.05 * torch.randn(x1.shape, generator=g, dtype=torch.float64)
    al = G.alignment(x1, iso, (w, b), n_boot=500)
    assert al.mean_abs_cos.lo < al.isotropic_abs_cos < al.mean_abs_cos.hi
    assert al.energy_along.lo < 1 / 16 < al.energy_along.hi
    assert al.mean_cos.lo < 0 < al.mean_cos.hi


def test_aligned_flips_are_exactly_the_margins_below_the_norm():
    g = gen(1)
    w, b = torch.randn(20, 8, generator=g, dtype=torch.float64), torch.randn(20, generator=g, dtype=torch.float64)
    x1 = 2 * torch.randn(5000, 8, generator=g, dtype=torch.float64)
    r = torch.randn(5000, 8, generator=g, dtype=torch.float64) * torch.rand(5000, 1, generator=g, dtype=torch.float64)
    cf = G.aligned_counterfactual(x1, x1 + r, (w, b), seed=2, n_boot=200)
    below = float((readout_margins(w, b, x1) < r.norm(dim=1)).double().mean())
    assert cf.aligned.value == below and cf.predicted_aligned == below
    assert 0.1 < below < 0.9
    # Isotropic residuals cross at least the nearest hyperplane as often as predicted (more tokens, more flips).
    assert cf.isotropic.value < cf.aligned.value
    assert cf.isotropic.hi > cf.predicted_isotropic


def test_isotropic_flips_and_the_ratio_against_dimension():
    # Two tokens, margins uniform on [0, 1], every norm 0.1: the half-space prediction is exact, and
    # the ratio follows 1 / E[u1+] ~ sqrt(2 pi d) (norms small against the margins' spread).
    ratios = {}
    for d in (4, 16, 64):
        g = gen(d)
        n = 40_000
        x1 = torch.randn(n, d, generator=g, dtype=torch.float64)
        x1[:, 0] = torch.rand(n, generator=g, dtype=torch.float64)
        r = torch.randn(n, d, generator=g, dtype=torch.float64)
        r = 0.1 * r / r.norm(dim=1, keepdim=True)
        cf = G.aligned_counterfactual(x1, x1 + r, line_readout(d), seed=3, n_boot=200)
        p = cf.predicted_isotropic
        assert abs(cf.isotropic.value - p) < 4 * math.sqrt(p * (1 - p) / n)
        assert abs(cf.aligned.value - 0.1) < 4 * math.sqrt(0.09 / n)
        assert cf.isotropic.value < cf.aligned.value
        assert cf.ratio.lo < cf.predicted_ratio < cf.ratio.hi
        assert cf.predicted_ratio == pytest.approx(cf.small_norm_ratio, rel=0.05)
        ratios[d] = cf.ratio.value
    assert ratios[4] < ratios[16] < ratios[64]
    assert ratios[64] / ratios[4] > 2
