"""scripts/record_attractor.py: a killed run resumes model by model, bad input fails before any
compute, and the record carries its command, its reference row and provenance."""

import pytest
from script_runs import killed_then_resumed, load_script


def load():
    return load_script("scripts/record_attractor.py")


class FakeReference:
    def __init__(self, args):
        self.row = {"model": "reference", "role": "reference"}


def test_record_attractor_resumes_per_model_and_records_its_command(tmp_path, monkeypatch):
    ra = load()
    monkeypatch.setattr(ra, "Reference", FakeReference)

    def row(name, role, args, ref, taus, bf16):
        return {"model": name, "role": role, "labels_gated": [[0], [4]], "cpu_seconds": 1.0, "wall_seconds": 1.0}

    out = tmp_path / "rec.json"
    argv = ["--models", "a,b", "--ablation", "c", "--ablation-with", "b", "--bf16", "a", "--chains", "2",
            "--steps", "20", "--embed-every", "10", "--segment", "10", "--out", str(out)]
    calls, rec = killed_then_resumed(ra, "chain_row", row, argv, out, tmp_path, monkeypatch,
                                     kill_at=2, kept="attractor/a-*.json", n_kept=1)
    assert [(c[0], c[1], c[5]) for c in calls] == [("a", "claim", True), ("b", "claim", False), ("b", "claim", False),
                                                   ("c", "ablation", False)]
    assert [r["model"] for r in rec["rows"]] == ["reference", "a", "b", "c"]
    assert rec["kind"] == "long chains through topic regions"
    assert "--models a,b --ablation c --ablation-with b --bf16 a" in rec["command"] and "--steps 20" in rec["command"]
    assert rec["provenance"]["params"]["chains"] == 2 and "git_commit" in rec["provenance"]


@pytest.mark.parametrize("argv, match", [(["--chains", "1"], "chains"), (["--taus", "0"], "tau"),
                                         (["--steps", "0"], "steps"), (["--embed-every", "3"], "embed-every"),
                                         (["--ablation-with", "x"], "ablation-with"), (["--bf16", "zz"], "bf16"),
                                         (["--keep-real", "1"], "keep_real")])
def test_record_attractor_names_a_bad_parameter_before_any_compute(argv, match, monkeypatch):
    ra = load()
    monkeypatch.setattr(ra, "Reference", lambda *a: pytest.fail("computed before checking"))
    with pytest.raises((ValueError, SystemExit), match=match):
        ra.main(argv)
