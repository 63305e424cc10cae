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
