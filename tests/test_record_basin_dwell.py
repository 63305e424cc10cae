"""scripts/record_basin_dwell.py: a killed run resumes model by model, bad input fails before any
compute, and the record carries its command and provenance."""

import pytest
from script_runs import killed_then_resumed, load_script


def load():
    return load_script("scripts/record_basin_dwell.py")


def test_record_basin_dwell_resumes_per_model_and_records_its_command(tmp_path, monkeypatch):
    est = {"value": 20.0, "lo": 15.0, "hi": 25.0, "n": 3}

    def row(name, args, taus, radii, censuses):
        return {"model": name, "n_traps": 3, "basin_dwell": {str(h): {f"{t:g}": {"median": est} for t in taus}
                                                             for h in radii}, "cpu_seconds": 1.0, "wall_seconds": 1.0}

    out = tmp_path / "rec.json"
    argv = ["--models", "a,b", "--taus", "0.5", "--radii", "2", "--chains", "2", "--steps", "50", "--out", str(out)]
    calls, rec = killed_then_resumed(load(), "basin_model", row, argv, out, tmp_path, monkeypatch,
                                     kill_at=2, kept="basin/a-*.json", n_kept=1)
    assert [c[0] for c in calls] == ["a", "b", "b"]                 # a was not run again
    assert [r["model"] for r in rec["rows"]] == ["a", "b"] and rec["kind"] == "basin dwell of recorded traps"
    assert "--models a,b" in rec["command"] and "--radii 2 --chains 2 --steps 50" in rec["command"]
    assert rec["provenance"]["params"]["steps"] == 50 and "git_commit" in rec["provenance"]


@pytest.mark.parametrize("argv, match", [(["--chains", "0"], "chains"), (["--radii", "-1"], "radii"),
                                         (["--taus", "0"], "tau"), (["--steps", "0"], "steps")])
def test_record_basin_dwell_names_a_bad_parameter_before_any_compute(argv, match, monkeypatch):
    rb = load()
    monkeypatch.setattr(rb, "basin_model", lambda *a: pytest.fail("computed before checking"))
    with pytest.raises((ValueError, SystemExit), match=match):
        rb.main(argv)
