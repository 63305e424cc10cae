"""Scores of generated text: exact small cases and a judge built in code."""

import math

import numpy as np
import pytest
import torch

from tokendyn.evaluation import generation as gs


def test_diversity_scores_on_exact_cases():
    assert gs.unigram_entropy([[1, 1, 2, 2]]) == pytest.approx(math.log(2))
    assert gs.unigram_entropy([[7, 7, 7]]) == 0.0
    assert gs.repetition([[1, 1, 1, 2], [3, 4]]) == pytest.approx(2 / 4)
    assert gs.distinct_n([[1, 2, 1, 2]], 2) == pytest.approx(2 / 3)
    assert gs.distinct_n([[5, 5, 5, 5]], 2) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="no token"):
        gs.unigram_entropy([[]])
    with pytest.raises(ValueError, match="n"):
        gs.distinct_n([[1]], 0)


def test_pooled_perplexity_is_token_weighted():
    nll = np.array([2.0, 0.0])
    count = np.array([1.0, 3.0])
    est = gs.pooled_perplexity(nll, count, n_boot=200)
    assert est.value == pytest.approx(math.exp(2 / 4))
    assert est.lo <= est.value <= est.hi


class _UniformLM(torch.nn.Module):
    """A causal 'LM' whose next-token law is uniform over V: NLL log V per token, exactly."""

    def __init__(self, V):
        super().__init__()
        self.V = V
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask=None):
        class Out:
            pass
        o = Out()
        o.logits = torch.zeros(*input_ids.shape, self.V) + 0 * self.w
        return o


class _Tok:
    pad_token_id = 0
    unk_token_id = None
    unk_token = None
    bos_token_id = 1

    def convert_tokens_to_ids(self, t):
        return 2 if t == "<|endoftext|>" else None

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [3 + (ord(c) % 5) for c in text]}


def test_judge_scores_every_token_including_the_first():
    nll, count = gs.judge_nll(_UniformLM(10), _Tok(), ["abc", "de"])
    assert count.tolist() == [3, 2]
    assert nll == pytest.approx(np.array([3, 2]) * math.log(10), rel=1e-5)
    s = gs.score_texts(_UniformLM(10), _Tok(), ["abc", "de"], [[1, 2, 3], [4, 4]])
    assert s.ppl.value == pytest.approx(10, rel=1e-4) and s.n_tokens == 5
    with pytest.raises(ValueError, match="differ in length"):
        gs.score_texts(_UniformLM(10), _Tok(), ["a"], [[1], [2]])


def test_seeded_scores_pool_perplexity_and_put_diversity_intervals_over_seeds():
    texts = [["abc", "de"], ["ab", "cde"], ["a", "bcd"]]
    toks = [[[1, 2, 3], [4, 4]], [[1, 1], [2, 3, 4]], [[5], [6, 6, 6]]]
    s = gs.score_seeds(_UniformLM(10), _Tok(), texts, toks)
    assert s.ppl.value == pytest.approx(10, rel=1e-4) and s.n_texts == 6 and s.n_tokens == 14
    assert [r["repetition"] for r in s.by_seed] == pytest.approx([1 / 3, 1 / 3, 1.0])
    assert s.repetition.value == pytest.approx(5 / 9)
    assert s.repetition.lo < s.repetition.value < s.repetition.hi  # t interval over 3 seeds, which differ
    assert s.ppl_seeds.lo == pytest.approx(10, rel=1e-4)  # equal per-seed values: a zero-width interval
    with pytest.raises(ValueError, match="same number"):
        gs.score_seeds(_UniformLM(10), _Tok(), [["a"], ["b", "c"]], [[[1]], [[2], [3]]])
    with pytest.raises(ValueError, match="S >= 2"):
        gs.score_seeds(_UniformLM(10), _Tok(), [["a"]], [[[1]]])


def test_seed_interval_is_the_student_t_interval():
    from tokendyn.core.stats import seed_interval

    est = seed_interval([1.0, 2.0, 3.0])
    # mean 2, sd 1, n 3: half-width t(0.975, 2) / sqrt(3) = 4.3027 / 1.7321
    assert est.value == 2.0 and est.hi - 2.0 == pytest.approx(4.302653 / math.sqrt(3), rel=1e-5)
    with pytest.raises(ValueError, match="2 seeds"):
        seed_interval([1.0])


def test_seed_interval_of_a_rate_stays_in_its_range():
    from tokendyn.core.stats import seed_interval

    est = seed_interval([0.0, 0.0, 0.06], bounds=(0.0, 1.0))
    assert est.lo == 0.0 and est.value == pytest.approx(0.02) and est.hi > 0.06


def test_entropy_matched_perplexity_removes_a_diversity_imbalance():
    from tokendyn.evaluation.generation import entropy_matched_perplexity, text_entropies

    assert text_entropies([[1, 1, 1, 1], [1, 2, 3, 4]]) == pytest.approx([0.0, math.log(4)])
    rng = np.random.default_rng(0)
    # Two samplers that score the same at every entropy: per-token NLL 2 at low entropy, 5 at high.
    # Sampler a writes mostly high-entropy texts, b mostly low ones, so their raw perplexities differ.
    def texts(n_low, n_high):
        ent = np.concatenate([rng.uniform(0.5, 1.0, n_low), rng.uniform(2.5, 3.0, n_high)])
        count = np.full(ent.size, 20.0)
        nll = np.where(ent < 2, 2.0, 5.0) * count
        return nll, count, ent
    a, b = texts(20, 180), texts(180, 20)
    raw_a = math.exp(a[0].sum() / a[1].sum())
    raw_b = math.exp(b[0].sum() / b[1].sum())
    assert raw_a / raw_b > 10
    m = entropy_matched_perplexity(*a, *b, bins=2, n_boot=200)
    assert m.a.value == pytest.approx(m.b.value) and m.ratio.value == pytest.approx(1.0)
    assert m.ratio.lo <= 1.0 <= m.ratio.hi
    assert m.shares_a[1] > 0.8 and m.shares_b[0] > 0.8
    # a real difference at equal entropy survives the matching
    worse = (a[0] * 1.5, a[1], a[2])
    assert entropy_matched_perplexity(*worse, *b, bins=2, n_boot=200).ratio.lo > 1.5
    with pytest.raises(ValueError, match="do not overlap"):
        entropy_matched_perplexity(np.ones(3), np.ones(3), np.zeros(3), np.ones(3), np.ones(3), np.full(3, 9.0), bins=2)
