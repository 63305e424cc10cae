"""Scores of generated text: judge perplexity under a causal LM, unigram entropy, repetition, distinct-n.

Generative perplexity alone is gamed by repetition (a sampler that repeats one frequent token scores
well), so the diffusion-LM literature reports unigram entropy beside it; we also give the immediate
repetition rate and distinct-2. The judge is a real language model (SmolLM2-135M offline,
:func:`tokendyn.models.load_ar`), run in float32; each text is read after a document-start token.
Perplexity is pooled over tokens, ``exp(sum NLL / sum tokens)``, with a percentile bootstrap over
texts for its interval. :func:`score_seeds` scores one sampler run with several seeds: the diversity
scores get an interval over seeds, since resampling texts would bias a pooled entropy down.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.checks import check_range
from ..core.positions import max_positions
from ..core.stats import Estimate, seed_interval
from .causal import right_pad, sequence_log_likelihoods, start_id


@dataclass(frozen=True)
class TextScores:
    """Scores of ``n_texts`` texts (``n_tokens`` judge tokens): ``ppl`` with its interval,
    ``entropy`` (nats, pooled unigram distribution of the given token lists), ``repetition`` (share
    of tokens equal to the one before), ``distinct2`` (distinct bigrams over all bigrams)."""

    ppl: Estimate
    entropy: float
    repetition: float
    distinct2: float
    n_texts: int
    n_tokens: int


def judge_nll(model: Any, tokenizer: Any, texts: Sequence[str], *, batch: int = 16, max_len: int = 256
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per-text negative log-likelihood (nats, summed over tokens) under a causal LM, and the number
    of tokens scored: two ``[N]`` arrays. Each text is read after :func:`.causal.start_id`, so its
    first token is scored too; texts are cut at ``max_len`` judge tokens."""
    if not texts:
        raise ValueError("texts is empty: nothing to score")
    check_range("batch", batch, 1, None, integer=True)
    lim = max_positions(model)
    check_range("max_len", max_len, 2, None if lim is None else lim[0], integer=True)
    s = start_id(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else s
    nll, count = [], []
    for i in range(0, len(texts), batch):
        seqs = [[s] + tokenizer(t, add_special_tokens=False)["input_ids"][: max_len - 1] for t in texts[i:i + batch]]
        x, att = right_pad(seqs, pad)
        nll += (-sequence_log_likelihoods(model, x, att)).tolist()
        count += [len(q) - 1 for q in seqs]
    return np.asarray(nll, dtype=np.float64), np.asarray(count, dtype=np.float64)


def pooled_perplexity(nll: np.ndarray, count: np.ndarray, *, n_boot: int = 2000, level: float = 0.95,
                      seed: int = 0) -> Estimate:
    """``exp(sum nll / sum count)`` over texts ``[N]`` with a percentile bootstrap over texts."""
    nll, count = np.asarray(nll, dtype=np.float64), np.asarray(count, dtype=np.float64)
    if nll.shape != count.shape or nll.size < 2 or count.sum() <= 0:
        raise ValueError("nll and count must be [N] with N >= 2 and at least one token")
    idx = np.random.default_rng(seed).integers(0, nll.size, size=(n_boot, nll.size))
    reps = np.exp(nll[idx].sum(1) / np.maximum(count[idx].sum(1), 1))
    a = (1 - level) / 2
    return Estimate(float(math.exp(nll.sum() / count.sum())), float(np.quantile(reps, a)),
                    float(np.quantile(reps, 1 - a)), int(nll.size), level)


def unigram_entropy(token_lists: Sequence[Sequence[int]]) -> float:
    """Entropy (nats) of the pooled unigram distribution of all tokens in ``token_lists``."""
    counts = Counter(t for seq in token_lists for t in seq)
    total = sum(counts.values())
    if total == 0:
        raise ValueError("token_lists holds no token")
    p = np.array(list(counts.values()), dtype=np.float64) / total
    return float(-(p * np.log(p)).sum())


def repetition(token_lists: Sequence[Sequence[int]]) -> float:
    """Share of tokens (after the first of each list) equal to the token just before them."""
    same = sum(int(a == b) for seq in token_lists for a, b in zip(seq[1:], seq[:-1]))
    pairs = sum(max(len(seq) - 1, 0) for seq in token_lists)
    if pairs == 0:
        raise ValueError("token_lists: no list has two tokens")
    return same / pairs


def distinct_n(token_lists: Sequence[Sequence[int]], n: int = 2) -> float:
    """Distinct ``n``-grams over all ``n``-grams, pooled over ``token_lists`` (1 = no n-gram repeats)."""
    check_range("n", n, 1, None, integer=True)
    grams = [tuple(seq[i:i + n]) for seq in token_lists for i in range(len(seq) - n + 1)]
    if not grams:
        raise ValueError(f"token_lists: no list has {n} tokens")
    return len(set(grams)) / len(grams)


def seq_rep(token_lists: Sequence[Sequence[int]], n: int = 4) -> np.ndarray:
    """seq-rep-n of each text (Welleck et al. 2019): ``1 - distinct n-grams / n-grams`` within the
    text, ``[N]`` for ``N`` token lists; 0 when no n-gram of a text repeats. A statistic that long
    texts can show: one loop of a phrase raises it, and unlike the immediate repetition rate it sees
    a repeat at any distance."""
    check_range("n", n, 1, None, integer=True)
    out = []
    for i, seq in enumerate(token_lists):
        grams = [tuple(seq[k:k + n]) for k in range(len(seq) - n + 1)]
        if not grams:
            raise ValueError(f"token_lists[{i}] has {len(seq)} tokens: seq-rep-{n} needs at least {n}")
        out.append(1.0 - len(set(grams)) / len(grams))
    return np.asarray(out, dtype=np.float64)


def score_texts(model: Any, tokenizer: Any, texts: Sequence[str], token_lists: Sequence[Sequence[int]], *,
                seed: int = 0) -> TextScores:
    """All four scores: judge perplexity of ``texts`` and the diversity scores of ``token_lists``
    (the generator's own tokens, one list per text)."""
    if len(texts) != len(token_lists):
        raise ValueError(f"texts and token_lists differ in length: {len(texts)} vs {len(token_lists)}")
    nll, count = judge_nll(model, tokenizer, texts)
    return TextScores(pooled_perplexity(nll, count, seed=seed), unigram_entropy(token_lists),
                      repetition(token_lists), distinct_n(token_lists, 2), len(texts), int(count.sum()))


@dataclass(frozen=True)
class SeededScores:
    """One sampler run with ``S`` seeds, the same number of texts per seed.

    ``ppl``: judge perplexity pooled over all texts, bootstrap over texts; ``ppl_seeds``: the mean
    of the per-seed perplexities with a Student-t interval over seeds. ``entropy``, ``repetition``
    and ``distinct2``: each computed on one seed's texts (so on equal token counts, which a unigram
    entropy needs to be comparable), mean with a t interval over seeds. ``by_seed``: per-seed rows.
    """

    ppl: Estimate
    ppl_seeds: Estimate
    entropy: Estimate
    repetition: Estimate
    distinct2: Estimate
    by_seed: list[dict[str, float]]
    n_texts: int
    n_tokens: int


def score_seeds(model: Any, tokenizer: Any, texts: Sequence[Sequence[str]],
                token_lists: Sequence[Sequence[Sequence[int]]], *, seed: int = 0) -> SeededScores:
    """Score ``S >= 2`` seeds of one sampler: ``texts[s]`` the decoded texts of seed ``s`` and
    ``token_lists[s]`` the generator's own tokens of each (one list per text). Every seed must
    hold the same number of texts."""
    if len(texts) < 2 or len(texts) != len(token_lists):
        raise ValueError(f"texts and token_lists must hold the same S >= 2 seeds, got {len(texts)} and "
                         f"{len(token_lists)}")
    sizes = {len(t) for t in texts} | {len(t) for t in token_lists}
    if len(sizes) != 1:
        raise ValueError(f"every seed must hold the same number of texts and token lists, got sizes {sorted(sizes)}")
    flat = [t for seed_texts in texts for t in seed_texts]
    nll, count = judge_nll(model, tokenizer, flat)
    per = len(texts[0])
    rows = []
    for s, toks in enumerate(token_lists):
        sl = slice(s * per, (s + 1) * per)
        rows.append({"seed": s, "ppl": float(np.exp(nll[sl].sum() / count[sl].sum())), "entropy": unigram_entropy(toks),
                     "repetition": repetition(toks), "distinct2": distinct_n(toks, 2)})
    col = {k: [r[k] for r in rows] for k in ("ppl", "entropy", "repetition", "distinct2")}
    rate = (0.0, 1.0)
    return SeededScores(pooled_perplexity(nll, count, seed=seed), seed_interval(col["ppl"], bounds=(1.0, math.inf)),
                        seed_interval(col["entropy"], bounds=(0.0, math.inf)),
                        seed_interval(col["repetition"], bounds=rate), seed_interval(col["distinct2"], bounds=rate),
                        rows, len(flat), int(count.sum()))


def text_entropies(token_lists: Sequence[Sequence[int]]) -> np.ndarray:
    """Unigram entropy (nats) of each text's own tokens: ``[N]`` for ``N`` token lists."""
    out = []
    for seq in token_lists:
        if not seq:
            raise ValueError("token_lists holds an empty list")
        p = np.array(list(Counter(seq).values()), dtype=np.float64) / len(seq)
        out.append(float(-(p * np.log(p)).sum()))
    return np.asarray(out)


@dataclass(frozen=True)
class MatchedPerplexity:
    """Judge perplexity of two samplers at equal per-text unigram entropy (:func:`entropy_matched_perplexity`).

    ``a`` / ``b``: each sampler's perplexity with its texts reweighted so that the share of texts in
    every entropy bin equals the pooled share (both samplers' texts together); ``ratio``: ``a / b``.
    Intervals: percentile bootstrap over texts (each sampler's texts resampled, bins kept).
    ``edges``: the bins (quantiles of the pooled entropies); ``shares_a`` / ``shares_b`` each
    sampler's own share per bin, the raw imbalance the matching removes.
    """

    a: Estimate
    b: Estimate
    ratio: Estimate
    edges: list[float]
    shares_a: list[float]
    shares_b: list[float]


def entropy_matched_perplexity(nll_a: np.ndarray, count_a: np.ndarray, ent_a: np.ndarray,
                               nll_b: np.ndarray, count_b: np.ndarray, ent_b: np.ndarray, *, bins: int = 4,
                               n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> MatchedPerplexity:
    """Compare two samplers' judge perplexity at matched diversity.

    Per text: ``nll`` (summed, nats), ``count`` (judge tokens) and ``ent`` (:func:`text_entropies`),
    ``[N_a]`` and ``[N_b]``. The pooled entropies are cut into ``bins`` quantile bins; within a bin
    each sampler's perplexity is pooled over tokens, and the per-bin log-perplexities are averaged
    with the pooled bin shares as weights, so both samplers are scored on the same mix of low- and
    high-entropy texts. A bin that one sampler leaves empty is dropped for both (its share is
    renormalised away); ``ValueError`` when no bin holds texts of both.
    """
    arrays = [np.asarray(v, dtype=np.float64) for v in (nll_a, count_a, ent_a, nll_b, count_b, ent_b)]
    nll_a, count_a, ent_a, nll_b, count_b, ent_b = arrays
    if not (nll_a.shape == count_a.shape == ent_a.shape and nll_b.shape == count_b.shape == ent_b.shape):
        raise ValueError("nll, count and ent must share a shape [N] per sampler")
    if nll_a.size < 2 or nll_b.size < 2:
        raise ValueError("each sampler needs at least 2 texts")
    check_range("bins", bins, 1, None, integer=True)
    check_range("n_boot", n_boot, 100, None, integer=True)
    pooled = np.concatenate([ent_a, ent_b])
    edges = np.quantile(pooled, np.linspace(0, 1, bins + 1))
    edges[0], edges[-1] = -np.inf, np.inf
    bin_a = np.clip(np.searchsorted(edges, ent_a, side="right") - 1, 0, bins - 1)
    bin_b = np.clip(np.searchsorted(edges, ent_b, side="right") - 1, 0, bins - 1)
    both = [k for k in range(bins) if (bin_a == k).any() and (bin_b == k).any()]
    if not both:
        raise ValueError("no entropy bin holds texts of both samplers: their entropies do not overlap")
    pooled_bins = np.concatenate([bin_a, bin_b])
    w = np.array([(pooled_bins == k).sum() for k in both], dtype=np.float64)
    w /= w.sum()

    def matched(nll, count, b, idx):
        out = 0.0
        for wk, k in zip(w, both):
            sel = idx[b[idx] == k]
            if sel.size == 0 or count[sel].sum() == 0:
                return math.nan
            out += wk * nll[sel].sum() / count[sel].sum()
        return math.exp(out)

    ia, ib = np.arange(nll_a.size), np.arange(nll_b.size)
    va, vb = matched(nll_a, count_a, bin_a, ia), matched(nll_b, count_b, bin_b, ib)
    rng = np.random.default_rng(seed)
    ra, rb = [], []
    for _ in range(n_boot):
        ra.append(matched(nll_a, count_a, bin_a, rng.integers(0, nll_a.size, nll_a.size)))
        rb.append(matched(nll_b, count_b, bin_b, rng.integers(0, nll_b.size, nll_b.size)))
    ra, rb = np.asarray(ra), np.asarray(rb)
    ok = np.isfinite(ra) & np.isfinite(rb)
    q = ((1 - level) / 2, 1 - (1 - level) / 2)

    def est(value, reps, n):
        lo, hi = np.quantile(reps[ok], q) if ok.any() else (math.nan, math.nan)
        return Estimate(float(value), float(lo), float(hi), int(n), level)

    share = [float((bin_a == k).mean()) for k in range(bins)], [float((bin_b == k).mean()) for k in range(bins)]
    return MatchedPerplexity(est(va, ra, nll_a.size), est(vb, rb, nll_b.size), est(va / vb, ra / rb, nll_a.size + nll_b.size),
                             [float(e) for e in edges[1:-1]], share[0], share[1])
