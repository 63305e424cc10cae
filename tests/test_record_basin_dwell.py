"""scripts/record_basin_dwell.py: a killed run resumes model by model, bad input fails before any
compute, and the record carries its command and provenance."""

import json

import pytest
from script_runs import load_script


def load():
    return load_script("scripts/record_basin_dwell.py")


def test_record_basin_dwell_resumes_per_model_and_records_its_command(tmp_path, monkeypatch):
    rb = load()
    monkeypatch.setattr(rb, "ROOT", tmp_path)
    calls = []
    est = {"value": 20.0, "lo": 15.0, "hi": 25.0, "n": 3}

    def once(name, args, taus, radii, censuses):
        calls.append(name)
        if name == "b" and calls.count("b") == 1:
            raise KeyboardInterrupt      # killed while the second model runs
        return {"model": name, "n_traps": 3, "basin_dwell": {str(h): {f"{t:g}": {"median": est} for t in taus}
                                                             for h in radii}, "cpu_seconds": 1.0, "wall_seconds": 1.0}

    monkeypatch.setattr(rb, "basin_model", once)
    out = tmp_path / "rec.json"
    argv = ["--models", "a,b", "--taus", "0.5", "--radii", "2", "--chains", "2", "--steps", "50", "--out", str(out)]
    with pytest.raises(KeyboardInterrupt):
        rb.main(argv)
    assert not out.exists() and len(list((tmp_path / "checkpoints" / "basin").glob("a-*.json"))) == 1
    assert rb.main(argv) == 0
    assert calls == ["a", "b", "b"]                 # a was not run again
    rec = json.loads(out.read_text())
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
