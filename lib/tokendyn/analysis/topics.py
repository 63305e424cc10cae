"""Topic regions in sentence-embedding space, and how Glauber chains visit them (chapter 4,
Paper 1's claim 8: political content as a recurrent attractor).

The measurement has four parts, all here so that the chapter only calls them:

- **Labelled snippets** (:func:`topic_split`): real passages per topic, cut to the chains' length
  (the first ``n`` content tokens, decoded), split into chain starts, classifier training and
  held-out validation, with no passage in two parts.
- **A topic classifier with a way to say "none of these"** (:class:`CentroidClassifier`): nearest
  centroid on unit sentence embeddings, validated on held-out snippets (:func:`accuracy`), with a
  reject threshold calibrated on real text (:func:`with_reject`) so that word salad is not forced
  into the nearest topic.
- **Null controls** (:func:`random_token_ids`, :func:`shuffled_words`): text with no topic at
  all, through the same classifier. A label that garbage gets often is a *sink* of the
  classifier; chains that drift into garbage land there without any attractor.
- **Visits** (:func:`region_visits`, :func:`visit_summary`): for a region (a boolean per recorded
  frame), whether a chain ever enters it, the share of its time spent there, how often it comes
  back and when it first arrives, with intervals over chains.

Two more gates separate "near political prose" from "where garbage goes": the cosine similarity
to each topic's real passages (:func:`knn_similarity`), and the fluency of the text under an
autoregressive LM (:func:`ar_nll`). :func:`chain_explorer` is the live (ipywidgets) view of a
chain's path through embedding space.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..core.checks import check_choice, check_range
from ..core.stats import Estimate, wilson

__all__ = ["TopicSplit", "topic_split", "content_length", "CentroidClassifier", "fit_centroids",
           "with_reject", "accuracy", "label_shares", "random_token_ids", "shuffled_words",
           "knn_similarity", "RegionVisits", "region_visits", "visit_summary", "median_entry",
           "ar_nll", "repeated_words", "region_shares", "excess_over_controls",
           "AttractorTest", "attractor_test", "fluent", "AttractorRun", "attractor_run", "chain_explorer", "model_card", "NONE",
           "FluencyGate", "fluency_gates", "LabelledFrames", "label_frames"]

NONE = "none of these"


# --- labelled snippets -----------------------------------------------------------------------------

def content_length(loaded: Any, text: str) -> int:
    """Number of content tokens of ``text`` under ``loaded``'s tokenizer (special tokens, ``[UNK]``
    included, dropped as :func:`tokendyn.mcmc.conditional.content_ids` drops them)."""
    tok = loaded.tokenizer
    special = set(tok.all_special_ids)
    return sum(t not in special for t in tok(text, add_special_tokens=False)["input_ids"])


@dataclass(frozen=True)
class TopicSplit:
    """Disjoint real passages per topic: ``starts`` (topic -> full passages the chains start from),
    classifier ``train_texts`` / ``train_labels`` and held-out ``val_texts`` / ``val_labels``
    (snippets: the first ``n_tokens`` content tokens of a passage, decoded), and the full passages
    behind the snippets (``train_passages``, ``val_passages``)."""

    topics: tuple[str, ...]
    n_tokens: int
    starts: dict[str, list[str]]
    train_texts: list[str]
    train_labels: list[str]
    val_texts: list[str]
    val_labels: list[str]
    train_passages: list[str]
    val_passages: list[str]


def topic_split(loaded: Any, topics: Sequence[str], *, n_tokens: int, n_start: int, n_train: int,
                n_val: int, seed: int = 0) -> TopicSplit:
    """For each topic, rank its passages by ``seed`` (:func:`tokendyn.core.data.passages`), keep those
    with at least ``n_tokens`` content tokens, and cut the ranking into ``n_start`` chain starts,
    ``n_train`` training and ``n_val`` validation passages, in that order (so no passage is in
    two parts and a larger ``n_val`` never changes the starts). Training and validation texts are
    snippets of ``n_tokens`` tokens, the length of the chains' states."""
    from ..mcmc.conditional import content_ids, decode
    from ..core.data import TOPICS, passages, topic_pool

    if isinstance(topics, str) or len(topics) < 2:
        raise ValueError(f"topics={topics!r}: give at least two topic names")
    for t in topics:
        check_choice("topics", t, TOPICS)
    check_range("n_tokens", n_tokens, 1, integer=True)
    check_range("n_start", n_start, 0, integer=True)
    check_range("n_train", n_train, 0, integer=True)
    check_range("n_val", n_val, 0, integer=True)
    check_range("seed", seed, 0, integer=True)
    need = n_start + n_train + n_val
    starts, tr, trl, va, val, trp, vap = {}, [], [], [], [], [], []
    for topic in topics:
        ranked = passages(topic, len(topic_pool(topic)), seed)
        usable = []
        for p in ranked:
            if content_length(loaded, p) >= n_tokens:
                usable.append(p)
                if len(usable) == need:
                    break
        if len(usable) < need:
            raise ValueError(f"topic {topic!r} has {len(usable)} passages with >= {n_tokens} tokens, "
                             f"fewer than n_start + n_train + n_val = {need}")
        starts[topic] = usable[:n_start]
        snip = decode(loaded, content_ids(loaded, usable[n_start:], n_tokens)) if need > n_start else []
        tr += snip[:n_train]
        trl += [topic] * n_train
        va += snip[n_train:]
        val += [topic] * n_val
        trp += usable[n_start:n_start + n_train]
        vap += usable[n_start + n_train:]
    return TopicSplit(tuple(topics), n_tokens, starts, tr, trl, va, val, trp, vap)


