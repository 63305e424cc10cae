"""Rules committed before the runs they judge: which recorded run each rule reads, and a check.

A verdict is only as honest as the order in which it was made: a rule written after its data can
be bent to it. Each recorded run in ``data/runs`` that a claim's rule reads is listed in
:data:`JUDGED` with the code that decides the verdict (the rule and the statistics it is given).
:func:`problems` compares that code at the run's recorded commit with the code now: a rule changed
after its run was recorded must be re-recorded (or the change reverted). Runs recorded before this
check existed are listed in :data:`BEFORE_THEIR_RULES`, so the scoreboard can say so; the list
only shrinks.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from ..core.atomic import read_record

# Each piece of code a verdict depends on, as "path under lib/:function".
RULE_CODE: dict[str, tuple[str, ...]] = {
    "claim_1": ("tokendyn/publish/verdicts.py:claim_1", "tokendyn/publish/verdicts.py:inside",
                "tokendyn/analysis/size.py:rung_estimates", "tokendyn/analysis/size.py:values"),
    "claim_3": ("tokendyn/publish/verdicts.py:claim_3", "tokendyn/analysis/size.py:rung_estimates",
                "tokendyn/analysis/size.py:slope", "tokendyn/analysis/size.py:values",
                "tokendyn/analysis/size.py:span"),
    "claim_4": ("tokendyn/publish/verdicts.py:claim_4", "tokendyn/mcmc/diagnostics/shape.py:compare_shapes",
                "tokendyn/mcmc/diagnostics/shape.py:censored_lognormal_fit"),
    "claim_5": ("tokendyn/publish/verdicts.py:claim_5", "tokendyn/publish/verdicts.py:inside",
                "tokendyn/mcmc/diagnostics/bootstrap.py:censor_at",
                "tokendyn/mcmc/diagnostics/bootstrap.py:bootstrap_medians",
                "tokendyn/mcmc/diagnostics/bootstrap.py:crossover_draws",
                "tokendyn/mcmc/diagnostics/bootstrap.py:rise_probability",
                "tokendyn/mcmc/diagnostics/survival.py:median_times"),
    "claim_6": ("tokendyn/publish/verdicts.py:claim_6", "tokendyn/analysis/traps/dwell.py:basin_dwell",
                "tokendyn/analysis/traps/dwell.py:basin_exit_times"),
    "exact_generator_regime": ("tokendyn/publish/verdicts.py:exact_generator_regime",
                               "tokendyn/latent/mechanism.py:map_cell", "tokendyn/latent/tube.py:sequence_bootstrap"),
    "claim_8": ("tokendyn/publish/verdicts.py:claim_8", "tokendyn/analysis/topics.py:attractor_test",
                "tokendyn/analysis/topics.py:excess_over_controls", "tokendyn/analysis/topics.py:region_shares",
                "tokendyn/analysis/topics.py:fluent", "tokendyn/analysis/topics.py:attractor_run"),
    # chapter 5's generator ladder: does a better flow move the ratio and the flips toward the paper?
    "toward_paper": ("tokendyn/publish/verdicts.py:toward_paper", "tokendyn/latent/tube.py:terminal_flips",
                     "tokendyn/latent/tube.py:sequence_bootstrap"),
    "claim_12": ("tokendyn/publish/verdicts.py:claim_12", "tokendyn/latent/decoders.py:curve_rows",
                 "tokendyn/latent/dabi.py:dabi_curves"),
    "claim_13": ("tokendyn/publish/verdicts.py:claim_13", "tokendyn/evaluation/ablation.py:commitment_effect",
                 "tokendyn/evaluation/ablation.py:commitment_effects", "tokendyn/evaluation/generation.py:seq_rep",
                 "tokendyn/evaluation/generation.py:text_entropies",
                 "tokendyn/evaluation/generation.py:pooled_perplexity"),
    "claim_14": ("tokendyn/publish/verdicts.py:claim_14",
                 "tokendyn/evaluation/generation.py:entropy_matched_perplexity"),
    "claim_15": ("tokendyn/publish/verdicts.py:claim_15",),
}

# A module split or moved by hand: a path it has had -> the paths it had before, newest first. The
# moves of the regrouping into floors are not repeated here: :func:`paths_then` derives them from
# :data:`MOVED_MODULES`. The rule code is compared as code, so a function that only moved (same
# code) is still the rule its run had.
FORMERLY: dict[str, tuple[str, ...]] = {
    "tokendyn/traps/dwell.py": ("tokendyn/traps.py",),
}

# Modules that moved, dotted name then -> now: an import inside a rule that names a module's old
# home names the same module today (the regrouping into floors moved every flat module).
MOVED_MODULES: dict[str, str] = {
    "tokendyn.atomic": "tokendyn.core.atomic",
    "tokendyn.jsonable": "tokendyn.core.jsonable",
    "tokendyn.checks": "tokendyn.core.checks",
    "tokendyn.paths": "tokendyn.core.paths",
    "tokendyn.integrity": "tokendyn.core.integrity",
    "tokendyn.stats": "tokendyn.core.stats",
    "tokendyn.devices": "tokendyn.core.devices",
    "tokendyn.positions": "tokendyn.core.positions",
    "tokendyn.checkpoint": "tokendyn.core.checkpoint",
    "tokendyn.data": "tokendyn.core.data",
    "tokendyn.conditional": "tokendyn.mcmc.conditional",
    "tokendyn.site_encoder": "tokendyn.mcmc.site_encoder",
    "tokendyn.step_settings": "tokendyn.mcmc.step_settings",
    "tokendyn.sampling": "tokendyn.mcmc.sampling",
    "tokendyn.glauber": "tokendyn.mcmc.glauber",
    "tokendyn.toy": "tokendyn.mcmc.toy",
    "tokendyn.fill": "tokendyn.mcmc.fill",
    "tokendyn.diagnostics": "tokendyn.mcmc.diagnostics",
    "tokendyn.embedding": "tokendyn.models.embedding",
    "tokendyn.decoding": "tokendyn.latent.discrete",
    "tokendyn.rectangle": "tokendyn.analysis.rectangle",
    "tokendyn.influence": "tokendyn.analysis.influence",
    "tokendyn.topics": "tokendyn.analysis.topics",
    "tokendyn.fidelity": "tokendyn.analysis.fidelity",
    "tokendyn.size": "tokendyn.analysis.size",
    "tokendyn.experiments": "tokendyn.analysis.experiments",
    "tokendyn.traps": "tokendyn.analysis.traps",
    "tokendyn.book": "tokendyn.publish.book",
    "tokendyn.checked": "tokendyn.publish.checked",
    "tokendyn.claims": "tokendyn.publish.claims",
    "tokendyn.verdicts": "tokendyn.publish.verdicts",
    "tokendyn.chapter_params": "tokendyn.publish.chapter_params",
    "tokendyn.preregistration": "tokendyn.publish.preregistration",
    "tokendyn.plotting": "tokendyn.publish.plotting",
    "tokendyn.results": "tokendyn.publish.results",
    "tokendyn.sweep": "tokendyn.publish.sweep",
    "tokendyn.cli": "tokendyn.publish.cli",
    "tokendyn.figures": "tokendyn.publish.figures",
}

# Recorded run (under data/) -> the rules that judge it, each committed before the run.
JUDGED: dict[str, tuple[str, ...]] = {
    "runs/03_phase_transition-shape.json": ("claim_4",),
    "runs/07_escapes-ode-sde.json": ("claim_14",),
    "runs/07_escapes-readouts.json": ("claim_15",),
    "runs/05_tube_law-mechanism-map.json": ("exact_generator_regime",),
    "runs/04_basins-basin-dwell.json": ("claim_6",),
    "runs/04_basins-attractor.json": ("claim_8",),
    "runs/06_dabi_cci-curves.json": ("claim_12",),
    "runs/07_escapes-commitment.json": ("claim_13",),
    # recorded at f964e43, where claim 5's rule and statistics were already today's (quoted beside claim 5)
    "runs/03_phase_transition-mpnet.json": ("claim_5",),
    "runs/02_rectangle_test-size-ladder.json": ("claim_1", "claim_3"),
    "runs/03_phase_transition-grid.json": ("claim_5",),
    "runs/03_phase_transition-minilm.json": ("claim_5",),
    "runs/04_basins-trap-ladder.json": ("claim_6",),  # claim 6's reason quotes its size slope
    # the census the basin run started from; claim 6 quotes its exact dwell
    "runs/04_basins-traps.json": ("claim_6",),
}

# Recorded runs whose claims' rules were written or changed after them (judged, but not pre-registered).
BEFORE_THEIR_RULES: dict[str, tuple[int, ...]] = {
    "runs/05_tube_law-ladder.json": (10, 11),
}


def function_source(text: str, name: str, where: str = "") -> str:
    """The exact source of the top-level function ``name`` in the module text ``text``."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            seg = ast.get_source_segment(text, node)
            if seg is not None:
                return seg
    raise KeyError(f"{where or 'module'}: no top-level function {name!r}")


