"""Quantities the book shows on more than one page: one record, one setting, one text.

A number a reader meets on two pages must be the same number, or be labelled as another setting
(live against recorded, residual against sharpest direction) every time. Each shared quantity has
a key in :data:`SHARED` that says what it is, which record and setting it comes from, how it is
written and on which pages it appears. A page writes it with :func:`show`, which marks the text
in the HTML (``<span data-quantity="key">``); ``tests/test_book_render.py`` reads every built
page's marks (:func:`marks`) and fails when a key is missing from a page the registry names or
when two marks of one key differ.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Shared:
    """A quantity shown on several pages: what it is (``meaning``), how its value is written
    (``spec``, a format spec) and the pages (documents as ``_toc.yml`` names them) that show it."""

    meaning: str
    spec: str
    pages: tuple[str, ...]


_LADDER = ("chapter 5's recorded generator ladder (runs/05_tube_law-ladder.json), the shipped contextual "
           "flow's rung: DABI of its terminal residual at K = {k}, over the ladder's held-out tokens")
SHARED: dict[str, Shared] = {
    f"flow-dabi-recorded-K{k}": Shared(_LADDER.format(k=k), ".3g", ("book/05_tube_law_map", "book/06_dabi_cci"))
    for k in (4, 8, 16)
}

_MARK = re.compile(r'<span class="tokendyn-quantity" data-quantity="([^"]+)">(.*?)</span>', re.S)


def show(key: str, value: float) -> str:
    """``value`` written as the registry says, marked with its key for the cross-page check
    (HTML; inside Markdown or a table cell). An unknown key raises ``KeyError`` naming the known ones."""
    if key not in SHARED:
        raise KeyError(f"{key!r} is not a shared quantity: one of {sorted(SHARED)}")
    return f'<span class="tokendyn-quantity" data-quantity="{key}">{format(value, SHARED[key].spec)}</span>'


def marks(page_html: str) -> list[tuple[str, str]]:
    """Every marked quantity in a page's HTML, in order: ``[(key, text as shown)]``."""
    return [(key, html.unescape(re.sub(r"<[^>]+>", "", text)).strip()) for key, text in _MARK.findall(page_html)]


def disagreements(pages: dict[str, str]) -> list[str]:
    """How the pages (doc name -> built HTML) break the registry, in words (empty: none): a key
    missing from a page that should show it, a key the registry does not know, or one key shown
    with two texts."""
    found: list[str] = []
    seen: dict[str, dict[str, set[str]]] = {}
    for doc, page in pages.items():
        for key, text in marks(page):
            seen.setdefault(key, {}).setdefault(text, set()).add(doc)
    for key in sorted(set(seen) - set(SHARED)):
        found.append(f"{key}: marked on {sorted(set().union(*seen[key].values()))} but not in SHARED")
    for key, q in SHARED.items():
        shown = seen.get(key, {})
        on = set().union(*shown.values()) if shown else set()
        found += [f"{key}: not shown on {doc}" for doc in q.pages if doc in pages and doc not in on]
        if len(shown) > 1:
            found.append(f"{key}: shown as " + "; ".join(f"{t} on {sorted(d)}" for t, d in sorted(shown.items())))
    return found


def _shipped(generator: object) -> bool:
    """Whether a rung of chapter 5's recorded generator ladder is the shipped flow (its name says so)."""
    return str(generator).startswith("shipped")


def ladder_value(generator: str, key: str, value: float, spec: str = ".3g") -> str:
    """A cell of chapter 5's recorded generator ladder as a page writes it: the shipped flow's rung
    (its ``generator`` starts with ``"shipped"``) marked as the shared quantity ``key`` when the
    registry has it, every other rung (or key) formatted with ``spec``."""
    if _shipped(generator) and key in SHARED:
        return show(key, value)
    return format(value, spec)


def shipped_ladder_dabi(rows: list[dict], ks: Iterable[int]) -> dict[int, float]:
    """The shipped flow's DABI at each K in ``ks`` that the recorded generator ladder's rows
    (``generator``, ``K``, ``dabi`` each) hold, K ascending; empty when it holds no shipped rung."""
    ks = {int(k) for k in ks}
    return {int(r["K"]): float(r["dabi"]) for r in sorted(rows, key=lambda r: r["K"])
            if _shipped(r["generator"]) and int(r["K"]) in ks}
