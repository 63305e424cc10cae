"""The deterministic held-out split of the project's text corpora, in one place.

A document is held out when the SHA-256 of its text, read as a number, is 0 mod ``every``: the same
on every machine. Two splits use the rule:

- the shipped MLMs: the unsalted text, ``every = 20`` (5% of the Wikipedia lead paragraphs;
  :func:`heldout_passages` evaluates on them and ``scripts/train_mlm.py`` trains on the rest);
- the text latent model: the text salted as ``f"{seed}:{text}"`` with its data seed
  (:func:`tokendyn.latent.text.split_documents`), so that split is independent of the first.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..core.checks import check_range

HELDOUT_MOD = 20


def is_heldout(text: str, every: int = HELDOUT_MOD, seed: int | None = None) -> bool:
    """True when ``text`` is held out: SHA-256 of ``text`` (of ``f"{seed}:{text}"`` when ``seed`` is
    given) is 0 mod ``every``. The default is the MLMs' split (5% of passages)."""
    key = text if seed is None else f"{seed}:{text}"
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % every == 0


def heldout_passages(n: int = 50) -> list[str]:
    """The first ``n`` held-out Wikipedia lead paragraphs (ordered by title), 20-90 words each:
    ``n`` strings that no shipped MLM was trained on."""
    from ..core.data import wiki_records

    check_range("n", n, 1, None, integer=True)
    pool = [r["extract"] for r in wiki_records()
            if is_heldout(r["extract"]) and 20 <= len(r["extract"].split()) <= 90]
    if n > len(pool):
        raise ValueError(f"n={n} is out of range: allowed [1, {len(pool)}]")
    return pool[:n]


def choose(pool: Any, n: int, seed: int = 0) -> Any:
    """``n`` rows of ``pool`` ``[N, ...]`` in a seeded random order (no repeats): ``[n, ...]``.
    ``n`` must lie in ``[1, N]``. The latent models' ``heldout(n, seed)`` all draw this way."""
    import torch

    check_range("n", n, 1, len(pool), integer=True)
    return pool[torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed))[:n]]
