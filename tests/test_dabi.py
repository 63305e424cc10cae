"""DABI, boundary directions and flip rates of tokendyn.latent.dabi against hand-computed cases."""

import math

import pytest
import torch

from tokendyn.latent import dabi as D
from tokendyn.latent.tube import readout_margins


def gen(seed):
    return torch.Generator().manual_seed(seed)


def brute_force(w, b, z, y):
    """Every signed boundary distance of every latent, through [N, V, d]."""
    diff = w[y][:, None, :] - w[None, :, :]
    gap = (z[:, None, :] * diff).sum(-1) + (b[y][:, None] - b[None, :])
    dist = gap / diff.norm(dim=-1)
    dist[torch.arange(len(z)), y] = float("inf")
    k = dist.argmin(1)
    normal = w[y] - w[k]
    return k, dist.min(1).values, -normal / normal.norm(dim=1, keepdim=True)


def test_identity_decoder_has_dabi_exactly_one_at_every_norm():
    z = torch.randn(40, 6, generator=gen(0), dtype=torch.float64)
    direction = D.isotropic_directions(z.shape, gen(1), dtype=torch.float64)
    points = D.dabi(lambda x: D.squared_error(x, z), z, direction, [1e-3, 0.1, 3.0], n_iso=3,
                    generator=gen(2), n_boot=200)
    assert [p.norm for p in points] == [1e-3, 0.1, 3.0]
    for p in points:
        assert p.structured == pytest.approx(p.norm ** 2, rel=1e-9)
        assert p.isotropic == pytest.approx(p.norm ** 2, rel=1e-9)
        assert (p.ratio.value, p.ratio.lo, p.ratio.hi) == pytest.approx((1.0, 1.0, 1.0), rel=1e-9)
        assert p.ratio.n == 40


