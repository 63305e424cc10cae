"""Censored times: when each run hit, every run watched up to one last step, the cap.

The one convention, from the coupling kernel (:func:`tokendyn.mcmc.glauber.coupling_times`) to the
diagnostics, the recorded runs, the figures and the verdicts: a run that hit within its watch has
its hitting step in ``times``; a run that had not hit by the last step it was watched is
``censored`` and its time is that last step, ``cap``. So ``P(T > t)`` is read directly for every
``t < cap``, and a censored time is a lower bound on the true one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.checks import check_range

__all__ = ["CensoredTimes"]


@dataclass(frozen=True)
class CensoredTimes:
    """Hitting (coupling) times of ``B`` runs watched for ``cap`` steps.

    ``times`` [B] int64: each run's first hitting step (``0`` if it started there), or ``cap``
    where ``censored`` [B] bool says it had not hit by then; ``cap``: the last step observed
    (``>= 0``). Unpacks as ``times, censored = cell`` (see :meth:`__iter__`).
    """

    times: Tensor
    censored: Tensor
    cap: int

    def __post_init__(self) -> None:
        check_range("cap", self.cap, 0, integer=True)
        for name, value, dtype in (("times", self.times, torch.int64), ("censored", self.censored, torch.bool)):
            if not isinstance(value, Tensor) or value.dim() != 1 or value.dtype != dtype:
                got = f"{value.dtype} {tuple(value.shape)}" if isinstance(value, Tensor) else type(value).__name__
                raise TypeError(f"{name} must be a 1-D {dtype} tensor [B], got {got}")
        if self.censored.shape != self.times.shape:
            raise ValueError(f"censored has {self.censored.numel()} entries but times has {self.times.numel()}")
        if self.censored.device != self.times.device:
            raise ValueError(f"censored is on {self.censored.device} but times on {self.times.device}")
        if bool((self.times < 0).any()):
            raise ValueError(f"times must be >= 0, got {self.times[self.times < 0][:3].tolist()}")
        if bool((self.times[self.censored] != self.cap).any()):
            bad = self.times[self.censored & (self.times != self.cap)][:3].tolist()
            raise ValueError(f"times of censored rows must equal cap={self.cap}, got {bad}")
        if bool((self.times > self.cap).any()):
            late = self.times[self.times > self.cap][:3].tolist()
            raise ValueError(f"uncensored times must be <= cap={self.cap}, got {late}")

    def __iter__(self) -> Iterator[Tensor]:
        # The pre-registered rule code (tokendyn.publish.preregistration.RULE_CODE: censor_at,
        # bootstrap_medians, median_times, compare_shapes) reads a cell as the pair
        # ``times, censored = cell`` and may not change, because recorded runs were judged by it;
        # so a cell unpacks to exactly that pair. The cap travels with the pair, in this record.
        return iter((self.times, self.censored))
