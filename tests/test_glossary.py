"""The glossary (book/glossary.md) defines every term of art the book uses, and every {term}
role in a page points at one of its entries."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
ROLE = re.compile(r"\{term\}`(?:[^`<]*<([^>]+)>|([^`]+))`")

# Terms a reader meets without a definition on the page that uses them; each needs an entry.
TERMS_OF_ART = ("e-fold", "blowup", "tau_1000", "probe bar", "portable float order", "recorded run",
                "chain-step", "rectangle test", "coupling time", "maximal coupling", "censored",
                "perfect trap", "approximate trap", "size ladder", "tube law", "tube mass", "oracle roll-in",
                "DABI", "CCI", "roofline fraction", "float order", "step settings")


def glossary() -> dict[str, str]:
    text = (BOOK / "glossary.md").read_text()
    body = text[text.index("```{glossary}") + len("```{glossary}"):text.rindex("```")]
    entries, term = {}, None
    for line in body.splitlines():
        if line and not line.startswith(" "):
            term = line.strip()
            entries[term] = ""
        elif term is not None:
            entries[term] += line.strip() + " "
    return entries


GLUED_MD = "application/papermill.record/text/markdown"


def pages() -> dict[str, str]:
    """Each page's prose: a markdown page, or a notebook's markdown cells and the markdown it glues
    into them (a ``{glue:md}`` paragraph renders its roles on the page)."""
    out = {p.name: p.read_text() for p in BOOK.glob("*.md") if p.name != "glossary.md"}
    for p in BOOK.glob("*.ipynb"):
        nb = json.loads(p.read_text())
        cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
        glued = ["".join(o["data"][GLUED_MD]) for c in nb["cells"] if c["cell_type"] == "code"
                 for o in c.get("outputs", []) if GLUED_MD in o.get("data", {})]
        out[p.name] = "\n".join(cells + glued)
    return out


def test_every_term_of_art_has_a_definition():
    g = glossary()
    missing = [t for t in TERMS_OF_ART if t not in g]
    assert not missing, f"book/glossary.md lacks {missing}"
    short = [t for t, d in g.items() if len(d.split()) < 8]
    assert not short, f"entries without a real definition: {short}"


def test_every_term_role_points_at_an_entry_and_every_entry_is_used():
    g = {t.lower() for t in glossary()}
    used = set()
    for name, text in pages().items():
        for m in ROLE.finditer(text):
            target = (m.group(1) or m.group(2)).strip().lower()
            assert target in g, f"{name}: {{term}} {target!r} is not in the glossary"
            used.add(target)
    unused = sorted(g - used - {"step settings", "influence coefficient",
                                "null control"})
    assert not unused, f"glossary entries no page links to: {unused}"
