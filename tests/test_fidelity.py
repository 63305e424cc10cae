"""The bf16 fidelity measures are exact where the answer is known."""

import math

import torch

from tokendyn.analysis import fidelity
from tokendyn.mcmc import toy


class Rounded:
    """A toy model whose logits pass through bfloat16: the CPU bf16 path in miniature."""

    def __init__(self, base):
        self.base, self.vocab_size = base, base.vocab_size

    def site_logits(self, tokens, sites):
        return self.base.site_logits(tokens, sites).to(torch.bfloat16).float()


def test_identical_models_agree_exactly():
    m = toy.potts_chain(6, 4, coupling=1.2, seed=0)
    x = torch.randint(4, (50, 6), generator=torch.Generator().manual_seed(1))
    sites = torch.randint(6, (50,), generator=torch.Generator().manual_seed(2))
    r = fidelity.conditional_kl(m, m, x, sites, [0.5, 1.0])
    assert r.kl.shape == (2, 50) and float(r.kl.abs().max()) < 1e-12 and bool(r.argmax_agree.all())
    y = (x + 1) % 4
    pc = fidelity.paired_coupling(m, m, x, y, tau=1.0, max_steps=200, seed=3)
    assert pc.max_survival_gap == 0.0 and torch.equal(pc.times_ref, pc.times_test)
    a, b = fidelity.paired_delta(m, m, x, seed=4, protocol="uniform")
    assert torch.equal(a, b)


def test_rounded_logits_move_the_conditional_a_little_and_more_at_low_tau():
    m = toy.potts_chain(6, 4, coupling=1.7, seed=0)
    x = torch.randint(4, (200, 6), generator=torch.Generator().manual_seed(1))
    sites = torch.randint(6, (200,), generator=torch.Generator().manual_seed(2))
    r = fidelity.conditional_kl(m, Rounded(m), x, sites, [0.25, 1.0, 4.0])
    mean = r.kl.mean(1)
    assert 0 < float(mean[2]) < float(mean[1]) < float(mean[0]) < 1e-3


def test_logits_kl_is_the_closed_form_and_ignores_the_unsupported_tokens():
    """KL(Bernoulli(p) || Bernoulli(q)) in closed form; a -inf token in both rows adds nothing."""
    inf = float("-inf")
    p, q = 0.8, 0.5
    ref = torch.tensor([[math.log(p / (1 - p)), 0.0, inf]], dtype=torch.float64)
    test = torch.tensor([[0.0, 0.0, inf]], dtype=torch.float64)
    want = p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))
    got = fidelity.logits_kl(ref, test, [1.0, 2.0])
    assert got.shape == (2, 1)
    assert math.isclose(float(got[0, 0]), want, rel_tol=1e-12)
    assert 0 < float(got[1, 0]) < float(got[0, 0])  # a higher tau flattens both, and they draw closer
    assert float(fidelity.logits_kl(ref, ref, [1.0]).abs().max()) == 0.0
