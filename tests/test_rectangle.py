"""Rectangle delta: zero on compatible toys, the known value on the incompatible one, exact on MLMs."""

import pytest
import torch

from tokendyn.analysis import rectangle as R
from tokendyn.mcmc import toy
from tokendyn.mcmc.conditional import MLMConditional, content_ids
from tokendyn.models import LoadedAR
from tokendyn.models.tiny import build_tiny

TEXT = "the capital of the city was used for the theme song of the band in the north"


def _x(q, b, n, seed=0):
    return torch.randint(q, (b, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("protocol", ["model", "uniform"])
def test_compatible_toy_gives_zero(protocol):
    m = toy.potts_chain(6, 5, coupling=1.3, seed=1)
    x = _x(5, 300, 6)
    r = R.draw_rectangles(m, x, protocol=protocol, seed=2)
    d = R.delta(m, x, r.i, r.j, r.a2, r.b2)
    assert d.max() < 1e-12


def test_incompatible_toy_gives_known_value():
    m = toy.incompatible_ising(6, skew=0.2)
    x = _x(2, 300, 6)
    r = R.draw_rectangles(m, x, protocol="uniform", seed=0)
    d = R.delta(m, x, r.i, r.j, r.a2, r.b2)
    bond = (r.i - r.j).abs() == 1
    torch.testing.assert_close(d[bond], torch.full((int(bond.sum()),), 1.6, dtype=torch.float64))
    assert d[~bond].abs().max() < 1e-12
    rows = torch.arange(300)
    torch.testing.assert_close(d, m.exact_delta(r.i, r.j, x[rows, r.i], x[rows, r.j], r.a2, r.b2))


def test_alternatives_differ_from_current_and_gap():
    m = toy.potts_chain(8, 4, seed=0)
    x = _x(4, 200, 8)
    rows = torch.arange(200)
    for protocol in ("model", "uniform"):
        r = R.draw_rectangles(m, x, protocol=protocol, seed=3, gap=3)
        assert ((r.i - r.j).abs() == 3).all()
        assert (r.a2 != x[rows, r.i]).all() and (r.b2 != x[rows, r.j]).all()
    a = R.draw_rectangles(m, x, seed=9)
    b = R.draw_rectangles(m, x, seed=9)
    assert all(torch.equal(u, v) for u, v in zip((a.i, a.j, a.a2, a.b2), (b.i, b.j, b.a2, b.b2)))


def test_delta_scales_as_one_over_tau():
    m = toy.incompatible_ising(4, skew=0.5)
    x = _x(2, 50, 4)
    r = R.draw_rectangles(m, x, protocol="uniform", seed=0)
    d1 = R.delta(m, x, r.i, r.j, r.a2, r.b2)
    torch.testing.assert_close(R.delta(m, x, r.i, r.j, r.a2, r.b2, tau=0.25), 4 * d1)


@pytest.mark.slow
def test_mlm_delta_matches_brute_force_forward_passes():
    loaded = build_tiny("bert", seed=1)
    m = MLMConditional(loaded)
    x = content_ids(loaded, [TEXT], 8).repeat(3, 1)
    i, j = torch.tensor([0, 2, 7]), torch.tensor([5, 3, 1])
    a2, b2 = torch.tensor([10, 20, 30]), torch.tensor([40, 50, 60])
    d = R.delta(m, x, i, j, a2, b2, signed=True)
    tok = loaded.tokenizer

    def logit(state, site, v):
        ids = [tok.cls_token_id] + state + [tok.sep_token_id]
        ids[site + 1] = tok.mask_token_id
        with torch.no_grad():
            return loaded.model(input_ids=torch.tensor([ids])).logits[0, site + 1, v].double()

    for r in range(3):
        s = x[r].tolist()
        a, b, ii, jj, A, B = s[i[r]], s[j[r]], int(i[r]), int(j[r]), int(a2[r]), int(b2[r])
        sb2 = list(s)
        sb2[jj] = B
        sa2 = list(s)
        sa2[ii] = A
        ref = ((logit(s, ii, A) - logit(s, ii, a)) + (logit(sa2, jj, B) - logit(sa2, jj, b))
               - (logit(s, jj, B) - logit(s, jj, b)) - (logit(sb2, ii, A) - logit(sb2, ii, a)))
        assert abs(d[r].item() - ref.item()) < 1e-4
    assert d.abs().min() > 1e-4  # a random MLM is incompatible


def test_arnold_press_generalises_the_rectangle():
    m = toy.incompatible_ising(5, skew=0.3)
    x = _x(2, 40, 5)
    r = R.draw_rectangles(m, x, protocol="uniform", seed=0)
    a, b = R.draw_grid(m, x, r.i, r.j, 2, protocol="uniform", seed=0)
    ap = R.arnold_press(m, x, r.i, r.j, a, b)
    d = R.delta(m, x, r.i, r.j, a[:, 1], b[:, 1])
    torch.testing.assert_close(ap.max_delta, d)
    torch.testing.assert_close(ap.rms, d / 4)  # K = 2: every residual entry is +-delta/4
    p = toy.potts_chain(5, 6, seed=0)
    xp = _x(6, 30, 5)
    rp = R.draw_rectangles(p, xp, seed=0)
    a, b = R.draw_grid(p, xp, rp.i, rp.j, 4, protocol="model", seed=1)
    assert (a[:, 0] == xp[torch.arange(30), rp.i]).all() and len(set(a[0].tolist())) == 4
    ap = R.arnold_press(p, xp, rp.i, rp.j, a, b)
    assert ap.residual.abs().max() < 1e-12 and ap.max_delta.max() < 1e-12
    mlm = MLMConditional(build_tiny("roberta", seed=2))
    xm = content_ids(mlm, [TEXT], 6).repeat(2, 1)
    i, j = torch.tensor([0, 4]), torch.tensor([3, 1])
    a, b = R.draw_grid(mlm, xm, i, j, 3, protocol="uniform", seed=0)
    ap = R.arnold_press(mlm, xm, i, j, a, b)
    d = R.delta(mlm, xm, i, j, a[:, 2], b[:, 1])
    assert (ap.max_delta >= d - 1e-6).all() and (ap.rms > 0).all()


@pytest.mark.parametrize("k", [2, 3, 5])
def test_arnold_press_rms_delta_is_the_residual_rms_in_delta_units(k):
    m = toy.incompatible_ising(6, skew=0.3)
    x = _x(2, 20, 6)
    mlm = MLMConditional(build_tiny("bert", seed=3))
    xm = content_ids(mlm, [TEXT], 7).repeat(4, 1)
    i, j = torch.tensor([0, 2, 6, 1]), torch.tensor([1, 5, 3, 0])
    a, b = R.draw_grid(mlm, xm, i, j, k, protocol="uniform", seed=1)
    ap = R.arnold_press(mlm, xm, i, j, a, b)
    # every ordered minor with k != k', l != l', by brute force
    C = torch.tensor([[(ap.log_ratio[r, p, s] - ap.log_ratio[r, p, t] - ap.log_ratio[r, q, s] + ap.log_ratio[r, q, t]).item()
                       for p in range(k) for q in range(k) if p != q for s in range(k) for t in range(k) if s != t]
                      for r in range(4)], dtype=torch.float64)
    torch.testing.assert_close(ap.rms_delta, C.pow(2).mean(1).sqrt())
    torch.testing.assert_close(ap.rms_delta, 2 * k / (k - 1) * ap.rms)
    assert (ap.rms_delta <= ap.max_delta + 1e-12).all()
    if k == 2:   # one rectangle: the RMS over its (ordered) minors is its delta
        r = R.draw_rectangles(m, x, protocol="uniform", seed=0)
        a2, b2 = R.draw_grid(m, x, r.i, r.j, 2, protocol="uniform", seed=0)
        torch.testing.assert_close(R.arnold_press(m, x, r.i, r.j, a2, b2).rms_delta,
                                   R.delta(m, x, r.i, r.j, a2[:, 1], b2[:, 1]))


def _tiny_causal():
    from transformers import LlamaConfig, LlamaForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32,
                                             num_hidden_layers=1, num_attention_heads=2,
                                             num_key_value_heads=2, bos_token_id=1, eos_token_id=2))

    class Tok:
        bos_token_id, eos_token_id = 1, 2

    return LoadedAR(name="tiny-llama", model=model.eval(), tokenizer=Tok())


