"""Chapters define no functions: each chapter's code is parameters, library calls and one call per
figure. Anything a chapter computes that deserves a name lives, tested, in the library."""

import ast
import json
import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = sorted(BOOK.glob("*.ipynb"))


def _code_cells(path: Path) -> list[tuple[int, str]]:
    nb = json.loads(path.read_text())
    return [(i, "".join(c["source"])) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]


def _parse(src: str) -> ast.Module:
    # IPython magics and shell escapes are not Python; chapters use none, but do not fail on one.
    return ast.parse("\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!"))))


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_defines_no_function_class_or_lambda(path):
    found = [(i, type(node).__name__, getattr(node, "name", "lambda"))
             for i, src in _code_cells(path) for node in ast.walk(_parse(src))
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))]
    assert not found, f"{path.name} defines (cell, kind, name): {found}; move them into the library"


def _is_caption(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and ast.unparse(stmt.value.func) == "tp.caption")


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_each_figure_is_its_caption_and_one_call(path):
    bad = []
    for i, src in _code_cells(path):
        body = _parse(src).body
        # a figure drawn only under a condition (e.g. where bf16 is native) sits in one if-block
        if len(body) == 1 and isinstance(body[0], ast.If) and not body[0].orelse:
            body = body[0].body
        if not any(_is_caption(s) for s in body):
            continue
        rest = [s for s in body if not _is_caption(s)]
        if len(rest) != 1 or not isinstance(rest[0], ast.Expr) or not isinstance(rest[0].value, ast.Call):
            bad.append(i)
        elif "alt." in ast.unparse(rest[0]):
            bad.append(i)
    assert not bad, f"{path.name}: figure cells {bad} build a chart inline; call a tokendyn.publish.figures function"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_text_speaks_of_no_issue(path):
    """A reader has no issue tracker: a chapter's text and code say what they mean, not which issue
    asked for it. Outputs are left out (sampled chains may well print the word)."""
    nb = json.loads(path.read_text())
    found = [(i, m.group(0)) for i, c in enumerate(nb["cells"])
             for m in re.finditer(r"(?i)\bissues?\b", "".join(c["source"]))]
    assert not found, f"{path.name} speaks of issues in cells {found}"


# page -> its code cells over MAX_CELL_LINES lines (parameters cells aside) now; the goal is 0 everywhere,
# so a page may only lose long cells (lower its pin when it does)
MAX_CELL_LINES = 25
LONG_CELLS = {
    "00_getting_started": 0, "01_glauber_theory": 0, "02_rectangle_test": 0, "02_rectangle_test_size": 0, "03_phase_transition": 0, "03_phase_transition_crossover": 0,
    "04_basins": 0, "04_basins_attractor": 0, "04_basins_census": 0, "05_tube_law": 0, "06_dabi_cci": 0, "07_escapes": 0, "07_escapes_decoders": 0, "appendix_models": 0, "appendix_models_scale": 0,
    "05_tube_law_image": 0, "05_tube_law_map": 0,
    "appendix_performance": 0, "appendix_scale": 0,
}


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_page_gains_a_long_cell(path):
    nb = json.loads(path.read_text())
    long = [(i, len("".join(c["source"]).splitlines())) for i, c in enumerate(nb["cells"])
            if c["cell_type"] == "code" and "parameters" not in c.get("metadata", {}).get("tags", [])
            and len("".join(c["source"]).splitlines()) > MAX_CELL_LINES]
    assert len(long) <= LONG_CELLS[path.stem], (f"{path.name}: (cell, lines) over {MAX_CELL_LINES} lines: {long}; "
                                                "move the loop into the library")
    assert len(long) == LONG_CELLS[path.stem], f"{path.name}: {LONG_CELLS[path.stem] - len(long)} fewer long cells; lower its pin"
