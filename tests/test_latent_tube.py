"""Margins, tube mass, flip rates, residuals and the roll-in bookkeeping of tokendyn.latent.tube."""

import math

import numpy as np
import pytest
import torch

from tokendyn.latent import tube
from tokendyn.latent.dabi import isotropic_like, residual_dabi
from tokendyn.latent.samplers import posterior_mean
from latent_toys import PointMass


def test_margin_exact_small_case():
    w = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    b = torch.zeros(3)
    z = torch.tensor([[2.0, 1.0], [0.0, 3.0]])
    # z0: class 0; boundary with 1 at (2-1)/sqrt(2), with 2 at (2+2)/2.
    # z1: class 1; boundary with 0 at (3-0)/sqrt(2), with 2 at (3-0)/sqrt(2).
    m = tube.readout_margins(w, b, z)
    assert m.tolist() == pytest.approx([1 / math.sqrt(2), 3 / math.sqrt(2)])


def test_margin_is_the_distance_at_which_the_argmax_changes():
    g = torch.Generator().manual_seed(0)
    w, b = torch.randn(50, 6, generator=g), torch.randn(50, generator=g)
    z = torch.randn(200, 6, generator=g) * 2
    m = tube.readout_margins(w, b, z, chunk=64)
    a = (z @ w.T + b).argmax(1)
    # Nearest boundary class and the direction straight at it.
    logits = z @ w.T + b
    diff = w[a][:, None, :] - w[None, :, :]  # [N, V, d]
    dist = (logits.gather(1, a[:, None]) - logits) / diff.norm(dim=-1).clamp_min(1e-12)
    dist.scatter_(1, a[:, None], float("inf"))
    c = dist.argmin(1)
    n = w[a] - w[c]
    n = n / n.norm(dim=1, keepdim=True)
    inside = ((z - 0.999 * m[:, None] * n) @ w.T + b).argmax(1)
    across = ((z - 1.001 * m[:, None] * n) @ w.T + b).argmax(1)
    assert torch.equal(inside, a)
    assert (across != a).all()


def test_margin_shape_checks():
    with pytest.raises(ValueError, match="shapes"):
        tube.readout_margins(torch.zeros(4, 3), torch.zeros(4), torch.zeros(2, 5))


def test_tube_mass_and_flip_rate_exact():
    m = torch.tensor([0.1, 0.2, 0.3, 0.4])
    assert tube.tube_mass(m, [0.0, 0.25, 1.0]).tolist() == [0.0, 0.5, 1.0]
    assert tube.flip_rate(torch.tensor([1, 2, 3, 4]), torch.tensor([1, 0, 3, 0])) == 0.5
    with pytest.raises(ValueError):
        tube.flip_rate(torch.zeros(3), torch.zeros(4))


def test_isotropic_like_matches_norms_per_vector():
    r = torch.randn(5, 7, 8, generator=torch.Generator().manual_seed(1)) * torch.arange(1, 9.0)
    iso = isotropic_like(r, torch.Generator().manual_seed(2))
    assert torch.allclose(iso.norm(dim=-1), r.norm(dim=-1), rtol=1e-5)
    assert torch.equal(iso, isotropic_like(r, torch.Generator().manual_seed(2)))
    cos = (iso * r).sum(-1) / (iso.norm(dim=-1) * r.norm(dim=-1))
    assert cos.abs().mean() < 0.5  # a random direction, not the residual's


def test_dabi_is_one_for_a_norm_only_loss_and_large_for_aligned_residuals():
    g = torch.Generator().manual_seed(0)
    clean = torch.randn(64, 4, generator=g)
    res = torch.randn(64, 4, generator=g) * 0.1
    sq = lambda z: float(((z - clean) ** 2).sum())  # noqa: E731
    assert residual_dabi(sq, clean, res, torch.Generator().manual_seed(1)) == pytest.approx(1.0, rel=1e-5)
    # A loss that only sees the first coordinate, and a residual only along it.
    first = lambda z: float(((z - clean)[:, 0] ** 2).sum())  # noqa: E731
    aligned = torch.zeros_like(clean)
    aligned[:, 0] = 0.1
    assert residual_dabi(first, clean, aligned, torch.Generator().manual_seed(1)) > 2.5


def test_oracle_terminal_and_rollin_bookkeeping():
    mu = torch.tensor([0.5, -1.0])
    net, x1 = PointMass(mu), mu.expand(3, 4, 2).clone()
    x_hat, s = tube.oracle_terminal(net, x1, 4, torch.Generator().manual_seed(0))
    assert s == pytest.approx(1 / 3)
    assert torch.allclose(x_hat, x1, atol=1e-6)
    rows = tube.rollin_curve(net, x1, lambda z: float((z - x1).abs().max()), [0.2, 0.5], [2, 4], seed=1)
    assert [(r["K"], r["t0"]) for r in rows] == [(2, 0.2), (2, 0.5), (4, 0.2), (4, 0.5)]
    r = rows[3]  # K = 4 from 0.5: terminal step starts at 0.875, s = 1/7
    assert r["t_terminal"] == pytest.approx(0.875) and r["s"] == pytest.approx(1 / 7)
    assert r["s_start"] == pytest.approx(1.0)
    assert all(row["value"] < 1e-5 for row in rows)  # a point mass is recovered exactly
    with pytest.raises(ValueError, match="t0"):
        tube.rollin_curve(net, x1, float, [1.0], [2])
    both = tube.rollin_curve(net, x1, lambda z: {"a": 1.0, "b": 2}, [0.5], [2])
    assert both[0]["a"] == 1.0 and both[0]["b"] == 2.0 and "value" not in both[0]


