"""The size ladder's statistics: per-rung estimates, slopes on size, paired quality checks.

A ladder record (``scripts/record_size_ladder.py``, ``scripts/record_traps.py``) holds one row per
model with its ``params``, ``encoder`` and per-item samples (rectangles, traps, probe items,
held-out passages). These functions turn them into the numbers chapters 2 and 4 print: each rung's
statistic with a bootstrap interval, the slope of a statistic on ln(parameters) with its interval
(:func:`tokendyn.core.stats.size_slope`), and paired comparisons of two models on the same probe items
and passages; and chapter 3's comparison of two sizes' crossover (:func:`crossover_by_size`).
:func:`read_ladder` reads a whole ladder record with a base-size model beside it (chapter 2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.stats import Estimate, bootstrap, size_slope, wilson
from ..evaluation.cloze import context_words
from ..mcmc.diagnostics import Crossover, rise_probability

Row = Mapping[str, Any]


def _params(row: Row) -> int:
    return int(row["params"])


def values(row: Row, key: str) -> np.ndarray:
    """A row's per-item sample ``key`` as floats, undefined (None) items left out: ``(m,)``."""
    return np.array([v for v in _items(row, key) if v is not None], dtype=np.float64)


def _items(row: Row, key: str) -> list[Any]:
    if "." in key:  # "traps.min_margin": one field of each trap
        outer, inner = key.split(".", 1)
        return [t[inner] for t in row[outer]]
    return list(row[key])


def rung_estimates(rows: Sequence[Row], key: str, stat: Callable[[np.ndarray], float] = np.mean, *,
                   seed: int = 0) -> dict[str, Estimate]:
    """Model -> ``stat`` of its sample ``key`` with a 95% bootstrap interval over its items."""
    return {r["model"]: bootstrap(values(r, key), stat, seed=seed) for r in rows}


def slope(rows: Sequence[Row], key: str, stat: Callable[[np.ndarray], float] = np.mean, *,
          seed: int = 0, within: str | None = None) -> Estimate:
    """The slope of ``stat(sample key)`` on ln(parameters) across ``rows`` (per e-fold), with a
    bootstrap interval that resamples each model's items (:func:`~tokendyn.core.stats.size_slope`).
    ``within="encoder"``: the slope within each backbone (one intercept per backbone), which a
    difference between backbones cannot move."""
    groups = [str(r[within]) for r in rows] if within is not None else None
    return size_slope([_params(r) for r in rows], [values(r, key) for r in rows], stat, seed=seed, groups=groups)


def span(rows: Sequence[Row]) -> float:
    """Largest parameter count over smallest."""
    p = [_params(r) for r in rows]
    return max(p) / min(p)


def probe_hits(items: Sequence[Mapping[str, Any]]) -> dict[str, tuple[bool, bool]]:
    """Probe sentence -> (top-5 hit, copy) from an ``eval.json``'s ``items`` (the cloze probe's
    own definitions: an accepted answer among the five best words; the best word already in the
    sentence)."""
    return {it["text"]: (any(w in it["answers"] for w in it["top"]), bool(it["top"]) and
                         it["top"][0] in context_words(it["text"])) for it in items}


def probe_top5(items: Sequence[Mapping[str, Any]]) -> Estimate:
    """Cloze-probe top-5 accuracy of one model's ``eval.json`` items with its Wilson interval."""
    hits = [h for h, _ in probe_hits(items).values()]
    return wilson(sum(hits), len(hits))


def paired_probe(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], *,
                 seed: int = 0) -> tuple[Estimate, Estimate, int]:
    """Top-5 and copy-rate differences ``a - b`` over the probe sentences both models cover, with
    bootstrap intervals over sentences (paired): ``(top5_diff, copy_diff, n_shared)``."""
    ha, hb = probe_hits(a), probe_hits(b)
    shared = [t for t in ha if t in hb]
    if len(shared) < 2:
        raise ValueError(f"a, b: {len(shared)} probe sentences in common; a paired comparison needs at least 2")
    top = np.array([ha[t][0] - hb[t][0] for t in shared], dtype=np.float64)
    cp = np.array([ha[t][1] - hb[t][1] for t in shared], dtype=np.float64)
    return bootstrap(top, seed=seed), bootstrap(cp, seed=seed), len(shared)


