"""Argument checks that fail before any compute starts, naming the parameter and its range."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def check_range(name: str, value: Any, lo: float | None = None, hi: float | None = None,
                *, integer: bool = False, lo_open: bool = False, hi_open: bool = False) -> None:
    """Raise ``ValueError`` unless ``lo <= value <= hi`` (``lo < value`` when ``lo_open``,
    ``value < hi`` when ``hi_open``; ``-inf``/``inf`` with both open means finite).

    The message names the parameter, the value and the allowed range, e.g.
    ``tau=0 is out of range: allowed (0, inf]``.
    """
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type:
        raise TypeError(f"{name} must be {kind}, got {value!r}")
    low = "-inf" if lo is None else lo
    high = "inf" if hi is None else hi
    bracket = "(" if lo_open else "["
    span = f"{bracket}{low}, {high}{')' if hi_open else ']'}"
    if value != value:  # NaN
        raise ValueError(f"{name}={value!r} is out of range: allowed {span}")
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise ValueError(f"{name}={value!r} is out of range: allowed {span}")
    if hi is not None and (value >= hi if hi_open else value > hi):
        raise ValueError(f"{name}={value!r} is out of range: allowed {span}")


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``allowed``."""
    allowed = list(allowed)
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed: choose one of {allowed}")
