"""Learning-rate schedules, as functions of the step (so that a resumed run needs no scheduler state)."""

from __future__ import annotations

import math


def lr_at(step: int, lr: float, steps: int, warmup: int, decay: int) -> float:
    """Warmup-stable-decay: linear warmup, constant, linear decay to 0 over the last ``decay`` steps.

    The stable phase does not depend on ``steps``, so a run may be lengthened by resuming from any
    checkpoint still in it.
    """
    if step < warmup:
        return lr * (step + 1) / warmup
    if step < steps - decay:
        return lr
    return lr * max(0.0, (steps - step) / decay)


def warmup_cosine(step: int, steps: int, warmup: int = 100) -> float:
    """Multiplier of the base rate at ``step``: linear warmup over ``warmup`` steps times a cosine
    decay from 1 to 0 over ``steps``."""
    return min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(step, steps) / steps))
