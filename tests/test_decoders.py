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
