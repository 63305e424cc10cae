"""Tests for tokendyn.training.distill (word alignment between the teacher's and BERT's tokens,
the soft targets) and the checks of scripts/teacher_targets.py and scripts/ablate_minilm.py."""

from __future__ import annotations

import pytest
import torch
from script_runs import run_scripts

from tokendyn.training import distill
from tokendyn.training.corpus import sentences


def test_sentence_split_keeps_plain_sentences_of_the_allowed_length():
    text = "Short one. This sentence has exactly seven words in it. Caf\u00e9 is not plain ASCII at all here."
    assert sentences(text) == ["This sentence has exactly seven words in it."]
    assert distill.strip_list_markers("1. The sun is hot. 2. Ice is cold.").split() == \
        "The sun is hot. Ice is cold.".split()


@pytest.fixture(scope="module")
def teacher():
    from tokendyn.models import load_ar, shipped

    ar = load_ar(device="cpu")
    _, bert_tok, _ = shipped.build("minilm-mlm", torch.Generator().manual_seed(0))
    return ar, bert_tok, distill.vocab_map(ar.tokenizer, bert_tok)


def test_targets_sit_on_whole_words_and_know_the_capital(teacher, tmp_path):
    ar, bert_tok, vmap = teacher
    sents = ["The capital of France is Paris, and it is a big city.",
             "She opened the umbrella-like window of the old house."]
    d = distill.score_shard(ar, bert_tok, vmap, sents)
    assert d["ids"].shape == (2, 64) and d["tid"].shape == (d["tpos"].shape[0], distill.TOPK)
    words = [bert_tok.convert_ids_to_tokens(d["ids"][r, p].item()) for r, p in d["tpos"].tolist()]
    # every target is a whole word of its sentence; the first word (no left context) never is
    assert all(not w.startswith("##") and w.isalpha() for w in words)
    assert all(p > 1 for _, p in d["tpos"].tolist())
    assert {"paris", "capital", "city", "umbrella", "window", "house"} <= set(words)
    assert "like" not in words  # "-like" continues the word, no whole-word target
    # the teacher's distribution is a distribution over BERT ids, best first
    p = d["tp"].float()
    assert torch.all(p[:, :-1] >= p[:, 1:]) and torch.all(p.sum(1) <= 1.001)
    k = words.index("paris")
    assert bert_tok.convert_ids_to_tokens(d["tid"][k, 0].item()) == "paris"
    # shards load back as one table indexed per (row, position)
    torch.save(d, tmp_path / "shard_0000.pt")
    t = distill.load_targets(tmp_path)
    r, pos = d["tpos"][k].tolist()
    assert torch.equal(t["tid"][t["tidx"][r, pos]], d["tid"][k])
    assert int((t["tidx"] >= 0).sum()) == d["tpos"].shape[0]


def test_causal_cloze_probe_reads_both_sides_and_pads_correctly(teacher):
    from tokendyn import evaluation as ev

    ar = teacher[0]
    texts = [" The capital of France is Paris.", " Ice is cold.", " She opened the window and let some air in."]
    start = ev.start_id(ar.tokenizer)
    batched = ev.causal_log_likelihoods(ar.model, ar.tokenizer, texts, start)
    alone = torch.cat([ev.causal_log_likelihoods(ar.model, ar.tokenizer, [t], start) for t in texts])
    assert torch.allclose(batched, alone, atol=1e-3)  # padding changes nothing
    items = [ev.ClozeItem("geography", "The capital of France is [MASK].", ("paris",)),
             ev.ClozeItem("everyday", "She opened the [MASK] and let some fresh air into the room.",
                               ("window", "windows"))]
    pr = ev.causal_cloze_probe(ar.model, ar.tokenizer, k=10, items=items)
    assert pr["items"][0]["top"][0] == "paris"
    # left context alone prefers "door"; the right context ("fresh air") must lift "window"
    assert "window" in pr["items"][1]["top"][:2]
    assert pr["copy_rate"] == 0.0 and pr["n"] == 2
    with pytest.raises(ValueError, match="k"):
        ev.causal_cloze_probe(ar.model, ar.tokenizer, k=2, items=items)


