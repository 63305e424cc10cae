"""Sphinx extension: how the book is built, and the scoreboard page.

- ``TOKENDYN_BOOK_EXECUTE=off`` renders the committed notebook outputs instead of executing the
  chapters. ``make test`` uses it: nbval has just executed every chapter and checked that those
  outputs reproduce, so executing them again for the pages would double CI time. ``make book``
  leaves it unset and executes (with the jupyter-cache).
- nbval's ``# NBVAL_CHECK_OUTPUT`` markers are for CI, not readers: they are stripped from the
  rendered cell sources.
- The ``tokendyn-rules`` directive becomes the book's page of verdict rules: every rule of
  ``tokendyn.publish.verdicts`` with its docstring, each under the anchor ``rule-<name>`` that the claims
  tables and the scoreboard link to.
- The ``tokendyn-scoreboard`` directive becomes the table of all sixteen claims, filled from the
  results records stored in the executed chapter notebooks (``tokendyn.publish.results.notebook_records``,
  ``tokendyn.publish.claims.scoreboard_from``), so it shows the very run the chapter pages show, *after*
  every chapter has been read (and so executed), at ``doctree-resolved``. The page holding it is re-read on every build, so
  it can never show older results than the files on disk. Each row links to the section of its chapter page that holds
  the claim's evidence (``tokendyn.publish.claims.evidence_link``), named by that section's heading; a link to a section the
  book lacks is a build warning.
"""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from docutils import nodes
from docutils.parsers.rst import Directive

if TYPE_CHECKING:
    from sphinx.application import Sphinx
    from tokendyn.publish.claims import Table

ROOT = Path(__file__).resolve().parents[2]


class scoreboard_node(nodes.General, nodes.Element):
    """Placeholder filled at doctree-resolved."""


class ScoreboardDirective(Directive):
    has_content = False

    def run(self):
        return [scoreboard_node()]


def _results_dir() -> Path:
    env = os.environ.get("TOKENDYN_RESULTS")
    return Path(env) if env else ROOT / "_build" / "results"


def _shown(app, nb: Path) -> Path:
    """The notebook a chapter page was rendered from: the one myst-nb wrote to ``jupyter_execute``
    in this build (executed, or the committed outputs when execution is off), else the source."""
    done = Path(app.outdir).parent / "jupyter_execute" / nb.relative_to(ROOT)
    return done if done.is_file() and done.stat().st_mtime >= nb.stat().st_mtime else nb


def _records(app) -> tuple[list[dict], str]:
    """The results records the pages show: those stored in each chapter notebook as rendered
    (``tokendyn.publish.results.notebook_records``), so the scoreboard and the chapters come from one run.
    Without any, the JSON files of ``_build/results``."""
    from tokendyn.publish import claims, results

    records = [r for nb in sorted((ROOT / "book").glob("*.ipynb")) for r in results.notebook_records(_shown(app, nb))]
    if records:
        return records, "the executed chapter notebooks (the outputs these pages show)"
    return claims.records_in(_results_dir()), "<code>_build/results/</code>"


def _fill(app, doctree, docname) -> None:
    nodes_here = list(doctree.findall(scoreboard_node))
    if not nodes_here:
        return
    import sys

    sys.path.insert(0, str(ROOT / "lib"))
    from tokendyn.core import atomic
    from tokendyn.publish import claims

    records, where = _records(app)
    board = claims.scoreboard_from(records)
    made = []
    out = Path(app.outdir) / "results"  # each record, to download beside the pages
    out.mkdir(parents=True, exist_ok=True)
    for rec in records:
        prov = rec.get("provenance", {})
        name = rec.get("chapter", "?")
        atomic.write_json(out / f"{name}.json", rec, indent=2, sort_keys=True)
        commit = (prov.get("git_commit") or "?")[:10] + (" (uncommitted changes)" if prov.get("git_dirty") else "")
        made.append(f"<li><a href=\"../results/{name}.json\"><code>{name}.json</code></a>: "
                    f"tokendyn {prov.get('tokendyn_version', '?')}, "
                    f"commit {commit}, seed {prov.get('seed')}, {prov.get('device', '?')} {prov.get('dtype', '')}, "
                    f"written {prov.get('written_at', '?')}</li>")
    sources = (f"<p>Built from {len(records)} results records in {where}:</p>"
               f"<ul class=\"tokendyn-sources\">{''.join(made)}</ul>") if records else (
        "<p><strong>No results were found</strong>: build the book with <code>make book</code>, "
        "which executes every chapter.</p>")
    import tokendyn.publish.plotting as tp
    from tokendyn.publish import figures

    tp.setup()
    tp.number_figures("S")
    tp.caption("Every claim, one row each (a claim measured by several chapters has a row per chapter): its "
               "verdict (left), and, where the paper gives a range and we a number with an interval, each of our "
               "numbers (points, 95% intervals) divided by the middle of the paper's range, over that range "
               "(orange band), on one log axis for all claims; 1 is the middle of the paper's range. Where the "
               "paper's value is not a range, it is written out. The table below links each row to its evidence.")
    figure = tp.render_spec(figures.scoreboard(claims.scoreboard_points(board)).to_dict())["text/html"]
    table = board.html(evidence_labels=_evidence_labels(app, docname, board))
    for node in nodes_here:
        node.replace_self(nodes.raw("", figure + f'<div class="tokendyn-scroll">{table}</div>' + sources,
                                    format="html"))


