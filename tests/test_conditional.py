"""The MLM adapter: wrapping, support, head-at-site equals the plain transformers forward."""

import pytest
import torch

from tokendyn.mcmc.conditional import ConditionalModel, MLMConditional, content_ids, decode, special_ids
from tokendyn.models.tiny import ARCHS, build_tiny
from tokendyn.mcmc.toy import potts_chain

TEXT = "the capital of the city was used for the theme song of the band in the north"


@pytest.fixture(scope="module", params=ARCHS)
def loaded(request):
    return build_tiny(request.param, pad_vocab=3)


def _assert_same_logits(got, ref, atol):
    """The same support (finite entries) and logits within ``atol`` there."""
    assert torch.equal(torch.isfinite(got), torch.isfinite(ref))
    fin = torch.isfinite(ref)
    torch.testing.assert_close(got[fin], ref[fin], atol=atol, rtol=0)


def _plain(loaded, adapter, x, sites):
    ids = adapter.wrap_ids(x).clone()
    rows = torch.arange(len(x))
    ids[rows, sites + adapter.offset] = loaded.tokenizer.mask_token_id
    with torch.no_grad():
        return loaded.model(input_ids=ids).logits[rows, sites + adapter.offset]


@pytest.mark.parametrize("wrap", ["special", "none"])
def test_matches_plain_forward(loaded, wrap):
    m = MLMConditional(loaded, wrap=wrap)
    x = content_ids(loaded, [TEXT, TEXT.upper().lower()[::-1][::-1]], 10).repeat(3, 1)
    sites = torch.tensor([0, 9, 4, 5, 1, 8])
    got = m.site_logits(x, sites)
    ref = _plain(loaded, m, x, sites)
    fin = torch.isfinite(got)
    assert got.dtype == torch.float32 and got.shape == (6, m.vocab_size)
    torch.testing.assert_close(got[fin], ref[fin], atol=1e-4, rtol=0)


def test_fallback_forward_agrees_with_head_at_site(loaded):
    m = MLMConditional(loaded)
    x = content_ids(loaded, [TEXT], 8).repeat(4, 1)
    sites = torch.tensor([0, 2, 5, 7])
    fast = m.site_logits(x, sites)
    m._head = None  # force the generic full-forward path
    torch.testing.assert_close(m.site_logits(x, sites), fast, atol=1e-5, rtol=0)


def test_wrapping_ids_are_the_tokenizers_own(loaded):
    m = MLMConditional(loaded)
    tok = loaded.tokenizer
    x = content_ids(loaded, [TEXT], 5)
    w = m.wrap_ids(x)[0].tolist()
    assert w[0] == tok.cls_token_id and w[-1] == tok.sep_token_id and w[1:-1] == x[0].tolist()
    assert tok.mask_token_id not in (w[0], w[-1])
    # the same wrapping the tokenizer itself applies to a text
    own = tok("the city")["input_ids"]
    assert (w[0], w[-1]) == (own[0], own[-1])
    assert MLMConditional(loaded, wrap="none").wrap_ids(x).tolist() == x.tolist()


def test_support_excludes_specials_and_padded_rows(loaded):
    m = MLMConditional(loaded)
    x = content_ids(loaded, [TEXT], 6)
    lg = m.site_logits(x, torch.tensor([2]))[0]
    tok = loaded.tokenizer
    for sid in tok.all_special_ids:
        assert lg[sid] == float("-inf")
    assert torch.isinf(lg[len(tok):]).all() and len(lg) == len(tok) + 3
    assert torch.isfinite(lg).sum() == m.support_size == len(tok) - len(set(tok.all_special_ids))


def test_protocol_and_toys_satisfy_it(loaded):
    assert isinstance(MLMConditional(loaded), ConditionalModel)
    assert isinstance(potts_chain(3, 2), ConditionalModel)


def test_special_ids_reject_mask_as_wrapper():
    tok = build_tiny("bert").tokenizer
    cls, sep, mask = special_ids(tok)
    assert (cls, sep, mask) == (tok.convert_tokens_to_ids("[CLS]"), tok.convert_tokens_to_ids("[SEP]"),
                                tok.convert_tokens_to_ids("[MASK]"))
    tok.cls_token = "[MASK]"
    with pytest.raises(ValueError, match="mask"):
        special_ids(tok)


def test_content_ids_and_errors(loaded):
    x = content_ids(loaded, [TEXT, TEXT], 7)
    assert x.shape == (2, 7) and x.dtype == torch.long
    assert not set(x.flatten().tolist()) & set(loaded.tokenizer.all_special_ids)
    unk = content_ids(loaded, ["the 7 city @ of the 9 river north"], 5)  # digits/@ are [UNK] here
    assert not set(unk[0].tolist()) & set(loaded.tokenizer.all_special_ids)
    assert len(decode(loaded, x)) == 2
    with pytest.raises(ValueError, match=r"texts\[1\]"):
        content_ids(loaded, [TEXT, "the"], 7)
    with pytest.raises(ValueError, match="wrap"):
        MLMConditional(loaded, wrap="cls")
    m = MLMConditional(loaded)
    with pytest.raises(ValueError, match="sites"):
        m.site_logits(x, torch.tensor([0]))


