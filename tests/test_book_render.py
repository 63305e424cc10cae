"""The built book renders offline in a real browser: charts draw marks and respond, formulas are
typeset, and no request leaves the machine.

Needs `make book` first and Debian's chromium; `make test` does both and sets
TOKENDYN_REQUIRE_BOOK=1 so that a missing book fails instead of skipping.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
REQUIRED = os.environ.get("TOKENDYN_REQUIRE_BOOK") == "1"

pytestmark = pytest.mark.browser


def _need(cond: bool, why: str) -> None:
    if not cond:
        if REQUIRED:
            pytest.fail(why)
        pytest.skip(why)


def _pages() -> list[Path]:
    """Every page the table of contents builds: the root and each chapter."""
    pages = [HTML / "book" / "intro.html"]
    pages += sorted((HTML / "book").glob("[0-9][0-9]_*.html")) + sorted((HTML / "book").glob("appendix_*.html"))
    return [p for p in pages if p.is_file()]


@pytest.fixture(scope="module")
def server():
    _need((HTML / "index.html").is_file(), f"no built book at {HTML}: run `make book`")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # keep the test log readable
            pass

    handler = functools.partial(Quiet, directory=str(HTML))
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


def _open(browser, server: str, page_path: Path):
    """Open one page with every non-local request recorded and refused; return (page, outside)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    outside: list[str] = []
    local = urlparse(server).netloc

    def route(r):
        u = urlparse(r.request.url)
        if u.scheme in ("data", "blob") or u.netloc == local:
            return r.continue_()
        outside.append(r.request.url)
        return r.abort()

    page.route("**/*", route)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # A script or font the book should serve itself but does not (a 404) is an error too.
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    url = f"{server}/{page_path.relative_to(HTML).as_posix()}"
    page.goto(url, wait_until="load")
    return ctx, page, outside, errors


def _wait_rendered(page) -> None:
    if page.locator(".tokendyn-vega").count():
        page.wait_for_function("document.documentElement.dataset.tokendynCharts === 'done'", timeout=60_000)
    if page.locator(".math").count():
        page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise"
                               " && document.querySelectorAll('mjx-container').length > 0", timeout=60_000)
        page.evaluate("MathJax.startup.promise")


@pytest.mark.parametrize("name", [p.name for p in _pages()] or ["(no pages built)"])
def test_page_renders_offline(server, browser, name):
    paths = [p for p in _pages() if p.name == name]
    _need(bool(paths), "no chapter pages were built")
    ctx, page, outside, errors = _open(browser, server, paths[0])
    try:
        _wait_rendered(page)
        charts = page.locator(".tokendyn-vega")
        for i in range(charts.count()):
            chart = charts.nth(i)
            assert chart.get_attribute("data-rendered") == "true", f"chart {i} on {name} did not draw"
            marks = chart.locator("svg g.mark-symbol path, svg g.mark-line path, svg g.mark-rect path,"
                                  " svg g.mark-area path, svg g.mark-rule line, svg g.mark-text text,"
                                  " svg g.mark-point path, svg g.mark-tick line, svg g.mark-arc path")
            assert marks.count() > 0, f"chart {i} on {name} has no drawn marks"
        n_math = page.locator(".math").count()
        if n_math:
            typeset = page.locator(".math mjx-container").count()
            assert typeset >= n_math, f"{name}: {typeset} of {n_math} formulas typeset"
            assert page.locator("mjx-merror").count() == 0, f"{name}: a formula failed to typeset"
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{paths[0].stem}.png"), full_page=True)
        assert not errors, f"{name}: script errors {errors}"
        assert not outside, f"{name}: requests left the machine: {outside}"
    finally:
        ctx.close()


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


def test_interactive_charts_respond(server, browser):
    """Several interactive charts on the getting-started page render and zoom under the mouse wheel."""
    pages = [p for p in _pages() if p.name.startswith("00_")]
    _need(bool(pages), "the getting-started page was not built")
    ctx, page, outside, _ = _open(browser, server, pages[0])
    try:
        _wait_rendered(page)
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
            assert after != before, f"chart {i} did not respond to the wheel: {before} -> {after}"
        assert not outside, f"requests left the machine: {outside}"
    finally:
        ctx.close()