def test_ar_joint_and_delta_zero():
    ar = _tiny_causal()
    ids = torch.tensor([[5, 9, 11, 3]])
    lp = R.ar_log_joint(ar, ids)
    with torch.no_grad():
        logits = ar.model(input_ids=torch.tensor([[1, 5, 9, 11, 3]])).logits[0].double()
    ref = torch.log_softmax(logits, -1)[torch.arange(4), ids[0]].sum()
    assert abs(lp.item() - ref.item()) < 1e-9
    x = torch.randint(3, 50, (6, 7), generator=torch.Generator().manual_seed(0))
    d = R.ar_delta(ar, x, torch.tensor([0, 1, 2, 3, 4, 5]), torch.tensor([6, 5, 4, 0, 1, 2]),
                   torch.full((6,), 7), torch.full((6,), 8))
    assert d.max() < 1e-9


def test_bad_arguments():
    m = toy.potts_chain(4, 3)
    x = _x(3, 2, 4)
    z = torch.zeros(2, dtype=torch.long)
    with pytest.raises(ValueError, match="differ"):
        R.delta(m, x, z, z, z, z)
    with pytest.raises(ValueError, match="protocol"):
        R.draw_rectangles(m, x, protocol="greedy")
    with pytest.raises(ValueError, match="gap"):
        R.draw_rectangles(m, x, gap=4)
    mlm = MLMConditional(build_tiny("bert"))
    xm = content_ids(mlm, [TEXT], 5).repeat(2, 1)
    cls = torch.full((2,), mlm.cls_id)
    with pytest.raises(ValueError, match="support"):
        R.delta(mlm, xm, torch.tensor([0, 1]), torch.tensor([2, 3]), cls, cls)