# --- classifier ----------------------------------------------------------------------------------

def _unit(emb: Tensor) -> Tensor:
    if not isinstance(emb, Tensor) or emb.dim() != 2 or not emb.is_floating_point():
        raise ValueError(f"emb must be a float tensor [N, d], got "
                         f"{tuple(emb.shape) if isinstance(emb, Tensor) else type(emb).__name__}")
    return torch.nn.functional.normalize(emb.double(), dim=-1)


@dataclass(frozen=True)
class CentroidClassifier:
    """Nearest centroid on unit embeddings: ``labels`` ``K`` names, ``centroids`` ``[K, d]`` unit
    float64, and ``threshold``: an embedding whose best cosine is below it is "none of these"
    (index ``-1``) when predicting with ``gated=True``. ``-inf`` means no reject option."""

    labels: tuple[str, ...]
    centroids: Tensor
    threshold: float = -math.inf

    def scores(self, emb: Tensor) -> Tensor:
        """Cosine to each centroid: ``[N, d]`` -> ``[N, K]`` float64."""
        e = _unit(emb)
        if e.shape[1] != self.centroids.shape[1]:
            raise ValueError(f"emb has dimension {e.shape[1]}, the centroids {self.centroids.shape[1]}")
        return e @ self.centroids.T

    def predict(self, emb: Tensor, *, gated: bool = False) -> Tensor:
        """``[N, d]`` -> ``[N]`` label indices; with ``gated``, ``-1`` where the best cosine is below
        :attr:`threshold`."""
        s = self.scores(emb)
        best, idx = s.max(-1)
        return torch.where(best >= self.threshold, idx, -1) if gated else idx

    def names(self, idx: Tensor) -> list[str]:
        """Label indices (``-1`` allowed) -> names, ``"none of these"`` for ``-1``."""
        return [NONE if int(i) < 0 else self.labels[int(i)] for i in idx.flatten().tolist()]

    def index(self, label: str) -> int:
        """The index of ``label``."""
        check_choice("label", label, self.labels)
        return self.labels.index(label)


def fit_centroids(emb: Tensor, labels: Sequence[str], *, order: Sequence[str] | None = None) -> CentroidClassifier:
    """Centroids of unit embeddings ``[N, d]`` per label (``N`` labels), in ``order`` (default: first
    appearance); each centroid renormalised to unit length."""
    e = _unit(emb)
    labels = list(labels)
    if len(labels) != e.shape[0]:
        raise ValueError(f"labels has {len(labels)} entries, emb {e.shape[0]} rows")
    names = tuple(dict.fromkeys(labels)) if order is None else tuple(order)
    missing = [n for n in names if n not in labels]
    if len(names) < 2 or missing or set(labels) - set(names):
        raise ValueError(f"need at least two labels, each with examples; order={names}, missing {missing}")
    lab = np.array(labels)
    cents = torch.stack([e[torch.from_numpy(lab == n)].mean(0) for n in names])
    return CentroidClassifier(names, torch.nn.functional.normalize(cents, dim=-1))


def with_reject(clf: CentroidClassifier, emb_real: Tensor, *, keep: float = 0.95) -> CentroidClassifier:
    """Add a "none of these" class: the threshold is the ``1 - keep`` quantile of the best cosine
    over real text ``emb_real`` ``[N, d]``, so a share ``keep`` of such text keeps its label."""
    check_range("keep", keep, 0.0, 1.0, lo_open=True)
    best = clf.scores(emb_real).max(-1).values.numpy()
    thr = float(np.quantile(best, 1 - keep, method="inverted_cdf")) if keep < 1 else float(best.min())
    return replace(clf, threshold=thr)


def accuracy(clf: CentroidClassifier, emb: Tensor, labels: Sequence[str], *, gated: bool = False) -> Estimate:
    """Share of ``emb`` ``[N, d]`` given their true ``labels`` (``N`` names), with a Wilson interval;
    with ``gated`` a "none of these" counts as wrong."""
    labels = list(labels)
    if len(labels) != emb.shape[0]:
        raise ValueError(f"labels has {len(labels)} entries, emb {emb.shape[0]} rows")
    pred = clf.names(clf.predict(emb, gated=gated))
    return wilson(sum(p == t for p, t in zip(pred, labels)), len(labels))


def label_shares(clf: CentroidClassifier, emb: Tensor, *, gated: bool = False) -> dict[str, Estimate]:
    """Share of ``emb`` ``[N, d]`` given each label (and "none of these" when ``gated``), Wilson
    intervals; the shares sum to 1."""
    names = clf.names(clf.predict(emb, gated=gated))
    keys = list(clf.labels) + ([NONE] if gated else [])
    return {k: wilson(sum(n == k for n in names), len(names)) for k in keys}


