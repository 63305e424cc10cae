"""Tests for tokendyn.evaluation: held-out split, probe file, cloze scoring, pseudo-perplexity and
the causal-LM helpers.

The scoring tests use a fake MLM whose logits are fixed by hand, so every number is exact; the
tiny random models (:mod:`tokendyn.models.tiny`) check the wiring against a plain forward pass.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from tokendyn import evaluation as ev
from tokendyn.mcmc.conditional import MLMConditional
from tokendyn.evaluation import ClozeItem
from tokendyn.models.tiny import ARCHS, build_tiny

REGISTERS = {"everyday", "science", "geography", "sports", "food", "politics"}


# ---- held-out split --------------------------------------------------------------------------

def test_heldout_split_is_the_documented_hash_rule():
    # sha256 mod 20 == 0: golden members of a fixed family of strings
    assert [s for s in (f"x{i}" for i in range(100)) if ev.is_heldout(s)] == ["x18", "x35", "x88", "x95"]
    assert not ev.is_heldout("The capital of France is Paris.")


def test_salted_split_is_the_text_latent_rule():
    # sha256 of f"{seed}:{text}" mod every == 0: golden members, as the text latent model was split
    assert [s for s in (f"x{i}" for i in range(200)) if ev.is_heldout(s, 20, seed=0)] == [
        "x2", "x24", "x96", "x99", "x103", "x104", "x119", "x192", "x199"]
    assert [s for s in (f"x{i}" for i in range(100)) if ev.is_heldout(s, 7, seed=3)] == [
        "x1", "x9", "x31", "x34", "x36", "x41", "x72", "x76", "x84", "x99"]
    assert ev.is_heldout("x18") and not ev.is_heldout("x18", seed=0)  # the salt changes the split


def test_text_latent_documents_use_the_same_split():
    from tokendyn.core.data import corpus
    from tokendyn.latent.text import split_documents

    docs = corpus("wiki")
    held = split_documents("wiki", "heldout", seed=0, heldout_every=20)
    train = split_documents("wiki", "train", seed=0, heldout_every=20)
    assert len(held) == 530 and len(train) + len(held) == len(docs)  # golden: the shipped split
    assert held == [d for d in docs if ev.is_heldout(d, 20, seed=0)]


def test_heldout_passages_are_5_percent_of_wiki_and_stable():
    from tokendyn.core.data import wiki_records

    recs = wiki_records()
    assert sum(ev.is_heldout(r["extract"]) for r in recs) == 513  # of 10,021
    ps = ev.heldout_passages(40)
    assert len(ps) == 40 and all(ev.is_heldout(p) for p in ps)
    assert ps[0].startswith("2001: A Space Odyssey is a 1968 epic science fiction film")
    with pytest.raises(ValueError, match="n="):
        ev.heldout_passages(0)


# ---- the probe file --------------------------------------------------------------------------

def test_probe_has_100_plus_sentences_in_six_registers():
    items = ev.load_probe()
    assert len(items) >= 100
    counts = {r: sum(it.register == r for it in items) for r in REGISTERS}
    assert set(it.register for it in items) == REGISTERS
    assert min(counts.values()) >= 15


def test_probe_answers_are_not_in_their_sentence_and_fit_one_bert_token():
    from transformers import AutoTokenizer

    from tokendyn.models.shipped import minilm_package_dir

    tok = AutoTokenizer.from_pretrained(str(minilm_package_dir()))
    for it in ev.load_probe():
        assert not ev.context_words(it.text) & set(it.answers), it.text
        assert any(len(tok.tokenize(a)) == 1 for a in it.answers), it.text


def test_probe_file_errors_name_the_line(tmp_path):
    p = tmp_path / "bad.tsv"
    p.write_text("food\tno mask here\tbread\n")
    with pytest.raises(ValueError, match="bad.tsv:1"):
        ev.load_probe(p)


def test_context_words_leave_out_the_mask():
    words = ev.context_words("It's the [MASK] of Rome, isn't it?")
    assert words == {"it's", "the", "of", "rome", "isn't", "it"}


# ---- scoring with a fake model ---------------------------------------------------------------

class FakeTokenizer:
    """Whitespace tokenizer over a fixed vocabulary with BERT-style special tokens."""

    def __init__(self, words):
        self.vocab = ["[PAD]", "[CLS]", "[SEP]", "[MASK]"] + list(words)
        self.ids = {w: i for i, w in enumerate(self.vocab)}
        self.pad_token_id, self.cls_token_id, self.sep_token_id, self.mask_token_id = 0, 1, 2, 3
        self.bos_token_id = self.eos_token_id = None
        self.mask_token = "[MASK]"
        self.all_special_ids = [0, 1, 2, 3]

    def __len__(self):
        return len(self.vocab)

    def _encode(self, text):
        return [self.ids[w if w == "[MASK]" else w.lower()] for w in text.replace(".", " ").split()]

    def __call__(self, texts, return_tensors=None, padding=False, add_special_tokens=True,
                 truncation=False, max_length=None):
        single = isinstance(texts, str)
        rows = [([1] if add_special_tokens else []) + self._encode(t) + ([2] if add_special_tokens else [])
                for t in ([texts] if single else texts)]
        if truncation and max_length is not None:
            rows = [r[:max_length] for r in rows]
        if return_tensors is None:
            return {"input_ids": rows[0] if single else rows}
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
        return {"input_ids": ids, "attention_mask": (ids != 0).long()}

    def decode(self, ids):
        return " ".join(self.vocab[i] for i in ids)


class FakeMLM(torch.nn.Module):
    """Logits = ``prefs`` (fixed over the vocabulary) at every position, whatever the context.
    Not a known architecture, so the adapter takes the full forward pass."""

    def __init__(self, prefs):
        super().__init__()
        self.prefs = torch.nn.Parameter(torch.as_tensor(prefs, dtype=torch.float32))

    def get_output_embeddings(self):
        return SimpleNamespace(weight=torch.zeros(len(self.prefs), 1))

    def forward(self, input_ids, attention_mask=None):
        return SimpleNamespace(logits=self.prefs.expand(*input_ids.shape, len(self.prefs)))


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
    r = ev.cloze_probe(MLMConditional(model, tok), items=ITEMS, k=5)
    # top-1 is "france" everywhere: right for item 3 only; a copy in item 1 only (in item 3 it
    # is the answer, not a word of the sentence)
    assert r["top1"] == pytest.approx(1 / 3)
    # top-5 = france paris rome cat sofa: items 1, 2 (sofa), 3
    assert r["top5"] == pytest.approx(1.0)
    assert r["copy_rate"] == pytest.approx(1 / 3)
    assert r["items"][0]["top"] == ["france", "paris", "rome", "cat", "sofa"]
    assert r["by_register"]["geography"] == {"n": 2, "top1": 0.5, "top5": 1.0}
    assert r["coverage"] == 1.0


def test_cloze_probe_no_copy_when_top1_is_new():
    model, tok = _fake(["rome", "mat", "paris"])
    r = ev.cloze_probe(model, tok, ITEMS, k=2)  # the (model, tokenizer) form of the scripts
    assert r["copy_rate"] == 0.0 and r["top1"] == 0.0
    assert r["top5"] == pytest.approx(1 / 3)  # k=2: rome, mat -> only the cat sentence


def test_every_form_of_mlm_gives_the_same_probe():
    model, tok = _fake(["paris", "mat", "cat"])
    cond = MLMConditional(model, tok)
    assert ev.as_mlm(cond) is cond
    want = ev.cloze_probe(cond, items=ITEMS)
    for form in ((model, tok), SimpleNamespace(model=model, tokenizer=tok, name="fake")):
        assert ev.cloze_probe(form, items=ITEMS) == want
    assert ev.cloze_probe(model, tok, ITEMS) == want


def test_masked_logits_needs_exactly_one_mask():
    model, tok = _fake(["paris"])
    with pytest.raises(ValueError, match="exactly one mask"):
        ev.masked_logits((model, tok), ["the cat sat on the mat"])
    with pytest.raises(TypeError, match="unsupported"):
        ev.head_logits(torch.nn.Linear(2, 2), torch.zeros(1, 2))


def test_pseudo_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    model, tok = _fake([])
    model.prefs.data.zero_()  # uniform over the 12 non-special words
    ppl = ev.pseudo_perplexity((model, tok), ["the cat sat on the mat", "paris is the capital"])
    assert ppl == pytest.approx(len(WORDS))


def test_pseudo_log_likelihoods_golden():
    model, tok = _fake(["cat", "mat"])  # logits 10 and 9, the rest 0
    ll = ev.pseudo_log_likelihoods((model, tok), "cat mat sofa")
    z = math.exp(10) + math.exp(9) + (len(WORDS) - 2)
    assert ll.tolist() == pytest.approx([10 - math.log(z), 9 - math.log(z), -math.log(z)], rel=1e-5)
    with pytest.raises(ValueError, match="max_len"):
        ev.pseudo_log_likelihoods((model, tok), "cat", max_len=1)


def test_text_site_logits_truncate_to_max_len_with_the_wrapping():
    model, tok = _fake(["cat"])
    ids, logits = ev.text_site_logits((model, tok), "the cat sat on the mat", max_len=5)
    assert ids.tolist() == [tok.ids[w] for w in ("the", "cat", "sat")]  # 5 = [CLS] + 3 + [SEP]
    assert logits.shape == (3, len(tok)) and torch.isinf(logits[:, :4]).all()


def test_repetition_rates_compare_the_text_with_the_models_guesses():
    model, tok = _fake(["cat", "mat"])  # always guesses "cat" first
    rep = ev.heldout_scores((model, tok), ["cat mat cat sofa"])["repetition"]
    # true tokens found elsewhere: cat (site 0), cat (site 2) -> 2 of 4; the guess "cat" is
    # elsewhere in the window at every site -> 4 of 4
    assert rep == {"data": 0.5, "model": 1.0, "sites": 4}
    rep = ev.heldout_scores((model, tok), ["sofa mat the"])["repetition"]
    assert rep == {"data": 0.0, "model": 0.0, "sites": 3}
    with pytest.raises(ValueError, match="texts"):
        ev.heldout_scores((model, tok), [])


# ---- the tiny random MLMs: the wiring against a plain forward pass ---------------------------

TEXT = "the capital of the city was used for the theme song of the band in the north"


@pytest.fixture(scope="module", params=ARCHS)
def tiny(request):
    return build_tiny(request.param, pad_vocab=3)


def test_text_site_logits_match_masking_each_token_of_the_encoded_text(tiny):
    tok = tiny.tokenizer
    text = TEXT + " \u2603 " + TEXT  # a snowman: [UNK] in WordPiece, bytes in BPE
    ids, logits = ev.text_site_logits(tiny, text, max_len=24)
    enc = tok(text, truncation=True, max_length=24)["input_ids"]
    special = set(tok.all_special_ids)
    sites = [p for p, t in enumerate(enc) if t not in special]
    assert ids.tolist() == [enc[p] for p in sites] and len(enc) == 24
    x = torch.tensor(enc).repeat(len(sites), 1)
    x[torch.arange(len(sites)), sites] = tok.mask_token_id
    with torch.no_grad():
        ref = tiny.model(input_ids=x).logits[torch.arange(len(sites)), sites]
    fin = torch.isfinite(logits)
    assert (~fin).sum(1).tolist() == [len(special) + 3] * len(sites)  # specials and padded rows
    torch.testing.assert_close(logits[fin], ref[fin], atol=1e-4, rtol=0)


def test_masked_logits_in_a_padded_batch_match_one_at_a_time(tiny):
    texts = ["the [MASK] of the city", "the band in the north played a [MASK] song of the season",
             "[MASK] river"]
    batched = ev.masked_logits(tiny, texts)
    alone = torch.cat([ev.masked_logits(tiny, [t]) for t in texts])
    assert batched.shape == (3, MLMConditional(tiny).vocab_size) and batched.dtype == torch.float32
    torch.testing.assert_close(batched, alone, atol=1e-4, rtol=0)


def test_head_logits_on_final_hidden_states_are_the_forward_logits(tiny):
    ids = tiny.tokenizer([TEXT], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        hidden = tiny.model.base_model(input_ids=ids).last_hidden_state[0]
        torch.testing.assert_close(ev.head_logits(tiny.model, hidden),
                                   tiny.model(input_ids=ids).logits[0], atol=1e-5, rtol=0)


def test_evaluate_is_the_probe_and_the_heldout_scores(tiny):
    out = ev.evaluate(tiny.model, tiny.tokenizer, n_passages=2)
    probe = ev.cloze_probe(tiny)
    held = ev.heldout_scores(tiny, ev.heldout_passages(2))
    assert {k: out[k] for k in ev.summary.PROBE_KEYS} == {k: probe[k] for k in ev.summary.PROBE_KEYS}
    assert out["pseudo_perplexity"] == held["pseudo_perplexity"] and out["repetition"] == held["repetition"]
    assert out["heldout_passages"] == 2 and out["items"] == probe["items"] and out["n"] == len(ev.load_probe())


# ---- causal-LM helpers -----------------------------------------------------------------------

def test_right_pad_golden():
    x, att = ev.right_pad([[5, 6, 7], [8], [9, 9]], pad_id=-1)
    assert x.tolist() == [[5, 6, 7], [8, -1, -1], [9, 9, -1]]
    assert att.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]] and x.dtype == att.dtype == torch.long


def test_is_word_token():
    assert ev.is_word_token("\u0120Paris") and ev.is_word_token("\u2581river")
    assert not ev.is_word_token("Paris")  # no leading space: a word piece
    assert not ev.is_word_token("\u0120caf\u00e9") and not ev.is_word_token("\u012042")


def test_start_id_prefers_endoftext_then_bos():
    def tok(ids, unk_id=0, bos=None):
        return SimpleNamespace(convert_tokens_to_ids=lambda t: ids.get(t, unk_id), unk_token_id=unk_id,
                               unk_token="<unk>", bos_token_id=bos)

    assert ev.start_id(tok({"<|endoftext|>": 7}, bos=1)) == 7
    assert ev.start_id(tok({}, bos=1)) == 1  # <|endoftext|> is unknown: BOS
    with pytest.raises(ValueError, match="BOS"):
        ev.start_id(tok({}))


class UniformCausalLM(torch.nn.Module):
    """A causal LM with equal logits everywhere: log p(x_t | x_<t) = -log V for every token."""

    def __init__(self, vocab: int):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(vocab))

    def forward(self, input_ids, attention_mask=None):
        return SimpleNamespace(logits=self.w.expand(*input_ids.shape, len(self.w)))


def test_sequence_log_likelihoods_skip_the_padding():
    x, att = ev.right_pad([[1, 2, 3, 4], [1, 2], [3]])
    ll = ev.sequence_log_likelihoods(UniformCausalLM(10), x, att)
    assert ll.tolist() == pytest.approx([-3 * math.log(10), -math.log(10), 0.0])
    def tok(text, add_special_tokens=False):  # one token per word, its length
        return {"input_ids": [len(w) for w in text.split()]}

    ll = ev.causal_log_likelihoods(UniformCausalLM(10), tok, ["a bb ccc", "dddd"], start_id=0)
    assert ll.tolist() == pytest.approx([-3 * math.log(10), -math.log(10)])