def test_uniform_rectangles_for_models_without_conditionals():
    x = torch.randint(3, 40, (50, 6), generator=torch.Generator().manual_seed(0))
    r = R.draw_rectangles_uniform(40, [0, 1, 2], x, seed=1)
    rows = torch.arange(50)
    assert (r.i != r.j).all() and (r.a2 != x[rows, r.i]).all() and (r.b2 != x[rows, r.j]).all()
    assert (r.a2 >= 3).all() and (r.b2 >= 3).all() and r.a2.max() < 40
    again = R.draw_rectangles_uniform(40, [0, 1, 2], x, seed=1)
    assert torch.equal(r.a2, again.a2) and torch.equal(r.i, again.i)


# --- alternatives and contexts are checked before any forward pass -------------------

class _Counting:
    """Counts forward passes of the wrapped model (and keeps its support mask)."""

    def __init__(self, cond):
        self.cond, self.vocab_size, self.unsupported = cond, cond.vocab_size, cond.unsupported
        self.tokenizer, self.calls = cond.tokenizer, 0

    def site_logits(self, tokens, sites):
        self.calls += 1
        return self.cond.site_logits(tokens, sites)


def _tiny_counting():
    return _Counting(MLMConditional(build_tiny("bert", seed=0, pad_vocab=3)))


def test_delta_refuses_an_alternative_equal_to_the_current_token():
    m = toy.incompatible_ising(4, skew=0.5)
    x = _x(2, 6, 4)
    i, j = torch.zeros(6, dtype=torch.long), torch.ones(6, dtype=torch.long)
    rows = torch.arange(6)
    a_same, b_new = x[rows, i], 1 - x[rows, j]
    with pytest.raises(ValueError, match=r"a_new must differ from the current token x\[r, i\[r\]\]"):
        R.delta(m, x, i, j, a_same, b_new)  # returned 0 before the fix
    with pytest.raises(ValueError, match="b_new must differ"):
        R.delta(m, x, i, j, 1 - a_same, x[rows, j])
    assert (R.delta(m, x, i, j, 1 - a_same, b_new) > 0).all()


