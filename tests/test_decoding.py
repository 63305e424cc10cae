"""Committed and expected-embedding decoding (tokendyn.latent.discrete) on tiny models built in code."""

import pytest
import torch

from tokendyn.latent.discrete import ar_decode, mask_diffusion_decode
from tokendyn.models.tiny import build_tiny


def _tiny_causal(seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).eval()


def test_ar_decode_commits_every_position_and_is_seeded():
    lm = _tiny_causal()
    prompt = torch.randint(0, 50, (3, 4), generator=torch.Generator().manual_seed(0))
    a = ar_decode(lm, prompt, 6, seed=1)
    b = ar_decode(lm, prompt, 6, seed=1)
    assert a.tokens.shape == (3, 6) and torch.equal(a.tokens, b.tokens)
    assert a.cci.value == 1.0 and a.cci.n == 18
    assert a.precision == "model float32, draws float64"


def test_ar_decode_matches_full_recompute():
    # The KV-cached loop must sample from the same distribution as a from-scratch forward pass.
    lm = _tiny_causal()
    prompt = torch.randint(0, 50, (2, 3), generator=torch.Generator().manual_seed(2))
    out = ar_decode(lm, prompt, 5, seed=0, tau=1e-4)  # ~greedy
    seq = prompt
    for _ in range(5):
        nxt = lm(input_ids=seq).logits[:, -1].argmax(-1, keepdim=True)
        seq = torch.cat([seq, nxt], 1)
    assert torch.equal(out.tokens, seq[:, 3:])


def test_expected_feedback_has_cci_zero_and_diverges():
    lm = _tiny_causal()
    prompt = torch.zeros(4, 2, dtype=torch.long)
    soft = ar_decode(lm, prompt, 8, seed=3, feedback="expected")
    hard = ar_decode(lm, prompt, 8, seed=3, feedback="token")
    assert soft.cci.value == 0.0 and hard.cci.value == 1.0
    # Same uniforms: the first draw sees the same distribution, so it agrees.
    assert torch.equal(soft.tokens[:, 0], hard.tokens[:, 0])


def test_banned_ids_are_never_drawn():
    lm = _tiny_causal()
    banned = torch.arange(0, 45)
    out = ar_decode(lm, torch.zeros(2, 2, dtype=torch.long), 10, seed=0, banned=banned)
    assert bool((out.tokens >= 45).all())


def test_mask_diffusion_fills_every_position_once():
    m = build_tiny("bert", seed=0)
    d = mask_diffusion_decode(m, 10, 3, 4, seed=0)
    assert d.tokens.shape == (3, 10) and d.cci.value == 1.0
    special = set(m.tokenizer.all_special_ids)
    assert not any(int(t) in special for t in d.tokens.flatten())
    again = mask_diffusion_decode(m, 10, 3, 4, seed=0)
    assert torch.equal(d.tokens, again.tokens)
    soft = mask_diffusion_decode(m, 10, 3, 4, seed=0, feedback="expected")
    assert soft.cci.value == 0.0
    # Step 1 sees the same all-mask input in both variants: its positions agree.
    first = torch.argsort(torch.rand(3, 10, generator=torch.Generator().manual_seed(0)), 1)[:, :2]
    assert torch.equal(soft.tokens.gather(1, first), d.tokens.gather(1, first))


@pytest.mark.parametrize("kw,name", [(dict(feedback="soft"), "feedback"), (dict(tau=0.0), "tau"),
                                     (dict(seed=-1), "seed")])
def test_bad_arguments_name_the_parameter(kw, name):
    lm = _tiny_causal()
    args = dict(seed=0) | kw
    with pytest.raises(ValueError, match=name):
        ar_decode(lm, torch.zeros(1, 2, dtype=torch.long), 3, **args)
    with pytest.raises(ValueError, match="steps"):
        mask_diffusion_decode(build_tiny("bert"), 4, 1, 5, seed=0)