def paired_pppl_ratio(a: Row, b: Row, *, seed: int = 0, n_boot: int = 2000) -> Estimate:
    """Pseudo-perplexity of ``a`` over ``b`` on the same held-out passages, each row's
    ``passage_nll`` (summed negative pseudo-log-likelihood per passage) and ``passage_tokens``;
    the interval resamples passages (paired). Below 1: ``a`` predicts the passages better. The two
    tokenizers must cut the text alike for this to be like with like (all-MiniLM and
    all-mpnet share BERT's uncased WordPiece)."""
    na, ta = np.asarray(a["passage_nll"], float), np.asarray(a["passage_tokens"], float)
    nb, tb = np.asarray(b["passage_nll"], float), np.asarray(b["passage_tokens"], float)
    if len(na) != len(nb) or len(na) < 2:
        raise ValueError(f"a, b: need the same passages (at least 2), got {len(na)} and {len(nb)}")

    def ratio(idx: np.ndarray) -> float:
        return float(np.exp(na[idx].sum() / ta[idx].sum() - nb[idx].sum() / tb[idx].sum()))

    rng = np.random.default_rng(seed)
    reps = np.array([ratio(rng.integers(0, len(na), len(na))) for _ in range(n_boot)])
    return Estimate(ratio(np.arange(len(na))), float(np.quantile(reps, 0.025)), float(np.quantile(reps, 0.975)),
                    len(na))


def crossover_by_size(draws: Mapping[str, Mapping[int, Crossover]], params: Mapping[str, float]
                      ) -> tuple[list[dict[str, Any]], dict[int, float], dict[int, float]]:
    """Chapter 3's size comparison of ``tau*``: two models' crossovers (``draws``, smaller model
    first: ``{model: {n: Crossover}}`` from the same budget and threshold) at every length both were
    run at. Returns ``(rows, higher, lower)``: one row ``{model, params, n, tau_star, lo, hi}`` per
    model and length, and per length the share of bootstrap resamples in which the larger model's
    ``tau*`` is higher (``higher``) and lower (``lower``)."""
    if len(draws) != 2:
        raise ValueError(f"draws must hold exactly two models (smaller first), got {list(draws)}")
    (small, cs), (large, cl) = draws.items()
    rows, higher, lower = [], {}, {}
    for n in sorted(set(cs) & set(cl)):
        higher[n] = rise_probability(cs[n], cl[n])
        lower[n] = rise_probability(cl[n], cs[n])
        rows += [{"model": m, "params": params[m], "n": n, "tau_star": c.tau_star, "lo": c.lo, "hi": c.hi}
                 for m, c in ((small, cs[n]), (large, cl[n]))]
    return rows, higher, lower


DELTA_KEYS = {"raw delta": "delta", "normalized delta": "normalized"}
"""Chapter 2's statistics on its ladder: name -> the per-rectangle sample key of each row."""


@dataclass(frozen=True)
class LadderReading:
    """A ladder record read as a whole (:func:`read_ladder`). Every mapping keyed by statistic has
    the keys of the ``keys`` it was read with.

    ``rows``: every recorded row; ``rungs``: the rows marked ``rung`` (both backbones, every depth,
    those below the probe bar kept); ``base``: the base-size model beside the ladder (in no slope);
    ``reference``: the other non-rung row (the book's default); ``top``: the largest rung;
    ``alone``: the rungs of one backbone. ``est``: statistic -> model -> mean with its 95% bootstrap
    interval (rungs and ``base``); ``pooled``, ``within`` (one intercept per backbone) and
    ``alone_slope``: statistic -> slope per e-fold of parameters; ``at_bar_pooled`` and
    ``at_bar_within``: the same over the rungs at or above the probe bar. ``probe``: model -> cloze
    top-5 (rungs, base, reference); ``reading``: the models at or above the bar; ``at_bar``: the
    rungs among them. ``*_vs_reference`` / ``*_vs_top``: ``base`` minus the reference / top rung on
    the probe sentences both cover (``n_probe_*`` of them), and ``pppl_vs_reference``: their
    held-out pseudo-perplexity ratio."""

    rows: list[Row]
    rungs: list[Row]
    base: Row
    reference: Row
    top: Row
    alone: list[Row]
    est: dict[str, dict[str, Estimate]]
    pooled: dict[str, Estimate]
    within: dict[str, Estimate]
    alone_slope: dict[str, Estimate]
    at_bar_pooled: dict[str, Estimate]
    at_bar_within: dict[str, Estimate]
    span: float
    span_alone: float
    span_nonembedding: float
    probe: dict[str, Estimate]
    reading: list[str]
    at_bar: list[Row]
    top5_vs_reference: Estimate
    copy_vs_reference: Estimate
    n_probe_reference: int
    pppl_vs_reference: Estimate
    top5_vs_top: Estimate
    copy_vs_top: Estimate
    n_probe_top: int

    @property
    def params(self) -> dict[str, int]:
        """Rung -> parameter count, in the rungs' order."""
        return {r["model"]: _params(r) for r in self.rungs}