def test_alternatives_outside_the_support_fail_before_the_forward_passes():
    m = _tiny_counting()
    tok = m.tokenizer
    x = content_ids(m.cond, [TEXT, TEXT], 8)
    r = R.draw_rectangles(m, x, seed=0)
    m.calls = 0
    for bad in (tok.mask_token_id, tok.cls_token_id, m.vocab_size - 1):
        a2 = r.a2.clone()
        a2[1] = bad
        with pytest.raises(ValueError, match="a_new holds 1 token id"):
            R.delta(m, x, r.i, r.j, a2, r.b2)
        with pytest.raises(ValueError, match="b_new"):
            R.delta(m, x, r.i, r.j, r.a2, torch.full_like(r.b2, m.vocab_size))
    assert m.calls == 0  # before the fix the four forward passes ran first
    with pytest.raises(ValueError, match="a_values holds"):
        R.arnold_press(m, x, r.i, r.j, torch.full((2, 3), tok.mask_token_id), torch.full((2, 3), 20))
    with pytest.raises(ValueError, match="distinct"):
        R.arnold_press(m, x, r.i, r.j, torch.full((2, 3), 20), torch.full((2, 3), 21))
    assert m.calls == 0


def test_a_context_holding_special_tokens_is_refused():
    m = _tiny_counting()
    x = content_ids(m.cond, [TEXT, TEXT], 8)
    x[0, 5] = m.tokenizer.mask_token_id
    r = R.Rectangles(i=torch.tensor([0, 0]), j=torch.tensor([1, 1]), a2=torch.tensor([20, 20]),
                     b2=torch.tensor([21, 21]))
    for call in (lambda: R.delta(m, x, r.i, r.j, r.a2, r.b2), lambda: R.draw_rectangles(m, x),
                 lambda: R.draw_grid(m, x, r.i, r.j, 3)):
        with pytest.raises(ValueError, match=r"x holds 1 token id\(s\) outside the model's support .*: 4 \(\[MASK\]\)"):
            call()
    assert m.calls == 0


# --- Part I made conclusive: each site's view of the interaction, and the normalised delta -------

def test_interactions_of_a_compatible_toy_agree_and_delta_is_their_difference():
    m = toy.potts_chain(6, 5, coupling=1.3, seed=1)
    x = _x(5, 300, 6)
    r = R.draw_rectangles(m, x, protocol="uniform", seed=2, gap=1)
    I_i, I_j = R.interactions(m, x, r.i, r.j, r.a2, r.b2)
    assert I_i.dtype == torch.float64 and I_i.shape == (300,)
    assert (I_i - I_j).abs().max() < 1e-12            # both are the joint's interaction
    assert I_i.abs().max() > 0.5                       # ... which is not zero on a bond
    torch.testing.assert_close(R.delta(m, x, r.i, r.j, r.a2, r.b2), (I_i - I_j).abs(), rtol=0, atol=0)
    nd = R.normalized_delta(I_i, I_j, atol=1e-9)
    live = ~nd.isnan()
    assert live.sum() > 250 and nd[live].max() < 1e-10


def test_interactions_of_the_incompatible_toy_are_known():
    c, skew = 1.0, 0.2
    m = toy.incompatible_ising(6, coupling=c, skew=skew)
    x = _x(2, 300, 6)
    r = R.draw_rectangles(m, x, protocol="uniform", seed=0)
    I_i, I_j = R.interactions(m, x, r.i, r.j, r.a2, r.b2)
    bond = (r.i - r.j).abs() == 1
    # on a bond I = (coupling +- skew) (s_a' - s_a)(s_b' - s_b) = +-4 (coupling +- skew), one sign
    left = bond & (r.i < r.j)    # i feels its right neighbour with coupling + skew
    torch.testing.assert_close(I_i[left].abs(), torch.full((int(left.sum()),), 4 * (c + skew), dtype=torch.float64))
    torch.testing.assert_close(I_j[left].abs(), torch.full((int(left.sum()),), 4 * (c - skew), dtype=torch.float64))
    assert (torch.sign(I_i[bond]) == torch.sign(I_j[bond])).all()
    d = R.delta(m, x, r.i, r.j, r.a2, r.b2)
    torch.testing.assert_close(d, (I_i - I_j).abs(), rtol=0, atol=0)
    torch.testing.assert_close(d[bond], torch.full((int(bond.sum()),), 8 * skew, dtype=torch.float64))
    nd = R.normalized_delta(I_i, I_j)
    # |2 skew| / (|c + skew| + |c - skew|) = skew / c
    torch.testing.assert_close(nd[bond], torch.full((int(bond.sum()),), skew / c, dtype=torch.float64))
    assert nd[~bond].isnan().all()   # sites that do not interact: 0 / 0, left undefined
    assert (I_i[~bond] == 0).all() and (I_j[~bond] == 0).all()