# --- null controls --------------------------------------------------------------------------------

def random_token_ids(support: Tensor, count: int, n: int, *, seed: int = 0) -> Tensor:
    """``count`` states of ``n`` tokens drawn uniformly from the ids where the boolean mask
    ``support`` ``[V]`` is True -> ``[count, n]``. (An MLM's support: ``~MLMConditional.unsupported``.)"""
    if not isinstance(support, Tensor) or support.dtype != torch.bool or support.dim() != 1:
        raise ValueError("support must be a boolean mask [V] of the token ids a chain can hold")
    check_range("count", count, 1, integer=True)
    check_range("n", n, 1, integer=True)
    ids = support.nonzero().flatten()
    if ids.numel() == 0:
        raise ValueError("support holds no token")
    g = torch.Generator().manual_seed(seed)
    return ids[torch.randint(ids.numel(), (count, n), generator=g)]


def shuffled_words(texts: Sequence[str], *, seed: int = 0) -> list[str]:
    """Word salad from real words: every word of ``texts`` pooled, shuffled (seeded) and dealt back
    into texts of the original word counts. Real vocabulary, no syntax, topics mixed."""
    texts = list(texts)
    if not texts:
        raise ValueError("texts is empty")
    words = [w for t in texts for w in t.split()]
    perm = np.random.default_rng(seed).permutation(len(words))
    pool = [words[i] for i in perm]
    out, k = [], 0
    for t in texts:
        m = len(t.split())
        out.append(" ".join(pool[k:k + m]))
        k += m
    return out


# --- distances to real passages ----------------------------------------------------------------

def knn_similarity(emb: Tensor, refs: Tensor, ref_labels: Sequence[str], labels: Sequence[str], *,
                   k: int = 5) -> Tensor:
    """Mean cosine of each row of ``emb`` ``[N, d]`` to its ``k`` most similar reference passages of
    each label: ``refs`` ``[M, d]`` with ``ref_labels`` (``M`` names) -> ``[N, len(labels)]`` float64.
    A chain state near real political prose scores as high on ``politics`` as real political
    snippets do; word salad scores low on every topic even where a classifier calls it political."""
    e, r = _unit(emb), _unit(refs)
    ref_labels = np.array(list(ref_labels))
    if len(ref_labels) != r.shape[0]:
        raise ValueError(f"ref_labels has {len(ref_labels)} entries, refs {r.shape[0]} rows")
    check_range("k", k, 1, integer=True)
    cos = e @ r.T
    cols = []
    for lab in labels:
        m = torch.from_numpy(ref_labels == lab)
        if int(m.sum()) < k:
            raise ValueError(f"label {lab!r} has {int(m.sum())} reference passages, fewer than k={k}")
        cols.append(cos[:, m].topk(k, dim=-1).values.mean(-1))
    return torch.stack(cols, -1)


# --- visits to a region ----------------------------------------------------------------------------

@dataclass(frozen=True)
class RegionVisits:
    """Visits of ``B`` chains to one region, from ``inside`` ``[T, B]`` bool at ``steps`` ``[T]``.

    Frame 0 is the start. An *entry* is a frame ``t >= 1`` inside the region whose previous frame
    was outside. ``ever`` ``[B]``: at least one entry; ``time_fraction`` ``[B]``: share of frames
    ``1..T-1`` inside; ``entries`` ``[B]``; ``returns`` ``[B]``: entries after the first
    (``entries - 1``, at least 0); ``first_entry`` ``[B]`` float64: the step of the first entry,
    ``inf`` for a chain that never entered within the record (censored at ``steps[-1]``)."""

    steps: Tensor
    inside: Tensor
    ever: Tensor
    time_fraction: Tensor
    entries: Tensor
    returns: Tensor
    first_entry: Tensor


def region_visits(inside: Tensor, steps: Tensor | Sequence[int]) -> RegionVisits:
    """Entry, time-share, return and first-entry statistics of a region: ``inside`` ``[T, B]``
    (``T >= 2`` frames), ``steps`` ``[T]`` strictly increasing -> :class:`RegionVisits`."""
    inside = torch.as_tensor(inside)
    st = torch.as_tensor(steps, dtype=torch.float64).flatten()
    if inside.dtype != torch.bool or inside.dim() != 2 or inside.shape[0] < 2:
        raise ValueError(f"inside must be a bool tensor [T >= 2, B], got {tuple(inside.shape)} {inside.dtype}")
    if st.numel() != inside.shape[0] or bool((st[1:] <= st[:-1]).any()):
        raise ValueError(f"steps must be {inside.shape[0]} strictly increasing steps")
    entry = inside[1:] & ~inside[:-1]                           # [T-1, B]
    entries = entry.sum(0)
    ever = entries > 0
    first = torch.where(ever, st[1:][entry.long().argmax(0)], torch.full_like(ever, math.inf, dtype=torch.float64))
    return RegionVisits(steps=st, inside=inside, ever=ever, time_fraction=inside[1:].double().mean(0),
                        entries=entries, returns=(entries - 1).clamp_min(0), first_entry=first)