def _module(path: str) -> str:
    """``tokendyn/core/stats.py`` -> ``tokendyn.core.stats`` (a package's ``__init__.py`` -> the package)."""
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _now(dotted: str) -> str:
    """A module's dotted name today, through :data:`MOVED_MODULES` (longest moved prefix)."""
    for old in sorted(MOVED_MODULES, key=len, reverse=True):
        if dotted == old or dotted.startswith(old + "."):
            return MOVED_MODULES[old] + dotted[len(old):]
    return dotted


def _then(dotted: str) -> str:
    """A module's dotted name before the regrouping: :func:`_now` backwards (longest moved prefix)."""
    for old, new in sorted(MOVED_MODULES.items(), key=lambda kv: len(kv[1]), reverse=True):
        if dotted == new or dotted.startswith(new + "."):
            return old + dotted[len(new):]
    return dotted


def paths_then(file: str) -> list[str]:
    """Every path the module at ``file`` (``tokendyn/...py``) has had, newest first: ``file``, its
    path before the regrouping (:data:`MOVED_MODULES`), then the older homes :data:`FORMERLY` lists."""
    package = file.endswith("/__init__.py")
    dotted = _then(_module(file))
    paths = [file, dotted.replace(".", "/") + ("/__init__.py" if package else ".py")]
    for path in list(paths):
        paths += FORMERLY.get(path, ())
    return list(dict.fromkeys(paths))


