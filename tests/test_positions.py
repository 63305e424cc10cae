"""States longer than a model's position table are refused before any forward pass.

The tiny models have 128 positions (RoBERTa: 130 less its padding offset 2), so with the
``[CLS]``/``[SEP]`` wrapping a state holds at most 126 content tokens.
"""

from __future__ import annotations

import pytest
import torch

from tokendyn.mcmc import fill, glauber
from tokendyn.analysis import influence, rectangle, traps
from tokendyn.mcmc.conditional import MLMConditional, content_ids
from tokendyn.latent.discrete import ar_decode, mask_diffusion_decode
from tokendyn.evaluation.causal import sequence_log_likelihoods
from tokendyn.evaluation.masked import masked_logits
from tokendyn.evaluation.pseudo_ppl import text_site_logits
from tokendyn.models.tiny import build_tiny
from tokendyn.core.positions import max_positions

TOO_LONG = "n=127 content tokens need 129 positions with {w} wrapping; {name} has 128 "


@pytest.fixture(scope="module")
def tiny():
    return {arch: build_tiny(arch) for arch in ("bert", "roberta", "modernbert")}


def _no_forward(monkeypatch, loaded) -> None:
    """Any forward pass through ``loaded.model`` or its encoder fails the test."""
    def boom(*a, **k):
        raise AssertionError("a forward pass ran")
    monkeypatch.setattr(loaded.model.base_model.embeddings, "forward", boom)


@pytest.mark.parametrize("arch,wrap,limit", [("bert", "[CLS]/[SEP]", "(max_position_embeddings)"),
                                             ("roberta", "<s>/</s>",
                                              "(max_position_embeddings=130 less its padding offset 2)"),
                                             ("modernbert", "[CLS]/[SEP]", "(max_position_embeddings)")])
def test_site_logits_refuses_a_state_past_the_position_table(tiny, monkeypatch, arch, wrap, limit):
    cond = MLMConditional(tiny[arch])
    assert cond.max_sites == 126
    cond.site_logits(torch.full((1, 126), 10), torch.tensor([0]))  # the longest that fits runs
    _no_forward(monkeypatch, tiny[arch])
    msg = TOO_LONG.format(w=wrap, name=f"tiny-{arch}") + limit + ": allowed n in [1, 126]"
    with pytest.raises(ValueError, match="^tokens: " + _re(msg) + "$"):
        cond.site_logits(torch.full((1, 127), 10), torch.tensor([0]))


def _re(s: str) -> str:
    import re
    return re.escape(s)


def test_no_wrapping_allows_the_whole_table(tiny):
    cond = MLMConditional(tiny["bert"], wrap="none")
    assert cond.max_sites == 128
    with pytest.raises(ValueError, match=_re("n=129 content tokens need 129 positions with no wrapping; "
                                             "tiny-bert has 128 (max_position_embeddings): allowed n in [1, 128]")):
        cond.site_logits(torch.full((1, 129), 10), torch.tensor([0]))


def test_every_entry_point_refuses_before_a_forward_pass(tiny, monkeypatch):
    loaded = tiny["bert"]
    cond = MLMConditional(loaded)
    _no_forward(monkeypatch, loaded)
    x = torch.full((2, 127), 10)
    i, j, a = torch.tensor([0, 1]), torch.tensor([2, 3]), torch.tensor([11, 11])
    calls = {
        "glauber.sample": lambda: glauber.sample(cond, x, steps=1, tau=1.0, seed=0),
        "glauber.coupling_times": lambda: glauber.coupling_times(cond, x, x.clone(), tau=1.0, max_steps=1, seed=0),
        "glauber.greedy_fixed_point": lambda: glauber.greedy_fixed_point(cond, x),
        "glauber.step": lambda: glauber.step(cond, glauber.init(x), torch.Generator(), tau=1.0),
        "rectangle.delta": lambda: rectangle.delta(cond, x, i, j, a, a + 1),
        "rectangle.draw_rectangles": lambda: rectangle.draw_rectangles(cond, x),
        "influence.estimate_influence": lambda: influence.estimate_influence(cond, x, [1.0]),
        "fill.all_site_logits": lambda: fill.all_site_logits(cond, x),
        "fill.site_conditionals": lambda: fill.site_conditionals(cond, x[0]),
        "traps.greedy_traps": lambda: traps.greedy_traps(cond, x),
        "traps.kinetic_sample": lambda: traps.kinetic_sample(cond, x, tau=1.0, moves=1, seed=0),
        "traps.long_chains": lambda: traps.long_chains(cond, x, steps=1, tau=1.0, seed=0),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=_re("n=127 content tokens need 129 positions with [CLS]/[SEP] "
                                                 "wrapping; tiny-bert has 128")):
            call()
    with pytest.raises(ValueError, match=_re("n=127 content tokens need 129 positions")):
        content_ids(loaded, ["the city " * 100], 127)
    with pytest.raises(ValueError, match=_re("n=127 content tokens need 129 positions")):
        content_ids(cond, ["the city " * 100], 127)
    with pytest.raises(ValueError, match=_re("n=127 content tokens need 129 positions")):
        mask_diffusion_decode(loaded, 127, 1, 1, seed=0)
    with pytest.raises(ValueError, match=_re("texts[1]: n=")):
        masked_logits(cond, ["the [MASK] city", "the city " * 70 + "[MASK]"])
    with pytest.raises(ValueError, match=_re("max_len=130 is out of range: allowed [3, 128]")):
        text_site_logits(cond, "the city", max_len=130)


def _tiny_causal(n_positions: int = 16):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=50, n_positions=n_positions, n_embd=16, n_layer=1, n_head=2,
                     bos_token_id=0, eos_token_id=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return GPT2LMHeadModel(cfg).eval()


def test_ar_decode_refuses_prompt_plus_generation_past_the_context():
    model = _tiny_causal(16)
    assert max_positions(model) == (16, "max_position_embeddings")
    prompt = torch.zeros(2, 10, dtype=torch.long)
    assert ar_decode(model, prompt, 6, seed=0).tokens.shape == (2, 6)  # 16 positions: fits
    with pytest.raises(ValueError, match=_re("prompt p=10 + n=7 new tokens need 17 positions; "
                                             "GPT2LMHeadModel has a context of 16 (max_position_embeddings): "
                                             "allowed p + n <= 16")):
        ar_decode(model, prompt, 7, seed=0)


def test_causal_likelihoods_refuse_texts_past_the_context():
    model = _tiny_causal(16)
    x = torch.zeros(2, 17, dtype=torch.long)
    with pytest.raises(ValueError, match=_re("texts of up to 17 tokens (start token included) need 17 "
                                             "positions; GPT2LMHeadModel has a context of 16")):
        sequence_log_likelihoods(model, x, torch.ones_like(x))


@pytest.mark.slow
def test_shipped_minilm_refuses_700_tokens_with_the_issue_message():
    from tokendyn.models import load_mlm

    cond = MLMConditional(load_mlm("minilm-mlm", device="cpu"))
    assert cond.max_sites == 510
    with pytest.raises(ValueError, match="^" + _re(
            "x0: n=700 content tokens need 702 positions with [CLS]/[SEP] wrapping; minilm-mlm has 512 "
            "(max_position_embeddings): allowed n in [1, 510]") + "$"):
        glauber.sample(cond, torch.full((1, 700), 2000), steps=1, tau=1.0, seed=0)
