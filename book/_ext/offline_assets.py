"""Sphinx extension: the built book serves every script it needs itself, taken from registry
packages at build time, so charts, widgets and formulas render with no network.

On ``config-inited`` (before Sphinx drops static paths that do not exist yet) it fills ``_build/book-assets/`` (copied into ``_build/html/_static/``):
- ``vega-bundle.js``: Vega, Vega-Lite and vega-embed from ``vl_convert.javascript_bundle()``;
- ``mathjax/``: MathJax 3 from npm ``mathjax``;
- ``require.js`` and ``@jupyter-widgets/html-manager/dist/``: RequireJS and the Jupyter widget
  manager from npm;
- ``tokendyn-charts.js``: our chart loader (``book/assets``).
It also drops sphinx-thebe's scripts: thebe is off in this book, and sphinx-thebe 0.3 declares
its ``const`` twice under Sphinx 7.4, which is a script error on every page.
On ``build-finished`` it puts the widget manager's font files beside every folder of pages as
well (see :func:`_widget_fonts`).
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


def gather() -> Path:
    """Fill ``_build/book-assets`` and return it."""
    import vl_convert

    OUT.mkdir(parents=True, exist_ok=True)
    bundle, version = OUT / "vega-bundle.js", OUT / "vega-bundle.version"
    want = f"vl-convert {vl_convert.__version__}"
    if not bundle.is_file() or not version.is_file() or version.read_text() != want:
        bundle.write_text(vl_convert.javascript_bundle())
        version.write_text(want)
    _copy_tree(NODE / "mathjax" / "es5", OUT / "mathjax")
    # Kept at its npm path: embed-amd.js asks for its fonts at <cdn>/@jupyter-widgets/html-manager/dist/.
    _copy_tree(NODE / "@jupyter-widgets" / "html-manager" / "dist", OUT / "@jupyter-widgets" / "html-manager" / "dist")
    shutil.copyfile(NODE / "requirejs" / "require.js", OUT / "require.js")
    for js in (ROOT / "book" / "assets").glob("*.js"):
        shutil.copyfile(js, OUT / js.name)
    return OUT


def _config_inited(app, config) -> None:
    gather()


WIDGET_DIST = Path("@jupyter-widgets") / "html-manager" / "dist"


def _widget_fonts(app, exception) -> None:
    """Copy the widget manager's fonts to ``<page folder>/@jupyter-widgets/html-manager/dist/``.

    embed-amd.js sets webpack's public path from the require.js URI of its bundled module, which
    require.js resolves against the *page*, not the script: a page in ``book/`` asks for
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
        dst = d / WIDGET_DIST
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
