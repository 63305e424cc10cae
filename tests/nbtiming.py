"""pytest plugin (``-p nbtiming``): print how long each chapter took to execute under nbval.

nbval runs a notebook as one item per cell; this adds up the cells of each notebook, so the CI
log shows every chapter's run time next to the budget it must fit.
"""

from __future__ import annotations

from collections import defaultdict


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    per_nb: dict[str, float] = defaultdict(float)
    for reports in terminalreporter.stats.values():
        for r in reports:
            nodeid = getattr(r, "nodeid", "")
            if ".ipynb::" in nodeid:
                per_nb[nodeid.split("::", 1)[0]] += getattr(r, "duration", 0.0)
    if not per_nb:
        return
    terminalreporter.section("chapter run times (nbval)")
    for nb, secs in sorted(per_nb.items()):
        terminalreporter.write_line(f"{nb}: {secs:.0f} s")
    terminalreporter.write_line(f"all chapters: {sum(per_nb.values()) / 60:.1f} min")
