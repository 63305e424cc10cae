"""Tiny code-built MLMs: architectures, tokenizers with proper specials, safetensors round trip."""

import pytest
import torch

from tokendyn.models import load_mlm
from tokendyn.models.tiny import ARCHS, build_tiny, save_tiny

SPECIALS = {"bert": ("[CLS]", "[SEP]", "[MASK]"), "roberta": ("<s>", "</s>", "<mask>"),
            "modernbert": ("[CLS]", "[SEP]", "[MASK]")}
CLASSES = {"bert": "BertForMaskedLM", "roberta": "RobertaForMaskedLM",
           "modernbert": "ModernBertForMaskedLM"}


@pytest.mark.parametrize("arch", ARCHS)
def test_architecture_and_special_tokens(arch):
    m = build_tiny(arch)
    tok = m.tokenizer
    assert type(m.model).__name__ == CLASSES[arch]
    cls, sep, mask = SPECIALS[arch]
    assert (tok.cls_token, tok.sep_token, tok.mask_token) == (cls, sep, mask)
    ids = {tok.cls_token_id, tok.sep_token_id, tok.mask_token_id, tok.pad_token_id}
    assert len(ids) == 4  # all distinct: no wrapping id set to the mask id
    enc = tok("the capital city")["input_ids"]
    assert enc[0] == tok.cls_token_id and enc[-1] == tok.sep_token_id
    assert tok.mask_token_id not in enc
    assert m.model.config.vocab_size == len(tok)


def test_tokenizer_kinds():
    assert build_tiny("bert").tokenizer.tokenize("cities")[1].startswith("##")  # WordPiece
    assert any(p.startswith("Ġ") for p in build_tiny("roberta").tokenizer.tokenize("the city"))  # byte BPE


def test_seeded_weights_and_rng_untouched():
    state = torch.random.get_rng_state()
    a, b, c = build_tiny("bert", seed=3), build_tiny("bert", seed=3), build_tiny("bert", seed=4)
    assert torch.equal(torch.random.get_rng_state(), state)
    wa = a.model.get_output_embeddings().weight
    assert torch.equal(wa, b.model.get_output_embeddings().weight)
    assert not torch.equal(a.model.bert.embeddings.word_embeddings.weight,
                           c.model.bert.embeddings.word_embeddings.weight)


@pytest.mark.parametrize("arch", ARCHS)
def test_save_and_load_through_registry(arch, tmp_path):
    d = save_tiny(arch, tmp_path / arch, pad_vocab=2)
    assert (d / "model.safetensors").is_file()
    loaded = load_mlm(str(d))
    ref = build_tiny(arch, pad_vocab=2)
    ids = ref.tokenizer("the city of the river", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(input_ids=ids).logits, ref.model(input_ids=ids).logits)
    assert loaded.tokenizer.mask_token_id == ref.tokenizer.mask_token_id


def test_bad_arguments():
    with pytest.raises(ValueError, match="arch"):
        build_tiny("gpt2")
    with pytest.raises(ValueError, match="hidden"):
        build_tiny("bert", hidden=0)