def test_interactions_of_a_hand_made_two_site_model():
    # logits l_0(v | x_1 = u) = h[0, v] + A[0, 1, v, u]; l_1(u | x_0 = v) = h[1, u] + A[1, 0, u, v]
    h = torch.tensor([[0.5, -1.0, 2.0], [0.0, 0.25, -0.75]], dtype=torch.float64)
    A = torch.zeros(2, 2, 3, 3, dtype=torch.float64)
    A[0, 1] = torch.tensor([[1.0, 0.0, 2.0], [0.5, -1.5, 0.0], [3.0, 1.0, -2.0]])
    A[1, 0] = torch.tensor([[0.0, 0.5, 1.0], [-1.0, 2.0, 0.25], [0.75, 0.0, 1.5]])
    m = toy.PairwiseConditional(h, A)
    x = torch.tensor([[0, 0], [2, 1]])                  # (a, b)
    i, j = torch.tensor([0, 1]), torch.tensor([1, 0])
    a2, b2 = torch.tensor([1, 0]), torch.tensor([2, 1])   # row 1: i = 1 (a = 1 -> 0), j = 0 (b = 2 -> 1)
    I_i, I_j = R.interactions(m, x, i, j, a2, b2)
    # row 0: I_0 = A01[1,2] - A01[0,2] - A01[1,0] + A01[0,0] = 0 - 2 - 0.5 + 1 = -1.5
    #        I_1 = A10[2,1] - A10[0,1] - A10[2,0] + A10[0,0] = 0 - 0.5 - 0.75 + 0 = -1.25
    # row 1 (site 1 flips 1 -> 0 while site 0 flips 2 -> 1):
    #        I_1 = A10[0,1] - A10[1,1] - A10[0,2] + A10[1,2] = 0.5 - 2 - 1 + 0.25 = -2.25
    #        I_0 = A01[1,0] - A01[2,0] - A01[1,1] + A01[2,1] = 0.5 - 3 + 1.5 + 1 = 0
    assert I_i.tolist() == [-1.5, -2.25] and I_j.tolist() == [-1.25, 0.0]
    assert R.delta(m, x, i, j, a2, b2).tolist() == [0.25, 2.25]
    assert R.delta(m, x, i, j, a2, b2, signed=True).tolist() == [0.25, 2.25]   # I_j - I_i
    assert R.normalized_delta(I_i, I_j).tolist() == [0.25 / 2.75, 1.0]
    I2 = R.interactions(m, x, i, j, a2, b2, tau=0.5)
    assert I2[0].tolist() == [-3.0, -4.5] and I2[1].tolist() == [-2.5, 0.0]   # logits / tau
    assert R.normalized_delta(*I2).tolist() == R.normalized_delta(I_i, I_j).tolist()


def test_normalized_delta_range_zero_over_zero_and_checks():
    a = torch.tensor([1.0, 1.0, 0.0, 0.0, 2.0, 1e-13, -3.0])
    b = torch.tensor([1.0, -1.0, 0.0, 0.5, 1.0, 0.0, -1.0])
    nd = R.normalized_delta(a, b)
    assert nd[[0, 1, 3, 5]].tolist() == [0.0, 1.0, 1.0, 1.0]
    assert nd[2].isnan() and abs(nd[4].item() - 1 / 3) < 1e-15 and abs(nd[6].item() - 0.5) < 1e-15
    assert R.normalized_delta(a, b, atol=1e-12)[5].isnan()
    g = torch.Generator().manual_seed(0)
    u, v = torch.randn(200_000, generator=g, dtype=torch.float64), torch.randn(200_000, generator=g, dtype=torch.float64)
    w = R.normalized_delta(u, v)
    assert ((w >= 0) & (w <= 1)).all()
    assert abs(w.mean().item() - R.NORMALIZED_INDEPENDENT) < 3e-3
    with pytest.raises(ValueError, match="same shape"):
        R.normalized_delta(a, b[:3])
    with pytest.raises(TypeError, match="I_j"):
        R.normalized_delta(a, [1.0])
    with pytest.raises(ValueError, match="atol"):
        R.normalized_delta(a, b, atol=-1.0)