def median_entry(first_entry: np.ndarray | Tensor) -> float:
    """The median first-entry step, ``inf`` counted as later than any step (the Kaplan-Meier median
    when every chain is watched for the same time): the smallest ``t`` by which half the chains
    have entered, ``inf`` if fewer than half ever do."""
    x = np.sort(np.asarray(first_entry, dtype=np.float64).ravel())
    if x.size == 0:
        raise ValueError("first_entry is empty")
    return float(x[math.ceil(x.size / 2) - 1])


def visit_summary(v: RegionVisits, *, seed: int = 0, n_boot: int = 2000, level: float = 0.95) -> dict[str, Estimate]:
    """The four numbers of a region with intervals over chains: ``ever`` (share of chains that
    entered; Wilson), ``time_fraction`` and ``returns`` (means; percentile bootstrap over chains,
    the same resamples as :func:`tokendyn.core.stats.bootstrap` with this seed), ``first_entry`` (median
    step, :func:`median_entry`; its bootstrap interval uses order statistics, ``inf`` where more
    than half the resampled chains never entered)."""
    b = v.ever.numel()
    check_range("n_boot", n_boot, 100, integer=True)
    check_range("level", level, 0.0, 1.0, lo_open=True)
    out = {"ever": wilson(int(v.ever.sum()), b, level)}
    tf, ret, fe = (v.time_fraction.numpy(), v.returns.double().numpy(), v.first_entry.numpy())
    if b < 2:
        out.update({k: Estimate(float(x[0]), float(x[0]), float(x[0]), 1, level)
                    for k, x in (("time_fraction", tf), ("returns", ret), ("first_entry", fe))})
        return out
    idx = np.random.default_rng(seed).integers(0, b, size=(n_boot, b))
    a = (1 - level) / 2
    for k, x in (("time_fraction", tf), ("returns", ret)):
        reps = x[idx].mean(1)
        out[k] = Estimate(float(x.mean()), float(np.quantile(reps, a)), float(np.quantile(reps, 1 - a)), b, level)
    reps = np.sort(np.sort(fe[idx], axis=1)[:, math.ceil(b / 2) - 1])
    lo = reps[max(0, math.floor(a * n_boot))]
    hi = reps[min(n_boot - 1, math.ceil((1 - a) * n_boot) - 1)]
    out["first_entry"] = Estimate(median_entry(fe), float(lo), float(hi), b, level)
    return out


# --- the attractor statistic -------------------------------------------------------------------------

def region_shares(labels: Tensor, n_regions: int) -> Tensor:
    """Share of each chain's recorded frames after the start in each region: ``labels`` ``[T, B]``
    (a region's index, or -1 for "none of these"), ``T >= 2`` -> ``[B, n_regions]`` float64."""
    labels = torch.as_tensor(labels)
    if labels.dim() != 2 or labels.shape[0] < 2 or labels.dtype.is_floating_point:
        raise ValueError(f"labels must be an integer tensor [T >= 2, B], got {tuple(labels.shape)} {labels.dtype}")
    check_range("n_regions", n_regions, 1, integer=True)
    if bool(((labels < -1) | (labels >= n_regions)).any()):
        raise ValueError(f"labels must lie in [-1, {n_regions - 1}] (-1: none of these)")
    after = labels[1:]
    return torch.stack([(after == k).double().mean(0) for k in range(n_regions)], 1)


def excess_over_controls(shares: Tensor, start: Sequence[int], region: int, *, exclude: Sequence[int] = ()) -> Tensor:
    """A region's pull on each chain: its share of the chain's time minus the mean share of the
    regions the chain did not start in, other than ``region`` and the regions in ``exclude``.
    ``shares`` ``[B, R]`` (:func:`region_shares`), ``start`` ``[B]`` start-region indices ->
    ``[B]`` float64, nan for a chain that started in ``region`` (its own start is no pull)."""
    shares = torch.as_tensor(shares, dtype=torch.float64)
    b, r = shares.shape
    start = torch.as_tensor(list(start), dtype=torch.long)
    if start.shape != (b,):
        raise ValueError(f"start must give one region per chain ({b}), got {tuple(start.shape)}")
    check_range("region", region, 0, r - 1, integer=True)
    out = torch.full((b,), math.nan, dtype=torch.float64)
    for i in range(b):
        s = int(start[i])
        if s == region:
            continue
        others = [k for k in range(r) if k not in (s, region) and k not in exclude]
        if not others:
            raise ValueError(f"no control region left for chain {i}: {r} regions, start {s}, region {region}, "
                             f"exclude {list(exclude)}")
        out[i] = shares[i, region] - shares[i, others].mean()
    return out


@dataclass(frozen=True)
class AttractorTest:
    """:func:`attractor_test`'s result: the target's ``excess`` and the ``null`` (the same statistic
    for the control region ``null_region`` with the largest mean), each a mean over chains with a
    bootstrap interval, and the per-chain values behind them (``[B]``, nan where not defined)."""

    target: str
    excess: Estimate
    null_region: str
    null: Estimate
    per_chain: Tensor
    null_per_chain: Tensor


