"""Stage 0 of the MiniLM rungs: the mask token's embedding row, trained through the frozen encoder
before the cache is built (all-MiniLM-L6-v2 never trained it), and its replay from a recorded run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ...evaluation import head_logits
from ...models import shipped
from ...models.shipped import head_names
from ..loop import Progress, save_atomic
from ..masking import mask_batch, special_token_mask
from ..mlm import check_resumable, make_optimizer, run_schedule, set_trainable
from .cache import train_windows, windows_digest
from .settings import HeadSettings

__all__ = ["MASK_ROW_STEPS", "MASK_ROW_CHECKPOINT", "MASK_ROW_LR", "mask_row_name", "train_mask_row",
           "replay_mask_row"]

MASK_ROW_STEPS = {"minilm": 300, "mpnet": 0}
"""Stage-0 steps per encoder family. all-MiniLM-L6-v2's pre-training (attention distillation, then
sentence pairs) never fed it a mask token, so its ``[MASK]`` row is as initialised (norm 0.24
against a median row's 1.1) and a head on frozen states reads nothing at a masked site (probe
top-5 0.00 at every depth without stage 0). MPNet was pre-trained with masks: its row is kept."""

MASK_ROW_CHECKPOINT = "mask_row.pt"
MASK_ROW_LR = 3e-3  # stage 0's head rate; the row takes 5x (``make_optimizer``'s row group)


def mask_row_name(model: Any, tok: Any) -> str:
    """The shipped name of the mask token's embedding row: ``"<prefix>.embeddings.word_embeddings.weight[id]"``."""
    return f"{model.base_model_prefix}.embeddings.word_embeddings.weight[{tok.mask_token_id}]"


