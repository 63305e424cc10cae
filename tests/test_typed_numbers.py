"""Numbers typed into the book's prose (tokendyn.publish.typed_numbers): the checker on constructed
text, and each page's count pinned, so a new typed number fails here and glueing one lowers a pin.

The goal is zero: every number a reader sees glued from its run, the paper's, or a stated
convention. The pins are where the book stands; lower a pin when a page loses typed numbers.
"""

from pathlib import Path

import pytest

import json

from tokendyn.publish.typed_numbers import DEFINITIONS, PAPER_NUMBERS, page_markdown, typed_numbers, unglued_keys

ROOT = Path(__file__).resolve().parents[1]

# page -> its typed numbers now (the goal: 0 everywhere)
PINNED = {
    "book/00_getting_started.ipynb": 0,
    "book/01_glauber_theory.ipynb": 0,
    "book/02_rectangle_test.ipynb": 0,
    "book/02_rectangle_test_size.ipynb": 0,
    "book/03_phase_transition.ipynb": 0,
    "book/03_phase_transition_crossover.ipynb": 0,
    "book/04_basins.ipynb": 0,
    "book/04_basins_attractor.ipynb": 0,
    "book/04_basins_census.ipynb": 0,
    "book/05_tube_law.ipynb": 0,
    "book/05_tube_law_image.ipynb": 0,
    "book/05_tube_law_map.ipynb": 0,
    "book/06_dabi_cci.ipynb": 0,
    "book/07_escapes.ipynb": 0,
    "book/07_escapes_decoders.ipynb": 0,
    "book/appendix_models.ipynb": 0,
    "book/appendix_models_scale.ipynb": 0,
    "book/appendix_performance.ipynb": 0,
    "book/appendix_scale.ipynb": 0,
    "book/appendix_rules.md": 0,
    "book/glossary.md": 0,
    "book/intro.md": 0,
    "book/references.md": 0,
    "book/scoreboard.md": 0,
}


def test_glued_referenced_defining_and_paper_numbers_are_not_typed():
    text = ("{glue:text}`grid_tau_star` at [Chapter 6](06_dabi_cci.ipynb) and Figure 5.2 (Wang 2026); the paper's "
            "10-33x and 12-41%; $n = 8$ and $1/\\sqrt{d}$; 95% intervals\n1. first item; Paper 2's claim; a top-5 probe, distinct-2 and seq-rep-4; Theorem 17; layer 12 and layer-11 states"
            "\n## 3. A numbered section; pages 4.2 and 4.3, [4.2 A trap census](04_basins_census.ipynb) and [5.2](x.ipynb)")
    assert typed_numbers(text) == []
    assert typed_numbers("[4.2 traps in 3 chains](x.ipynb) but 4.2 alone") == ["3", "4.2"]  # only the page number is excused


def test_typed_results_are_found_in_prose_math_and_html():
    assert typed_numbers("a ratio of 2.6x over 16,384 tokens") == ["2.6", "16,384"]
    assert typed_numbers("with $C = 1.73$ [1.53, 1.92]") == ["1.73", "1.53", "1.92"]
    assert typed_numbers("<span class='x'>7.27</span> and a < 3 but b > 4") == ["7.27", "3", "4"]
    assert typed_numbers("ours is 2, not 10") == ["2", "10"]  # only whole paper ranges are excused
    assert typed_numbers("the paper's ~0% and ~1; ours 0% and ~0.5%") == ["0%", "0.5%"]  # a paper phrase, not a bare 0
    assert typed_numbers("a top-5 of 0.31 in Paper 1") == ["0.31"]  # the metric's name is excused, its value is not


def test_every_excused_number_says_why():
    assert all(reason.strip() for reason in DEFINITIONS.values())
    assert {"10-33", "12-41", "508", "294"} <= PAPER_NUMBERS


@pytest.mark.parametrize("page", sorted(PINNED))
def test_no_page_gains_a_typed_number(page):
    found = typed_numbers(page_markdown(ROOT / page))
    assert len(found) <= PINNED[page], f"{page}: {len(found) - PINNED[page]} new typed number(s); glue them: {found}"
    assert len(found) == PINNED[page], f"{page}: {PINNED[page] - len(found)} fewer typed numbers; lower its pin"


def test_every_page_is_pinned():
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "book").glob("*.ipynb")} | {
        p.relative_to(ROOT).as_posix() for p in (ROOT / "book").glob("*.md")}
    assert pages == set(PINNED)


def _glued(key):
    return {"output_type": "display_data", "data": {"application/papermill.record/text/plain": "'1'"},
            "metadata": {"scrapbook": {"mime_prefix": "application/papermill.record/", "name": key}}}


def test_unglued_keys_finds_a_key_no_output_glues(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "source": ["{glue:text}`a` and {glue:text}`b:.2f` and {glue:md}`c`"]},
                    {"cell_type": "code", "source": ["glue('a', 1)"], "outputs": [_glued("a"), _glued("c")]}]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    assert unglued_keys(path) == ["b"]


@pytest.mark.parametrize("page", sorted(p for p in PINNED if p.endswith(".ipynb")))
def test_every_glued_key_a_page_uses_is_glued_by_its_committed_outputs(page):
    assert unglued_keys(ROOT / page) == [], f"{page}: these keys render as nothing"
