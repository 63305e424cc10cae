"""Whole seeded trajectories (every chain, every step) of the Glauber and coupled samplers on
exact toy models, against tests/golden/samplers.json (scripts/record_golden.py). The toys run in
float64, so no CPU's float order moves them: a difference is a change of the samplers' random
numbers or of their law. The file was recorded with the float64 full-row softmax draw that the
two-level draw of tokendyn.sampling replaced; the same ids came out."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import record_golden  # noqa: E402

GOLDEN = json.loads((ROOT / "tests" / "golden" / "samplers.json").read_text())


def test_the_golden_file_covers_every_recorded_case():
    assert [c["name"] for c in GOLDEN["cases"]] == [c["name"] for c in record_golden.CASES]


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=[c["name"] for c in GOLDEN["cases"]])
def test_seeded_trajectory_matches_the_golden_one(case):
    spec = {k: v for k, v in case.items() if k not in ("x", "y")}
    got = record_golden.replay(spec)
    for key in ("x", "y"):
        if key not in case:
            continue
        want = case[key]
        assert len(got[key]) == len(want) == case["steps"] + 1
        first = next((t for t, (a, b) in enumerate(zip(got[key], want)) if a != b), None)
        assert first is None, (f"{case['name']}: chain {key} leaves the golden trajectory at step {first}: "
                               f"{got[key][first]} against {want[first]}")
    # a trajectory that never moves would match a broken sampler that does nothing
    assert got["x"][-1] != got["x"][0]