def _evidence_labels(app: Sphinx, docname: str, board: Table) -> dict[str, str]:
    """Each scoreboard row's ``evidence`` link (``<chapter>.html#<section id>``) named by the
    chapter's title (up to its colon) and the section's heading, as the built chapter page shows
    them. A link whose chapter or section the book lacks is a build warning, so that a renamed
    heading cannot leave the scoreboard pointing nowhere: update ``Claim.evidence`` in
    ``tokendyn/publish/claims.py``."""
    from sphinx.util import logging

    from tokendyn.publish.plotting import pretty

    log = logging.getLogger(__name__)
    here = Path(docname).parent
    labels: dict[str, str] = {}
    for row in board.rows:
        link = row.get("evidence", "")
        if not link or link in labels:
            continue
        page, _, section_id = link.partition("#")
        target = (here / page).with_suffix("").as_posix()
        if target not in app.env.all_docs:
            log.warning(f"scoreboard: claim {row['id']} links to {link}, but the book has no page {target}",
                        location=docname)
            continue
        found = [s for s in app.env.get_doctree(target).findall(nodes.section) if section_id in s["ids"]]
        if not found:
            log.warning(f"scoreboard: claim {row['id']} links to {link}, but {target} has no section with that "
                        "id: set Claim.evidence in tokendyn/publish/claims.py to one of its section ids", location=docname)
            continue
        chapter = app.env.titles[target].astext().split(":")[0]
        # a heading's maths reads as text here: $\tau^*$ -> τ*
        section = re.sub(r"[\\^{}]", "", pretty(found[0][0].astext()))
        labels[link] = f"{chapter} › {section}"
    return labels


def _markdown(doc: str) -> str:
    """A docstring as MyST: ``x`` and :func:`x` become inline code."""
    doc = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", doc)
    return doc.replace("``", "`")


class RulesDirective(Directive):
    has_content = False

    def _parse(self, text: str, into) -> None:
        from docutils.statemachine import StringList

        self.state.nested_parse(StringList(text.splitlines(), source="tokendyn.publish.verdicts"), 0, into)

    def run(self):
        import sys

        sys.path.insert(0, str(ROOT / "lib"))
        from tokendyn.publish import verdicts

        out = nodes.container()
        intro = _markdown(inspect.getdoc(verdicts) or "").split("\n\n", 1)[-1]
        self._parse(intro, out)
        for name, fn in verdicts.RULES.items():
            sec = nodes.section(ids=[f"rule-{name}"], names=[f"rule-{name}"])
            # Registered as a target so that MyST links to "#rule-<name>" (the table of rules
            # before runs, on the same page) resolve.
            self.state.document.note_explicit_target(sec, sec)
            sec += nodes.title(text=name)
            sig = str(inspect.signature(fn)).replace("'", "")
            sec += nodes.literal_block(text=f"verdicts.{name}{sig}", language="python")
            self._parse(_markdown(inspect.getdoc(fn) or ""), sec)
            out += sec
        return [out]


def _lib():
    import sys

    if str(ROOT / "lib") not in sys.path:
        sys.path.insert(0, str(ROOT / "lib"))


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "not recorded"
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


class RerunDirective(RulesDirective):
    """The "Rerun at scale" box that ends a chapter: the papermill command with the chapter's
    GPU-scale values (``tokendyn.publish.sweep.rerun_command``, read from its parameters cell), how long
    the committed run of the CPU defaults took, and a link to its results record."""

    def run(self):
        _lib()
        from tokendyn.publish import sweep

        env = self.state.document.settings.env
        nb = ROOT / f"{env.docname}.ipynb"
        stem = nb.stem
        took = _minutes(sweep.recorded_run_time(nb))
        ran_on = _ran_on(nb)
        text = "\n".join([
            "```{admonition} Rerun at scale",
            ":class: tip",
            "With the GPU-scale values from this chapter's parameters cell, from the project root:",
            "",
            "    " + sweep.rerun_command(nb).replace(" -y ", " \\\n        -y "),
            "",
            f"The CPU defaults behind this page took **{took}** on {ran_on}, as its record says (the committed run, a "
            "rough cost; "
            "every chapter's time is in the [scale appendix](appendix_scale.ipynb)). The GPU-scale run "
            "has not been timed: no GPU was available to the runs behind this book. This page's results "
            "record, with the "
            f'parameters, seed, models, library version and git commit that made it: '
            f'<a href="../results/{stem}.json" download>{stem}.json</a>.',
            "```",
        ])
        out = nodes.container()
        self._parse(text, out)
        return [out]


