"""Phase 3 of the head recipe: the head (and optionally the top layers) trained on the cached
states with the shipped models' optimiser, schedule and resumable loop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ...core.paths import data_dir
from ...evaluation import PROBE_FILE, cloze_probe, head_logits
from ...models import shipped
from ..loop import Progress, save_atomic
from ..mlm import TrainedMLM, check_resumable, make_optimizer, run_schedule, set_trainable
from .cache import CachedStates, build_cache, load_cache, n_layers, train_windows, upper_states, val_windows
from .mask_row import mask_row_name, train_mask_row
from .settings import CHECKPOINT, HeadSettings

__all__ = ["site_logits", "cached_loss", "TrainedHead", "train_head"]

def site_logits(model: Any, cache: CachedStates, idx: Tensor, start: int) -> tuple[Tensor, Tensor]:
    """Logits ``(s, V)`` and targets ``(s,)`` at every masked site of items ``idx (b,)``, through the
    layers ``start:`` (none when the cache holds sites) and the head."""
    dev = next(model.parameters()).device
    h, attn, pos, targets = cache.take(idx)
    h = h.to(dev, torch.float32)
    if attn is not None:
        h = upper_states(model, h, attn.long(), start)[pos[:, 0].to(dev), pos[:, 1].to(dev)]
    return head_logits(model, h), targets.to(dev)


@torch.no_grad()
def cached_loss(model: Any, cache: CachedStates, start: int, batch: int = 64) -> float:
    """Mean cross-entropy (nats) over every masked site of a cache, in eval mode."""
    was = model.training
    model.eval()
    total, n = 0.0, 0
    for idx in torch.arange(cache.n_items).split(batch):
        logits, targets = site_logits(model, cache, idx, start)
        total += float(torch.nn.functional.cross_entropy(logits.float(), targets, reduction="sum"))
        n += len(targets)
    model.train(was)
    return total / max(n, 1)


@dataclass
class TrainedHead(TrainedMLM):
    """:class:`~.mlm.TrainedMLM` plus the run's log: one ``{"step", "train_loss", "val_loss"[,
    "probe_top1", "probe_top5"]}`` per checkpoint, and the seconds stage 0 took (0 without it;
    ``elapsed`` counts the head's training only)."""

    history: list[dict[str, Any]] = field(default_factory=list)
    mask_row_elapsed: float = 0.0


def train_head(s: HeadSettings, ckpt: Path, *, device: torch.device, texts: list[str] | None = None,
               val_texts: list[str] | None = None, stop: int | None = None, ckpt_minutes: float = 4.0,
               train: bool = True, cache_only: bool = False, cache_stop_after: int | None = None,
               log: Callable[[str], None] = print) -> TrainedHead | None:
    """Build rung ``s.model``, cache its states in ``ckpt`` (resuming a started cache), and train
    its head to step ``stop`` of the ``s.steps`` schedule (default all), resuming ``ckpt/head.pt``.

    ``texts`` / ``val_texts`` default to the MLM corpus and the held-out Wikipedia leads. Returns
    None when the cache is not finished (``cache_stop_after`` shards were computed in this call) or
    ``cache_only``; ``train=False`` only restores the checkpoint. Raises
    :class:`~.mlm.IncompatibleCheckpoint` when ``ckpt`` holds a cache or run of other settings, or
    a run past its stable phase whose ``steps`` differ.
    """
    if s.model not in shipped.HEAD_MODELS:
        raise ValueError(f"model={s.model!r} is not a head model: allowed {list(shipped.HEAD_MODELS)}")
    ckpt.mkdir(parents=True, exist_ok=True)
    model, tok, trainable = shipped.build(s.model, torch.Generator().manual_seed(s.seed))
    depth = n_layers(model)
    if not 0 <= s.top_layers <= depth:
        raise ValueError(f"top_layers={s.top_layers} is out of range for {s.model}: allowed [0, {depth}]")
    start = depth - s.top_layers
    prefix = f"{model.base_model_prefix}.encoder.layer."
    trainable = trainable + [n for n, _ in model.named_parameters()
                             if n.startswith(prefix) and int(n[len(prefix):].split(".")[0]) >= start]
    model.to(device)

    windows, val = train_windows(s, ckpt, tok, texts), val_windows(s, tok, val_texts)
    shipped_names = list(trainable)
    mask_row_elapsed = 0.0
    if s.mask_row_steps:
        mask_row_elapsed = train_mask_row(model, tok, windows, s, ckpt, ckpt_minutes=ckpt_minutes, log=log).elapsed
        shipped_names.append(mask_row_name(model, tok))
    log(f"{s.model}: {depth} layers, cache after layer {start}; {len(windows)} training windows x "
        f"{s.views} views, {len(val)} held-out windows")
    common = dict(upto=start, mask_rate=s.mask_rate, shard_items=s.shard_items,
                  encode_batch=s.encode_batch, log=log)
    done = build_cache(model, tok, windows, ckpt / "cache_train", key=s.cache_key(), views=s.views,
                       seed=s.seed, stop_after=cache_stop_after, **common)
    if not done:
        return None
    build_cache(model, tok, val, ckpt / "cache_val", key={**s.cache_key(), "val_windows": s.val_windows},
                views=1, seed=s.seed + 1, **common)
    if cache_only:
        return None
    cache, val_cache = load_cache(ckpt / "cache_train"), load_cache(ckpt / "cache_val")
    log(f"cache: {cache.n_items} masked windows, {len(cache.targets)} sites, "
        f"{cache.h.numel() * 2 / 2**20:.0f} MiB")

    names, rows = set_trainable(model, trainable)
    params = [p for n, p in model.named_parameters() if n in names]
    opt = make_optimizer(model, names, rows, s.lr)
    progress, history = Progress(), []
    last = ckpt / CHECKPOINT
    if last.is_file():
        state = torch.load(last, weights_only=True)
        check_resumable(state, last, s.fixed(), s.steps, s.decay)
        model.load_state_dict(state["model"], strict=False)
        opt.load_state_dict(state["opt"])
        progress = Progress(step=state["step"], elapsed=state["elapsed"], losses=list(state["losses"]))
        history = list(state["history"])
        log(f"resumed from step {progress.step} ({progress.elapsed / 60:.1f} min trained so far)")

    def save(p: Progress) -> None:
        row: dict[str, Any] = {"step": p.step, "train_loss": p.losses[-1] if p.losses else None,
                               "val_loss": cached_loss(model, val_cache, start)}
        if (data_dir() / PROBE_FILE).is_file():
            model.eval()
            pr = cloze_probe(model, tok)
            row.update(probe_top1=pr["top1"], probe_top5=pr["top5"])
            model.train()
        history.append(row)
        tsd = {n: q.detach().cpu() for n, q in model.named_parameters() if n in names}
        save_atomic({"fixed": s.fixed(), "steps": s.steps, "decay": s.decay, "step": p.step,
                     "elapsed": p.elapsed, "losses": p.losses, "history": history, "model": tsd,
                     "opt": opt.state_dict()}, last)
        probe = (f", probe top1 {row['probe_top1']:.3f} top5 {row['probe_top5']:.3f}"
                 if "probe_top1" in row else "")
        log(f"checkpoint step {p.step}: val loss {row['val_loss']:.4f}{probe}")

    per_epoch = max(1, cache.n_items // s.batch)

    def loss_at(step: int) -> Tensor:
        epoch, k = divmod(step, per_epoch)
        perm = torch.randperm(cache.n_items, generator=torch.Generator().manual_seed(s.seed * 7919 + epoch))
        logits, targets = site_logits(model, cache, perm[k * s.batch:(k + 1) * s.batch], start)
        return torch.nn.functional.cross_entropy(logits.float(), targets)

    model.train()
    if train:
        run_schedule(opt, loss_at, s, params=params, stop=stop, progress=progress, save=save,
                     ckpt_minutes=ckpt_minutes, log=log)
    model.eval()
    return TrainedHead(model=model, tokenizer=tok, trainable=shipped_names, step=progress.step,
                       elapsed=progress.elapsed, init_meta=None, history=history,
                       mask_row_elapsed=mask_row_elapsed)
