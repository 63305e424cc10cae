"""Rectangle delta: zero on compatible toys, the known value on the incompatible one, exact on MLMs."""

import pytest
import torch

from tokendyn import rectangle as R
from tokendyn import toy
from tokendyn.conditional import MLMConditional, content_ids
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


# --- Issue 17: alternatives and contexts are checked before any forward pass -------------------

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
