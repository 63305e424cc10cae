"""Numbers typed into a page's prose: the ones a reader cannot trace to a run, a parameter or the paper.

A number in a chapter's markdown should be glued from the run that computed it (``{glue:text}``),
be one of the paper's values (:data:`PAPER_NUMBERS`, from the claims' paper values and the
numbers the chapters quote from the two papers), or be part of a reference that is not a result
(a chapter, figure, table or claim number, a year, a list marker), or define a convention
(:data:`DEFINITIONS`, each with its reason). :func:`typed_numbers` lists
every other numeric token of a markdown text; ``tests/test_typed_numbers.py`` pins each page's
count, so a new typed number fails the test and removing one means lowering the pin.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .claims import CLAIMS

# The paper's own numbers as the chapters quote them (beyond the claims' paper values): whole
# ranges where the paper gives a range, so a bare "2" or "10" of ours is never excused as the paper's.
_QUOTED = ("0.64", "0.80", "0.64-0.80", "1.5-2", "10-33", "12-41", "47-77", "508", "5e2", "1e5", "1e4", "294", "50",
           "5.9", "110-150", "15-38",
           "28-54", "82-132")  # the last two: cited perplexities of Discrete Flow Matching in float64 and float32
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?(?:-\d[\d,]*(?:\.\d+)?)?%?"
                     r"(?:x|M|k)?(?![\w])")  # a number or a range, with its %, x, M or k
_UNIT = re.compile(r"(?:x|M|k)$")
PAPER_NUMBERS: frozenset[str] = frozenset(
    _QUOTED + tuple(n for c in CLAIMS.values() for n in (_UNIT.sub("", t).rstrip("%") for t in _NUMBER.findall(c.paper_value))
                    if any(ch in n for ch in ".-e") or len(n) >= 3))  # "0", "1": too common to excuse
"""Numbers the chapters may type because they are the paper's (not ours)."""

DEFINITIONS: dict[str, str] = {
    "95%": "the level of every interval in the book, a convention stated once in the introduction",
    "3.11": "the Python version the setup requires (the README's), not a result",
}
"""Numbers that define the book's conventions rather than report a result, each with its reason."""

_STRIP = [
    re.compile(r"\{glue:[a-z]+\}`[^`]*`"),          # glued: traced to the run
    re.compile(r"\{(?:cite|cite:p|cite:t|term|ref|doc|numref|eq)\}`[^`]*`"),  # references, terms
    re.compile(r"```.*?```", re.S),                 # code blocks
    re.compile(r"`[^`]*`"),                         # code spans (names, parameters, commands)
    re.compile(r"</?[A-Za-z][^<>\n]*>"),            # HTML tags and their attributes (not "a < 1 and b > 2")
    re.compile(r"\[\d+(?:\.\d+)+(?=(?:\s[^\]]*)?\]\()"),  # a page's number opening a link to it ([4.2 A trap census](...))
    re.compile(r"\]\([^)]*\)"),                     # link targets
    re.compile(r"(?i)\b(?:chapter|chapters|figure|figures|fig\.|table|section|claim|claims|part|appendix|step|paper|theorem|layer|page)s?[\s-]+"
               r"\d+(?:\.\d+)?(?:\s*(?:,|and|to|-)\s*\d+(?:\.\d+)?)*"),  # the book's parts, Paper 1 / 2, a model's layer 12
    re.compile(r"(?m)^\s*\d+\.\s"),                 # numbered-list markers
    re.compile(r"\b(?:top|distinct|seq-rep)-\d+\b"),   # metric names (top-5, distinct-2, seq-rep-4), not results
    re.compile(r"(?m)^#+\s*\d+\.\s"),               # a numbered section's heading
    re.compile(r"\b(?:19|20)\d\d[a-z]?\b"),         # years (citations, dates)
]
# A claim's paper value quoted as the paper gives it ("~1", "~0%", "47-77% vs ~0%"): the whole value or
# one side of its "vs", when that side is marked as approximate or a range (a bare "0" or "1" never is).
# Chapter 6's push experiment quotes the paper the same way, outside the claims table.
_PAPER_VALUES = [c.paper_value for c in CLAIMS.values()] + ["47-77% vs ~0%"]
_PAPER_PHRASES = sorted({part.strip() for v in _PAPER_VALUES for part in (v, *v.split(" vs "))
                         if re.search(r"[~<>]|\d-\d|\d%", part)}, key=len, reverse=True)
_STRIP.insert(0, re.compile("|".join(rf"(?<![\w.~]){re.escape(p)}(?![\w.])" for p in _PAPER_PHRASES)))
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$", re.S)
_DECIMAL = re.compile(r"(?<![\w.])[-+]?\d+\.\d+(?![\w.])")


def typed_numbers(markdown: str) -> list[str]:
    """The numeric tokens of ``markdown`` that are neither glued, the paper's, a reference nor a
    definition (see the module docstring): every decimal inside math first, then the numbers of
    the prose in order of appearance."""
    text = markdown
    for pattern in _STRIP:
        text = pattern.sub(" ", text)
    # math defines (n = 8, 1/sqrt(d), tau >~ 1): only a decimal in it may be a typed result (C = 1.73)
    in_math = [d for m in _MATH.findall(text) for d in _DECIMAL.findall(m)]
    text = _MATH.sub(" ", text)
    found = []
    for token in in_math + _NUMBER.findall(text):
        token = _UNIT.sub("", token.rstrip(","))
        bare = token.lstrip("+-").rstrip("%")
        if token in DEFINITIONS or bare in PAPER_NUMBERS or bare.replace(",", "") in PAPER_NUMBERS:
            continue
        found.append(token)
    return found


def page_markdown(path: str | Path) -> str:
    """The reader's prose of a page: a notebook's markdown cells joined, or a markdown file."""
    path = Path(path)
    if path.suffix != ".ipynb":
        return path.read_text(encoding="utf-8")
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


_GLUE_ROLE = re.compile(r"\{glue(?::[a-z]+)?\}`([^`<]+?)(?:\s*<[^`]*>)?`")


def unglued_keys(path: str | Path) -> list[str]:
    """The ``{glue:...}`` keys a notebook's markdown uses that none of its committed outputs glues
    (myst-nb would render nothing there), sorted. A glued output carries its key in the output's
    ``metadata.scrapbook.name``; ``{glue:text}`key:.2f``` uses ``key``."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    used = {k.split(":")[0].strip() for c in nb["cells"] if c["cell_type"] == "markdown" for k in _GLUE_ROLE.findall("".join(c["source"]))}
    glued = {o.get("metadata", {}).get("scrapbook", {}).get("name") for c in nb["cells"] if c["cell_type"] == "code"
             for o in c.get("outputs", [])}
    return sorted(used - glued)
