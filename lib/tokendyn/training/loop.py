"""The resumable training loop shared by the masked LMs, the autoencoders and the flows.

:func:`run_steps` takes optimiser steps with the learning rate a function of the step, gradient
clipping, a running-loss log and checkpoints every so many steps or seconds; what a checkpoint holds
is the caller's. :func:`train` is the whole recipe for a module whose loss draws its batch and noise
from one generator (the latent models): AdamW, warmup-cosine rate, and a checkpoint holding model,
optimiser, generator state and loss log, so an interrupted run that resumes ends at the same
weights as one that never stopped (on CPU).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import torch
from torch import nn

from ..core.atomic import write_atomic
from ..core.checks import check_range
from .schedule import warmup_cosine


@dataclass
class Progress:
    """Where a run stands: ``step`` steps taken, ``elapsed`` seconds spent in them, and the mean
    loss of each logged stretch of steps."""

    step: int = 0
    elapsed: float = 0.0
    losses: list[float] = field(default_factory=list)


def save_atomic(obj: Any, path: Path) -> None:
    """``torch.save`` through :func:`tokendyn.core.atomic.write_atomic`, so that a kill mid-write never
    leaves a broken file."""
    write_atomic(path, lambda p: torch.save(obj, p))


def timestamped_log(fh: IO[str] | None = None) -> Callable[[str], None]:
    """A logger that prints ``HH:MM:SS message`` and appends the same line to ``fh`` if given."""

    def log(msg: str) -> None:
        line = time.strftime("%H:%M:%S ") + msg
        print(line, flush=True)
        if fh is not None:
            fh.write(line + "\n")
            fh.flush()

    return log


def start_run(folder: Path, *, device: str, threads: int, args: dict[str, Any]) -> tuple[torch.device, Callable[[str], None]]:
    """What a training script does first: set ``threads``, resolve ``device`` (``"auto"`` is CUDA
    when present), create ``folder`` and a timestamped log appending to ``folder/train.log``, and
    log ``args``. Returns ``(device, log)``."""
    torch.set_num_threads(threads)
    dev = torch.device("cuda" if device == "auto" and torch.cuda.is_available()
                       else ("cpu" if device == "auto" else device))
    folder.mkdir(parents=True, exist_ok=True)
    log = timestamped_log(open(folder / "train.log", "a"))
    log(f"args {args} device {dev}")
    return dev, log


def run_steps(opt: torch.optim.Optimizer, loss_at: Callable[[int], torch.Tensor], *,
              params: list[nn.Parameter], lr_at_step: Callable[[int], float], stop: int,
              total: int | None = None, progress: Progress | None = None,
              save: Callable[[Progress], None] | None = None, save_every_steps: int | None = None,
              save_every_seconds: float | None = None, log_every: int = 100,
              log: Callable[[str], None] = print, label: str = "") -> Progress:
    """Take optimiser steps from ``progress.step`` up to ``stop``; return the updated progress.

    Each step sets every parameter group's rate to ``group.get("lr_mult", 1) * lr_at_step(step)``,
    computes the scalar ``loss_at(step)`` (which draws its own batch), back-propagates, clips the
    gradient norm of ``params`` to 1 and steps ``opt``. Every ``log_every`` steps (and at ``stop``)
    the mean loss since the last log is appended to ``progress.losses`` and logged against ``total``
    (default ``stop``). ``save(progress)`` runs every ``save_every_steps`` steps, once
    ``save_every_seconds`` have passed since the last save, and at ``stop``.
    """
    progress = progress if progress is not None else Progress()
    total = total if total is not None else stop
    prefix = f"[{label}] " if label else ""
    t_saved = t0 = time.time()
    running, n = 0.0, 0
    while progress.step < stop:
        step = progress.step
        for group in opt.param_groups:
            group["lr"] = group.get("lr_mult", 1.0) * lr_at_step(step)
        ts = time.time()
        loss = loss_at(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        progress.step = step + 1
        progress.elapsed += time.time() - ts
        running += loss.item()
        n += 1
        if progress.step % log_every == 0 or progress.step == stop:
            progress.losses.append(running / n)
            rate = (time.time() - t0) / n
            log(f"{prefix}step {progress.step}/{total} loss {progress.losses[-1]:.4f} "
                f"lr {opt.param_groups[0]['lr']:.2e} {rate:.2f} s/step "
                f"eta {(total - progress.step) * rate / 60:.1f} min")
            running, n, t0 = 0.0, 0, time.time()
        due = (progress.step == stop
               or (save_every_steps is not None and progress.step % save_every_steps == 0)
               or (save_every_seconds is not None and time.time() - t_saved > save_every_seconds))
        if save is not None and due:
            save(progress)
            t_saved = time.time()
    return progress


def train(model: nn.Module, loss_fn: Callable[[torch.Generator], torch.Tensor], *, steps: int,
          lr: float, generator: torch.Generator, checkpoint: str | Path | None = None,
          checkpoint_every: int = 200, log_every: int = 100, label: str = "train",
          log: Callable[[str], None] = print, stop: int | None = None) -> list[float]:
    """Run AdamW (no weight decay) with a 100-step warmup and cosine decay for ``steps`` steps;
    resume from ``checkpoint`` if it exists.

    ``loss_fn(generator)`` draws its own batch and noise from ``generator`` and returns a scalar loss.
    Returns the logged running losses. The checkpoint holds model, optimiser, step, generator state
    and the loss log; it is written every ``checkpoint_every`` steps and at the end.

    ``stop`` (default ``steps``) ends this call after step ``stop`` (checkpointed there) while the
    rate still follows the schedule over ``steps``: a run in segments, each call resuming where the
    last stopped, ends at the same weights as one call (``scripts/train_context_latent.py
    flow-ladder`` snapshots the weights between segments). A checkpoint already at or past ``stop``
    takes no step.
    """
    check_range("steps", steps, 1, None, integer=True)
    stop = steps if stop is None else stop
    check_range("stop", stop, 1, steps, integer=True)
    check_range("lr", lr, 0, 1, lo_open=True)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    progress = Progress()
    ckpt = Path(checkpoint) if checkpoint is not None else None
    if ckpt is not None and ckpt.is_file():
        state = torch.load(ckpt, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        generator.set_state(state["generator"])
        progress = Progress(step=int(state["step"]), losses=list(state["losses"]))
        log(f"[{label}] resumed at step {progress.step}/{steps}")

    def save(p: Progress) -> None:
        assert ckpt is not None
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        save_atomic({"model": model.state_dict(), "opt": opt.state_dict(), "generator": generator.get_state(),
                     "step": p.step, "losses": p.losses}, ckpt)

    model.train()
    run_steps(opt, lambda step: loss_fn(generator), params=list(model.parameters()),
              lr_at_step=lambda step: lr * warmup_cosine(step, steps), stop=stop, total=steps, progress=progress,
              save=save if ckpt is not None else None, save_every_steps=checkpoint_every,
              log_every=log_every, log=log, label=label)
    model.eval()
    return progress.losses