def test_two_class_readout_by_hand():
    w = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    b = torch.tensor([0.0, 0.5], dtype=torch.float64)
    z = torch.tensor([[2.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    # Boundary z1 - z2 = 0.5, normal (1, -1) / sqrt(2); z0 reads as 0, z1 as 1.
    k, dist, direction = D.nearest_boundary(w, b, z)
    r = 1 / math.sqrt(2)
    assert k.tolist() == [1, 0]
    assert dist.tolist() == pytest.approx([1.5 * r, 2.5 * r])
    assert torch.allclose(direction, torch.tensor([[-r, r], [r, -r]], dtype=torch.float64))
    on = z + dist[:, None] * direction
    logits = on @ w.T + b
    assert logits[:, 0].tolist() == pytest.approx(logits[:, 1].tolist())
    # The true token of z1 taken as 0: it is already across, a negative distance.
    _, dist0, dir0 = D.nearest_boundary(w, b, z, torch.tensor([0, 0]))
    assert dist0.tolist() == pytest.approx([1.5 * r, -2.5 * r])
    assert dir0[1].tolist() == pytest.approx([-r, r])
    # With two classes the margin's steepest descent is the boundary normal.
    grad = D.gradient_direction(lambda x: x @ w.T + b, D.margin_loss, z, torch.tensor([0, 1]))
    assert torch.allclose(grad, direction)


@pytest.mark.parametrize("chunk", [1, 4, 7, 100])
def test_chunked_nearest_boundary_equals_brute_force(chunk):
    g = gen(3)
    w, b = torch.randn(37, 5, generator=g, dtype=torch.float64), torch.randn(37, generator=g, dtype=torch.float64)
    z = 2 * torch.randn(60, 5, generator=g, dtype=torch.float64)
    for y in [(z @ w.T + b).argmax(1), torch.randint(0, 37, (60,), generator=g)]:
        k, dist, direction = D.nearest_boundary(w, b, z, y, chunk=chunk)
        k_ref, dist_ref, dir_ref = brute_force(w, b, z, y)
        assert torch.equal(k, k_ref)
        assert torch.allclose(dist, dist_ref) and torch.allclose(direction, dir_ref)
    assert torch.allclose(D.nearest_boundary(w, b, z, chunk=chunk)[1], readout_margins(w, b, z))


def test_nearest_boundary_skips_a_duplicate_row_and_crosses_at_the_distance():
    g = gen(4)
    w = torch.randn(20, 8, generator=g)
    w[5] = w[0]
    b = torch.randn(20, generator=g)
    b[5] = b[0]
    z = torch.randn(300, 8, generator=g)
    y = (z @ w.T + b).argmax(1)
    k, dist, direction = D.nearest_boundary(w, b, z)
    assert not ((y == 0) & (k == 5)).any() and not ((y == 5) & (k == 0)).any()
    inside = ((z + 0.999 * dist[:, None] * direction) @ w.T + b).argmax(1)
    across = ((z + 1.001 * dist[:, None] * direction) @ w.T + b).argmax(1)
    dup = (y == 0) | (y == 5)  # rows 0 and 5 tie: argmax picks one of them
    assert torch.equal(inside[~dup], y[~dup]) and (across[~dup] != y[~dup]).all()


def near_boundary_case(n=500, d=200, offset=0.05):
    """Two classes split by the sign of coordinate 0 in d dims; every latent at distance ``offset``."""
    w = torch.zeros(2, d, dtype=torch.float64)
    w[0, 0], w[1, 0] = 1.0, -1.0
    b = torch.zeros(2, dtype=torch.float64)
    z = torch.randn(n, d, generator=gen(5), dtype=torch.float64)
    z[:, 0] = offset
    return w, b, z


def test_cross_entropy_amplifies_the_boundary_direction_near_a_boundary():
    w, b, z = near_boundary_case()
    y = torch.zeros(len(z), dtype=torch.long)
    _, dist, direction = D.nearest_boundary(w, b, z, y)
    assert torch.allclose(dist, torch.full_like(dist, 0.05))
    assert torch.allclose(direction, -torch.eye(200, dtype=torch.float64)[0].expand_as(z))
    points = D.dabi(lambda x: D.cross_entropy(x @ w.T + b, y), z, direction, [0.005, 0.02], n_iso=4,
                    generator=gen(6), n_boot=200)
    for p in points:
        assert p.structured > p.isotropic > 0
        assert p.ratio.lo > 10


def test_flip_rates_just_past_the_boundary():
    w, b, z = near_boundary_case()
    _, _, direction = D.nearest_boundary(w, b, z)
    logits = lambda x: x @ w.T + b  # noqa: E731
    past = D.flip_rates(logits, z, direction, 0.051, generator=gen(7))
    assert past.k_structured == past.n == 500 and past.structured.value == 1.0 and past.structured.hi == 1.0
    assert past.k_isotropic == 0 and past.isotropic.hi < 0.01
    short = D.flip_rates(logits, z, direction, 0.049, generator=gen(7))
    assert short.k_structured == 0


def test_gradient_direction_of_a_reconstruction_decoder():
    a = torch.randn(9, 4, generator=gen(8), dtype=torch.float64)
    z0 = torch.randn(6, 4, generator=gen(9), dtype=torch.float64)
    delta = torch.randn(6, 4, generator=gen(10), dtype=torch.float64)
    delta[0] = 0  # at the clean latent: no gradient, a zero vector
    decoder = lambda x: x @ a.T  # noqa: E731
    out = D.gradient_direction(decoder, D.squared_error, z0 + delta, decoder(z0))
    expect = delta @ a.T @ a  # half the gradient of ||A (z - z0)||^2
    expect = expect / expect.norm(dim=1, keepdim=True).clamp_min(1e-300)
    assert torch.allclose(out, expect) and out[0].abs().max() == 0
    with pytest.raises(ValueError, match="loss_fn"):
        D.gradient_direction(decoder, lambda o, t: D.squared_error(o, t).sum(), z0, decoder(z0))


def test_isotropic_directions_are_seeded_unit_vectors():
    u = D.isotropic_directions((3, 400, 16), gen(11))
    assert u.shape == (3, 400, 16) and u.dtype == torch.float32
    assert torch.allclose(u.norm(dim=-1), torch.ones(3, 400))
    assert torch.equal(u, D.isotropic_directions((3, 400, 16), gen(11)))
    assert u.mean((0, 1)).abs().max() < 0.05


def test_bad_inputs_name_the_parameter():
    w, b, z = torch.randn(5, 3), torch.randn(5), torch.randn(4, 3)
    unit = D.isotropic_directions(z.shape, gen(0))
    sq = lambda x: D.squared_error(x, z)  # noqa: E731
    with pytest.raises(ValueError, match="weight"):
        D.nearest_boundary(w, b, torch.randn(4, 2))
    with pytest.raises(ValueError, match="weight"):
        D.nearest_boundary(w[:1], b[:1], z)
    with pytest.raises(ValueError, match="y"):
        D.nearest_boundary(w, b, z, torch.tensor([0, 1, 2, 5]))
    with pytest.raises(ValueError, match="chunk"):
        D.nearest_boundary(w, b, z, chunk=0)
    with pytest.raises(ValueError, match="z"):
        D.nearest_boundary(w, b, z[0])
    with pytest.raises(ValueError, match="norms"):
        D.dabi(sq, z, unit, [0.1, -1.0], generator=gen(0))
    with pytest.raises(ValueError, match="norms"):
        D.dabi(sq, z, unit, [], generator=gen(0))
    with pytest.raises(ValueError, match="n_iso"):
        D.dabi(sq, z, unit, [0.1], n_iso=0, generator=gen(0))
    with pytest.raises(ValueError, match="structured_dir"):
        D.dabi(sq, z, 2 * unit, [0.1], generator=gen(0))
    with pytest.raises(ValueError, match="structured_dir"):
        D.dabi(sq, z, unit[:, :2], [0.1], generator=gen(0))
    with pytest.raises(ValueError, match="loss_fn"):
        D.dabi(lambda x: sq(x).sum(), z, unit, [0.1], generator=gen(0))
    with pytest.raises(ValueError, match="norm"):
        D.flip_rates(lambda x: x @ w.T + b, z, unit, 0.0, generator=gen(0))
    with pytest.raises(ValueError, match="shape"):
        D.isotropic_directions((), gen(0))
