"""The text latent model (an ELF analogue): word tokens -> per-token continuous latents -> argmax.

- :class:`WordTokenizer`: lower-cased words and single punctuation marks over a vocabulary of a few
  thousand entries built from the training split of the Wikipedia corpus; id 0 is ``[unk]``.
- :class:`TextAutoencoder`: embedding, one transformer layer, a projection to ``latent_dim`` and an
  RMS normalisation (every latent vector has norm ``sqrt(latent_dim)``, so about 1 per coordinate,
  the scale of the flow's noise). The readout is one linear layer over the vocabulary and the
  decoded token is its argmax: a sharp categorical readout.
- :func:`sequences`: non-overlapping windows of ``seq_len`` tokens, split into train and held-out by
  document (a seeded hash), so the chapter's roll-in runs on text the models never saw.
- :func:`load_text_latent`: the shipped weights in ``data/models/text-latent``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import torch
from torch import nn

from ..core.atomic import write_json
from ..core.checks import check_choice, check_range
from ..core.paths import data_dir
from ..evaluation.heldout import choose, is_heldout
from .flow import VelocityNet, load_autoencoder_and_flow

_WORD = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
UNK = "[unk]"
SPLITS = ("train", "heldout")


class WordTokenizer:
    """Word-level tokenizer: ``encode(text) -> list[int]``, ``decode(ids) -> str``; unknown -> 0."""

    def __init__(self, words: list[str]):
        if not words or words[0] != UNK:
            raise ValueError(f"the vocabulary must start with {UNK!r}")
        self.words = list(words)
        self.index = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    @staticmethod
    def split(text: str) -> list[str]:
        """Lower-cased words (letters and digits) and single punctuation marks."""
        return _WORD.findall(text.lower())

    @classmethod
    def build(cls, texts: list[str], vocab_size: int) -> WordTokenizer:
        """The ``vocab_size - 1`` most frequent pieces of ``texts`` (ties alphabetical) plus ``[unk]``."""
        check_range("vocab_size", vocab_size, 2, None, integer=True)
        counts = Counter(w for t in texts for w in cls.split(t))
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: vocab_size - 1]
        return cls([UNK] + [w for w, _ in top])

    def encode(self, text: str) -> list[int]:
        return [self.index.get(w, 0) for w in self.split(text)]

    def decode(self, ids) -> str:
        return " ".join(self.words[int(i)] for i in ids)

    def save(self, path: str | Path) -> None:
        write_json(path, self.words, ensure_ascii=False)

    @classmethod
    def load(cls, path: str | Path) -> WordTokenizer:
        return cls(json.loads(Path(path).read_text(encoding="utf-8")))


def split_documents(source: str = "wiki", split: str = "train", *, seed: int = 0,
                    heldout_every: int = 20) -> list[str]:
    """Documents of ``source`` in one split: about one in ``heldout_every`` is held out, by a hash
    salted with ``seed`` (:func:`tokendyn.evaluation.heldout.is_heldout`)."""
    from ..core.data import corpus

    check_choice("split", split, SPLITS)
    check_range("heldout_every", heldout_every, 2, None, integer=True)
    want = split == "heldout"
    return [d for d in corpus(source) if is_heldout(d, heldout_every, seed) == want]


def sequences(tokenizer: WordTokenizer, docs: list[str], seq_len: int = 32) -> torch.Tensor:
    """Non-overlapping ``seq_len``-token windows of every document, in order: ``[N, seq_len]`` int64."""
    check_range("seq_len", seq_len, 1, None, integer=True)
    rows = []
    for d in docs:
        ids = tokenizer.encode(d)
        rows += [ids[i:i + seq_len] for i in range(0, len(ids) - seq_len + 1, seq_len)]
    if not rows:
        raise ValueError(f"no document holds {seq_len} tokens")
    return torch.tensor(rows, dtype=torch.long)


@dataclass(frozen=True)
class TextAEConfig:
    """Shape of a :class:`TextAutoencoder`."""

    vocab_size: int
    seq_len: int = 32
    embed_dim: int = 32
    width: int = 64
    latent_dim: int = 32
    heads: int = 4
    ff: int = 128


class TextAutoencoder(nn.Module):
    """Token ids ``[B, n]`` -> latents ``[B, n, latent_dim]`` -> logits ``[B, n, V]`` -> argmax ids."""

    def __init__(self, cfg: TextAEConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.embed_dim)
        self.up = nn.Linear(cfg.embed_dim, cfg.width)
        self.pos = nn.Parameter(torch.zeros(cfg.seq_len, cfg.width))
        self.mix = nn.TransformerEncoderLayer(cfg.width, cfg.heads, cfg.ff, dropout=0.0, activation="gelu",
                                              batch_first=True, norm_first=True)
        self.to_latent = nn.Linear(cfg.width, cfg.latent_dim)
        self.readout = nn.Linear(cfg.latent_dim, cfg.vocab_size)

    def encode(self, ids: torch.Tensor) -> torch.Tensor:
        """Contextual latents of ``ids`` ``[B, n]`` -> ``[B, n, latent_dim]``, RMS 1 per vector."""
        h = self.up(self.embed(ids)) + self.pos[: ids.shape[1]]
        z = self.to_latent(self.mix(h))
        return z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + 1e-6)

    def logits(self, z: torch.Tensor) -> torch.Tensor:
        """The linear readout: ``[..., latent_dim]`` -> ``[..., V]``."""
        return self.readout(z)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """The sharp readout: argmax token ids of latents ``[..., latent_dim]`` -> ``[...]``."""
        return self.logits(z).argmax(-1)

    def loss(self, ids: torch.Tensor, noise: float, generator: torch.Generator) -> torch.Tensor:
        """Cross-entropy of reading ``ids`` ``[B, n]`` back from latents plus N(0, noise^2) jitter.

        The jitter keeps the clean latents a little away from the decision boundaries, as a
        robustly trained autoencoder would; the readout stays linear and sharp.
        """
        z = self.encode(ids)
        z = z + noise * torch.randn(z.shape, generator=generator).to(z.device)
        return nn.functional.cross_entropy(self.logits(z).flatten(0, 1), ids.flatten())


@dataclass
class TextLatent:
    """The shipped text latent model: tokenizer, autoencoder, flow and their provenance."""

    tokenizer: WordTokenizer
    autoencoder: TextAutoencoder
    flow: VelocityNet
    config: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return "text-latent"

    def heldout(self, n: int, seed: int = 0) -> torch.Tensor:
        """``n`` held-out sequences ``[n, seq_len]`` (documents never trained on), chosen by ``seed``."""
        check_range("n", n, 1, None, integer=True)
        pool = _heldout_pool(self.config["data"]["seed"], self.config["data"]["heldout_every"],
                             self.autoencoder.cfg.seq_len, tuple(self.tokenizer.words))
        return choose(pool, n, seed)


@lru_cache(maxsize=2)
def _heldout_pool(seed: int, every: int, seq_len: int, words: tuple[str, ...]) -> torch.Tensor:
    return sequences(WordTokenizer(list(words)), split_documents("wiki", "heldout", seed=seed,
                                                                 heldout_every=every), seq_len)


def model_dir() -> Path:
    """``data/models/text-latent``."""
    return data_dir() / "models" / "text-latent"


def load_text_latent(path: str | Path | None = None) -> TextLatent:
    """Load the shipped text latent model (safetensors + JSON) from ``path`` or :func:`model_dir`."""
    d = Path(path) if path is not None else model_dir()
    ae, flow, cfg = load_autoencoder_and_flow(d, "text", TextAutoencoder, TextAEConfig)
    return TextLatent(WordTokenizer.load(d / "vocab.json"), ae, flow, cfg)