def read_ladder(rows: Sequence[Row], *, base: str, bar: float, alone: str = "mpnet",
                keys: Mapping[str, str] = DELTA_KEYS, seed: int = 0) -> LadderReading:
    """Read a recorded ladder (``rows``, as :func:`tokendyn.publish.results.load_ladder` returns
    them: rungs marked ``rung``, plus the base-size model named ``base`` and one reference model):
    each statistic of ``keys`` (name -> per-item sample key) per rung with its bootstrap interval,
    its slopes on size pooled, within backbones and over the ``alone`` backbone, over every rung and
    over the rungs whose cloze top-5 reaches ``bar``, and the paired comparisons of ``base`` with the
    reference and with the top rung. Every bootstrap is seeded by ``seed``."""
    rungs = [r for r in rows if r["rung"]]
    by_name = {r["model"]: r for r in rows if not r["rung"]}
    if base not in by_name:
        raise ValueError(f"base: {base!r} is not a non-rung row of the ladder (non-rung rows: {sorted(by_name)})")
    others = [r for m, r in by_name.items() if m != base]
    if len(rungs) < 2 or not others:
        raise ValueError(f"rows: a ladder needs at least 2 rungs and a reference row, got {len(rungs)} rungs "
                         f"and non-rung rows {sorted(by_name)}")
    base_row, ref_row = by_name[base], others[0]
    top = max(rungs, key=_params)  # the first of the largest: the rung the ladder ends on
    one = [r for r in rungs if r["encoder"] == alone]
    probe = {r["model"]: probe_top5(r["probe_items"]) for r in rungs + [base_row, ref_row]}
    reading = [m for m, e in probe.items() if e.value >= bar]
    at_bar = [r for r in rungs if r["model"] in reading]
    top5_ref, copy_ref, n_ref = paired_probe(base_row["probe_items"], ref_row["probe_items"], seed=seed)
    top5_top, copy_top, n_top = paired_probe(base_row["probe_items"], top["probe_items"], seed=seed)
    nonemb = [r["params_nonembedding"] for r in rungs]
    return LadderReading(
        rows=list(rows), rungs=rungs, base=base_row, reference=ref_row, top=top, alone=one,
        est={s: rung_estimates(rungs + [base_row], k, seed=seed) for s, k in keys.items()},
        pooled={s: slope(rungs, k, seed=seed) for s, k in keys.items()},
        within={s: slope(rungs, k, seed=seed, within="encoder") for s, k in keys.items()},
        alone_slope={s: slope(one, k, seed=seed) for s, k in keys.items()},
        at_bar_pooled={s: slope(at_bar, k, seed=seed) for s, k in keys.items()},
        at_bar_within={s: slope(at_bar, k, seed=seed, within="encoder") for s, k in keys.items()},
        span=span(rungs), span_alone=span(one), span_nonembedding=max(nonemb) / min(nonemb),
        probe=probe, reading=reading, at_bar=at_bar,
        top5_vs_reference=top5_ref, copy_vs_reference=copy_ref, n_probe_reference=n_ref,
        pppl_vs_reference=paired_pppl_ratio(base_row, ref_row, seed=seed),
        top5_vs_top=top5_top, copy_vs_top=copy_top, n_probe_top=n_top)