def attractor_test(labels: Tensor, start: Sequence[str], regions: Sequence[str], target: str = "politics", *,
                   seed: int = 0, n_boot: int = 2000) -> AttractorTest:
    """Is ``target`` an attractor, or a region that label noise makes big? ``labels`` ``[T, B]``
    (indices into ``regions``, -1 "none of these"; frame 0 the start) of chains that started in
    the regions ``start`` (``B`` names).

    The excess of the target is its share of a chain's time minus the mean share of the regions
    the chain did not start in (:func:`excess_over_controls`). The null is the same statistic for
    every other region, each over the chains that did not start in it and compared with the
    regions that are neither the chain's start, nor itself, nor the target (so the target's pull
    cannot lower a control's baseline): the control region with the largest mean excess is what a
    region with no pull reaches by label noise and the classifier's geometry. Both are bootstrap
    means over chains (:func:`tokendyn.core.stats.bootstrap` with ``seed``)."""
    from ..core.stats import bootstrap

    regions = list(regions)
    check_choice("target", target, regions)
    for s in start:
        check_choice("start", s, regions)
    shares = region_shares(labels, len(regions))
    if shares.shape[0] != len(start):
        raise ValueError(f"start names {len(start)} chains, labels hold {shares.shape[0]}")
    idx = [regions.index(s) for s in start]
    k = regions.index(target)
    ex = excess_over_controls(shares, idx, k)
    nulls = {}
    for j, name in enumerate(regions):
        if j != k:
            v = excess_over_controls(shares, idx, j, exclude=(k,))
            if int((~v.isnan()).sum()) >= 2:
                nulls[name] = v
    if not nulls or int((~ex.isnan()).sum()) < 2:
        raise ValueError("attractor_test needs at least two chains for the target and for a control region")
    null_region = max(nulls, key=lambda n: float(nulls[n][~nulls[n].isnan()].mean()))
    nv = nulls[null_region]
    return AttractorTest(target, bootstrap(ex[~ex.isnan()].numpy(), seed=seed, n_boot=n_boot), null_region,
                         bootstrap(nv[~nv.isnan()].numpy(), seed=seed, n_boot=n_boot), ex, nv)


def fluent(nll: Tensor, dominance: Tensor, repeats: Tensor, *, real_nll: Tensor, real_repeats: Tensor,
           keep: float = 0.95, repeat_share: float = 0.5) -> Tensor:
    """Which texts pass the fluency gate -> ``[N]`` bool: per-token NLL under the AR judge
    (:func:`ar_nll`) at most the ``keep`` quantile of real snippets' (``real_nll``), not a
    repetition basin (``dominance`` below ``repeat_share``, :func:`tokendyn.analysis.traps.dominance` of the
    text's tokens), and no more repeated longer words (:func:`repeated_words`) than the ``keep``
    quantile of the real snippets' (``real_repeats``): a judge scores "x, also known as x, is x"
    as likely text, since every repeat is predictable. All inputs ``[N]`` (real ones ``[M]``)."""
    check_range("keep", keep, 0.0, 1.0, lo_open=True)
    check_range("repeat_share", repeat_share, 0.0, 1.0, lo_open=True)
    nll, dominance, repeats = (torch.as_tensor(x, dtype=torch.float64) for x in (nll, dominance, repeats))
    if not nll.shape == dominance.shape == repeats.shape or nll.dim() != 1:
        raise ValueError(f"nll, dominance and repeats must share one shape [N], got {tuple(nll.shape)}, "
                         f"{tuple(dominance.shape)}, {tuple(repeats.shape)}")
    if torch.as_tensor(real_nll).numel() < 1 or torch.as_tensor(real_repeats).numel() < 1:
        raise ValueError("real_nll and real_repeats must hold at least one real snippet")
    nll_limit = torch.quantile(torch.as_tensor(real_nll, dtype=torch.float64), keep)
    word_limit = torch.quantile(torch.as_tensor(real_repeats, dtype=torch.float64), keep)
    return (nll <= nll_limit) & (dominance < repeat_share) & (repeats <= word_limit)


@dataclass(frozen=True)
class AttractorRun:
    """A recorded attractor run (``scripts/record_attractor.py``) read into what claim 8's rule
    takes: ``tests`` ((model, tau, labels) -> :class:`AttractorTest`, labels "gated" or "argmax")
    for the claim's models and the ablation's; ``politics_fluent``, the fluent share of the claim
    models' sampled politics states pooled (Wilson; None when no state was labelled politics);
    ``real_fluent``, the real held-out snippets'; ``ablation`` (tau -> the mean paired fall in
    gated politics share, chain by chain, when political prose leaves the corpus: with minus
    without, bootstrap); ``chains``, the fewest chains of a (model, tau); ``steps`` per chain."""

    models: tuple[str, ...]
    ablation_models: tuple[str, str] | None
    tests: dict[tuple[str, float, str], AttractorTest]
    politics_fluent: Estimate | None
    real_fluent: Estimate
    ablation: dict[float, Estimate]
    chains: int
    steps: int
    dtypes: dict[str, str]

    def rows(self) -> list[dict[str, Any]]:
        """One table row per (model, tau, labels): the politics excess and the null, with intervals."""
        return [{"model": m, "τ": f"{t:g}", "labels": lab, "politics excess [95% CI]": r.excess.fmt("+.3f"),
                 "null region": r.null_region, "null [95% CI]": r.null.fmt("+.3f"),
                 "above the null": "yes" if r.excess.lo > r.null.hi else "no", "chains": r.excess.n}
                for (m, t, lab), r in self.tests.items()]

    def figure_rows(self, labels: str = "gated") -> list[dict[str, Any]]:
        """Rows for :func:`tokendyn.publish.figures.basins.attractor_vs_null`."""
        out = []
        for (m, t, lab), r in self.tests.items():
            if lab == labels:
                out += [{"model": m, "tau": t, "statistic": r.target, "value": r.excess.value, "lo": r.excess.lo,
                         "hi": r.excess.hi},
                        {"model": m, "tau": t, "statistic": f"null: {r.null_region}", "value": r.null.value,
                         "lo": r.null.lo, "hi": r.null.hi}]
        return out


