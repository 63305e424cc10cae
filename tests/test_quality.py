"""Tests for tokendyn.quality: held-out split, probe file, cloze scoring and pseudo-perplexity.

The scoring tests use a fake MLM whose logits are fixed by hand, so every number is exact.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from tokendyn import quality
from tokendyn.quality import ClozeItem

REGISTERS = {"everyday", "science", "geography", "sports", "food", "politics"}


# ---- held-out split --------------------------------------------------------------------------

def test_heldout_split_is_the_documented_hash_rule():
    # sha256 mod 20 == 0: golden members of a fixed family of strings
    assert [s for s in (f"x{i}" for i in range(100)) if quality.is_heldout(s)] == ["x18", "x35", "x88", "x95"]
    assert not quality.is_heldout("The capital of France is Paris.")


def test_heldout_passages_are_5_percent_of_wiki_and_stable():
    from tokendyn.data import wiki_records

    recs = wiki_records()
    assert sum(quality.is_heldout(r["extract"]) for r in recs) == 513  # of 10,021
    ps = quality.heldout_passages(40)
    assert len(ps) == 40 and all(quality.is_heldout(p) for p in ps)
    assert ps[0].startswith("2001: A Space Odyssey is a 1968 epic science fiction film")
    with pytest.raises(ValueError, match="n="):
        quality.heldout_passages(0)


# ---- the probe file --------------------------------------------------------------------------

def test_probe_has_100_plus_sentences_in_six_registers():
    items = quality.load_probe()
    assert len(items) >= 100
    counts = {r: sum(it.register == r for it in items) for r in REGISTERS}
    assert set(it.register for it in items) == REGISTERS
    assert min(counts.values()) >= 15


def test_probe_answers_are_not_in_their_sentence_and_fit_one_bert_token():
    from transformers import AutoTokenizer

    from tokendyn.models.embedded import minilm_package_dir

    tok = AutoTokenizer.from_pretrained(str(minilm_package_dir()))
    for it in quality.load_probe():
        context = set(quality._WORD.findall(it.text.replace("[MASK]", " ").lower()))
        assert not context & set(it.answers), it.text
        assert any(len(tok.tokenize(a)) == 1 for a in it.answers), it.text


def test_probe_file_errors_name_the_line(tmp_path):
    p = tmp_path / "bad.tsv"
    p.write_text("food\tno mask here\tbread\n")
    with pytest.raises(ValueError, match="bad.tsv:1"):
        quality.load_probe(p)


# ---- scoring with a fake model ---------------------------------------------------------------

class FakeTokenizer:
    """Whitespace tokenizer over a fixed vocabulary with BERT-style special tokens."""

    def __init__(self, words):
        self.vocab = ["[PAD]", "[CLS]", "[SEP]", "[MASK]"] + list(words)
        self.ids = {w: i for i, w in enumerate(self.vocab)}
        self.pad_token_id, self.cls_token_id, self.sep_token_id, self.mask_token_id = 0, 1, 2, 3
        self.mask_token = "[MASK]"
        self.all_special_ids = [0, 1, 2, 3]

    def _encode(self, text):
        return [self.ids[w if w == "[MASK]" else w.lower()] for w in text.replace(".", " ").split()]

    def __call__(self, texts, return_tensors=None, padding=False, add_special_tokens=True,
                 truncation=False, max_length=None):
        single = isinstance(texts, str)
        rows = [([1] if add_special_tokens else []) + self._encode(t) + ([2] if add_special_tokens else [])
                for t in ([texts] if single else texts)]
        if return_tensors is None:
            return {"input_ids": rows[0] if single else rows}
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
        return {"input_ids": ids, "attention_mask": (ids != 0).long()}

    def decode(self, ids):
        return " ".join(self.vocab[i] for i in ids)


class FakeMLM(torch.nn.Module):
    """Logits = ``prefs`` (fixed over the vocabulary) at every position, whatever the context."""

    base_model_prefix = "bert"

    def __init__(self, prefs):
        super().__init__()
        self.prefs = torch.nn.Parameter(torch.as_tensor(prefs, dtype=torch.float32))
        self.bert = lambda input_ids, attention_mask=None: SimpleNamespace(
            last_hidden_state=torch.zeros(*input_ids.shape, 1))
        self.cls = lambda h: h @ torch.zeros(1, len(prefs)) + self.prefs


WORDS = ["the", "capital", "of", "france", "is", "paris", "cat", "sat", "on", "mat", "rome", "sofa"]


def _fake(order):
    tok = FakeTokenizer(WORDS)
    prefs = torch.zeros(len(tok.vocab))
    for rank, w in enumerate(order):  # earlier in ``order`` = larger logit
        prefs[tok.ids[w]] = 10.0 - rank
    prefs[tok.mask_token_id] = 100.0  # special tokens must never be predicted
    return FakeMLM(prefs), tok


ITEMS = [ClozeItem("geography", "the capital of france is [MASK]", ("paris",)),
         ClozeItem("everyday", "the cat sat on the [MASK]", ("mat", "sofa")),
         ClozeItem("geography", "paris is the capital of [MASK]", ("france",))]


def test_cloze_probe_counts_exactly():
    model, tok = _fake(["france", "paris", "rome", "cat", "sofa", "mat"])
    r = quality.cloze_probe(model, tok, ITEMS, k=5)
    # top-1 is "france" everywhere: right for item 3 only; a copy in item 1 only (in item 3 it
    # is the answer, not a word of the sentence)
    assert r["top1"] == pytest.approx(1 / 3)
    # top-5 = france paris rome cat sofa: items 1, 2 (sofa), 3
    assert r["top5"] == pytest.approx(1.0)
    assert r["copy_rate"] == pytest.approx(1 / 3)
    assert r["items"][0]["top"] == ["france", "paris", "rome", "cat", "sofa"]
    assert r["by_register"]["geography"] == {"n": 2, "top1": 0.5, "top5": 1.0}


def test_cloze_probe_no_copy_when_top1_is_new():
    model, tok = _fake(["rome", "mat", "paris"])
    r = quality.cloze_probe(model, tok, ITEMS, k=2)
    assert r["copy_rate"] == 0.0 and r["top1"] == 0.0
    assert r["top5"] == pytest.approx(1 / 3)  # k=2: rome, mat -> only the cat sentence


def test_masked_logits_needs_exactly_one_mask():
    model, tok = _fake(["paris"])
    with pytest.raises(ValueError, match="exactly one mask"):
        quality.masked_logits(model, tok, ["the cat sat on the mat"])
    with pytest.raises(TypeError, match="unsupported"):
        quality.head_logits(torch.nn.Linear(2, 2), torch.zeros(1, 2))


def test_pseudo_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    model, tok = _fake([])
    model.prefs.data.zero_()  # uniform over the 12 non-special words
    ppl = quality.pseudo_perplexity(model, tok, ["the cat sat on the mat", "paris is the capital"])
    assert ppl == pytest.approx(len(WORDS))


def test_pseudo_log_likelihoods_golden():
    model, tok = _fake(["cat", "mat"])  # logits 10 and 9, the rest 0
    ll = quality.pseudo_log_likelihoods(model, tok, "cat mat sofa")
    z = math.exp(10) + math.exp(9) + (len(WORDS) - 2)
    assert ll.tolist() == pytest.approx([10 - math.log(z), 9 - math.log(z), -math.log(z)], rel=1e-5)
    with pytest.raises(ValueError, match="max_len"):
        quality.pseudo_log_likelihoods(model, tok, "cat", max_len=1)


def test_repetition_rates_compare_the_text_with_the_models_guesses():
    model, tok = _fake(["cat", "mat"])  # always guesses "cat" first
    rep = quality.heldout_scores(model, tok, ["cat mat cat sofa"])["repetition"]
    # true tokens found elsewhere: cat (site 0), cat (site 2) -> 2 of 4; the guess "cat" is
    # elsewhere in the window at every site -> 4 of 4
    assert rep == {"data": 0.5, "model": 1.0, "sites": 4}
    rep = quality.heldout_scores(model, tok, ["sofa mat the"])["repetition"]
    assert rep == {"data": 0.0, "model": 0.0, "sites": 3}
    with pytest.raises(ValueError, match="texts"):
        quality.heldout_scores(model, tok, [])
