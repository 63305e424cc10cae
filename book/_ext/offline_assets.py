"""Sphinx extension: the built book serves every script it needs itself, taken from registry
packages at build time, so charts, widgets and formulas render with no network.

On ``config-inited`` (before Sphinx drops static paths that do not exist yet) it fills ``_build/book-assets/`` (copied into ``_build/html/_static/``):
- ``vega.min.js``, ``vega-lite.min.js``, ``vega-embed.min.js``: the UMD builds of npm ``vega``,
  ``vega-lite`` and ``vega-embed``. Classic scripts, not ES modules: Chromium refuses module scripts
  on pages opened from disk (file://). ``_config.yml`` loads them before require.js (priority
  below 500), since a UMD build that finds require.js's ``define.amd`` registers as an AMD module
  instead of setting ``window.vega``;
- ``mathjax/``: MathJax 3 from npm ``mathjax``;
- ``require.js`` and ``@jupyter-widgets/html-manager/dist/``: RequireJS and the Jupyter widget
  manager from npm;
- ``tokendyn-charts.js`` and ``tokendyn.css``: our chart loader and styles (``book/assets``).
It also drops sphinx-thebe's scripts: thebe is off in this book, and sphinx-thebe 0.3 declares
its ``const`` twice under Sphinx 7.4, which is a script error on every page. For the same reason
(a console error on every page) it gives the theme a ``default_mode`` (see :func:`_config_inited`).
On ``build-finished`` it puts the widget manager's font files beside every folder of pages as
well (see :func:`_widget_fonts`). ``tokendyn-mathjax-hub.js`` (``book/assets``) lets that
widget manager, written for MathJax 2, typeset its labels with the MathJax 3 served here.
Nothing gathered here is committed; a build rebuilds only what is missing or stale.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "_build" / "book-assets"
NODE = ROOT / "js" / "node_modules"


def _copy_tree(src: Path, dst: Path) -> None:
    if not src.is_dir():
        raise FileNotFoundError(f"missing {src}: run `make setup` (npm ci in js/)")
    stamp = dst / ".source"
    key = f"{src}:{src.stat().st_mtime_ns}"
    if stamp.is_file() and stamp.read_text() == key:
        return
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    stamp.write_text(key)


# npm packages whose UMD build ``build/<name>.min.js`` is served as ``_static/<name>.min.js``.
VEGA_UMD = ("vega", "vega-lite", "vega-embed")
# Left in _build/book-assets by earlier builds (the vl-convert ES-module bundle); Sphinx would
# still copy them into every build's _static.
STALE = ("vega-bundle.js", "vega-bundle.version")


def _copy_file(src: Path, dst: Path) -> None:
    if not src.is_file():
        raise FileNotFoundError(f"missing {src}: run `make setup` (npm ci in js/)")
    if not dst.is_file() or dst.read_bytes() != src.read_bytes():
        shutil.copyfile(src, dst)


def gather() -> Path:
    """Fill ``_build/book-assets`` and return it."""
    OUT.mkdir(parents=True, exist_ok=True)
    for name in STALE:
        (OUT / name).unlink(missing_ok=True)
    for package in VEGA_UMD:
        _copy_file(NODE / package / "build" / f"{package}.min.js", OUT / f"{package}.min.js")
    _copy_tree(NODE / "mathjax" / "es5", OUT / "mathjax")
    # Kept at its npm path: embed-amd.js asks for its fonts at <cdn>/@jupyter-widgets/html-manager/dist/.
    _copy_tree(NODE / "@jupyter-widgets" / "html-manager" / "dist", OUT / "@jupyter-widgets" / "html-manager" / "dist")
    _copy_file(NODE / "requirejs" / "require.js", OUT / "require.js")
    for asset in sorted((ROOT / "book" / "assets").glob("*")):
        if asset.suffix in {".js", ".css"}:
            _copy_file(asset, OUT / asset.name)
    return OUT


def _config_inited(app, config) -> None:
    gather()
    # pydata-sphinx-theme reads the colour mode from localStorage or else from html_context's
    # default_mode; with neither (a first visit, and every page opened from disk in a fresh
    # profile) it logs "Got invalid theme mode: ." as a console error. "auto" follows the system.
    config.html_context.setdefault("default_mode", "auto")


WIDGET_DIST = Path("@jupyter-widgets") / "html-manager" / "dist"
# Where embed-amd.js's modules look for their fonts, relative to the page (see _widget_fonts).
WIDGET_FONT_DIRS = (Path("@jupyter-widgets"), WIDGET_DIST)


def _widget_fonts(app, exception) -> None:
    """Copy the widget manager's fonts to ``<page folder>/@jupyter-widgets/`` and
    ``<page folder>/@jupyter-widgets/html-manager/dist/``.

    Each AMD module in embed-amd.js sets webpack's public path from its require.js module URI,
    which require.js resolves against the *page*, not the script: on a page in ``book/``,
    ``@jupyter-widgets/controls`` asks for ``book/@jupyter-widgets/<hash>.woff2`` and
    ``@jupyter-widgets/html-manager/dist/libembed-amd`` for
    ``book/@jupyter-widgets/html-manager/dist/<hash>.woff2``. Only the fonts (about 1 MB) go
    there; the scripts stay in ``_static``.
    """
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    src = out / "_static" / WIDGET_DIST
    fonts = [f for f in src.glob("*") if f.suffix in {".woff2", ".woff", ".ttf", ".eot", ".svg"}]
    page_dirs = {p.parent for p in out.rglob("*.html")
                 if "_static" not in p.relative_to(out).parts and "_sources" not in p.relative_to(out).parts}
    for d in page_dirs:
        for sub in WIDGET_FONT_DIRS:
            dst = d / sub
            dst.mkdir(parents=True, exist_ok=True)
            for f in fonts:
                if not (dst / f.name).is_file():
                    shutil.copyfile(f, dst / f.name)


def _drop_thebe(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    keep = []
    for js in scripts:
        name = getattr(js, "filename", None) or ""
        body = getattr(js, "attributes", {}).get("body", "")
        if "thebe" in str(name) or "THEBE_JS_URL" in str(body):
            continue
        keep.append(js)
    context["script_files"] = keep


def setup(app):
    # Priority 100: before sphinx.builders.html.validate_html_static_path (800) checks the folder.
    app.connect("config-inited", _config_inited, priority=100)
    app.connect("html-page-context", _drop_thebe, priority=900)
    app.connect("build-finished", _widget_fonts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
