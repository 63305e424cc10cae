"""Chapter 7's readout comparison (tokendyn.training.readout.measure_readouts) on heads, a flow and a
judge with exact answers: a sign readout, the same readout with its boundary moved, and an MLP that
starts as it; a flow whose posterior mean is one point on the far side of every boundary; a judge
whose next-token law is uniform."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest
import torch

from latent_toys import PointMass
from tokendyn.training.readout import ResidualMLPReadout, measure_readouts

Z0 = [0.1, 0.2, 0.3, 0.4, -1.0]   # coordinate 0 of each window's five latents; coordinate 1 is 0


class _UniformJudge(torch.nn.Module):
    """A causal LM whose next-token law is uniform over 10 ids: perplexity 10 on any text."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask=None):
        return SimpleNamespace(logits=torch.zeros(*input_ids.shape, 10) + 0 * self.w)


class _Tok:
    pad_token_id, unk_token_id, unk_token, bos_token_id = 0, None, None, 1

    def convert_tokens_to_ids(self, t):
        return None

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [3 + (ord(c) % 5) for c in text]}


def _heads():
    sign = torch.nn.Linear(2, 2)      # class 0 where z0 > 0: logits (z0, -z0)
    with torch.no_grad():
        sign.weight.copy_(torch.tensor([[1.0, 0.0], [-1.0, 0.0]]))
        sign.bias.zero_()
    moved = copy.deepcopy(sign)       # boundary moved to z0 = 0.25: the latents at 0.1 and 0.2 now read 1
    with torch.no_grad():
        moved.bias.copy_(torch.tensor([-0.5, 0.0]))
    return {"shipped": sign, "moved": moved, "mlp": ResidualMLPReadout(sign, 3, torch.Generator().manual_seed(0))}


def _measure(heads, **kw):
    x1 = torch.tensor([[z, 0.0] for z in Z0]).expand(4, 5, 2).clone()            # [B = 4, L = 5, d = 2]
    ids = torch.zeros(4, 5, dtype=torch.long)                                      # every window's true ids: 0
    judged = x1[:2].expand(2, 2, 5, 2).clone()                                     # [S = 2, n = 2, L, d]
    judge = SimpleNamespace(model=_UniformJudge(), tokenizer=_Tok())
    return measure_readouts(heads, PointMass(torch.tensor([-0.5, 0.0])), ids, x1, judged, steps=4, n_dabi=10,
                            judge=judge, decode_text=lambda r: "".join("ab"[i] for i in r.tolist()), seed=0, **kw)


def test_each_readout_is_measured_against_its_own_clean_decode():
    m = _measure(_heads())
    t = m.table
    assert list(t.index) == ["shipped", "moved", "mlp"]
    # clean decodes: shipped and mlp [0, 0, 0, 0, 1], moved [1, 1, 0, 0, 1]; the true ids are all 0
    assert t["accuracy"].tolist() == pytest.approx([0.8, 0.4, 0.8])
    assert t["changed"].tolist() == pytest.approx([0.0, 0.4, 0.0])
    # the posterior mean (-0.5, 0) reads 1 under every head: each latent it read as 0 flips
    assert t["flip"].tolist() == pytest.approx([0.8, 0.4, 0.8]) and t["flipped"].tolist() == [16, 8, 16]
    assert (t["tokens"] == 20).all() and m.s == pytest.approx(1 / 3)
    assert t.loc["shipped", "logit_gap"] == pytest.approx(0.6)                    # median of 2 |z0|
    assert t.loc["shipped", "median_margin"] == pytest.approx(0.3) and math.isnan(t.loc["mlp", "median_margin"])
    assert t.loc["moved", "median_margin"] == pytest.approx(0.15)                 # |z0 - 0.25|
    assert set(m.margins) == {"shipped", "moved"} and m.margins["shipped"].shape == (4, 5)
    assert t["ode_ppl"].tolist() == pytest.approx([10, 10, 10], rel=1e-4)
    assert ((t["dabi_lo"] <= t["dabi"]) & (t["dabi"] <= t["dabi_hi"])).all()


def test_the_tube_constant_is_fitted_on_the_first_readout_and_predicts_from_each_ones_margins():
    m = _measure(_heads())
    t = m.table
    # shipped margins 0.1, 0.2, 0.3, 0.4, 1.0 and 80% flips: kappa s lies in (0.4, 1.0]
    assert 0.4 < m.kappa * m.s <= 1.0 and t.loc["shipped", "predicted"] == pytest.approx(0.8)
    # moved margins 0.15, 0.05, 0.05, 0.15, 1.25: the same kappa predicts 80% where it flips 40%
    assert t.loc["moved", "predicted"] == pytest.approx(0.8) and math.isnan(t.loc["mlp", "predicted"])


def test_the_first_readout_must_be_linear():
    heads = _heads()
    with pytest.raises(ValueError, match="first head"):
        _measure({"mlp": heads["mlp"], "shipped": heads["shipped"]})
