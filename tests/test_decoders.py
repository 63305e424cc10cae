"""DecoderUnderTest: the identity anchor is exactly 1, boundary normals are exact, heads agree."""

import pytest
import torch

from tokendyn.latent import decoders


def _readout(seed=0, V=12, d=6, N=40):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(V, d, generator=g), torch.randn(V, generator=g), torch.randn(N, d, generator=g)


def test_identity_anchor_is_one_up_to_round_off():
    w, b, z = _readout()
    dut = decoders.linear_readout("toy", w, b, z)
    anchor = decoders.identity_anchor(dut.z, dut.structured)
    for p in anchor.dabi([0.01, 0.1, 1.0], seed=0, n_boot=200):
        assert abs(p.ratio.value - 1) < 1e-12
        assert abs(p.structured - p.norm ** 2) < 1e-12


def test_linear_readout_structured_direction_flips_exactly_past_the_margin():
    w, b, z = _readout()
    dut = decoders.linear_readout("toy", w, b, z)
    from tokendyn.latent.dabi import nearest_boundary
    _, dist, _ = nearest_boundary(w.double(), b.double(), z.double())
    s = float(dist.median())
    fr = dut.flips(s * 1.0001, seed=0)
    # Along the exact normal a latent flips iff its margin is below the push: the tube mass F(s).
    assert fr.k_structured == int((dist < s * 1.0001).sum())
    pts = dut.dabi([0.5 * s], seed=0, n_boot=200)
    assert pts[0].ratio.value > 1


def test_head_on_a_linear_map_matches_the_linear_readout_targets():
    w, b, z = _readout(1)
    lin = torch.nn.Linear(6, 12).double()
    with torch.no_grad():
        lin.weight.copy_(w.double())
        lin.bias.copy_(b.double())
    head = decoders.classifier_head("head", lin, z.double())
    ref = decoders.linear_readout("lin", w, b, z)
    assert torch.allclose(head.loss(head.z), ref.loss(ref.z))
    assert torch.allclose(head.structured.norm(dim=1), torch.ones(len(z), dtype=torch.float64))


def test_image_decoder_rejects_bad_shapes_and_zero_directions():
    dec = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 4))
    z = torch.randn(5, 4, 2)
    with pytest.raises(ValueError, match="residual"):
        decoders.image_decoder("img", dec, z, torch.randn(5, 8))
    with pytest.raises(ValueError, match="zero"):
        decoders.image_decoder("img", dec, z, torch.zeros(5, 4, 2))
    ok = decoders.image_decoder("img", dec, z, torch.randn(5, 4, 2))
    assert ok.z.shape == (5, 8) and ok.kind == "image"
    with pytest.raises(ValueError, match="classifier"):
        ok.flips(0.1)


def test_linear_line_matches_the_plain_loss_and_counts_flips_exactly():
    w, b, z = _readout(2, N=60)
    res = torch.randn(60, 6, generator=torch.Generator().manual_seed(9))
    dut = decoders.linear_readout("toy", w, b, z, res)
    assert list(dut.directions) == ["sharpest", "residual"] and dut.labels["residual"] == "generator residual"
    u = dut.directions["residual"]
    loss, cls = dut.line(u, [0.0, 0.3, -0.3])
    for i, s in enumerate([0.0, 0.3, -0.3]):
        assert torch.allclose(loss[i], dut.loss(dut.z + s * u), rtol=1e-12, atol=1e-14)
        assert torch.equal(cls[i], dut.logits(dut.z + s * u).argmax(1))
    from tokendyn.latent.dabi import nearest_boundary
    _, dist, _ = nearest_boundary(w.double(), b.double(), z.double())
    s = float(dist.median()) * 1.0001
    cv = dut.curves([s], seed=0, n_iso=2, n_boot=200)
    # along the exact normal a latent flips iff its margin is below the push
    assert cv.flips["sharpest"][0].k_structured == int((dist < s).sum())
    assert cv.flips["sharpest"][0].k_isotropic == cv.flips["residual"][0].k_isotropic
    rows = decoders.curve_rows(dut, [0.5, 1.0], n_iso=2, n_boot=200)
    assert [(r["along"], r["norm"]) for r in rows] == [("sharpest", 0.5), ("sharpest", 1.0), ("residual", 0.5),
                                                       ("residual", 1.0)]
    assert rows[0]["latent norm"] == pytest.approx(0.5 * dut.rms) and "k_flips" in rows[0]


def test_head_line_matches_the_head_loss():
    w, b, z = _readout(3)
    lin = torch.nn.Linear(6, 12)
    with torch.no_grad():
        lin.weight.copy_(w)
        lin.bias.copy_(b)
    head = decoders.classifier_head("head", lin, z)
    assert list(head.directions) == ["sharpest"]
    loss, cls = head.line(head.structured, [0.0, 0.5])
    assert torch.allclose(loss[1], head.loss(head.z + 0.5 * head.structured))
    assert torch.equal(cls[0], lin(z).argmax(1))


def test_image_decoder_sharpest_direction_is_the_top_singular_vector():
    # a linear "image" decoder of [N, 2, 2] latents with known singular values (3, 2, 1, 0.5)
    g = torch.Generator().manual_seed(0)
    q1, _ = torch.linalg.qr(torch.randn(6, 6, generator=g))
    q2, _ = torch.linalg.qr(torch.randn(4, 4, generator=g))
    a = q1[:, :4] @ torch.diag(torch.tensor([3.0, 2.0, 1.0, 0.5])) @ q2.T
    dec = lambda x: (x.flatten(1) @ a.T).reshape(-1, 1, 2, 3)  # noqa: E731
    z = torch.randn(8, 2, 2, generator=g)
    dut = decoders.image_decoder("lin", dec, z, n_iter=60)
    assert list(dut.directions) == ["sharpest"]
    assert torch.allclose(dut.structured.abs().float(), q2[:, 0].abs().expand(8, 4), atol=1e-4)
    p = dut.dabi([0.5], seed=0, n_iso=4, n_boot=200)[0]
    assert p.structured == pytest.approx(9 * 0.25, rel=1e-4)   # s^2 sigma_1^2, exactly quadratic
    both = decoders.image_decoder("lin", dec, z, torch.randn(8, 2, 2, generator=g))
    assert list(both.directions) == ["sharpest", "residual"]
    assert set(both.curves([0.1], n_iso=2, n_boot=200).points) == {"sharpest", "residual"}


def test_shipped_decoders_rejects_unknown_names():
    with pytest.raises(ValueError, match="not shipped"):
        decoders.shipped_decoders({}, n_tokens=64, n_digits=2, n_faces=2, terminal_k=2, seed=0, passages=[],
                                  names=["nope"])


def test_vocab_is_the_width_of_the_logits_and_none_without_them():
    import torch
    from tokendyn.latent.decoders import DecoderUnderTest

    z = torch.zeros(3, 4)
    head = torch.nn.Linear(4, 7)
    common = dict(name="t", kind="text", z=z, loss=lambda x: x.sum(-1), directions={"d": z}, labels={"d": "d"})
    assert DecoderUnderTest(**common, logits=head).vocab == 7
    assert DecoderUnderTest(**common).vocab is None