def function_code(text: str, name: str, path: str) -> str:
    """What runs of the top-level function ``name`` in the module text ``text`` found at ``path``
    (``tokendyn/...py``), as a string to compare: its syntax tree without the docstring, every
    import inside it made absolute and renamed through :data:`MOVED_MODULES`. Comments,
    docstrings, formatting and a module's move do not count; a changed expression does."""
    node = ast.parse(function_source(text, name, path)).body[0]
    assert isinstance(node, ast.FunctionDef)
    if node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
            and isinstance(node.body[0].value.value, str):
        node.body = node.body[1:] or [ast.Pass()]
    package = _module(path).split(".")[:-1] if not path.endswith("__init__.py") else _module(path).split(".")

    class _Absolute(ast.NodeTransformer):
        def visit_ImportFrom(self, imp: ast.ImportFrom) -> ast.AST:
            base = ".".join(package[:len(package) - imp.level + 1] if imp.level else [])
            source = ".".join(p for p in (base, imp.module or "") if p)
            names = sorted(f"{_now(source + '.' + a.name)} as {a.asname or a.name}" for a in imp.names)
            return ast.Expr(ast.Constant("import " + ", ".join(names)))

    return ast.dump(_Absolute().visit(node), annotate_fields=False)


def _git_show(repo: Path, commit: str, path: str) -> str | None:
    out = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def problems(repo: Path, data: Path | None = None) -> list[str]:
    """Every way the recorded runs in :data:`JUDGED` break pre-registration, in words (empty: none).

    For each run: it exists, names a clean commit, and every piece of its rules' code
    (:data:`RULE_CODE`) at that commit is the code in ``repo`` now (:func:`function_code`: the
    same syntax, docstrings and moves aside).
    """
    data = data or repo / "data"
    found = []
    for rel, rules in JUDGED.items():
        path = data / rel
        if not path.is_file():
            found.append(f"{rel}: judged by {', '.join(rules)} but not recorded")
            continue
        record = read_record(path)
        prov = record["provenance"]
        commit = prov.get("git_commit")
        if not commit or prov.get("git_dirty") is not False:
            found.append(f"{rel}: no clean commit recorded (git_commit={commit!r}, git_dirty={prov.get('git_dirty')!r})")
            continue
        # A run that kept rows from an earlier run names each row's commit: those rows were computed
        # there, so the rule must already be in every one of them, not only in the last.
        rows = record.get("rows") if isinstance(record.get("rows"), list) else []
        kept = sorted({r["git_commit"] for r in rows if isinstance(r, dict) and r.get("git_commit")} - {commit})
        if any(isinstance(r, dict) and r.get("git_dirty") for r in rows):
            found.append(f"{rel}: a row was computed in a tree with uncommitted changes")
        found += [p for c in kept for p in _rule_problems(repo, rel, rules, c, "a kept row's commit")]
        found += _rule_problems(repo, rel, rules, commit)
    return found


def _rule_problems(repo: Path, rel: str, rules: tuple[str, ...], commit: str, whose: str = "its commit") -> list[str]:
    """How the code of ``rules`` at ``commit`` differs from the code in ``repo`` now, in words."""
    found = []
    if subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True).returncode:
        return [f"{rel}: {whose} {commit[:12]} is not in this clone's history (a shallow clone? fetch it)"]
    for rule in rules:
        for piece in RULE_CODE[rule]:
            file, fn = piece.split(":")
            old, missing = None, f"lib/{file} is not in {whose} {commit[:12]}"
            for where in paths_then(file):  # where the function lived then
                then = _git_show(repo, commit, f"lib/{where}")
                if then is None:
                    continue
                try:
                    old = function_code(then, fn, where)
                    break
                except KeyError as e:
                    missing = f"at {whose} {commit[:12]}, {e.args[0]}"
            if old is None:
                found.append(f"{rel}: {missing} (the rule came after the run)")
                continue
            if old != function_code((repo / "lib" / file).read_text(), fn, file):
                found.append(f"{rel}: {piece} changed since {whose} {commit[:12]}; re-record it")
    return found
