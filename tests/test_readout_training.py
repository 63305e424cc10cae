"""Readout interventions: objectives on exact cases, the MLP readout starts as the linear one, training helps."""

import pytest
import torch

from tokendyn.training.readout import ResidualMLPReadout, objective, retrain


def test_hinge_is_zero_past_the_margin_and_linear_inside():
    h = objective("hinge", margin=1.0)
    logits = torch.tensor([[3.0, 1.0, 0.0], [0.5, 0.0, 0.2]])
    ids = torch.tensor([0, 0])
    # row 0: gap 2 >= 1 -> 0; row 1: gap 0.3 -> 0.7
    assert float(h(logits, ids)) == pytest.approx(0.35)
    s = objective("smooth", epsilon=0.0)
    assert float(s(logits, ids)) == pytest.approx(float(torch.nn.functional.cross_entropy(logits, ids)))
    with pytest.raises(ValueError, match="objective"):
        objective("focal")


def test_mlp_readout_starts_as_the_linear_one_and_retraining_fits():
    g = torch.Generator().manual_seed(0)
    lin = torch.nn.Linear(4, 6)
    mlp = ResidualMLPReadout(lin, 8, g)
    z = torch.randn(64, 4, generator=g)
    assert torch.allclose(mlp(z), lin(z))
    ids = (z[:, 0] > 0).long() + 2 * (z[:, 1] > 0).long()  # 4 classes from two signs
    with torch.no_grad():
        before = float(torch.nn.functional.cross_entropy(lin(z), ids))
    losses = retrain(lin, z, ids, "ce", steps=200, batch=32, lr=1e-2, seed=0)
    with torch.no_grad():
        after = float(torch.nn.functional.cross_entropy(lin(z), ids))
    assert after < before and len(losses) >= 1
    with pytest.raises(ValueError, match="ids"):
        retrain(lin, z, ids[:3], "ce", steps=1)


def test_argmax_decoder_and_logit_gaps_on_an_exact_head():
    from tokendyn.latent.decoders import argmax_decoder, logit_gaps

    lin = torch.nn.Linear(2, 3)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
        lin.bias.zero_()
    z = torch.tensor([[2.0, 0.5], [0.1, 3.0], [-1.0, -1.0]])
    assert argmax_decoder(lin, chunk=2)(z[None]).tolist() == [[0, 1, 2]]
    assert logit_gaps(lin, z, chunk=2).tolist() == pytest.approx([1.5, 2.9, 1.0])
    with pytest.raises(ValueError, match="chunk"):
        argmax_decoder(lin, chunk=0)
