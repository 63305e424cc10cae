"""Sentence embeddings and the small linear algebra the chapters do with them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def embed(embedder: Any, texts: Sequence[str], *, batch_size: int = 64) -> torch.Tensor:
    """Unit-norm sentence embeddings: ``texts`` (N strings) -> float32 tensor [N, d]."""
    if len(texts) == 0:
        raise ValueError("texts is empty: give at least one text to embed")
    out = embedder.encode(list(texts), batch_size=batch_size, convert_to_tensor=True,
                          normalize_embeddings=True, show_progress_bar=False)
    return out.detach().to("cpu", torch.float32)


def cosine_matrix(a: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """Cosine similarities: a [N, d], b [M, d] (default a) -> [N, M]."""
    b = a if b is None else b
    a = torch.nn.functional.normalize(a.double(), dim=-1)
    b = torch.nn.functional.normalize(b.double(), dim=-1)
    return (a @ b.T).float()


def pca(x: torch.Tensor, k: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Principal components of x [N, d] -> (scores [N, k], explained variance ratio [k]).

    Deterministic: computed by SVD in float64, each component's sign fixed so that its largest
    loading is positive.
    """
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"x must be [N, d] with N >= 2, got shape {tuple(x.shape)}")
    if not 1 <= k <= min(x.shape):
        raise ValueError(f"k={k} is out of range: allowed [1, {min(x.shape)}]")
    xc = x.double() - x.double().mean(0, keepdim=True)
    _, s, vt = torch.linalg.svd(xc, full_matrices=False)
    comps = vt[:k]
    signs = torch.sign(comps.gather(1, comps.abs().argmax(1, keepdim=True)))
    comps = comps * signs
    ratio = (s[:k] ** 2) / (s**2).sum()
    return (xc @ comps.T).float(), ratio.float()


def within_across(cosine: torch.Tensor, labels: Sequence[str]) -> tuple[float, float]:
    """Mean cosine between different items of the same label, and between items of different labels.

    ``cosine`` [N, N] (from :func:`cosine_matrix`), ``labels`` N strings -> ``(within, across)``,
    each a mean over all such ordered pairs (an item with itself excluded).
    """
    if cosine.shape != (len(labels), len(labels)):
        raise ValueError(f"cosine must be [N, N] with N = len(labels) = {len(labels)}, got {tuple(cosine.shape)}")
    same = torch.tensor([[a == b for b in labels] for a in labels])
    off_diag = ~torch.eye(len(labels), dtype=torch.bool)
    return cosine[same & off_diag].mean().item(), cosine[~same].mean().item()


def topic_separation(emb: torch.Tensor, labels: Sequence[str]) -> torch.Tensor:
    """Per item: mean cosine to the other items of its label minus mean cosine to other labels.

    ``emb`` [N, d], ``labels`` N strings (each label at least twice) -> [N] float64. Positive values
    mean an item sits closer to its own topic; a bootstrap over items gives the interval.
    """
    if emb.ndim != 2 or emb.shape[0] != len(labels):
        raise ValueError(f"emb must be [N, d] with N = len(labels) = {len(labels)}, got {tuple(emb.shape)}")
    lab = list(labels)
    same = torch.tensor([[a == b for b in lab] for a in lab])
    off = ~torch.eye(len(lab), dtype=torch.bool)
    if bool(((same & off).sum(1) == 0).any()) or bool(same.all()):
        raise ValueError("labels: every label needs at least two items, and there must be two labels")
    c = cosine_matrix(emb).double()
    within = (c * (same & off)).sum(1) / (same & off).sum(1)
    across = (c * ~same).sum(1) / (~same).sum(1)
    return within - across