def attractor_run(rows: Sequence[dict[str, Any]], *, ablation_with: str | None = None, seed: int = 0) -> AttractorRun:
    """Read the rows of a recorded attractor run (its reference row, then one per model with
    ``role`` "claim" or "ablation") into an :class:`AttractorRun`; ``ablation_with``: the claim
    model the ablation's model is paired with (the record's ``--ablation-with``). Every statistic
    is computed here from the label matrices (:func:`attractor_test`, seeded bootstraps)."""
    from ..core.stats import bootstrap

    ref = next((r for r in rows if r.get("role") == "reference"), None)
    if ref is None:
        raise ValueError("the attractor record has no reference row (role 'reference')")
    regions = list(ref["regions"])
    pol = regions.index("politics")
    tests: dict[tuple[str, float, str], AttractorTest] = {}
    shares: dict[tuple[str, float], Tensor] = {}
    claim, abl_model, chains, steps, fl, dtypes = [], None, [], set(), [0, 0], {}
    for r in rows:
        if r.get("role") not in ("claim", "ablation"):
            continue
        name = r["model"]
        claim += [name] if r["role"] == "claim" else []
        abl_model = name if r["role"] == "ablation" else abl_model
        dtypes[name] = r.get("dtype", "float32")
        steps.add(int(r["steps"]))
        tau = torch.tensor(r["tau"], dtype=torch.float64)
        for t in sorted(set(r["tau"])):
            sel = (tau == t).nonzero().flatten()
            start = [r["start_topic"][i] for i in sel.tolist()]
            chains.append(len(start))
            for lab in ("gated", "argmax"):
                labels = torch.tensor(r[f"labels_{lab}"])[:, sel]
                tests[(name, float(t), lab)] = attractor_test(labels, start, regions, seed=seed)
                if lab == "gated":
                    shares[(name, float(t))] = region_shares(labels, len(regions))[:, pol]
        if r["role"] == "claim" and r.get("politics_fluency"):
            fl[0] += int(r["politics_fluency"]["fluent"])
            fl[1] += int(r["politics_fluency"]["n"])
    if len(steps) != 1:
        raise ValueError(f"the record's models ran different step counts {sorted(steps)}")
    with_model = ablation_with
    if abl_model is not None and with_model not in claim:
        raise ValueError(f"ablation_with={with_model!r}: give the claim model the ablation pairs with, one of {claim}")
    ablation = {}
    if abl_model is not None:
        for (m, t), v in shares.items():
            if m == with_model and (abl_model, t) in shares:
                ablation[t] = bootstrap((v - shares[(abl_model, t)]).numpy(), seed=seed)
    real = ref["real_fluent"]
    return AttractorRun(tuple(claim), (with_model, abl_model) if abl_model else None, tests,
                        wilson(fl[0], fl[1]) if fl[1] else None, wilson(int(real["fluent"]), int(real["n"])),
                        ablation, min(chains), steps.pop(), dtypes)


# --- fluency under an autoregressive LM -------------------------------------------------------

def repeated_words(texts: Sequence[str], *, min_letters: int = 4) -> Tensor:
    """Share of each text's longer words that repeat an earlier word of the same text -> ``[N]`` float64.

    Words are runs of letters (lower-cased) of at least ``min_letters`` letters, a stand-in for
    content words that needs no stop-word list. "a mental hospital, also known as a mental
    hospital, is a mental hospital." scores 4/8: an autoregressive judge finds such a tautology
    likely (each repeat is predictable), so a fluency gate by perplexity alone passes it. 0 for a
    text with no such word.
    """
    import re

    check_range("min_letters", min_letters, 1, None, integer=True)
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    out = []
    for text in texts:
        words = [w for w in re.findall(r"[^\W\d_]+", text.lower()) if len(w) >= min_letters]
        out.append((len(words) - len(set(words))) / len(words) if words else 0.0)
    return torch.tensor(out, dtype=torch.float64)


@torch.no_grad()
def ar_nll(ar: Any, texts: Sequence[str], *, batch: int = 16) -> Tensor:
    """Mean negative log-likelihood per token of each text under a causal LM (``ar.model``,
    ``ar.tokenizer``, e.g. :func:`tokendyn.models.load_ar`), each read after ``<|endoftext|>`` (or
    BOS) -> ``[N]`` float64 nats; ``exp`` of it is the text's perplexity
    (:func:`tokendyn.evaluation.causal.causal_log_likelihoods` per token, over batches of ``batch``,
    which it checks)."""
    from ..evaluation.causal import causal_log_likelihoods, start_id

    return -causal_log_likelihoods(ar.model, ar.tokenizer, list(texts), start_id(ar.tokenizer), batch=batch,
                                   per_token=True)


