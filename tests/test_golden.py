"""Whole seeded trajectories (every chain, every step) of the Glauber, coupled, kinetic, ODE and
SDE samplers on exact toy models, against tests/golden/samplers.json (scripts/record_golden.py). The toys run in
float64, so no CPU's float order moves them: a difference is a change of the samplers' random
numbers or of their law. The file was recorded with the float64 full-row softmax draw that the
two-level draw of tokendyn.mcmc.sampling replaced; the same ids came out."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import record_golden  # noqa: E402

GOLDEN = json.loads((ROOT / "tests" / "golden" / "samplers.json").read_text())


def test_the_golden_file_covers_every_recorded_case():
    assert [c["name"] for c in GOLDEN["cases"]] == [c["name"] for c in record_golden.CASES]


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=[c["name"] for c in GOLDEN["cases"]])
def test_seeded_trajectory_matches_the_golden_one(case):
    spec = {k: v for k, v in case.items() if k not in ("x", "y", "times", "z", "tokens")}
    got = record_golden.replay(spec)
    for key in ("x", "y", "times", "tokens"):  # token ids and move times: exactly
        if key not in case:
            continue
        want = case[key]
        assert len(got[key]) == len(want)
        first = next((t for t, (a, b) in enumerate(zip(got[key], want)) if a != b), None)
        assert first is None, (f"{case['name']}: {key} leaves the golden trajectory at record {first}: "
                               f"{got[key][first]} against {want[first]}")
    if "z" in case:  # float64 latents: another CPU's float order moves them at round-off only
        torch.testing.assert_close(torch.tensor(got["z"]), torch.tensor(case["z"]), rtol=1e-9, atol=1e-12)
        assert got["z"][-1] != got["z"][0]
    else:
        # a trajectory that never moves would match a broken sampler that does nothing
        assert got["x"][-1] != got["x"][0]