def train_mask_row(model: Any, tok: Any, windows: Tensor, s: HeadSettings, ckpt: Path, *,
                   stop: int | None = None, ckpt_minutes: float = 4.0,
                   log: Callable[[str], None] = print) -> Progress:
    """Stage 0: train the mask token's embedding row of ``model`` in place, by back-propagating
    through the frozen encoder, with a throwaway head trained beside it; afterwards the head is
    put back as it was (fresh), so stage 1 trains it exactly as for a rung without stage 0.

    ``s.mask_row_steps`` steps of ``s.batch`` windows from ``windows (N, L)`` (drawn and masked
    by generators seeded from ``s.seed`` and the step, so a resumed run takes the same batches),
    lr :data:`MASK_ROW_LR` on the head and 5x on the row, warmup 20, linear decay over the last
    20%. Resumes from ``ckpt/mask_row.pt``; a finished one is only loaded. ``stop`` ends the
    call at that step (as a kill would, after a checkpoint). Returns stage 0's :class:`~.loop.Progress`:
    finished when ``step == s.mask_row_steps``; ``elapsed`` is its training seconds over every call."""
    from types import SimpleNamespace

    steps = s.mask_row_steps
    row_name = mask_row_name(model, tok)
    heads = head_names(model)
    fresh = {n: p.detach().clone() for n, p in model.named_parameters() if n in heads}
    names, rows = set_trainable(model, heads + [row_name])
    params = [p for n, p in model.named_parameters() if n in names]
    opt = make_optimizer(model, names, rows, MASK_ROW_LR)
    sched = SimpleNamespace(lr=MASK_ROW_LR, steps=steps, warmup=min(20, steps // 5), decay=max(1, steps // 5))
    fixed = {"model": s.model, "seed": s.seed, "batch": s.batch, "seq_len": s.seq_len, "mask_rate": s.mask_rate,
             "lr": MASK_ROW_LR, "windows": windows_digest(windows)}
    ckpt.mkdir(parents=True, exist_ok=True)
    path = ckpt / MASK_ROW_CHECKPOINT
    progress = Progress()
    if path.is_file():
        state = torch.load(path, weights_only=True)
        check_resumable(state, path, fixed, steps, sched.decay)
        model.load_state_dict(state["model"], strict=False)
        opt.load_state_dict(state["opt"])
        progress = Progress(step=state["step"], elapsed=state["elapsed"], losses=list(state["losses"]))
    special = special_token_mask(tok)
    base = getattr(model, model.base_model_prefix)
    dev = next(model.parameters()).device

    def loss_at(step: int) -> Tensor:
        g = torch.Generator().manual_seed(s.seed * 1_000_003 + 7 * step + 5)
        ids = windows[torch.randint(len(windows), (s.batch,), generator=g)].long()
        inputs, pos, truth = mask_batch(ids, tok, special, s.mask_rate, g)
        attn = (ids != tok.pad_token_id).long()
        h = base(input_ids=inputs.to(dev), attention_mask=attn.to(dev)).last_hidden_state
        logits = head_logits(model, h[pos[:, 0].to(dev), pos[:, 1].to(dev)])
        return torch.nn.functional.cross_entropy(logits.float(), truth.to(dev))

    def save(p: Progress) -> None:
        tsd = {n: q.detach().cpu() for n, q in model.named_parameters() if n in names}
        save_atomic({"fixed": fixed, "steps": steps, "decay": sched.decay, "step": p.step, "elapsed": p.elapsed,
                     "losses": p.losses, "model": tsd, "opt": opt.state_dict()}, path)
        log(f"stage 0 checkpoint step {p.step}: mask row norm "
            f"{float(model.get_input_embeddings().weight[tok.mask_token_id].detach().norm()):.3f}")

    if progress.step < steps:
        log(f"stage 0: the mask row of {s.model}, {steps} steps x {s.batch} windows through the frozen encoder")
        model.eval()  # no dropout: stage 1 caches eval-mode states, and a resumed run draws nothing unseeded
        run_schedule(opt, loss_at, sched, params=params, stop=stop, progress=progress, save=save,
                     ckpt_minutes=ckpt_minutes, log=log)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n in fresh:
                p.copy_(fresh[n])
    for p in model.parameters():
        p.requires_grad_(True)
    model.eval()
    return progress


def replay_mask_row(name: str, ckpt: Path, *, texts: list[str] | None = None,
                    log: Callable[[str], None] = print) -> dict[str, float]:
    """Re-run stage 0 of shipped rung ``name`` with the settings its model.json records, in ``ckpt``
    (resumable, as :func:`train_mask_row`), and compare the row with the shipped one.

    Returns ``{"minutes"`` (stage 0's training time, this run), ``"max_abs_diff"``, ``"rel_diff"``
    (``|replayed - shipped| / |shipped|``; the shipped row is fp16, so a run that reproduces
    it still differs by its rounding, about 2e-4), ``"moved_rel"`` (``|shipped - pretrained| / |pretrained|``: how far stage 0
    moved the row, the scale ``rel_diff`` is read against)``}``. Raises ``ValueError`` when the rung
    is not exported or has no stage 0."""
    path = shipped.models_dir() / name / "model.json"
    if not path.is_file():
        raise ValueError(f"model={name!r} is not exported here (no {path}): train it with scripts/train_head.py")
    meta = json.loads(path.read_text())["training"]
    steps = meta.get("mask_row_steps", 0)
    if not steps:
        raise ValueError(f"model={name!r} records no stage 0 (mask_row_steps) in its model.json")
    if meta.get("mask_row_lr", MASK_ROW_LR) != MASK_ROW_LR:
        raise ValueError(f"{name} was trained with mask_row_lr={meta['mask_row_lr']}, this library uses {MASK_ROW_LR}")
    s = HeadSettings(model=name, mask_row_steps=steps,
                     **{k: meta[k] for k in ("batch", "seq_len", "mask_rate", "sotu_share", "seed", "max_windows")})
    model, tok, _ = shipped.build(name, torch.Generator().manual_seed(s.seed))
    row_id = tok.mask_token_id
    pretrained = model.get_input_embeddings().weight[row_id].detach().clone()
    elapsed = train_mask_row(model, tok, train_windows(s, ckpt, tok, texts), s, ckpt, log=log).elapsed
    row = model.get_input_embeddings().weight[row_id].detach().float()
    ship = shipped.load_shipped(name).model.get_input_embeddings().weight[row_id].detach().float()
    diff = row - ship
    return {"minutes": elapsed / 60, "max_abs_diff": float(diff.abs().max()),
            "rel_diff": float(diff.norm() / ship.norm()),
            "moved_rel": float((ship - pretrained).norm() / pretrained.norm())}
