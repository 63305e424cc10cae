"""The Glauber step's draw (tokendyn.mcmc.sampling.draw_tempered: tempered weights, then a two-level
inverse CDF) against the exact float64 softmax law."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from tokendyn.mcmc import sampling as S

CRITICAL_P = 1e-6  # a correct draw fails a test one run in a million


def _exact(logits: torch.Tensor, tau: float) -> torch.Tensor:
    return torch.softmax(logits.double() / tau, -1)


def _chi2(counts: torch.Tensor, p: torch.Tensor) -> float:
    """Pearson's statistic over the cells of positive probability (zero cells are tested apart)."""
    keep = p > 0
    n = counts.sum()
    e = n * p[keep]
    return float(((counts[keep].double() - e) ** 2 / e).sum())


def _draws(logits: torch.Tensor, tau: float, n: int, seed: int, block: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(n, generator=g, dtype=torch.float64)
    ids, _ = S.draw(S.tempered(logits.expand(n, -1), tau), u, block=block)
    return torch.bincount(ids, minlength=logits.shape[-1])


@pytest.mark.parametrize("block", [4, S.BLOCK])
def test_law_matches_the_softmax_and_the_test_has_power(block):
    # 19 tokens: with block 4, four full blocks and a ragged tail of 3, two of them outside the support
    g = torch.Generator().manual_seed(0)
    logits = (1.5 * torch.randn(1, 19, generator=g)).float()
    logits[0, [3, 17]] = float("-inf")
    tau, n = 0.7, 400_000
    p = _exact(logits, tau)[0]
    counts = _draws(logits, tau, n, 1, block)
    assert counts[[3, 17]].sum() == 0
    df = int((p > 0).sum()) - 1
    critical = stats.chi2.isf(CRITICAL_P, df)
    assert _chi2(counts, p) < critical
    # Power: the same draws read against a law 1% away in total variation (0.01 of mass moved
    # from the most to the least likely token) fail the same bound, so the test sees a 1% error.
    q = p.clone()
    top, low = int(q.argmax()), int(torch.where(q > 0, q, 2.0).argmin())
    q[top] -= 0.01
    q[low] += 0.01
    assert 0.5 * float((q - p).abs().sum()) == pytest.approx(0.01)
    assert _chi2(counts, q) > critical


@pytest.mark.parametrize("tau", [0.05, 100.0])
def test_extreme_temperatures_are_exact(tau):
    logits = torch.tensor([[0.0, 2.0, float("-inf"), 1.0, -3.0]])
    w = S.tempered(logits, tau)
    p = w.double() / w.double().sum()
    assert w[0, 2] == 0 and w.max() == 1.0
    # Relative 1e-6 wherever float32 is normal; below its smallest normal (1.2e-38 of the largest
    # weight: e^-100 here) weights are subnormal, a probability no run could ever draw.
    torch.testing.assert_close(p, _exact(logits, tau), rtol=1e-6, atol=torch.finfo(torch.float32).tiny)
    n = 200_000
    counts = _draws(logits, tau, n, 2, S.BLOCK)
    assert counts[2] == 0
    pe = _exact(logits, tau)[0]
    assert _chi2(counts, pe) < stats.chi2.isf(CRITICAL_P, int((pe > 0).sum()) - 1)
    if tau == 0.05:  # p(token 3) = e^-20 / (1 + ...): about 4e-4 of 2e5 draws would be 0.4e-3 expected
        assert pe[3] == pytest.approx(math.exp(-20) / (1 + math.exp(-20) + math.exp(-40) + math.exp(-100)),
                                      rel=1e-9)


def test_small_tau_keeps_close_logits_exact():
    # Dividing before subtracting the max would round 30/1e-3 = 3e4 to float32 steps of ~2e-3 and
    # bias two tokens 1e-3 apart by about that much; subtracting first keeps their ratio e^-1.
    logits = torch.tensor([[30.0, 30.0 - 1e-3, -5.0]])
    w = S.tempered(logits, 1e-3)
    assert float(w[0, 1] / w[0, 0]) == pytest.approx(math.exp(-(30.0 - float(torch.tensor(30.0 - 1e-3)))
                                                               / 1e-3), rel=1e-5)


def test_per_chain_temperatures():
    logits = torch.tensor([[0.0, 1.0, 2.0]]).expand(3, 3)
    tau = torch.tensor([0.5, 1.0, 4.0], dtype=torch.float64)
    w = S.tempered(logits, tau)
    for r, t in enumerate(tau.tolist()):
        torch.testing.assert_close((w[r] / w[r].sum()).double(), _exact(logits[r:r + 1], t)[0], rtol=1e-6, atol=0)


def test_rows_without_mass_are_flagged_and_refused():
    logits = torch.tensor([[0.0, 1.0, 2.0], [float("-inf")] * 3, [0.0, float("nan"), 1.0], [0.0, float("inf"), 1.0]])
    u = torch.full((4,), 0.5, dtype=torch.float64)
    _, total = S.draw_tempered(logits, 1.0, u)
    assert S.no_mass(total).tolist() == [False, True, True, True]
    with pytest.raises(ValueError, match=r"row\(s\) \[1, 2, 3\]"):
        S.sample_logits(logits, 1.0, u)
    with pytest.raises(ValueError, match="tau"):
        S.sample_logits(logits[:1], 0.0, u[:1])
    with pytest.raises(ValueError, match="u must lie in"):
        S.sample_logits(logits[:1], 1.0, torch.ones(1, dtype=torch.float64))
    with pytest.raises(ValueError, match="logits must be a float tensor"):
        S.sample_logits(torch.zeros(2, 3, dtype=torch.long), 1.0, u[:2])


def test_never_a_zero_weight_id_at_block_edges():
    # Positive weights only at block edges, zero blocks between; uniforms at 0, near 1 and at the
    # exact cumulative boundaries (where rounding could tip the target past a block).
    block, v = 4, 23
    w = torch.zeros(1, v, dtype=torch.float64)
    w[0, [3, 4, 15, 21]] = torch.tensor([1.0, 2.0, 3.0, 1e-300], dtype=torch.float64)
    u = torch.tensor([0.0, 1 / 6, 0.5, 1 - 2**-53, 0.9999999999, 3 / 6], dtype=torch.float64)
    ids, _ = S.draw(w.expand(len(u), v), u, block=block)
    assert (w[0, ids] > 0).all(), ids.tolist()
    assert ids.tolist()[:3] == [3, 4, 15]


def test_same_ids_as_a_full_row_float64_inverse_cdf():
    # 4,000 rows of a 30,522-token vocabulary (60 blocks and a tail): the ids of the full-row
    # float64 softmax and cumulative sum the draw replaced. The draw holds the weights and their
    # block sums in float32, so it knows a boundary only to about one float32 ulp of the row's mass
    # (2^-23 of a row normalised to 1): a target that lands that close to a boundary may go either
    # way (one row at tau = 5 on an AVX-512 EPYC, 2.5e-9 from it); an id off anywhere else is wrong.
    band = 2.0 ** -23
    g = torch.Generator().manual_seed(3)
    rows, v = 4000, 30522
    for tau in (0.3, 1.0, 5.0):
        ids, ref, gap = [], [], []
        for s in range(0, rows, 500):
            logits = 4 * torch.randn(500, v, generator=g)
            logits[:, :5] = float("-inf")
            u = torch.rand(500, generator=g, dtype=torch.float64)
            ids.append(S.draw_tempered(logits, tau, u)[0])
            c = _exact(logits, tau).cumsum(-1)
            t = u.unsqueeze(-1) * c[:, -1:]
            ref.append((c <= t).sum(-1).clamp_max(v - 1))
            gap.append((c - t).abs().min(-1).values)
        ids, ref, gap = torch.cat(ids), torch.cat(ref), torch.cat(gap)
        differ = (ids != ref).nonzero().flatten()
        far = differ[gap[differ] > band]
        assert len(far) == 0, (f"tau={tau}: {len(far)} rows differ with their target farther than {band:.1e} from "
                               f"every boundary: {gap[far][:5].tolist()}")
