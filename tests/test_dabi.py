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


def _known_linear_map(seed=0, d=5, out=7):
    """A = U diag(sigma) V^T with sigma = (3, 2, 1, 0.5, 0.25): top right singular vector V[:, 0]."""
    q1, _ = torch.linalg.qr(torch.randn(out, out, generator=gen(seed), dtype=torch.float64))
    q2, _ = torch.linalg.qr(torch.randn(d, d, generator=gen(seed + 1), dtype=torch.float64))
    sigma = torch.tensor([3.0, 2.0, 1.0, 0.5, 0.25], dtype=torch.float64)[:d]
    return q1[:, :d] @ torch.diag(sigma) @ q2.T, q2[:, 0], sigma


def test_top_singular_direction_of_a_known_linear_decoder():
    a, v0, sigma = _known_linear_map()
    z = torch.randn(6, 5, generator=gen(3), dtype=torch.float64)
    v, s = D.top_singular_directions(lambda x: x @ a.T, z, n_iter=60, generator=gen(4))
    assert v.shape == z.shape and s.shape == (6,)
    assert torch.allclose(s, torch.full((6,), 3.0, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(v.abs(), v0.abs().expand(6, 5), atol=1e-8)
    lead = v.gather(1, v.abs().argmax(1, keepdim=True))
    assert bool((lead > 0).all())   # sign fixed: largest coordinate positive


def test_sharpest_direction_of_a_quadratic_loss_has_the_largest_exact_increase():
    # squared error of a linear decoder: the increase along unit u is s^2 ||A u||^2 exactly
    a, _, sigma = _known_linear_map(1)
    z = torch.randn(30, 5, generator=gen(5), dtype=torch.float64)
    v, _ = D.top_singular_directions(lambda x: x @ a.T, z, n_iter=60, generator=gen(6))
    pts = D.dabi(lambda x: D.squared_error(x @ a.T, z @ a.T), z, v, [0.1, 1.0], n_iso=4, generator=gen(7), n_boot=200)
    for p in pts:
        assert p.structured == pytest.approx(9.0 * p.norm ** 2, rel=1e-9)
        assert p.ratio.value > 1


def test_dabi_curves_share_the_isotropic_draws_with_dabi():
    w = torch.randn(9, 4, generator=gen(8), dtype=torch.float64)
    b = torch.randn(9, generator=gen(9), dtype=torch.float64)
    z = torch.randn(50, 4, generator=gen(10), dtype=torch.float64)
    y = (z @ w.T + b).argmax(1)
    _, _, normal = D.nearest_boundary(w, b, z)
    other = D.isotropic_directions(z.shape, gen(11), dtype=torch.float64)

    def loss(x):
        return D.cross_entropy(x @ w.T + b, y)

    cv = D.dabi_curves(D.loss_line(loss, z), z, {"a": normal, "b": other}, [0.1, 1.0], n_iso=3,
                       generator=gen(12), n_boot=200)
    for name, u in (("a", normal), ("b", other)):
        ref = D.dabi(loss, z, u, [0.1, 1.0], n_iso=3, generator=gen(12), n_boot=200)
        for p, q in zip(cv.points[name], ref):
            assert p.structured == pytest.approx(q.structured, rel=1e-12)
            assert p.isotropic == pytest.approx(q.isotropic, rel=1e-12)
            assert (p.ratio.lo, p.ratio.hi) == pytest.approx((q.ratio.lo, q.ratio.hi), rel=1e-9)
    assert cv.flips == {"a": [], "b": []}   # a plain loss line has no argmax
    assert len(cv.isotropic_increase) == 2 and cv.isotropic_increase[0].shape == (50,)


def test_dabi_curves_rejects_bad_directions():
    z = torch.randn(4, 3, generator=gen(0), dtype=torch.float64)
    line = D.loss_line(lambda x: D.squared_error(x, z), z)
    with pytest.raises(ValueError, match="at least one"):
        D.dabi_curves(line, z, {}, [0.1], generator=gen(0))
    with pytest.raises(ValueError, match="'x'"):
        D.dabi_curves(line, z, {"x": torch.ones(4, 3, dtype=torch.float64)}, [0.1], generator=gen(0))


def test_dabi_curves_figure_has_one_panel_per_direction_kind():
    import pandas as pd

    from tokendyn.publish import figures

    d = pd.DataFrame({"decoder": ["a"] * 4, "kind": ["text"] * 4, "along": ["residual", "residual", "sharpest", "sharpest"],
                      "norm": [0.1, 1.0] * 2, "DABI": [10.0, 2.0, 900.0, 100.0], "lo": [8.0, 1.5, 800.0, 90.0],
                      "hi": [12.0, 2.5, 1000.0, 110.0]})
    spec = figures.dabi_curves(d, reference=1.0).to_dict()
    assert spec["facet"]["column"]["field"] == "along"
    assert len(spec["spec"]["layer"]) == 5   # line, points, intervals, DABI = 1, the reference s
    assert len(figures.dabi_curves(d.drop(columns="along"), reference=1.0).to_dict()["layer"]) == 5
