"""Seeded initialisation and a resumable training loop shared by the autoencoders and the flows.

Every random draw comes from an explicit ``torch.Generator`` whose state is saved in the checkpoint,
so an interrupted run that resumes ends at the same weights as one that never stopped (on CPU).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from ..checks import check_range


def init_params(module: nn.Module, generator: torch.Generator) -> nn.Module:
    """Re-initialise every parameter from ``generator`` (no global seed involved).

    Matrices (and embeddings) get N(0, 1/fan_in); biases zero; 1-d norm scales one.
    """
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() >= 2:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(fan_in))
            elif "norm" in name and name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.zero_()
    return module


def train(model: nn.Module, loss_fn: Callable[[torch.Generator], torch.Tensor], *, steps: int,
          lr: float, generator: torch.Generator, checkpoint: str | Path | None = None,
          checkpoint_every: int = 200, log_every: int = 100, label: str = "train",
          log: Callable[[str], None] = print) -> list[float]:
    """Run AdamW with cosine decay for ``steps`` steps; resume from ``checkpoint`` if it exists.

    ``loss_fn(generator)`` draws its own batch and noise from ``generator`` and returns a scalar loss.
    Returns the logged running losses. The checkpoint holds model, optimiser, step, generator state
    and the loss log; it is written every ``checkpoint_every`` steps and at the end.
    """
    check_range("steps", steps, 1, None, integer=True)
    check_range("lr", lr, 0, 1, lo_open=True)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 100) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    start, losses = 0, []
    ckpt = Path(checkpoint) if checkpoint is not None else None
    if ckpt is not None and ckpt.is_file():
        state = torch.load(ckpt, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        generator.set_state(state["generator"])
        start, losses = int(state["step"]), list(state["losses"])
        log(f"[{label}] resumed at step {start}/{steps}")

    def save(step: int) -> None:
        if ckpt is None:
            return
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        tmp = ckpt.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                    "generator": generator.get_state(), "step": step, "losses": losses}, tmp)
        tmp.replace(ckpt)  # atomic: a kill mid-write never leaves a broken checkpoint

    model.train()
    t0, running = time.time(), 0.0
    for step in range(start, steps):
        loss = loss_fn(generator)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        running += loss.item()
        if (step + 1) % log_every == 0 or step + 1 == steps:
            n = (step + 1) % log_every or log_every
            losses.append(running / n)
            running = 0.0
            rate = (step + 1 - start) / max(time.time() - t0, 1e-9)
            log(f"[{label}] step {step + 1}/{steps} loss {losses[-1]:.4f} "
                f"({rate:.1f} steps/s, eta {(steps - step - 1) / max(rate, 1e-9) / 60:.1f} min)")
        if (step + 1) % checkpoint_every == 0 or step + 1 == steps:
            save(step + 1)
    model.eval()
    return losses
