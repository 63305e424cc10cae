"""Every page in book/ is in the table of contents, once: a page the toc leaves out is built by no
one and linked from nowhere, and Sphinx only warns about it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_files(toc: dict) -> list[str]:
    """Every document a jb-book ``_toc.yml`` lists, sections included, root first."""
    files = [toc["root"]]

    def walk(entries):
        for e in entries or []:
            if "file" in e:
                files.append(e["file"])
            walk(e.get("sections"))

    for part in toc.get("parts", [{"chapters": toc.get("chapters")}]):
        walk(part.get("chapters"))
    return files


def test_toc_files_walks_sections():
    toc = {"root": "book/intro", "parts": [{"chapters": [{"file": "book/a", "sections": [{"file": "book/a_2"}]}]}]}
    assert toc_files(toc) == ["book/intro", "book/a", "book/a_2"]


def test_every_page_is_in_the_toc_once():
    listed = toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    twice = [f for f, k in Counter(listed).items() if k > 1]
    pages = {f"book/{p.stem}" for p in (ROOT / "book").iterdir() if p.suffix in (".ipynb", ".md")}
    assert not twice, f"listed more than once in _toc.yml: {twice}"
    assert not pages - set(listed), f"pages in book/ that _toc.yml leaves out: {sorted(pages - set(listed))}"
    assert not set(listed) - pages, f"_toc.yml lists pages that book/ lacks: {sorted(set(listed) - pages)}"
