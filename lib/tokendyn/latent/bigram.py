"""A smoothed bigram model of the word tokens: a cheap stand-in for the paper's generative perplexity.

Paper 2 scores generated text by its perplexity under a large LM (ELF-B at K = 4: ODE 294 against
SDE 50). Offline and on CPU we score decoded token sequences under an add-``alpha`` bigram model fit
on the training split of the same corpus, and count immediate repetitions (the failure mode the
paper describes for deterministic few-step text generators).
"""

from __future__ import annotations

import math

import torch

from ..core.checks import check_range


class BigramLM:
    """Add-``alpha`` smoothed bigram probabilities over ``vocab_size`` ids, fit on ``[N, L]`` sequences."""

    def __init__(self, sequences: torch.Tensor, vocab_size: int, alpha: float = 0.1):
        check_range("vocab_size", vocab_size, 1, None, integer=True)
        check_range("alpha", alpha, 0, None, lo_open=True)
        if sequences.dim() != 2 or sequences.shape[1] < 2:
            raise ValueError(f"sequences must be [N, L] with L >= 2, got {tuple(sequences.shape)}")
        if int(sequences.min()) < 0 or int(sequences.max()) >= vocab_size:
            raise ValueError(f"token ids must lie in [0, {vocab_size})")
        self.vocab_size, self.alpha = vocab_size, alpha
        pairs = sequences[:, :-1] * vocab_size + sequences[:, 1:]
        keys, counts = pairs.flatten().unique(return_counts=True)
        self._pair = dict(zip(keys.tolist(), counts.tolist()))
        self._prev = torch.bincount(sequences[:, :-1].flatten(), minlength=vocab_size).double()

    def log_prob(self, ids: torch.Tensor) -> torch.Tensor:
        """``log p(x_{i+1} | x_i)`` for every adjacent pair of ``ids`` ``[B, L]`` -> ``[B, L - 1]`` (float64)."""
        prev, nxt = ids[:, :-1], ids[:, 1:]
        pair = (prev * self.vocab_size + nxt).flatten().tolist()
        num = torch.tensor([self._pair.get(k, 0) for k in pair], dtype=torch.float64) + self.alpha
        den = self._prev[prev.flatten()] + self.alpha * self.vocab_size
        return (num / den).log().reshape(prev.shape)

    def perplexity(self, ids: torch.Tensor) -> float:
        """exp of the mean negative bigram log-probability of ``ids`` ``[B, L]``."""
        return float(math.exp(-float(self.log_prob(ids).mean())))


def repetition_rate(ids: torch.Tensor) -> float:
    """Share of positions whose token repeats the one before: ``ids`` ``[B, L]`` -> float."""
    if ids.dim() != 2 or ids.shape[1] < 2:
        raise ValueError(f"ids must be [B, L] with L >= 2, got {tuple(ids.shape)}")
    return float((ids[:, 1:] == ids[:, :-1]).double().mean())