def test_bring_your_own_model_and_tokenizer(loaded):
    """A researcher's first line works: MLMConditional(model, tokenizer), or the pair as a tuple."""
    ref = MLMConditional(loaded)
    x = content_ids(loaded, [TEXT], 8).repeat(2, 1)
    sites = torch.tensor([1, 6])
    for m in (MLMConditional(loaded.model, loaded.tokenizer), MLMConditional((loaded.model, loaded.tokenizer))):
        assert torch.equal(m.site_logits(x, sites), ref.site_logits(x, sites))
        assert m.support_size == ref.support_size and isinstance(m, ConditionalModel)
    with pytest.raises(TypeError, match=r"\(model, tokenizer\)"):
        MLMConditional(loaded.model)
    with pytest.raises(TypeError, match="tokenizer must be a transformers tokenizer"):
        MLMConditional(loaded.model, "bert-base-uncased")


def test_the_readme_bring_your_own_model_lines_run(tmp_path):
    """The README's example, on a tiny BERT saved as safetensors and loaded back by path."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from tokendyn.mcmc import glauber

    tiny = build_tiny("bert", pad_vocab=0)
    tiny.model.save_pretrained(tmp_path, safe_serialization=True)
    tiny.tokenizer.save_pretrained(tmp_path)
    assert any(p.suffix == ".safetensors" for p in tmp_path.iterdir())
    model = AutoModelForMaskedLM.from_pretrained(str(tmp_path))
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    cond = MLMConditional(model, tok)
    x0 = content_ids(cond, [TEXT] * 3, 6)
    chains = glauber.sample(cond, x0, steps=5, tau=1.0, seed=0).tokens
    again = glauber.sample(cond, x0, steps=5, tau=1.0, seed=0).tokens
    assert chains.shape == (3, 6) and torch.equal(chains, again)
    # the README's hand loop over glauber.step draws what glauber.run does
    gen = torch.Generator().manual_seed(0)
    state = glauber.init(x0)
    for _ in range(5):
        state, info = glauber.step(cond, state, gen, tau=1.0)
        assert info.sites.shape == info.values.shape == (3,)
    r = glauber.run(cond, glauber.init(x0), torch.Generator().manual_seed(0), steps=5, tau=1.0)
    assert torch.equal(state.tokens, r.state.tokens)


def test_compiled_encoder_matches_eager_and_drives_a_chain():
    """compile=True (torch.compile with frozen weights) gives the eager logits up to float rounding,
    and the Glauber kernel runs on it unchanged."""
    from tokendyn.mcmc import glauber

    tiny = build_tiny("bert", pad_vocab=3)
    eager, comp = MLMConditional(tiny), MLMConditional(tiny, compile=True)
    assert comp.compiled and not eager.compiled
    x = content_ids(tiny, [TEXT], 10).repeat(4, 1)
    sites = torch.tensor([0, 3, 6, 9])
    _assert_same_logits(comp.site_logits(x, sites), eager.site_logits(x, sites), 1e-4)
    state = glauber.init(x)
    for _ in range(3):
        state, info = glauber.step(comp, state, torch.Generator().manual_seed(0), tau=1.0)
    assert state.t == 3 and not bool(info.no_mass.any())
    with pytest.raises(TypeError, match="compile must be True or False"):
        MLMConditional(tiny, compile="yes")


def test_site_logits_in_place_fill_leaves_no_alias(loaded):
    """The support mask is filled in place: two calls give equal, distinct tensors."""
    m = MLMConditional(loaded, chunk=2)
    x = content_ids(loaded, [TEXT], 6).repeat(3, 1)  # three rows in chunks of 2: the cat path
    sites = torch.tensor([0, 2, 5])
    a, b = m.site_logits(x, sites), m.site_logits(x, sites)
    assert a.data_ptr() != b.data_ptr()
    torch.testing.assert_close(a, b)
    assert bool(torch.isneginf(a[:, m.unsupported]).all())


def test_last_layer_runs_at_the_sites_only_and_agrees_with_the_full_pass(loaded):
    """Every tiny family runs its last layer at the sites (tokendyn.mcmc.site_encoder); "full" runs every
    layer at every position; the two give the same logits up to float rounding."""
    sites_only, full = MLMConditional(loaded), MLMConditional(loaded, last_layer="full")
    assert sites_only.last_layer == "sites" and full.last_layer == "full"
    x = content_ids(loaded, [TEXT], 10).repeat(4, 1)
    sites = torch.tensor([0, 3, 6, 9])
    _assert_same_logits(sites_only.site_logits(x, sites), full.site_logits(x, sites), 1e-5)
    with pytest.raises(ValueError, match="last_layer"):
        MLMConditional(loaded, last_layer="some")
