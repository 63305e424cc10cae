"""The built book renders offline in a real browser, opened from disk (file://) and served over
http: charts draw marks and respond, formulas are typeset with their fonts, no script or console
error shows, and no request leaves the machine.

Needs `make book` first and Debian's chromium; `make test` does both and sets
TOKENDYN_REQUIRE_BOOK=1 so that a missing book fails instead of skipping.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from test_toc import toc_files

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
REQUIRED = os.environ.get("TOKENDYN_REQUIRE_BOOK") == "1"
# How a reader opens the book: from disk, or from any web server (`make serve`).
MODES = ("file", "http")
CHART_MARKS = ("svg g.mark-symbol path, svg g.mark-line path, svg g.mark-rect path,"
               " svg g.mark-area path, svg g.mark-rule line, svg g.mark-text text,"
               " svg g.mark-point path, svg g.mark-tick line, svg g.mark-arc path")

pytestmark = pytest.mark.browser


def _need(cond: bool, why: str) -> None:
    if not cond:
        if REQUIRED:
            pytest.fail(why)
        pytest.skip(why)


def _toc_files() -> list[str]:
    """Every document _toc.yml lists (root first), as paths without suffix."""
    return toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))


@functools.cache
def _claim_pages() -> tuple[str, ...]:
    """The chapter pages whose results record holds claim rows: each opens with its claims table
    (chapter 5's image page judges no claim, so it has none)."""
    from tokendyn.publish import results

    return tuple(d for d in _toc_files() if Path(d).name[:2].isdigit()
                 and any(r.get("claims") for r in results.notebook_records(ROOT / f"{d}.ipynb")))


def _pages() -> list[Path]:
    return [HTML / f"{f}.html" for f in _toc_files()]


@pytest.fixture(scope="module")
def built():
    _need((HTML / "index.html").is_file(), f"no built book at {HTML}: run `make book`")
    missing = [p.relative_to(HTML).as_posix() for p in _pages() if not p.is_file()]
    _need(not missing, f"pages in _toc.yml that were not built: {missing}: run `make book`")
    return HTML


@pytest.fixture(scope="module")
def server(built):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # keep the test log readable
            pass

    handler = functools.partial(Quiet, directory=str(built))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    _need(Path(CHROMIUM).exists(), "Debian's chromium is not installed: run scripts/ensure_chromium.sh")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


class Visit:
    """One page opened in a fresh browser context, with everything that went wrong recorded."""

    def __init__(self, browser, request, mode: str, page_path: Path):
        if mode == "file":
            url = page_path.as_uri()
            home = ("file", "")
        else:
            base = request.getfixturevalue("server")
            url = f"{base}/{page_path.relative_to(HTML).as_posix()}"
            home = ("http", urlparse(base).netloc)
        self.ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.ctx.new_page()
        self.outside: list[str] = []   # requests that would have left the machine
        self.errors: list[str] = []    # page errors, console errors, failed or 4xx/5xx loads
        self.warnings: list[str] = []  # console warnings, reported in failure messages

        def stays(u: str) -> bool:
            p = urlparse(u)
            return p.scheme in ("data", "blob", "about") or (p.scheme, p.netloc) == home

        def on_request(r):
            if not stays(r.url):
                self.outside.append(r.url)

        def route(r):
            return r.continue_() if stays(r.request.url) else r.abort()

        def on_console(m):
            if m.type == "error":
                self.errors.append(f"console: {m.text}")
            elif m.type == "warning":
                self.warnings.append(m.text)

        def on_failed(r):
            if stays(r.url):  # refused outside requests are already in self.outside
                self.errors.append(f"failed {r.url}: {r.failure}")

        self.page.on("request", on_request)
        self.page.route("**/*", route)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("console", on_console)
        self.page.on("requestfailed", on_failed)
        # A script or font the book should serve itself but does not (a 404) is an error too.
        self.page.on("response", lambda r: self.errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        self.page.goto(url, wait_until="load")

    def wait_rendered(self) -> None:
        page = self.page
        page.wait_for_function("document.documentElement.dataset.tokendynCharts === 'done'", timeout=60_000)
        if page.locator(".math").count():
            page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise"
                                   " && document.querySelectorAll('mjx-container').length > 0", timeout=60_000)
            page.evaluate("MathJax.startup.promise")
        page.evaluate("document.fonts.ready.then(() => null)")

    def close(self) -> None:
        self.ctx.close()


def _head_scripts(page_path: Path) -> list[str]:
    head = page_path.read_text(encoding="utf-8").split("</head>", 1)[0]
    return [Path(urlparse(s).path).name for s in re.findall(r'<script[^>]*\ssrc="([^"]+)"', head)]


def test_head_loads_classic_vega_before_require(built):
    """Vega, Vega-Lite and vega-embed load as classic scripts (module scripts are refused from
    file://), in order, and before require.js: a UMD build that sees require.js's define.amd
    registers as an AMD module and never sets window.vega."""
    want = ["vega.min.js", "vega-lite.min.js", "vega-embed.min.js", "tokendyn-charts.js"]
    for page_path in _pages():
        text = page_path.read_text(encoding="utf-8")
        assert 'type="module"' not in text, f"{page_path.name}: a module script cannot load from file://"
        names = _head_scripts(page_path)
        at = [names.index(n) for n in want if n in names]
        assert len(at) == len(want) and at == sorted(at), f"{page_path.name}: scripts out of order: {names}"
        if "require.js" in names:
            assert names.index("require.js") > at[-1], f"{page_path.name}: require.js before vega: {names}"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("doc", _toc_files())
def test_page_renders_offline(built, browser, request, mode, doc):
    page_path = HTML / f"{doc}.html"
    name = page_path.name
    visit = Visit(browser, request, mode, page_path)
    page = visit.page
    try:
        visit.wait_rendered()
        charts = page.locator(".tokendyn-vega")
        for i in range(charts.count()):
            chart = charts.nth(i)
            state = chart.get_attribute("data-rendered")
            assert state == "true", f"{mode}: chart {i} on {name} did not draw ({state}): {chart.inner_text()[:200]}"
            assert chart.locator(CHART_MARKS).count() > 0, f"{mode}: chart {i} on {name} has no drawn marks"
        n_math = page.locator(".math").count()
        if n_math:
            typeset = page.locator(".math mjx-container").count()
            assert typeset >= n_math, f"{mode}: {name}: {typeset} of {n_math} formulas typeset"
            assert page.locator("mjx-merror").count() == 0, f"{mode}: {name}: a formula failed to typeset"
        fonts = page.evaluate("[...document.fonts].map(f => [f.family, f.status])")
        broken = [f for f, s in fonts if s == "error"]
        assert not broken, f"{mode}: {name}: fonts that did not load: {broken}"
        if n_math:
            assert any(f.startswith("MJXTEX") and s == "loaded" for f, s in fonts), \
                f"{mode}: {name}: MathJax's fonts did not load: {fonts}"
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{page_path.stem}.{mode}.png"), full_page=True)
        assert not visit.outside, f"{mode}: {name}: requests left the machine: {visit.outside}"
        assert not visit.errors, f"{mode}: {name}: errors {visit.errors} (warnings {visit.warnings})"
    finally:
        visit.close()


def _interactive_charts(page) -> list[int]:
    """Indices of charts whose spec binds a parameter to its scales (zoom and pan)."""
    specs = page.eval_on_selector_all(".tokendyn-vega script[type='application/json']",
                                      "els => els.map(e => e.textContent)")
    idx = []
    for i, s in enumerate(specs):
        params = json.loads(s).get("params", [])
        if any(p.get("bind") == "scales" for p in params):
            idx.append(i)
    return idx


@pytest.mark.parametrize("mode", MODES)
def test_interactive_charts_respond(built, browser, request, mode):
    """Several interactive charts on the getting-started page render and zoom under the mouse wheel."""
    pages = [p for p in _pages() if p.name.startswith("00_")]
    _need(bool(pages), "the getting-started page is not in the table of contents")
    visit = Visit(browser, request, mode, pages[0])
    page = visit.page
    try:
        visit.wait_rendered()
        idx = _interactive_charts(page)
        assert len(idx) >= 2, f"expected several zoomable charts, found {len(idx)}"
        for i in idx:
            before = page.evaluate(f"window.tokendynViews[{i}].scale('x').domain()")
            box = page.locator(".tokendyn-vega").nth(i).locator("svg").first
            box.scroll_into_view_if_needed()
            bb = box.bounding_box()
            page.mouse.move(bb["x"] + bb["width"] / 2, bb["y"] + bb["height"] / 2)
            page.mouse.wheel(0, -400)
            page.wait_for_timeout(300)
            after = page.evaluate(f"window.tokendynViews[{i}].scale('x').domain()")
            assert after != before, f"{mode}: chart {i} did not respond to the wheel: {before} -> {after}"
        assert not visit.outside, f"{mode}: requests left the machine: {visit.outside}"
        assert not visit.errors, f"{mode}: errors {visit.errors}"
    finally:
        visit.close()


# TeX left in the prose: text outside code and outside MathJax's output that still holds "$$" or
# a TeX command. It means a formula never reached MathJax (broken $ pairing in the source, or a
# Markdown output rendered as CommonMark), which the typeset count above cannot see.
RAW_TEX = r"""() => {
  const skip = 'pre, code, script, style, textarea, .math, mjx-container, .highlight, .tokendyn-vega';
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.parentElement.closest(skip) && /\$\$|\\[A-Za-z]{2,}/.test(n.textContent)) {
      found.push(n.textContent.trim().replace(/\s+/g, ' ').slice(0, 100));
    }
  }
  return found; }"""

# Printed output must wrap inside the text column, wide HTML output scroll inside its own box.
SPILL = """() => {
  const bad = [];
  for (const pre of document.querySelectorAll('div.cell_output pre')) {
    if (pre.scrollWidth > pre.clientWidth + 1) bad.push('pre: ' + pre.textContent.slice(0, 60));
  }
  for (const el of document.querySelectorAll('div.cell_output div.output.text_html')) {
    const box = el.closest('div.cell_output').getBoundingClientRect();
    if (el.getBoundingClientRect().right > box.right + 1) bad.push('html: ' + el.textContent.slice(0, 60));
    if (getComputedStyle(el).overflowX !== 'auto') bad.push('html output does not scroll: ' + el.textContent.slice(0, 60));
  }
  return bad; }"""


@pytest.mark.parametrize("doc", _toc_files())
def test_page_text(built, browser, request, doc):
    """Every formula in the prose reached MathJax, and no cell output runs past the column."""
    page_path = HTML / f"{doc}.html"
    visit = Visit(browser, request, "file", page_path)
    try:
        visit.wait_rendered()
        spill = visit.page.evaluate(SPILL)
        assert not spill, f"{page_path.name}: output runs past the column: {spill[:5]}"
        raw = visit.page.evaluate(RAW_TEX)
        assert not raw, f"{page_path.name}: TeX left untypeset in the text: {raw[:5]}"
    finally:
        visit.close()


def test_scoreboard_lists_every_claim_and_chapters_open_with_theirs(built, browser, request):
    """The scoreboard holds all sixteen claims, each chapter page opens with its claims table, and
    every chart is a numbered, captioned figure."""
    visit = Visit(browser, request, "file", HTML / "book" / "scoreboard.html")
    try:
        ids = visit.page.eval_on_selector_all("table.tokendyn-claims tbody tr td:first-child",
                                              "tds => tds.map(t => t.textContent.trim())")
        assert set(ids) == {str(k) for k in range(1, 17)}, f"scoreboard claim ids: {sorted(set(ids))}"
        verdicts = visit.page.eval_on_selector_all("table.tokendyn-claims tbody tr td:nth-child(5)",
                                                   "tds => tds.map(t => t.textContent.trim())")
        measured = [v for v in verdicts if v != "not yet measured"]
        assert measured, "no chapter's results reached the scoreboard"
        # every measured verdict names the rule that gave it, linked to its text on the rules page
        rules = visit.page.eval_on_selector_all("table.tokendyn-claims tbody tr td:nth-child(6)",
                                                "tds => tds.map(t => [t.textContent.trim(), t.querySelector('a') ? t.querySelector('a').getAttribute('href') : ''])")
        for v, (rule, href) in zip(verdicts, rules):
            if v != "not yet measured":
                assert rule and href == f"appendix_rules.html#rule-{rule}", (v, rule, href)
    finally:
        visit.close()
    visit = Visit(browser, request, "file", HTML / "book" / "appendix_rules.html")
    try:
        for rule in {r for r, _ in rules if r}:
            assert visit.page.locator(f"section#rule-{rule}").count() == 1, f"no section for rule {rule}"
    finally:
        visit.close()
    for doc in [d for d in _toc_files() if Path(d).name[:2].isdigit()]:
        # a chapter page whose record holds claim rows opens with them; a page that judges no claim
        # (chapter 5's image page) has no claims section at all, rather than an empty one
        judged = doc in _claim_pages()
        visit = Visit(browser, request, "file", HTML / f"{doc}.html")
        try:
            assert visit.page.locator("#claims-at-a-glance table.tokendyn-claims").count() == int(judged), \
                f"{doc}: {'no' if judged else 'a'} claims-at-a-glance table, and its record holds " \
                f"{'claims' if judged else 'none'}"
            charts = visit.page.locator(".tokendyn-vega").count()
            captions = visit.page.eval_on_selector_all(
                "figure.tokendyn-figure figcaption", "fs => fs.map(f => f.textContent.trim())")
            assert len(captions) == charts, f"{doc}: {charts} charts but {len(captions)} figure captions"
            assert all(c.startswith("Figure ") and len(c) > 40 for c in captions), f"{doc}: {captions}"
        finally:
            visit.close()


# Each claims row as [claim, headline, verdict, rule, chapter that measured it].
ROWS = """sel => [...document.querySelectorAll(sel + ' tbody tr')].map(tr => {
  const td = [...tr.querySelectorAll(':scope > td')];
  const head = td[3].querySelector('.tokendyn-headline');
  return [td[0].textContent.trim(), (head || td[3]).textContent.trim(), td[4].textContent.trim(),
          td[5].textContent.trim(), tr.dataset.chapter || '']; })"""


def test_scoreboard_rows_equal_the_chapters_own_rows(built, browser, request):
    """One run behind every page: each claim's row on the scoreboard has the same number and
    verdict as the claims table on the page of the chapter that measured it."""
    visit = Visit(browser, request, "file", HTML / "book" / "scoreboard.html")
    try:
        board = visit.page.evaluate(ROWS, "table.tokendyn-claims")
    finally:
        visit.close()
    measured = [r for r in board if r[2] != "not yet measured"]
    assert measured
    chapters: dict[str, list[list[str]]] = {}
    for r in measured:
        chapter = r[4]
        assert chapter, f"claim {r[0]}: the scoreboard row names no chapter"
        if chapter not in chapters:
            visit = Visit(browser, request, "file", HTML / "book" / f"{chapter}.html")
            try:
                chapters[chapter] = visit.page.evaluate(ROWS, "#claims-at-a-glance table.tokendyn-claims")
            finally:
                visit.close()
        own = [c for c in chapters[chapter] if c[0] == r[0]]
        assert own, f"claim {r[0]}: no row on {chapter}'s page"
        assert own[0][1:4] == r[1:4], f"claim {r[0]}: scoreboard {r[1:4]!r} against {chapter}'s {own[0][1:4]!r}"


def test_scoreboard_rows_link_to_their_evidence(built, browser, request):
    """Every scoreboard row links, under its claim, to a section of the chapter page that holds the
    claim's evidence, named by the chapter and the section's heading; each link's page exists and
    holds a section with that id."""
    visit = Visit(browser, request, "file", HTML / "book" / "scoreboard.html")
    try:
        links = visit.page.eval_on_selector_all(
            "table.tokendyn-claims tbody tr", "trs => trs.map(tr => { const a = tr.querySelector("
            "':scope > td:nth-child(2) a.tokendyn-evidence'); return [tr.querySelector('td').textContent.trim(), "
            "a ? a.getAttribute('href') : '', a ? a.textContent.trim() : '']; })")
    finally:
        visit.close()
    assert {claim for claim, _, _ in links} == {str(k) for k in range(1, 17)}, links
    by_page: dict[str, set[str]] = {}
    for claim, href, text in links:
        page, _, section = href.partition("#")
        assert page.endswith(".html") and section, f"claim {claim}: evidence link {href!r}"
        assert "›" in text and href not in text, f"claim {claim}: the link is not named by its section: {text!r}"
        by_page.setdefault(page, set()).add(section)
    for page, sections in by_page.items():
        assert (HTML / "book" / page).is_file(), f"evidence links to {page}, which the book lacks"
        visit = Visit(browser, request, "file", HTML / "book" / page)
        try:
            found = visit.page.evaluate("ids => ids.filter(i => document.getElementById(i)?.tagName === 'SECTION')",
                                        sorted(sections))
        finally:
            visit.close()
        assert set(found) == sections, f"{page}: no section for {sorted(sections - set(found))}"


WIDTHS = (960, 1280)  # a laptop window and a desktop one


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", _toc_files())
def test_page_fits_and_every_chart_draws(built, browser, request, doc, width):
    """At 960 and 1280 px nothing is wider than the text column (charts, svgs, MathJax displays,
    tables outside a scroll box of their own), no chart draws a mark outside its own box, no facet
    is empty and no legend's symbols are all alike (tests/book_fit.py says how each is measured)."""
    from book_fit import FIT

    page_path = HTML / f"{doc}.html"
    visit = Visit(browser, request, "file", page_path)
    try:
        visit.page.set_viewport_size({"width": width, "height": 900})
        visit.wait_rendered()
        visit.page.wait_for_timeout(200)  # charts re-lay out after the resize
        bad = visit.page.evaluate(FIT)
        assert not bad, f"{page_path.name} at {width} px: {bad[:8]}"
    finally:
        visit.close()


VERDICT_CELLS = 'table.tokendyn-claims td[class^="tokendyn-verdict-"]'


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", ["book/scoreboard", *_claim_pages()])
def test_verdict_words_never_break(built, browser, request, doc, width):
    """At 960 and 1280 px no verdict in a claims table (the scoreboard's, each chapter's) has a word
    broken across lines ("rep/rod/uce/d") or runs out of its cell (tests/book_fit.py, BROKEN_WORDS)."""
    from book_fit import BROKEN_WORDS

    page_path = HTML / f"{doc}.html"
    visit = Visit(browser, request, "file", page_path)
    try:
        visit.page.set_viewport_size({"width": width, "height": 900})
        visit.wait_rendered()
        assert visit.page.locator(VERDICT_CELLS).count() > 0, f"{page_path.name}: no verdict cells"
        bad = visit.page.evaluate(BROKEN_WORDS, VERDICT_CELLS)
        assert not bad, f"{page_path.name} at {width} px: {bad[:8]}"
    finally:
        visit.close()


RESULTS_TABLE_CELLS = '.cell_output table[id^="T_"] th, .cell_output table[id^="T_"] td'


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("doc", [d for d in _toc_files() if Path(d).name[:2].isdigit()])
def test_results_tables_never_break_a_word(built, browser, request, doc, width):
    """At 960 and 1280 px no header or cell of a results table (tokendyn.publish.book.table) has a word
    broken across lines ("pseudo-perplexi/ty"); a line break at a word's own hyphen is a break
    between its parts, not a broken word."""
    from book_fit import BROKEN_WORDS

    page_path = HTML / f"{doc}.html"
    visit = Visit(browser, request, "file", page_path)
    try:
        visit.page.set_viewport_size({"width": width, "height": 900})
        visit.wait_rendered()
        bad = [b for b in visit.page.evaluate(BROKEN_WORDS, RESULTS_TABLE_CELLS)
               if not (b.startswith("broken:") and "-" in b.split('"')[1])]
        assert not bad, f"{page_path.name} at {width} px: {bad[:8]}"
    finally:
        visit.close()


def test_broken_words_probe_finds_a_verdict_broken_mid_word(built, browser, tmp_path):
    """The probe behind test_verdict_words_never_break is not vacuous: a verdict in a cell squeezed
    below its word's width, with words allowed to break anywhere, is reported; the same cell with
    the book's stylesheet is not."""
    from book_fit import BROKEN_WORDS

    css = (HTML / "_static" / "tokendyn.css").as_uri()
    cell = '<td class="tokendyn-verdict-not-reproduced"><strong>not reproduced</strong></td>'
    table = (f'<table class="tokendyn-claims" style="width: 12em"><tr><td>{"claim " * 40}</td>{cell}</tr></table>')

    def page(style: str) -> str:
        return (f'<html><head><meta charset="utf-8">{style}</head><body>'
                f'<article class="bd-article" style="width: 20em">{table}</article></body></html>')

    squeezed = tmp_path / "squeezed.html"
    squeezed.write_text(page("<style>td { overflow-wrap: anywhere; }</style>"))
    booked = tmp_path / "booked.html"
    booked.write_text(page(f'<style>td {{ overflow-wrap: anywhere; }}</style><link rel="stylesheet" href="{css}">'))
    ctx = browser.new_context(viewport={"width": 960, "height": 900})
    try:
        pg = ctx.new_page()
        found = {}
        for name, path in (("squeezed", squeezed), ("booked", booked)):
            pg.goto(path.as_uri())
            found[name] = pg.evaluate(BROKEN_WORDS, VERDICT_CELLS)
    finally:
        ctx.close()
    assert any(b.startswith("broken: ") for b in found["squeezed"]), found["squeezed"]
    assert found["booked"] == [], found["booked"]


def _chart_div(spec: dict) -> str:
    payload = json.dumps(spec).replace("</", "<\\/")
    return f'<div class="tokendyn-vega"><script type="application/json">{payload}</script></div>'


def test_fit_probe_fails_on_a_too_wide_chart_an_empty_facet_an_alike_legend_and_overlapping_labels(built, browser, tmp_path):
    """The probe behind test_page_fits_and_every_chart_draws is not vacuous: on a page built to break
    each rule (a 1,400 px chart in a 600 px column, a facet grid with an empty cell, a legend whose
    symbols are all black circles, twelve long tick labels squeezed into 60 px, a wide table and a
    wide display equation with no scroll box) it reports each one, and on the same charts made right
    it reports nothing."""
    from book_fit import FIT

    static = HTML / "_static"
    head = "".join(f'<script src="{(static / n).as_uri()}"></script>'
                   for n in ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js", "tokendyn-charts.js"))
    rows = [{"a": a, "b": b, "x": x, "y": x * x} for a in ("p", "q") for b in ("u", "v") for x in range(4)
            if (a, b) != ("q", "v")]
    schema = "https://vega.github.io/schema/vega-lite/v5.json"
    wide = {"$schema": schema, "data": {"values": rows}, "mark": "line", "width": 1400, "height": 100,
            "encoding": {"x": {"field": "x", "type": "quantitative"}, "y": {"field": "y", "type": "quantitative"}}}
    grid = {"$schema": schema, "data": {"values": rows}, "mark": "point", "width": 100, "height": 80,
            "encoding": {"x": {"field": "x", "type": "quantitative"}, "y": {"field": "y", "type": "quantitative"},
                         "row": {"field": "a"}, "column": {"field": "b"}}}
    alike = {"$schema": schema, "data": {"values": rows}, "mark": {"type": "point", "filled": True},
             "width": 200, "height": 80,
             "encoding": {"x": {"field": "x", "type": "quantitative"}, "y": {"field": "y", "type": "quantitative"},
                          "color": {"field": "a", "scale": {"range": ["black", "black"]}}}}
    squeezed = {"$schema": schema, "data": {"values": [{"k": f"label number {k}", "v": k} for k in range(12)]},
                "mark": "bar", "width": 60, "height": 60,
                "encoding": {"x": {"field": "k", "type": "nominal", "axis": {"labelAngle": 0, "labelOverlap": False}},
                             "y": {"field": "v", "type": "quantitative"}}}
    table = "<table><tr>" + "".join(f"<td>column{k}</td>" for k in range(60)) + "</tr></table>"
    equation = '<mjx-container display="true" style="display:block"><mjx-math style="display:inline-block;width:1500px">x</mjx-math></mjx-container>'

    def page(body: str) -> str:
        return (f'<html><head><meta charset="utf-8">{head}</head><body>'
                f'<article class="bd-article" style="width:600px">{body}</article></body></html>')

    broken = tmp_path / "broken.html"
    broken.write_text(page(_chart_div(wide) + _chart_div(grid) + _chart_div(alike) + _chart_div(squeezed) + table
                           + equation))
    fixed = tmp_path / "fixed.html"
    good_rows = [r for r in rows]
    good_grid = dict(grid, encoding={**grid["encoding"], "facet": {"field": "a"}})
    good_grid["encoding"].pop("row"), good_grid["encoding"].pop("column")
    good_grid["encoding"]["facet"] = {"field": "b", "columns": 2}
    good_grid["data"] = {"values": [r for r in good_rows if r["a"] == "p"]}
    fixed.write_text(page(_chart_div(dict(wide, width=400)) + _chart_div(good_grid)
                          + _chart_div({**alike, "encoding": {**alike["encoding"], "color": {"field": "a"}}})
                          + _chart_div({**squeezed, "width": 540, "encoding": {**squeezed["encoding"], "x": {
                              **squeezed["encoding"]["x"], "axis": {"labelAngle": -45, "labelOverlap": False}}}})
                          + f'<div style="overflow-x:auto">{table}</div>'))
    ctx = browser.new_context(viewport={"width": 960, "height": 900})
    try:
        pg = ctx.new_page()
        found = {}
        for name, path in (("broken", broken), ("fixed", fixed)):
            pg.goto(path.as_uri())
            pg.wait_for_function("document.documentElement.dataset.tokendynCharts === 'done'", timeout=60_000)
            found[name] = pg.evaluate(FIT)
    finally:
        ctx.close()
    kinds = [b.split(":")[0] for b in found["broken"]]
    assert "wide chart" in " ".join(kinds), found["broken"]
    assert "wide table" in kinds and "wide equation" in kinds, found["broken"]
    assert "empty facet" in kinds, found["broken"]
    assert "alike legend" in kinds, found["broken"]
    assert "overlap" in kinds, found["broken"]
    assert found["fixed"] == [], found["fixed"]


def test_every_chapter_ends_with_its_rerun_box_and_results_link(built):
    """Each chapter and appendix with a parameters cell ends with a "Rerun at scale" box: its own
    papermill command, its committed run's CPU time, and a link to a results record the built
    book serves; the scale appendix tabulates every page's run time."""
    for doc in _toc_files():
        name = Path(doc).name
        if not (name[:2].isdigit() or name in ("appendix_models", "appendix_models_scale", "appendix_performance")):
            continue
        text = (HTML / f"{doc}.html").read_text(encoding="utf-8")
        assert "Rerun at scale" in text, f"{name}: no rerun box"
        assert f"papermill book/{name}.ipynb" in text, f"{name}: the box does not rerun this chapter"
        assert "took <strong>" in text and "not recorded" not in text.split("Rerun at scale", 1)[1], name
        link = re.search(r'href="\.\./results/([^"]+\.json)"', text.split("Rerun at scale", 1)[1])
        assert link and (HTML / "results" / link.group(1)).is_file(), f"{name}: results link {link}"
    scale = (HTML / "book" / "appendix_scale.html").read_text(encoding="utf-8")
    section = scale.split('id="how-long-each-page-takes"', 1)
    times = re.findall(r"<td>(?:<p>)?[\d.]+ (?:s|min)(?:</p>)?</td>", section[-1])
    assert len(section) == 2 and len(times) >= 10, times


def test_header_run_times_are_the_measured_ones(built):
    """A page whose header states its run time states the one its rerun box measured (the
    ``tokendyn-runtime`` role), never a typed guess: the same words above the box and in it, or,
    for a page with no box, in the scale appendix's table of run times."""
    scale = (HTML / "book" / "appendix_scale.html").read_text(encoding="utf-8")
    using = 0
    for doc in _toc_files():
        source = ROOT / f"{doc}.ipynb"
        if not source.is_file() or "{tokendyn-runtime}" not in source.read_text(encoding="utf-8"):
            continue
        using += 1
        text = (HTML / f"{doc}.html").read_text(encoding="utf-8")
        head, _, box = text.partition("Rerun at scale")
        took = re.search(r"took <strong>([^<]+)</strong>", box) or re.search(
            rf'<span class="std std-doc">{Path(doc).name}</span></a></p></td>\s*<td><p>([^<]+)</p>', scale)
        assert took, f"{doc}: no measured time in its rerun box or the scale appendix"
        assert took.group(1) + " on" in re.sub(r"<[^>]+>", "", head), f"{doc}: the header does not say {took.group(1)}"
    assert using >= 10, using


def test_a_quantity_shown_on_several_pages_is_one_number(built):
    """Each shared quantity of the registry (``tokendyn.publish.quantities.SHARED``: one record, one
    setting) appears on every page the registry names, with one text everywhere it is marked."""
    from tokendyn.publish import quantities

    pages = {doc: (HTML / f"{doc}.html").read_text(encoding="utf-8") for doc in _toc_files()}
    assert not quantities.disagreements(pages), "\n".join(quantities.disagreements(pages))
    shown = {key for page in pages.values() for key, _ in quantities.marks(page)}
    assert shown == set(quantities.SHARED), sorted(set(quantities.SHARED) - shown)
