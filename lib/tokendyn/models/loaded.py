"""What the model loaders return, and the error they raise offline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


class OfflineModelError(RuntimeError):
    """A model was asked for that needs the network, and the network is not there."""


@dataclass
class LoadedMLM:
    """A masked LM and its tokenizer. ``info`` holds size, architecture and provenance."""

    name: str
    model: Any  # transformers *ForMaskedLM, in eval mode
    tokenizer: Any  # transformers PreTrainedTokenizerFast
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class LoadedAR:
    """An autoregressive LM and its tokenizer."""

    name: str
    model: Any  # transformers *ForCausalLM, in eval mode
    tokenizer: Any
    info: dict[str, Any] = field(default_factory=dict)


def n_params(model: torch.nn.Module) -> int:
    """Number of parameters of a module."""
    return sum(p.numel() for p in model.parameters())


def n_nonembedding_params(model: torch.nn.Module) -> int:
    """Parameters outside the embedding tables (word, position, token-type, and their LayerNorm),
    counted once when the output decoder is tied to the word embeddings: the size measure of
    scaling laws, which an encoder's depth changes and its vocabulary does not."""
    return sum(p.numel() for n, p in model.named_parameters() if ".embeddings." not in f".{n}")