def test_interactions_check_like_delta_before_any_forward_pass():
    m = _tiny_counting()
    x = content_ids(m.cond, [TEXT, TEXT], 8)
    r = R.draw_rectangles(m, x, seed=0)
    m.calls = 0
    rows = torch.arange(2)
    with pytest.raises(ValueError, match="a_new must differ"):
        R.interactions(m, x, r.i, r.j, x[rows, r.i], r.b2)
    with pytest.raises(ValueError, match="b_new holds 1 token id"):
        R.interactions(m, x, r.i, r.j, r.a2, torch.full_like(r.b2, m.tokenizer.mask_token_id))
    with pytest.raises(ValueError, match="differ in every row"):
        R.interactions(m, x, r.i, r.i, r.a2, r.b2)
    with pytest.raises(ValueError, match="tau"):
        R.interactions(m, x, r.i, r.j, r.a2, r.b2, tau=0.0)
    assert m.calls == 0
    I_i, I_j = R.interactions(m, x, r.i, r.j, r.a2, r.b2)
    assert m.calls == 1 and I_i.shape == (2,) and I_i.dtype == torch.float64


def test_tau_slope_with_a_bootstrap_over_rectangles():
    taus = [0.5, 1.0, 2.0, 4.0]
    d1 = torch.rand(50, generator=torch.Generator().manual_seed(0), dtype=torch.float64) + 0.1
    fixed = torch.stack([d1 / t for t in taus])
    e = R.tau_slope(taus, fixed)
    assert abs(e.value + 1) < 1e-12 and abs(e.lo + 1) < 1e-12 and abs(e.hi + 1) < 1e-12 and e.n == 50
    half = torch.stack([d1 * t ** -0.5 for t in taus])
    assert abs(R.tau_slope(taus, half).value + 0.5) < 1e-12
    noisy = fixed * torch.rand(4, 50, generator=torch.Generator().manual_seed(1), dtype=torch.float64).add(0.5)
    e = R.tau_slope(taus, noisy, seed=3)
    assert e.lo < e.value < e.hi and e == R.tau_slope(taus, noisy.numpy(), seed=3)
    with pytest.raises(ValueError, match="shape"):
        R.tau_slope(taus[:3], fixed)
    with pytest.raises(ValueError, match="taus"):
        R.tau_slope([0.0, 1.0, 2.0, 4.0], fixed)
    with pytest.raises(ValueError, match="positive mean"):
        R.tau_slope(taus, fixed * 0)


@pytest.mark.parametrize("protocol", ["model", "uniform"])
def test_draw_interactions_is_draw_then_interactions(protocol):
    m = toy.incompatible_ising(7, skew=0.4, seed=2)
    x = _x(2, 120, 7)
    r, I_i, I_j = R.draw_interactions(m, x, protocol=protocol, tau=0.7, seed=5, gap=1)
    r2 = R.draw_rectangles(m, x, protocol=protocol, tau=0.7, seed=5, gap=1)
    assert all(torch.equal(u, v) for u, v in zip((r.i, r.j, r.a2, r.b2), (r2.i, r2.j, r2.a2, r2.b2)))
    ref = R.interactions(m, x, r.i, r.j, r.a2, r.b2, tau=0.7)
    torch.testing.assert_close((I_i, I_j), ref, rtol=0, atol=1e-12)
    mlm = MLMConditional(build_tiny("bert", seed=4))
    xm = content_ids(mlm, [TEXT], 8).repeat(6, 1)
    r, I_i, I_j = R.draw_interactions(mlm, xm, protocol=protocol, seed=1)
    ref = R.interactions(mlm, xm, r.i, r.j, r.a2, r.b2)
    torch.testing.assert_close((I_i, I_j), ref, rtol=1e-5, atol=1e-5)   # batched float32 evaluations
    torch.testing.assert_close(R.delta(mlm, xm, r.i, r.j, r.a2, r.b2), (I_i - I_j).abs(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="protocol"):
        R.draw_interactions(m, x, protocol="greedy")
