"""scripts/record_traps.py: a killed run resumes model by model, the record carries its command and
provenance, and the chapter's reader finds what it needs in it."""

import pytest
from script_runs import killed_then_resumed, load_script


def load():
    return load_script("scripts/record_traps.py")


def fake_row(name, args, taus):
    est = {"value": 1.0, "lo": 0.5, "hi": 2.0, "n": 3}
    return {"model": name, "params": 10, "n_traps": 3, "median_margin": est, "tau_1000": est,
            "exact_dwell": {f"{t:g}": est for t in taus}, "dwell_law": {}, "traps": [], "cpu_seconds": 1.0,
            "wall_seconds": 1.0, "starts": args.starts}


def test_record_traps_resumes_per_model_and_records_its_command(tmp_path, monkeypatch):
    rt = load()
    out = tmp_path / "rec.json"
    argv = ["--models", "a,b", "--starts", "6", "--taus", "0.3,0.5", "--min-traps", "2", "--out", str(out)]
    calls, rec = killed_then_resumed(rt, "census_model", fake_row, argv, out, tmp_path, monkeypatch,
                                     kill_at=2, kept="traps/a-*.json", n_kept=1)
    names = lambda: [c[0] for c in calls]  # noqa: E731
    assert names() == ["a", "b", "b"]                 # a was not run again
    assert [r["model"] for r in rec["rows"]] == ["a", "b"] and rec["kind"] == "trap census and dwell law"
    assert "--models a,b --starts 6 --taus 0.3,0.5" in rec["command"]
    assert rec["command"].endswith(f"--out {out}")  # the command rewrites this file, not the default one
    prov = rec["provenance"]
    assert {"git_commit", "git_dirty", "seed"} <= set(prov) and prov["params"]["taus"] == [0.3, 0.5]
    # --resume-from names where to look for rows, not what they are: the same run, nothing recomputed
    assert rt.main(argv + ["--resume-from", "runs/none.json"]) == 0 and names() == ["a", "b", "b"]
    # other parameters are another run: nothing is resumed
    assert rt.main(argv[:3] + ["8"] + argv[4:]) == 0 and names()[-2:] == ["a", "b"]


def test_record_traps_checks_its_arguments():
    rt = load()
    with pytest.raises(ValueError, match="starts"):
        rt.main(["--starts", "2"])
    with pytest.raises(ValueError):
        rt.main(["--taus", "0,0.5"])
