"""What removing categorical commitment does to long generated texts: claim 13's statistics.

Each generator (an autoregressive LM, a masked-diffusion MLM) is decoded twice from the same
uniforms (:mod:`tokendyn.latent.discrete`): *committed* (the drawn token fed back) and *ablated* (the
expected embedding fed back). :func:`commitment_effect` compares the two variants' texts on three
per-text statistics, each with a percentile bootstrap over texts:

- the judge's perplexity, pooled over tokens (:func:`.generation.pooled_perplexity`), from per-text
  negative log-likelihoods of a judge model: a causal LM's (:func:`.generation.judge_nll`) or a
  masked LM's pseudo-log-likelihoods (:func:`.pseudo_ppl.pseudo_log_likelihoods`);
- seq-rep-4, the share of a text's 4-grams that repeat within it (:func:`.generation.seq_rep`);
- the unigram entropy of a text's own tokens (:func:`.generation.text_entropies`).

:func:`commitment_effects` reads the same from a recorded run's rows
(``scripts/record_commitment.py``), and :func:`tokendyn.publish.verdicts.claim_13` judges them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.stats import Estimate, bootstrap
from .generation import pooled_perplexity, seq_rep, text_entropies

VARIANTS = ("committed", "ablated")


@dataclass(frozen=True)
class CommitmentEffect:
    """One generator's committed and ablated texts, each statistic as ``(committed, ablated)``.

    ``judge``: the model whose (pseudo-)perplexity ``ppl`` is; ``judged_by_itself``: whether it is
    the generator (which flatters its own committed text). ``n_texts``: texts in the smaller
    variant; ``min_tokens``: the shortest text, in the generator's tokens. ``rep``: mean seq-rep-4
    per text; ``entropy``: mean per-text unigram entropy (nats).
    """

    generator: str
    judge: str
    judged_by_itself: bool
    n_texts: int
    min_tokens: int
    ppl: tuple[Estimate, Estimate]
    rep: tuple[Estimate, Estimate]
    entropy: tuple[Estimate, Estimate]

    def rows(self) -> list[dict[str, Any]]:
        """Long format, one row per (statistic, variant): ``generator``, ``judge``, ``score``,
        ``variant``, ``value``, ``lo``, ``hi`` (what :func:`tokendyn.publish.figures.escapes.ablation_panels` draws)."""
        return [{"generator": self.generator, "judge": self.judge, "score": name, "variant": variant,
                 "value": e.value, "lo": e.lo, "hi": e.hi}
                for name, pair in (("judge perplexity", self.ppl), ("seq-rep-4", self.rep),
                                   ("unigram entropy per text", self.entropy))
                for variant, e in zip(VARIANTS, pair)]


def commitment_effect(generator: str, judge: str, committed: Mapping[str, Any], ablated: Mapping[str, Any], *,
                      n_boot: int = 2000, seed: int = 0) -> CommitmentEffect:
    """Compare one generator's two variants. Each of ``committed`` / ``ablated`` maps ``"nll"``
    ``[N]`` (the judge's summed negative log-likelihood per text, nats), ``"count"`` ``[N]`` (the
    tokens it scored) and ``"tokens"`` (the generator's own ids, one list per text)."""
    stats: dict[str, list[Estimate]] = {"ppl": [], "rep": [], "entropy": []}
    sizes, shortest = [], []
    for name, v in (("committed", committed), ("ablated", ablated)):
        toks: Sequence[Sequence[int]] = v["tokens"]
        nll, count = np.asarray(v["nll"], dtype=np.float64), np.asarray(v["count"], dtype=np.float64)
        if not (len(toks) == nll.size == count.size) or nll.ndim != 1:
            raise ValueError(f"{generator} {name}: nll, count and tokens must hold one entry per text, got "
                             f"{nll.size}, {count.size} and {len(toks)}")
        sizes.append(len(toks))
        shortest.append(min(len(t) for t in toks))
        stats["ppl"].append(pooled_perplexity(nll, count, n_boot=n_boot, seed=seed))
        stats["rep"].append(bootstrap(seq_rep(toks, 4), n_boot=n_boot, seed=seed))
        stats["entropy"].append(bootstrap(text_entropies(toks), n_boot=n_boot, seed=seed))
    return CommitmentEffect(generator, judge, judge == generator, min(sizes), min(shortest),
                            *(tuple(stats[k]) for k in ("ppl", "rep", "entropy")))  # type: ignore[arg-type]


def commitment_effects(rows: Sequence[Mapping[str, Any]], *, n_boot: int = 2000, seed: int = 0
                       ) -> dict[str, CommitmentEffect]:
    """Every generator's effect from a recorded run's rows, judged by each row's ``judge`` (the
    judge named for that generator before the run). A row holds ``generator``, ``variant``
    (committed or ablated), ``judge``, ``tokens`` and ``judges[judge]`` with ``nll`` and ``count``."""
    by: dict[str, dict[str, Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("variant") in VARIANTS:
            by.setdefault(r["generator"], {})[r["variant"]] = r
    out = {}
    for gen, pair in by.items():
        if set(pair) != set(VARIANTS):
            raise ValueError(f"{gen}: the record holds {sorted(pair)}, need both {VARIANTS}")
        judge = pair["committed"]["judge"]
        if pair["ablated"]["judge"] != judge:
            raise ValueError(f"{gen}: the two variants name different judges")
        c, a = ({**pair[v]["judges"][judge], "tokens": pair[v]["tokens"]} for v in VARIANTS)
        out[gen] = commitment_effect(gen, judge, c, a, n_boot=n_boot, seed=seed)
    return out
