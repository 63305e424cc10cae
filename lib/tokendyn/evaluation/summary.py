"""The one-call summary of a masked LM that the model exports write to ``eval.json``."""

from __future__ import annotations

from typing import Any

from ..core.checks import check_range
from .cloze import cloze_probe
from .heldout import heldout_passages
from .masked import as_mlm
from .pseudo_ppl import heldout_scores

PROBE_KEYS = ("n", "top1", "top5", "copy_rate", "coverage", "by_register")


def evaluate(mlm: Any, tokenizer: Any = None, n_passages: int = 40) -> dict[str, Any]:
    """Cloze probe (top-1, top-5, copy rate, coverage), pseudo-perplexity and repetition rates on
    ``n_passages`` held-out passages of a masked LM (``mlm`` as in
    :func:`~tokendyn.evaluation.cloze.cloze_probe`). Returns the keys of both
    (:func:`~tokendyn.evaluation.cloze.cloze_probe`, :func:`~tokendyn.evaluation.pseudo_ppl.heldout_scores`)
    plus ``heldout_passages`` and the probe's ``items``."""
    check_range("n_passages", n_passages, 1, None, integer=True)
    mlm = as_mlm(mlm, tokenizer)
    probe = cloze_probe(mlm)
    scores = heldout_scores(mlm, heldout_passages(n_passages))
    return {**{k: probe[k] for k in PROBE_KEYS}, **scores,
            "heldout_passages": n_passages, "items": probe["items"]}