# --- live explorer ---------------------------------------------------------------------------------

def chain_explorer(frames: Any, *, points: Any = None) -> Any:
    """An ipywidgets explorer of chains through embedding space, for live use in Jupyter.

    ``frames``: a pandas DataFrame with columns ``chain``, ``frame`` (0, 1, ...), ``step``,
    ``pc1``, ``pc2``, ``label`` and ``text``, one row per recorded state. ``points`` (optional):
    reference passages with ``pc1``, ``pc2``, ``topic``, drawn grey behind. A dropdown picks the
    chain and a slider the frame; the panel shows the state's text and label and its point on the
    chain's path. Returns the widget (display it as a cell's last expression).
    """
    import altair as alt
    import ipywidgets as w
    from IPython.display import display

    need = {"chain", "frame", "step", "pc1", "pc2", "label", "text"}
    if not need <= set(frames.columns):
        raise ValueError(f"frames needs columns {sorted(need)}, has {sorted(frames.columns)}")
    chains = list(dict.fromkeys(frames["chain"]))
    pick = w.Dropdown(options=chains, description="chain")
    slider = w.IntSlider(min=0, max=int(frames["frame"].max()), description="frame")
    text = w.HTML()
    out = w.Output()

    def show(*_: Any) -> None:
        path = frames[frames["chain"] == pick.value].sort_values("frame")
        slider.max = int(path["frame"].max())
        row = path[path["frame"] == min(slider.value, slider.max)].iloc[0]
        text.value = (f"<b>step {int(row['step'])}</b>, label <b>{row['label']}</b><br>"
                      f"<span style='font-family:monospace'>{row['text']}</span>")
        layers = [alt.Chart(path).mark_line(color="#888").encode(x="pc1:Q", y="pc2:Q", order="frame:Q"),
                  alt.Chart(path[path["frame"] == row["frame"]]).mark_point(size=200, filled=True, color="red")
                  .encode(x="pc1:Q", y="pc2:Q")]
        if points is not None:
            layers.insert(0, alt.Chart(points).mark_circle(size=20, opacity=0.3)
                          .encode(x="pc1:Q", y="pc2:Q", color="topic:N"))
        spec = alt.layer(*layers).properties(width=420, height=300).to_dict()
        out.clear_output(wait=True)
        with out:  # the raw Vega-Lite bundle: the book's figure-numbering renderer stays out of it
            display({f"application/vnd.vegalite.v{alt.SCHEMA_VERSION.lstrip('v').split('.')[0]}+json": spec}, raw=True)

    pick.observe(show, "value")
    slider.observe(show, "value")
    show()
    return w.VBox([w.HBox([pick, slider]), text, out])


def model_card(name: str) -> dict[str, Any]:
    """What the book knows about a shipped MLM's quality, from ``data/models/<name>/eval.json`` and
    ``model.json``: cloze ``top1``, ``top5``, ``copy_rate``, ``pseudo_perplexity``, ``repetition``
    (text / model first guess) and the training mix. Empty for a model that does not ship here."""
    import json

    from ..core.paths import data_dir

    d = data_dir() / "models" / name
    out: dict[str, Any] = {}
    if (d / "eval.json").is_file():
        ev = json.loads((d / "eval.json").read_text())
        out.update({k: ev[k] for k in ("top1", "top5", "copy_rate", "pseudo_perplexity", "repetition") if k in ev})
    if (d / "model.json").is_file():
        tr = json.loads((d / "model.json").read_text()).get("training", {})
        out.update({k: tr[k] for k in ("data", "sotu_share", "steps") if k in tr})
    return out


# --- texts through the fluency gate, chain frames through the classifier ---------------------------

@dataclass(frozen=True)
class FluencyGate:
    """A set of texts read through the fluency gate against real snippets (:func:`fluency_gates`).

    Per text ``[N]`` (float64 unless said): ``nll`` (nats per token under the AR judge, :func:`ar_nll`),
    ``dominance`` (:func:`tokendyn.analysis.traps.dominance` of its tokens), ``repeats``
    (:func:`repeated_words`) and ``fluent`` (bool, :func:`fluent`); of the real snippets: ``real_nll``
    and ``real_repeats`` ``[M]``, and their ``keep`` quantiles ``nll_limit`` and ``word_limit``."""

    nll: Tensor
    dominance: Tensor
    repeats: Tensor
    fluent: Tensor
    real_nll: Tensor
    real_repeats: Tensor
    nll_limit: float
    word_limit: float

    @property
    def tautology(self) -> Tensor:
        """``[N]`` bool: more repeated longer words than the real snippets' ``keep`` quantile (an AR
        judge finds "x, also known as x, is x" likely, so perplexity alone passes it)."""
        return self.repeats > self.word_limit


