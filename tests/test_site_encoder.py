"""tokendyn.mcmc.site_encoder: the last encoder layer at the query sites equals the full pass there.

Tiny random models of every supported family, with weights drawn larger than the transformers
initialisation (std 1.5/sqrt(fan_in) for every linear, N(0, 1) embeddings) so attention is sharp:
with the default 0.02 init the scores are ~1e-3, attention is nearly uniform and a missing
position bias or rotary would hide below the tolerance.

fp32 tolerance 1e-5 absolute: outputs are LayerNorm'd (|h| <= ~4), float32 rounding of a 32-wide
hidden state through 3-4 layers is ~1e-6 (the two paths differ only in summation order and where
the 1/sqrt(d) scale is applied). bf16: the site path must be as close to the float32 full pass
as the bf16 full pass is (twice its error, plus 1e-3); bf16 carries ~3 significant digits.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers import (
    BertConfig,
    BertForMaskedLM,
    DistilBertConfig,
    DistilBertForMaskedLM,
    ModernBertConfig,
    ModernBertForMaskedLM,
    MPNetConfig,
    MPNetForMaskedLM,
    RobertaConfig,
    RobertaForMaskedLM,
    XLMRobertaConfig,
    XLMRobertaForMaskedLM,
)

from tokendyn.mcmc.site_encoder import SiteEncoder, site_encoder

SIZE = dict(vocab_size=99, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37)
PAD = {"bert": 0, "roberta": 1, "xlmr": 1, "mpnet": 1, "distilbert": 0, "modernbert_local": 0,
       "modernbert_global": 0}
L = 20  # longer than ModernBERT's window below (sliding_window = local_attention // 2 = 3)


def _modernbert_config(layer_types: list[str], **kw) -> ModernBertConfig:
    return ModernBertConfig(
        **{**SIZE, "num_hidden_layers": len(layer_types)}, layer_types=layer_types, local_attention=6,
        max_position_embeddings=64, pad_token_id=0, bos_token_id=2, eos_token_id=3, cls_token_id=2,
        sep_token_id=3, **kw)


# family -> (class, config factory)
FAMILIES = {
    "bert": (BertForMaskedLM, lambda: BertConfig(**SIZE, max_position_embeddings=64)),
    "roberta": (RobertaForMaskedLM, lambda: RobertaConfig(**SIZE, max_position_embeddings=66, pad_token_id=1)),
    "xlmr": (XLMRobertaForMaskedLM, lambda: XLMRobertaConfig(**SIZE, max_position_embeddings=66, pad_token_id=1)),
    "mpnet": (MPNetForMaskedLM, lambda: MPNetConfig(**SIZE, max_position_embeddings=66)),
    "distilbert": (DistilBertForMaskedLM, lambda: DistilBertConfig(
        vocab_size=99, dim=32, n_layers=3, n_heads=4, hidden_dim=37, max_position_embeddings=64)),
    # last layer local (window 3 < L), with biases in attention, MLP and norms
    "modernbert_local": (ModernBertForMaskedLM, lambda: _modernbert_config(
        ["full_attention", "sliding_attention", "sliding_attention"],
        attention_bias=True, mlp_bias=True, norm_bias=True)),
    # last layer global, after a local one
    "modernbert_global": (ModernBertForMaskedLM, lambda: _modernbert_config(
        ["full_attention", "sliding_attention", "sliding_attention", "full_attention"])),
}


def _sharpen(model: nn.Module) -> None:
    """Larger random weights, so attention patterns (and position information) matter."""
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.Linear):
                mod.weight.normal_(0.0, 1.5 / mod.in_features ** 0.5)
                if mod.bias is not None:
                    mod.bias.normal_(0.0, 0.1)
            elif isinstance(mod, nn.Embedding):
                mod.weight.normal_(0.0, 1.0)
            elif isinstance(mod, nn.LayerNorm):
                mod.weight.normal_(1.0, 0.2)
                if mod.bias is not None:
                    mod.bias.normal_(0.0, 0.1)


def build(family: str, impl: str | None = None, dtype: torch.dtype = torch.float32) -> nn.Module:
    torch.manual_seed(0)
    cls, config = FAMILIES[family]
    model = cls(config())
    _sharpen(model)
    if impl is not None:
        model.set_attn_implementation(impl)
    return model.to(dtype).eval()


# Attention implementations each family supports on CPU in transformers 5.x (MPNet: eager only).
CASES = [(f, i) for f, (cls, _) in FAMILIES.items() for i in ["eager", "sdpa"][:1 + bool(cls._supports_sdpa)]]


def batch(family: str, b: int = 5, lengths: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Random content ids [b, L] (away from the special ids) and an attention mask; rows shorter
    than L are right-padded with the family's pad id."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 99, (b, L), generator=g)
    mask = torch.ones(b, L, dtype=torch.long)
    for r, n in enumerate(lengths or []):
        ids[r, n:] = PAD[family]
        mask[r, n:] = 0
    return ids, mask


def full(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    return model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state[rows, pos]


def _sites_one_per_row() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(5), torch.tensor([0, 7, 19, 3, 12])


def _sites_uneven() -> tuple[torch.Tensor, torch.Tensor]:
    # row 1 three times (one site repeated), row 3 none, M = 6 != B = 5
    return torch.tensor([1, 0, 1, 4, 1, 2]), torch.tensor([2, 5, 17, 9, 2, 19])


@pytest.mark.parametrize("family,impl", CASES)
def test_one_site_per_row(family, impl):
    model = build(family, impl)
    ids, mask = batch(family)
    rows, pos = _sites_one_per_row()
    if family.startswith("modernbert"):  # the configurations are what they claim: last layer local or
        # global, and a window (|i - j| <= sliding_window) narrower than the row
        want_type = "sliding_attention" if family == "modernbert_local" else "full_attention"
        assert model.config.layer_types[-1] == want_type and 2 * model.config.sliding_window + 1 < L
    enc = site_encoder(model)
    assert isinstance(enc, SiteEncoder)
    with torch.inference_mode():
        got, want = enc(ids, mask, rows, pos), full(model, ids, mask, rows, pos)
    assert got.shape == (5, 32) and got.dtype == torch.float32
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("family,impl", CASES)
def test_several_sites_in_a_row_and_a_row_with_none(family, impl):
    model = build(family, impl)
    ids, mask = batch(family)
    rows, pos = _sites_uneven()
    with torch.inference_mode():
        got, want = site_encoder(model)(ids, mask, rows, pos), full(model, ids, mask, rows, pos)
    assert got.shape == (6, 32)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    torch.testing.assert_close(got[0], got[4], atol=1e-5, rtol=0)  # the same site twice (batched GEMMs: not bitwise)


@pytest.mark.parametrize("family,impl", CASES)
def test_padded_rows(family, impl):
    model = build(family, impl)
    ids, mask = batch(family, lengths=[20, 9, 14, 4, 17])
    rows, pos = torch.tensor([0, 1, 1, 2, 3, 4, 4]), torch.tensor([19, 0, 8, 13, 3, 5, 16])
    with torch.inference_mode():
        got, want = site_encoder(model)(ids, mask, rows, pos), full(model, ids, mask, rows, pos)
        # padding matters here: without the mask the same ids give other states at the sites
        unmasked = full(model, ids, torch.ones_like(mask), rows, pos)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert (unmasked - want)[1:].abs().max() > 1e-2


@pytest.mark.parametrize("family", list(FAMILIES))
def test_bf16(family):
    ids, mask = batch(family, lengths=[20, 9, 14, 4, 17])
    rows, pos = torch.tensor([0, 1, 2, 2, 4]), torch.tensor([19, 8, 0, 13, 16])
    with torch.inference_mode():
        ref = full(build(family), ids, mask, rows, pos)
        model = build(family, dtype=torch.bfloat16)
        got, want = site_encoder(model)(ids, mask, rows, pos), full(model, ids, mask, rows, pos)
    assert got.dtype == torch.bfloat16
    err_full = (want.float() - ref).abs().max().item()
    err_site = (got.float() - ref).abs().max().item()
    assert err_site <= 2 * err_full + 1e-3, (err_site, err_full)
    assert err_full < 0.25  # the yardstick itself is bf16 rounding, not a broken model


def test_unknown_architecture_and_decoder_give_none():
    from transformers import ElectraConfig, ElectraForMaskedLM, GPT2Config, GPT2LMHeadModel

    assert site_encoder(ElectraForMaskedLM(ElectraConfig(**SIZE, embedding_size=32))) is None
    assert site_encoder(GPT2LMHeadModel(GPT2Config(vocab_size=99, n_embd=32, n_layer=2, n_head=4))) is None
    assert site_encoder(BertForMaskedLM(BertConfig(**SIZE, is_decoder=True))) is None
    assert site_encoder(object()) is None


@pytest.mark.parametrize("family", ["bert", "mpnet", "modernbert_local"])
def test_sees_weights_changed_after_creation(family):
    model = build(family)
    enc = site_encoder(model)
    ids, mask = batch(family)
    rows, pos = _sites_one_per_row()
    with torch.inference_mode():
        before = enc(ids, mask, rows, pos)
    name, last = [(n, m) for n, m in model.base_model.named_modules() if isinstance(m, nn.Linear)][-1]
    assert f".{model.config.num_hidden_layers - 1}." in name  # a linear of the last layer
    with torch.no_grad():
        last.weight.mul_(-2.0)
        for p in model.base_model.embeddings.parameters():  # and before it
            p.add_(0.5)
    with torch.inference_mode():
        after, want = enc(ids, mask, rows, pos), full(model, ids, mask, rows, pos)
    assert (after - before).abs().max() > 1e-2
    torch.testing.assert_close(after, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", ["bert", "distilbert", "modernbert_global"])
def test_last_layer_runs_only_at_the_sites(family):
    """The feed-forward of the last layer sees M rows, the one before sees B * L; and the model's
    parameters, buffers and config are left as they were."""
    model = build(family)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    config = model.config.to_dict()
    ffn = [m for m in model.base_model.modules() if isinstance(m, nn.Linear) and m.in_features == 32
           and m.out_features in (37, 74)]
    seen: list[int] = []
    hooks = [m.register_forward_hook(lambda m, a, out: seen.append(a[0].shape[:-1].numel())) for m in ffn]
    ids, mask = batch(family)
    rows, pos = _sites_uneven()
    try:
        with torch.inference_mode():
            site_encoder(model)(ids, mask, rows, pos)
    finally:
        for h in hooks:
            h.remove()
    assert seen == [5 * L] * (len(ffn) - 1) + [6]
    assert model.config.to_dict() == config
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())


def test_training_mode_is_refused():
    model = build("bert").train()
    ids, mask = batch("bert")
    with pytest.raises(RuntimeError, match="eval mode"):
        site_encoder(model)(ids, mask, *_sites_one_per_row())
