"""How many input positions a transformers model has, checked before a forward pass overflows it.

A BERT-style encoder past ``max_position_embeddings`` fails deep inside torch (a raw
``RuntimeError`` about an expanded size or an index); a RoPE model (ModernBERT, SmolLM2) runs
on, beyond anything it was trained on. Both are refused here, by the entry points, with the
number of tokens asked for and the range allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def max_positions(model: Any) -> tuple[int, str] | None:
    """``(positions, where the number comes from)`` for a transformers model, ``None`` when its
    config gives no limit. RoBERTa-style embeddings number positions from ``padding_idx + 1``, so
    they hold ``max_position_embeddings - padding_idx - 1`` tokens."""
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        return None
    emb = getattr(getattr(model, "base_model", None), "embeddings", None)
    pad = getattr(emb, "padding_idx", None)
    if isinstance(pad, int) and hasattr(emb, "position_embeddings"):
        return limit - pad - 1, f"max_position_embeddings={limit} less its padding offset {pad + 1}"
    return limit, "max_position_embeddings"


def check_content_fits(model: Any, n: int, *, extra: int, wrapping: str | Callable[[], str],
                       label: str, name: str = "n", where: str = "") -> None:
    """Raise ``ValueError`` unless ``n`` content tokens plus ``extra`` wrapping positions fit in
    ``model`` (``label`` names it, ``where`` prefixes the message, ``wrapping`` describes the
    wrapping, or is called for it only on failure); a model without a known limit passes."""
    lim = max_positions(model)
    if lim is None or n + extra <= lim[0]:
        return
    wrapping = wrapping() if callable(wrapping) else wrapping
    raise ValueError(f"{where}{name}={n} content tokens need {n + extra} positions{wrapping}; {label} has "
                     f"{lim[0]} ({lim[1]}): allowed {name} in [1, {lim[0] - extra}]")


def check_context(model: Any, length: int, *, what: str, allowed: str, label: str = "") -> None:
    """Raise ``ValueError`` unless a causal LM's input of ``length`` positions fits its context.
    ``what`` says how it adds up (``"prompt p=7 + n=10 new tokens"``), ``allowed`` what is bounded
    (``"p + n"``)."""
    lim = max_positions(model)
    if lim is None or length <= lim[0]:
        return
    label = label or type(model).__name__
    raise ValueError(f"{what} need {length} positions; {label} has a context of {lim[0]} "
                     f"({lim[1]}): allowed {allowed} <= {lim[0]}")