def test_whole_sentence_targets_use_the_right_context_and_are_exact(teacher):
    from tokendyn import evaluation as ev

    ar, bert_tok, vmap = teacher
    sent = "She opened the window and let some fresh air into the room."
    two = [sent, "Ice is cold in the winter."]
    left = distill.score_shard(ar, bert_tok, vmap, two)
    whole = distill.score_shard(ar, bert_tok, vmap, two, target="whole", k=8)
    assert torch.equal(left["tpos"], whole["tpos"])  # the same sites, another target
    words = [bert_tok.convert_ids_to_tokens(whole["ids"][r, p].item()) for r, p in whole["tpos"].tolist()]
    s = words.index("window")

    def ranked(d):
        return bert_tok.convert_ids_to_tokens(d["tid"][s].tolist())

    # after "She opened the" the teacher prefers "door"; the right context ("fresh air") lifts "window"
    assert ranked(left).index("door") < ranked(left).index("window")
    assert ranked(whole)[0] == "window"
    p = whole["tp"].float()
    assert torch.allclose(p.sum(1), torch.ones(p.shape[0]), atol=2e-3)  # a distribution over k words
    assert torch.all(p[:, 8:] == 0) and torch.all(p[:, :7] >= p[:, 1:8])
    # the true word is always a candidate, so it always has mass
    true = whole["ids"][whole["tpos"][:, 0].long(), whole["tpos"][:, 1].long()]
    assert torch.all((whole["tid"] == true[:, None]).any(1))
    # exact: the softmax of whole-sentence log-likelihoods, computed here the slow way
    cands = ranked(whole)[:8]
    texts = [" " + sent.replace("window", w) for w in cands]
    ll = ev.causal_log_likelihoods(ar.model, ar.tokenizer, texts, 0)
    assert torch.allclose(ll.softmax(0), p[s, :8], atol=2e-3)
    # how candidate rows are batched (and padded beside the shorter sentence) changes nothing
    small = distill.score_shard(ar, bert_tok, vmap, two, target="whole", k=8, ll_batch=5)
    assert torch.equal(small["tid"], whole["tid"]) and torch.allclose(small["tp"].float(), p, atol=2e-3)
    # one site per sentence when asked, seeded
    one = distill.score_shard(ar, bert_tok, vmap, [sent, sent], target="whole", k=2, sites=1, seed=3)
    assert one["tpos"].shape[0] == 2
    assert torch.equal(one["tpos"], distill.score_shard(
        ar, bert_tok, vmap, [sent, sent], target="whole", k=2, sites=1, seed=3)["tpos"])


def test_script_arguments_are_checked_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="target"):
        distill.score_shard(None, None, None, [], target="both")
    # a folder of shards made with other settings is refused, --sites counting for left targets too
    made = tmp_path / "made"
    made.mkdir()
    (made / "settings.json").write_text('{"seed": 0, "target": "left", "sites": 0}\n')
    calls = [(("teacher_targets.py", ["--target", "whole", "--candidates", "40", "--out", str(tmp_path)]),
              "ValueError: candidates"),
             (("teacher_targets.py", ["--sites", "-1", "--out", str(tmp_path)]), "ValueError: sites"),
             (("teacher_targets.py", ["--sites", "2", "--out", str(made)]), "use another --out"),
             (("ablate_minilm.py", ["--steps", "5"]), "ValueError: steps"),
             (("ablate_minilm.py", ["--arms", "shipped,decoder-only"]), "--arms")]
    for (call, want), r in zip(calls, run_scripts([c for c, _ in calls])):
        assert r.returncode != 0 and want in r.stderr, (call, r.stderr[-1000:])
    assert not list(tmp_path.glob("shard_*.pt"))