def test_residual_flips_structured_vs_isotropic():
    # Readout on the first coordinate's sign; clean latents at +0.5, pushed to -0.5 along it.
    decode = lambda z: (z[..., 0] > 0).long()  # noqa: E731
    x1 = torch.zeros(4, 50, 8)
    x1[..., 0] = 0.5
    ref = decode(x1)
    x_hat = x1.clone()
    x_hat[..., 0] = -0.5
    out = tube.residual_flips(decode, ref, x1, x_hat, torch.Generator().manual_seed(0))
    assert out["structured"] == 1.0
    assert out["residual_rms"] == pytest.approx(1.0 / math.sqrt(8))
    # The same norm in a random direction of 8 rarely moves coordinate 0 by 0.5 or more.
    assert out["isotropic"] < 0.5


def test_tube_constant_recovers_a_known_scale():
    margins = torch.linspace(0.0, 1.0, 2001)[1:]
    s = np.array([0.01, 0.03, 0.1, 0.2])
    flips = tube.predict_flips(margins, s, 2.5)
    assert flips.tolist() == pytest.approx((2.5 * s).tolist(), abs=1e-3)
    assert tube.fit_tube_constant(margins, s, flips) == pytest.approx(2.5, rel=0.01)


def test_slope_and_curve_spread():
    a, r2 = tube.slope_through_origin([1, 2, 3], [2, 4, 6])
    assert a == pytest.approx(2.0) and r2 == pytest.approx(1.0)
    x = [0.1, 0.2, 0.4]
    same = {4: (x, [1.0, 2.0, 4.0]), 8: (x, [1.0, 2.0, 4.0])}
    assert tube.curve_spread(same, [0.15, 0.3]) == 0.0
    double = {4: (x, [1.0, 2.0, 4.0]), 8: (x, [2.0, 4.0, 8.0])}
    assert tube.curve_spread(double, [0.2]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        tube.curve_spread(same, [5.0])


def test_posterior_mean_of_point_mass_is_the_point():
    mu = torch.tensor([0.5, -1.0])
    x = torch.randn(2, 3, 2, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(posterior_mean(PointMass(mu), x, 0.3), mu.expand(2, 3, 2), atol=1e-6)


def test_bigram_perplexity_and_repetition_exact():
    from tokendyn.latent.bigram import BigramLM, repetition_rate

    seqs = torch.tensor([[0, 1, 2], [0, 1, 1]])
    lm = BigramLM(seqs, vocab_size=3, alpha=1.0)
    # Pairs: (0,1) x2, (1,2), (1,1); from 0: 2 of 2, from 1: one each to 1 and 2.
    lp = lm.log_prob(torch.tensor([[0, 1, 2]]))
    assert lp.exp().tolist()[0] == pytest.approx([(2 + 1) / (2 + 3), (1 + 1) / (2 + 3)])
    assert lm.perplexity(torch.tensor([[0, 1, 2]])) == pytest.approx(math.exp(-float(lp.mean())))
    # An unseen pair gets only the smoothing mass: from 2 nothing was seen.
    assert lm.log_prob(torch.tensor([[2, 0]])).exp().item() == pytest.approx(1 / 3)
    assert repetition_rate(torch.tensor([[5, 5, 5, 1], [1, 2, 3, 3]])) == pytest.approx(3 / 6)
    with pytest.raises(ValueError, match="ids"):
        BigramLM(torch.tensor([[0, 4]]), vocab_size=3)


def test_terminal_flips_counts_intervals_and_independent_draws():
    # Readout on coordinate 0's sign; a "flow" whose posterior mean pushes every latent across it.
    class Flip(torch.nn.Module):
        def forward(self, x, t):  # x + (1 - t) v = -x1 exactly when v = (-x1 - x) / (1 - t)
            return (-torch.full_like(x, 0.5) - x) / (1 - t[:, None, None].clamp_max(1 - 1e-6))

    decode = lambda z: (z[..., 0] > 0).long()  # noqa: E731
    x1 = torch.full((6, 5, 4), 0.5)
    ref = decode(x1)
    rows = tube.terminal_flips(decode, Flip(), x1, ref, [1, 4], seed=0, n_boot=200)
    assert [r.K for r in rows] == [1, 4]
    assert rows[0].s == float("inf") and rows[1].s == pytest.approx(1 / 3)
    for r in rows:
        assert r.k_structured == 30 and r.structured.value == 1.0 and r.n_tokens == 30 and r.n_sequences == 6
        assert r.structured.lo == 1.0  # every sequence flips every token
        assert 0 <= r.isotropic.lo <= r.isotropic.value <= r.isotropic.hi <= 1
        assert r.ratio.value == pytest.approx(30 / max(r.k_isotropic, 1))
    with pytest.raises(ValueError, match="B >= 2"):
        tube.terminal_flips(decode, Flip(), x1[:1], ref[:1], [2])
