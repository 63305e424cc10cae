"""Each chapter's claim rows and the words its text glues, assembled from the chapter's tables.

A chapter measures with the library and judges with :mod:`tokendyn.publish.verdicts`; the module
named after it here only puts those numbers into its claims table and its sentences, so that the
notebook stays data -> library call -> table or figure.
"""

from __future__ import annotations

import inspect
from typing import Any


def default(fn: Any, name: str) -> Any:
    """The default of parameter ``name`` of ``fn``: the threshold a rule or statistic runs with, so
    that a page states the number the code applies (``default(verdicts.claim_4, "level")``)."""
    return inspect.signature(fn).parameters[name].default
