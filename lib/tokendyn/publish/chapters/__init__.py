"""Each chapter's claim rows and the words its text glues, assembled from the chapter's tables.

A chapter measures with the library and judges with :mod:`tokendyn.publish.verdicts`; the module
named after it here only puts those numbers into its claims table and its sentences, so that the
notebook stays data -> library call -> table or figure.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any


def default(fn: Any, name: str) -> Any:
    """The default of parameter ``name`` of ``fn``: the threshold a rule or statistic runs with, so
    that a page states the number the code applies (``default(verdicts.claim_4, "level")``)."""
    return inspect.signature(fn).parameters[name].default


_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                 "twelve")


def count_words(n: int, *, zero: str = "no", through: int = 12) -> str:
    """A count as prose writes it: a word from ``zero`` (``"no"`` or ``"zero"``) up to ``through``
    (at most twelve), digits with thousands commas beyond (``count_words(3)`` -> ``"three"``,
    ``count_words(1500)`` -> ``"1,500"``)."""
    if not 0 <= through < len(_NUMBER_WORDS):
        raise ValueError(f"through={through} is out of range: allowed [0, {len(_NUMBER_WORDS) - 1}]")
    if not 0 <= n <= through:
        return f"{n:,}"
    return zero if n == 0 else _NUMBER_WORDS[n]


def join_words(values: Iterable[Any], last: str = "and") -> str:
    """``["a", "b", "c"]`` -> ``"a, b and c"`` (``last`` joins the final pair); one value alone, and
    ``""`` for none."""
    vs = [str(v) for v in values]
    return "" if not vs else vs[0] if len(vs) == 1 else ", ".join(vs[:-1]) + f" {last} " + vs[-1]


def range_words(lo: float, hi: float, spec: str) -> str:
    """``"lo to hi"`` formatted by ``spec``, or one value when both print alike."""
    a, b = f"{lo:{spec}}", f"{hi:{spec}}"
    return a if a == b else f"{a} to {b}"
