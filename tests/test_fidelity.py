"""The bf16 fidelity measures are exact where the answer is known."""

import math

import pytest
import torch

from tokendyn.analysis import fidelity
from tokendyn.core.stats import Estimate
from tokendyn.mcmc import toy
from tokendyn.mcmc.censored import CensoredTimes


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
    assert pc.max_survival_gap == 0.0 and torch.equal(pc.ref.times, pc.test.times) and pc.max_steps == 200
    assert torch.equal(pc.ref.censored, pc.test.censored) and pc.ref.cap == pc.test.cap == 200
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


def test_compare_of_a_model_with_itself_changes_no_conclusion():
    """Every site of every row is compared, the intervals are at zero difference, and the record
    holds what the performance appendix saves."""
    m = toy.potts_chain(6, 4, coupling=1.2, seed=0)
    gen = torch.Generator().manual_seed(1)
    x, x0, y0, xr = (torch.randint(4, (b, 6), generator=gen) for b in (5, 8, 8, 30))
    s = fidelity.compare(m, m, x, x0, (x0 + 1) % 4, xr, taus=[0.5, 2], tau=1.0, max_steps=150, seed=3)
    assert list(s.kl) == [0.5, 2] and all(e.n == 5 * 6 and e.value == 0.0 for e in s.kl.values())
    assert s.argmax_agree.value == 1.0 and s.argmax_agree.n == 30
    assert math.isclose(s.band, 1.36 * math.sqrt(2 / 8)) and s.n == 6 and s.tau == 1.0
    assert s.medians[0] == s.medians[1] and torch.equal(*s.deltas)
    assert s.delta_diff.value == 0.0 and s.delta_ref == s.delta_test and s.conclusions_agree()
    r = s.record()
    assert r["changes_a_conclusion"] is False and list(r["kl"]) == ["0.5", "2"]
    assert r["coupling"] == {"median_fp32": s.medians[0], "median_bf16": s.medians[1], "max_survival_gap": 0.0,
                             "band": s.band, "pairs": 8, "tau": 1.0, "n": 6}
    assert r["delta"]["paired_difference"] == {"value": 0.0, "lo": 0.0, "hi": 0.0, "n": 30, "level": 0.95}


def test_a_model_that_prefers_other_tokens_changes_a_conclusion():
    """The opposite field flips most argmaxes: agreement far below 95%, so the verdict is a change."""
    m = toy.potts_chain(6, 4, coupling=0.0, field=3.0, seed=0)
    test = toy.PairwiseConditional(-m.h, m.A)  # the fields reversed: each site's favourite becomes its least liked
    gen = torch.Generator().manual_seed(1)
    x, x0, y0, xr = (torch.randint(4, (b, 6), generator=gen) for b in (20, 8, 8, 20))
    s = fidelity.compare(m, test, x, x0, y0, xr, taus=[1.0], tau=1.0, max_steps=100, seed=0)
    assert s.argmax_agree.value < 0.95 and not s.conclusions_agree() and s.record()["changes_a_conclusion"] is True
    assert float(s.kl[1.0].value) > 0.1


def _summary(gap, ref, test, agree):
    none = CensoredTimes(torch.zeros(4, dtype=torch.long), torch.zeros(4, dtype=torch.bool), cap=10)
    pc = fidelity.PairedCoupling(none, none, gap)
    e = Estimate(0.0, 0.0, 0.0, 4)
    return fidelity.FidelitySummary({1.0: e}, Estimate(agree, agree, agree, 100), pc, (1.0, 1.0), 0.3, 1.0, 6,
                                    (torch.zeros(4), torch.zeros(4)), Estimate(*ref, 4), Estimate(*test, 4), e)


def test_each_criterion_alone_changes_the_conclusion():
    assert _summary(0.3, (0.5, 0.4, 0.6), (0.7, 0.6, 0.8), 0.95).conclusions_agree()  # at every edge: holds
    assert not _summary(0.31, (0.5, 0.4, 0.6), (0.5, 0.4, 0.6), 1.0).conclusions_agree()  # survival gap over the band
    assert not _summary(0.0, (0.5, 0.4, 0.6), (0.7, 0.61, 0.8), 1.0).conclusions_agree()  # delta intervals apart
    assert not _summary(0.0, (0.5, 0.4, 0.6), (0.5, 0.4, 0.6), 0.94).conclusions_agree()  # argmax agrees too rarely


def test_bf16_fidelity_refuses_more_passages_than_qualify():
    """Asking for more rectangles than real passages qualify fails at once, naming the shortfall
    (before any model is touched), instead of silently measuring fewer."""
    with pytest.raises(ValueError, match="rectangles=100000: only"):
        fidelity.bf16_fidelity(None, None, n=16, passages=16, taus=[1.0], pairs=4, tau=2.0, budget_factor=5.0,
                               rectangles=100000, seed=0)
