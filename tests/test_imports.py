"""The library's import graph: floors with no import up a floor and no circles (lazy imports
included), no cycles among module-level imports, and every module imports alone.

A cycle works until someone reorders two lines; then a chapter fails with a half-initialised
module. The graph is read statically from each module's top-level imports (lazy imports inside
functions are allowed: they run after every module has loaded).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "lib"
PKG = LIB / "tokendyn"


def _module_name(path: Path) -> str:
    parts = path.relative_to(LIB).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _edges(name: str, path: Path, known: set[str], lazy: bool = False) -> set[str]:
    """Modules of the package that ``name`` imports at module level (``lazy``: anywhere, inside
    functions too)."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in (ast.walk(tree) if lazy else tree.body):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[:len(base) - node.level + (1 if is_pkg else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = {f"{target}.{a.name}" for a in node.names} & known
            out |= subs or ({target} & known)
    out.discard(name)
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle in a directed graph as a list of nodes (first == last), or None."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(u: str) -> list[str] | None:
        colour[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if colour.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if colour.get(v) is None and (c := visit(v)):
                return c
        stack.pop()
        colour[u] = 2
        return None

    for u in sorted(graph):
        if colour.get(u) is None and (c := visit(u)):
            return c
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles_in_the_library():
    mods = _modules()
    graph = {m: _edges(m, p, set(mods)) for m, p in mods.items()}
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"


# The floors, bottom up: a module imports from its own floor or a lower one, never a higher one.
FLOORS = ("core", "models", "mcmc", "evaluation", "latent", "training", "analysis", "publish")


def _floor(module: str) -> int:
    """The floor of ``tokendyn.<package>...`` (the root ``tokendyn`` module: below every floor)."""
    parts = module.split(".")
    return -1 if len(parts) == 1 else FLOORS.index(parts[1])


def test_every_module_lives_on_a_floor():
    flat = sorted(m for m in _modules() if m.count(".") == 1 and m.split(".")[1] not in FLOORS)
    assert not flat, f"modules outside the floors {FLOORS}: {flat}"


def test_no_import_runs_up_a_floor_or_round_a_circle():
    mods = _modules()
    graph = {m: _edges(m, p, set(mods), lazy=True) for m, p in mods.items()}
    up = sorted(f"{a} -> {b}" for a, bs in graph.items() for b in bs if _floor(b) > _floor(a))
    assert not up, "imports up a floor:\n" + "\n".join(up)
    packages = {}
    for a, bs in graph.items():
        packages.setdefault(".".join(a.split(".")[:2]), set()).update(".".join(b.split(".")[:2]) for b in bs)
    for k in packages:
        packages[k].discard(k)
    assert find_cycle(packages) is None, f"packages import in a circle: {find_cycle(packages)}"
    assert find_cycle(graph) is None, f"modules import in a circle (lazy imports too): {find_cycle(graph)}"


_ALONE = """
import importlib, sys, traceback
failed = []
for name in sys.argv[1:]:
    for m in [m for m in sys.modules if m == "tokendyn" or m.startswith("tokendyn.")]:
        del sys.modules[m]  # third-party modules stay loaded: only our own import order is tested
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc(limit=3))
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_every_module_imports_alone():
    # each module imported with no other tokendyn module loaded before it: an import that only
    # works after another module was loaded fails here
    r = subprocess.run([sys.executable, "-c", _ALONE, *sorted(_modules())], capture_output=True, text=True,
                       env={"PYTHONPATH": str(LIB), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