def _ran_on(nb):
    """The threads the committed run of notebook ``nb`` used, from its results records."""
    from tokendyn.publish import results

    threads = sorted({r["provenance"].get("threads") for r in results.notebook_records(nb)} - {None})
    return " or ".join(f"{t} CPU thread{'s' if t != 1 else ''}" for t in threads) if threads else "threads not recorded"


def runtime_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{tokendyn-runtime}`page``` -> how long this page's committed run of the CPU defaults took
    (``tokendyn.publish.sweep.recorded_run_time``) and on how many threads (its records), so a
    header's run time is the measured one."""
    _lib()
    from tokendyn.publish import sweep

    env = inliner.document.settings.env
    nb = ROOT / f"{env.docname}.ipynb"
    return [nodes.Text(f"{_minutes(sweep.recorded_run_time(nb))} on {_ran_on(nb)}")], []


class RuntimesDirective(RulesDirective):
    """A table of every chapter's recorded CPU run time (``tokendyn.publish.sweep.recorded_run_time``)."""

    def run(self):
        _lib()
        from tokendyn.publish import results, sweep

        book = ROOT / "book"
        files = sorted(book.glob("[0-9][0-9]_*.ipynb")) + sorted(book.glob("appendix_*.ipynb"))
        rows = ["| page | CPU defaults, committed run | cells run |", "|---|---|---|"]
        total = 0.0
        for f in files:
            t = sweep.recorded_run_time(f)
            total += t or 0.0
            cells = sum(1 for c in results.read_notebook(f)["cells"] if c.get("metadata", {}).get("execution"))
            rows.append(f"| [{f.stem}]({f.name}) | {_minutes(t)} | {cells} |")
        rows.append(f"| **all** | **{_minutes(total)}** | |")
        out = nodes.container()
        self._parse("\n".join(rows), out)
        return [out]


class PreregistrationDirective(RulesDirective):
    """Which recorded run each claim's rule judges, and whether the rule was committed before it
    (``tokendyn.publish.preregistration``: checked by ``tests/test_preregistration.py``) or after."""

    def run(self):
        _lib()
        from tokendyn.publish import preregistration as pre
        from tokendyn.core.atomic import read_record

        rows = ["| recorded run | judged by | its commit | rule committed before the run |", "|---|---|---|---|"]
        for rel, rules in pre.JUDGED.items():
            path = ROOT / "data" / rel
            commit = (read_record(path, keys=("provenance",))["provenance"].get("git_commit") or "none")[:10] \
                if path.is_file() else "not recorded yet"
            rows.append(f"| `{rel}` | {', '.join(f'[{r}](#rule-{r})' for r in rules)} | {commit} | yes (tested) |")
        for rel, claims_ in pre.BEFORE_THEIR_RULES.items():
            rows.append(f"| `{rel}` | claims {', '.join(str(c) for c in claims_)} | | no: recorded before its rule |")
        out = nodes.container()
        self._parse("\n".join(rows), out)
        return [out]


def _strip_markers(app, doctree) -> None:
    for node in list(doctree.findall(nodes.literal_block)):
        text = node.astext()
        if "NBVAL_" not in text:
            continue
        kept = "\n".join(line for line in text.split("\n") if not re.fullmatch(r"\s*# NBVAL_\w+\s*", line))
        node.children = [nodes.Text(kept)]
        node.rawsource = kept


def _always_reread(app, env, added, changed, removed):
    return [d for d in env.found_docs if _holds_scoreboard(env, d)]


def _holds_scoreboard(env, docname: str) -> bool:
    try:
        text = Path(env.doc2path(docname)).read_text()
        return any(f"tokendyn-{d}" in text for d in ("scoreboard", "rules", "preregistration"))  # built from code, not from the page
    except (OSError, UnicodeDecodeError):
        return False


def _execution_switch(app, config) -> None:
    mode = os.environ.get("TOKENDYN_BOOK_EXECUTE", "").strip()
    if mode:
        allowed = ("off", "cache", "force", "auto")
        if mode not in allowed:
            raise ValueError(f"TOKENDYN_BOOK_EXECUTE={mode!r} is not allowed: choose one of {list(allowed)}")
        config.nb_execution_mode = mode


def setup(app):
    app.add_node(scoreboard_node, html=(lambda self, node: None, lambda self, node: None))
    app.add_directive("tokendyn-scoreboard", ScoreboardDirective)
    app.add_directive("tokendyn-rules", RulesDirective)
    app.add_directive("tokendyn-rerun", RerunDirective)
    app.add_directive("tokendyn-runtimes", RuntimesDirective)
    app.add_role("tokendyn-runtime", runtime_role)
    app.add_directive("tokendyn-preregistration", PreregistrationDirective)
    app.connect("config-inited", _execution_switch, priority=100)
    app.connect("doctree-resolved", _fill)
    app.connect("doctree-read", _strip_markers)
    app.connect("env-get-outdated", _always_reread)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
