"""One head-training run's settings, and the checkpoint file it writes."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["CHECKPOINT", "HeadSettings"]

CHECKPOINT = "head.pt"


@dataclass
class HeadSettings:
    """One head-training run (``model`` a key of ``shipped.HEAD_MODELS``)."""

    model: str
    steps: int = 600  # ~1.2 passes over the cached sites: what 2 CPU cores train 7 rungs with in an hour
    batch: int = 32  # masked windows per step (every masked site in them: ~16 per 64-token window)
    lr: float = 1e-3
    warmup: int = 50
    decay_frac: float = 0.2  # share of steps in the final linear decay
    top_layers: int = 0  # encoder layers trained with the head; the cache is read below them
    seq_len: int = 64
    mask_rate: float = 0.25
    views: int = 1  # independent maskings of each training window in the cache
    sotu_share: float = 0.15  # SOTU share of training words, as for the other shipped MLMs
    seed: int = 0
    max_windows: int | None = 16000  # a seeded subset of the 42k windows (256k masked sites); None: all
    val_windows: int = 512  # held-out windows in the validation cache
    shard_items: int = 256  # masked windows per cache shard
    encode_batch: int = 32  # windows per encoder forward pass while caching
    mask_row_steps: int = 0  # stage 0 (:func:`train_mask_row`): steps that train the mask token's row first

    @property
    def decay(self) -> int:
        """Steps in the final decay."""
        return max(1, int(self.decay_frac * self.steps))

    def cache_key(self) -> dict[str, Any]:
        """The settings the training cache depends on (the validation cache adds ``val_windows``)."""
        key = {k: getattr(self, k) for k in ("model", "top_layers", "seq_len", "mask_rate", "views",
                                              "sotu_share", "seed", "max_windows", "shard_items")}
        if self.mask_row_steps:  # the states depend on the learned row (absent: the caches built before it)
            key["mask_row_steps"] = self.mask_row_steps
        return key

    def fixed(self) -> dict[str, Any]:
        """The settings a checkpoint is bound to: all but ``steps`` and ``decay_frac`` (a run in its
        stable phase may be lengthened) and the caching batch size (it changes no result)."""
        return {k: v for k, v in asdict(self).items() if k not in ("steps", "decay_frac", "encode_batch")}
