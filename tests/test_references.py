"""The references (references.bib): both papers the book reproduces carry their arXiv ids, and
every {cite} in a page names an entry that exists (a typo would render as a broken citation)."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENTRY = re.compile(r"@\w+\{([^,\s]+),(.*?)\n\}", re.S)
CITE = re.compile(r"\{cite(?::\w+)?\}`([^`]+)`")


def entries() -> dict[str, str]:
    return {k: body for k, body in ENTRY.findall((ROOT / "references.bib").read_text())}


def page_texts():
    for p in sorted((ROOT / "book").glob("*.md")):
        yield p.name, p.read_text()
    for p in sorted((ROOT / "book").glob("*.ipynb")):
        nb = json.loads(p.read_text())
        yield p.name, "\n".join("".join(c["source"]) for c in nb["cells"])


def test_both_papers_have_their_arxiv_ids():
    bib = entries()
    for key, arxiv in (("sana2026glauber", "2605.16378"), ("wang2026noncommitment", "2606.30705")):
        body = bib[key]
        assert re.search(rf"eprint\s*=\s*\{{{re.escape(arxiv)}\}}", body), f"{key}: no eprint {arxiv}"
        assert re.search(r"archivePrefix\s*=\s*\{arXiv\}", body), f"{key}: no archivePrefix = {{arXiv}}"
        assert f"https://arxiv.org/abs/{arxiv}" in body, f"{key}: no link to its arXiv page"


def test_every_citation_names_an_entry():
    keys = set(entries())
    missing = {(page, k.strip()) for page, text in page_texts() for group in CITE.findall(text)
               for k in group.split(",") if k.strip() not in keys}
    assert not missing, f"citations with no entry in references.bib: {sorted(missing)}"
    assert {"welleck2020unlikelihood", "gat2024dfm", "flowmatching2025precision"} <= keys