def fluency_gates(ar: Any, texts: Mapping[str, Sequence[str]], dominance: Mapping[str, Tensor],
                  real: Mapping[str, Sequence[str]], *, keep: float = 0.95,
                  repeat_share: float = 0.5) -> dict[str, FluencyGate]:
    """Each group's ``texts`` (key -> ``N`` strings, ``dominance`` key -> ``[N]``) through the fluency
    gate against its own real snippets (``real``: key -> ``M`` strings) under the AR judge ``ar``
    (:func:`ar_nll`) -> key -> :class:`FluencyGate`. Groups with the same real snippets (models
    that share a tokenizer share their starts) have them scored once. A group with no text gets
    empty tensors (no judge call)."""
    check_range("keep", keep, 0.0, 1.0, lo_open=True)
    if set(texts) != set(dominance) or not set(texts) <= set(real):
        raise ValueError(f"texts {sorted(texts)}, dominance {sorted(dominance)} and real {sorted(real)} must name "
                         "the same groups")
    scored: dict[tuple[str, ...], tuple[Tensor, Tensor]] = {}
    for key in texts:
        r = tuple(real[key])
        if r not in scored:
            scored[r] = (ar_nll(ar, list(r)), repeated_words(list(r)))
    out = {}
    for key, tx in texts.items():
        real_nll, real_repeats = scored[tuple(real[key])]
        tx = list(tx)
        nll = ar_nll(ar, tx) if tx else torch.zeros(0, dtype=torch.float64)
        dom = torch.as_tensor(dominance[key], dtype=torch.float64)
        if dom.shape != nll.shape:
            raise ValueError(f"group {key!r}: {len(tx)} texts but dominance of shape {tuple(dom.shape)}")
        rep = repeated_words(tx)
        out[key] = FluencyGate(nll, dom, rep, fluent(nll, dom, rep, real_nll=real_nll, real_repeats=real_repeats,
                                                     keep=keep, repeat_share=repeat_share),
                               real_nll, real_repeats, float(np.quantile(real_nll.numpy(), keep)),
                               float(np.quantile(real_repeats.numpy(), keep)))
    return out


@dataclass(frozen=True)
class LabelledFrames:
    """Recorded chain states read by the topic classifier (:func:`label_frames`).

    ``states`` ``[F, B, n]`` at ``steps`` ``[F]``; ``texts`` (``F B`` strings, frame-major, as
    ``states.reshape(-1, n)``) and their sentence embeddings ``emb`` ``[F B, d]``; class indices
    ``argmax`` and ``gated`` ``[F, B]`` (``-1``: none of these) with their names ``label_names`` and
    ``gated_names`` (``F B``, frame-major); ``similarity`` ``[F, B, R]`` float64: the
    :func:`knn_similarity` to each of the ``R`` regions (``None`` where no reference snippets were
    given); ``classes``: the classifier's labels, the meaning of an index."""

    states: Tensor
    steps: Tensor
    texts: list[str]
    emb: Tensor
    argmax: Tensor
    gated: Tensor
    label_names: list[str]
    gated_names: list[str]
    similarity: Tensor | None
    classes: tuple[str, ...]


def label_frames(loaded: Any, embedder: Any, trajectory: Tensor, steps: Tensor, *, every: int,
                 clf: CentroidClassifier, gated_clf: CentroidClassifier, refs: Tensor | None = None,
                 ref_labels: Sequence[str] = (), regions: Sequence[str] = (), k: int = 5) -> LabelledFrames:
    """The recorded states of chains (``trajectory`` ``[T, B, n]`` content ids at ``steps`` ``[T]``)
    whose step is a multiple of ``every``, decoded with ``loaded``'s tokenizer, embedded by
    ``embedder`` (:func:`tokendyn.models.embedding.embed`), labelled by ``clf`` (argmax) and
    ``gated_clf`` (with its "none of these" gate), and, given reference snippets ``refs`` ``[M, d]``
    (``ref_labels``), scored by :func:`knn_similarity` for each of ``regions`` -> :class:`LabelledFrames`
    (``similarity`` ``None`` without ``refs``: the recorded attractor run keeps labels only)."""
    from ..mcmc.conditional import decode
    from ..models.embedding import embed

    check_range("every", every, 1, integer=True)
    if trajectory.dim() != 3 or torch.as_tensor(steps).numel() != trajectory.shape[0]:
        raise ValueError(f"trajectory [T, B, n] and steps [T] must agree, got {tuple(trajectory.shape)} and "
                         f"{tuple(torch.as_tensor(steps).shape)}")
    if refs is None and (len(ref_labels) or len(regions)):
        raise ValueError("ref_labels and regions score the frames against refs: give refs too")
    idx = (steps % every == 0).nonzero().flatten()
    traj = trajectory[idx]                                                  # [F, B, n]
    f_, b = traj.shape[:2]
    texts = decode(loaded, traj.reshape(-1, traj.shape[-1]))
    e = embed(embedder, texts)
    raw, gat = clf.predict(e).reshape(f_, b), gated_clf.predict(e, gated=True).reshape(f_, b)
    sim = None if refs is None else knn_similarity(e, refs, ref_labels, regions, k=k).reshape(f_, b, -1)
    return LabelledFrames(traj, steps[idx], texts, e, raw, gat, clf.names(raw.flatten()), gated_clf.names(gat.flatten()),
                          sim, tuple(clf.labels))
