"""Rules precede the runs they judge: a rule changed after its run was recorded is caught."""

import json
import subprocess
from pathlib import Path

import pytest

from tokendyn.publish import preregistration as pre
from tokendyn.publish import verdicts

REPO = Path(__file__).resolve().parents[1]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _record(repo: Path, commit: str, dirty: bool = False, rows: list | None = None) -> None:
    (repo / "data" / "runs").mkdir(parents=True, exist_ok=True)
    (repo / "data" / "runs" / "r.json").write_text(json.dumps(
        {"kind": "any", "command": "make it", "provenance": {"git_commit": commit, "git_dirty": dirty},
         **({"rows": rows} if rows is not None else {})}))


@pytest.fixture
def toy_repo(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "lib" / "tokendyn").mkdir(parents=True)
    _git(tmp_path, "init", "-q", str(repo))
    _git(repo, "config", "user.email", "t@t")
    _git(repo, "config", "user.name", "t")
    (repo / "lib" / "tokendyn" / "verdicts.py").write_text("def rule(x):\n    return x > 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "rule")
    monkeypatch.setattr(pre, "RULE_CODE", {"rule": ("tokendyn/verdicts.py:rule",)})
    monkeypatch.setattr(pre, "JUDGED", {"runs/r.json": ("rule",)})
    return repo


def test_a_run_recorded_after_its_rule_passes(toy_repo):
    _record(toy_repo, _git(toy_repo, "rev-parse", "HEAD"))
    assert pre.problems(toy_repo) == []


def test_a_rule_changed_after_its_run_fails(toy_repo):
    _record(toy_repo, _git(toy_repo, "rev-parse", "HEAD"))
    (toy_repo / "lib" / "tokendyn" / "verdicts.py").write_text("def rule(x):\n    return x > 2\n")
    (found,) = pre.problems(toy_repo)
    assert "tokendyn/verdicts.py:rule changed since its commit" in found and "re-record" in found


def test_a_rule_written_after_its_run_fails(toy_repo):
    first = _git(toy_repo, "rev-parse", "HEAD")
    (toy_repo / "lib" / "tokendyn" / "verdicts.py").write_text("def other():\n    pass\n")
    _git(toy_repo, "commit", "-qam", "no rule yet")
    _record(toy_repo, _git(toy_repo, "rev-parse", "HEAD"))
    (toy_repo / "lib" / "tokendyn" / "verdicts.py").write_text("def rule(x):\n    return x > 1\n")
    (found,) = pre.problems(toy_repo)
    assert "no top-level function 'rule'" in found and first


def test_rows_kept_from_before_the_rule_fail(toy_repo):
    """A resumed run stamps its last commit, but a row it kept was computed where it was computed."""
    (toy_repo / "lib" / "tokendyn" / "verdicts.py").write_text("def other():\n    pass\n")
    _git(toy_repo, "commit", "-qam", "no rule")
    before = _git(toy_repo, "rev-parse", "HEAD")
    (toy_repo / "lib" / "tokendyn" / "verdicts.py").write_text("def rule(x):\n    return x > 1\n")
    _git(toy_repo, "commit", "-qam", "the rule")
    now = _git(toy_repo, "rev-parse", "HEAD")
    _record(toy_repo, now, rows=[{"git_commit": now}, {"git_commit": now}])
    assert pre.problems(toy_repo) == []
    _record(toy_repo, now, rows=[{"git_commit": before}, {"git_commit": now}])
    (found,) = pre.problems(toy_repo)
    assert f"a kept row's commit {before[:12]}" in found and "no top-level function 'rule'" in found
    _record(toy_repo, now, rows=[{"git_commit": now, "git_dirty": True}])
    assert "uncommitted changes" in pre.problems(toy_repo)[0]


def test_a_rule_that_only_moved_is_followed(toy_repo, monkeypatch):
    """A module split after the run: the function is looked up where it was, and compared by content."""
    _record(toy_repo, _git(toy_repo, "rev-parse", "HEAD"))
    (toy_repo / "lib" / "tokendyn" / "rules").mkdir()
    (toy_repo / "lib" / "tokendyn" / "verdicts.py").rename(toy_repo / "lib" / "tokendyn" / "rules" / "core.py")
    monkeypatch.setattr(pre, "RULE_CODE", {"rule": ("tokendyn/rules/core.py:rule",)})
    (found,) = pre.problems(toy_repo)
    assert "lib/tokendyn/rules/core.py is not in its commit" in found
    monkeypatch.setattr(pre, "FORMERLY", {"tokendyn/rules/core.py": ("tokendyn/verdicts.py",)})
    assert pre.problems(toy_repo) == []
    (toy_repo / "lib" / "tokendyn" / "rules" / "core.py").write_text("def rule(x):\n    return x > 3\n")
    (found,) = pre.problems(toy_repo)
    assert "changed since its commit" in found


def test_the_paths_a_module_had_come_from_the_regrouping_and_formerly():
    assert pre.paths_then("tokendyn/analysis/traps/dwell.py") == [
        "tokendyn/analysis/traps/dwell.py", "tokendyn/traps/dwell.py", "tokendyn/traps.py"]
    assert pre.paths_then("tokendyn/latent/discrete.py") == ["tokendyn/latent/discrete.py", "tokendyn/decoding.py"]
    assert pre.paths_then("tokendyn/latent/tube.py") == ["tokendyn/latent/tube.py"]


def test_docstrings_and_moved_imports_are_not_the_rule_but_what_runs_is(toy_repo, monkeypatch):
    """The rule is its code: a reworded docstring, or an import of a module that moved, leave it
    the rule its run had; an import of another module, or another threshold, do not."""
    rules = toy_repo / "lib" / "tokendyn" / "verdicts.py"
    rules.write_text('def rule(x):\n    """Above one (tokendyn.stats)."""\n    from .stats import f\n    return f(x) > 1\n')
    _git(toy_repo, "commit", "-qam", "rule with an import")
    _record(toy_repo, _git(toy_repo, "rev-parse", "HEAD"))
    monkeypatch.setattr(pre, "MOVED_MODULES", {"tokendyn.stats": "tokendyn.core.stats"})
    rules.write_text('def rule(x):\n    """Above one, reworded (tokendyn.core.stats)."""\n'
                     '    from .core.stats import f  # moved\n    return f(x) > 1\n')
    assert pre.problems(toy_repo) == []
    rules.write_text('def rule(x):\n    from .other import f\n    return f(x) > 1\n')
    assert "changed since its commit" in pre.problems(toy_repo)[0]
    rules.write_text('def rule(x):\n    from .core.stats import f\n    return f(x) >= 1\n')
    assert "changed since its commit" in pre.problems(toy_repo)[0]


def test_a_dirty_or_missing_run_fails(toy_repo):
    _record(toy_repo, _git(toy_repo, "rev-parse", "HEAD"), dirty=True)
    assert "no clean commit" in pre.problems(toy_repo)[0]
    (toy_repo / "data" / "runs" / "r.json").unlink()
    assert "not recorded" in pre.problems(toy_repo)[0]


def test_every_rule_named_exists_and_every_run_is_accounted_for():
    for rule, pieces in pre.RULE_CODE.items():
        assert rule in verdicts.RULES
        for piece in pieces:
            file, fn = piece.split(":")
            pre.function_source((REPO / "lib" / file).read_text(), fn)
    assert set(pre.JUDGED).isdisjoint(pre.BEFORE_THEIR_RULES)
    runs = {f"runs/{p.name}" for p in (REPO / "data" / "runs").glob("*.json")}
    judged = set(pre.JUDGED) | set(pre.BEFORE_THEIR_RULES)
    assert set(pre.BEFORE_THEIR_RULES) <= runs  # the list of runs before their rules only shrinks


def test_the_recorded_runs_follow_their_rules():
    """The book's own recorded runs: each judged run was made at a clean commit whose rule code is today's."""
    shallow = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"],
                             capture_output=True, text=True).stdout.strip()
    if shallow != "false":
        pytest.skip(f"needs the full git history (is-shallow-repository: {shallow or 'not a git checkout'})")
    assert pre.problems(REPO) == []
