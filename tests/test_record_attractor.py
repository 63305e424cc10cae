"""scripts/record_attractor.py: a killed run resumes model by model, bad input fails before any
compute, and the record carries its command, its reference row and provenance."""

from types import SimpleNamespace

import pytest
import torch
from script_runs import killed_then_resumed, load_script

from tokendyn.analysis import topics, traps


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


# --- one model's row: labels and fluency are the library's (topics.label_frames, topics.fluency_gates) ----

class _Tok:
    def decode(self, ids):
        return " ".join(f"w{i}" for i in ids)


class _Embedder:
    """Sentence embeddings by the text's first word: w0..w4 -> the region's axis, others far from all five."""

    def encode(self, texts, **kw):
        return torch.stack([torch.eye(5)[int(t.split()[0][1:])] if int(t.split()[0][1:]) < 5 else -torch.ones(5)
                            for t in texts])


def _reference(regions):
    e = torch.cat([torch.eye(5), torch.eye(5) * 0.9 + 0.01])                  # two snippets a region
    labels = regions * 2
    clf = topics.fit_centroids(e, labels, order=regions)
    val = ["w0 w1 w2 w3", "w1 w2 w3 w0", "w2 w3 w0 w1"]
    ref = SimpleNamespace(split=SimpleNamespace(starts={s: [f"{s} a", f"{s} b"] for s in ("health", "sports", "food")},
                                                val_texts=val),
                          embedder=_Embedder(), clf=clf, gclf=topics.with_reject(clf, e, keep=1.0), ar=None)
    return ref, e, labels


def test_chain_row_labels_and_gates_through_the_library(tmp_path, monkeypatch):
    """The recorded labels are those chapter 4's topics.label_frames gives the same frames (its kNN
    aside), and the fluency of the sampled politics states is topics.fluency_gates' verdict."""
    ra = load()
    from tokendyn import models
    from tokendyn.mcmc import conditional, step_settings

    ref, e, labels = _reference(ra.REGIONS)
    # frame 0: the starts (health 0, sports 1, food 2); politics (4) at 3 states after it: one fluent, one the
    # judge finds unlikely (w8), one a repetition basin
    first = torch.tensor([[0, 0, 1, 1, 2, 2], [4, 0, 4, 7, 3, 1], [4, 8, 1, 9, 2, 2]])        # [F=3, B=6]
    rest = torch.tensor([5, 6, 7])
    traj = torch.cat([first[..., None], rest.expand(3, 6, 3)], -1)                            # [3, 6, 4]
    traj[1, 2, 1] = 8                                                                         # w4 w8 w6 w7
    traj[2, 0] = 4                                                                            # w4 w4 w4 w4
    monkeypatch.setattr(models, "load_mlm", lambda name, dtype=None: SimpleNamespace(tokenizer=_Tok()))
    monkeypatch.setattr(step_settings, "conditional", lambda loaded: None)
    monkeypatch.setattr(conditional, "content_ids",
                        lambda loaded, texts, n: torch.zeros(len(texts), n, dtype=torch.long))
    monkeypatch.setattr(traps, "long_chains",
                        lambda *a, **k: SimpleNamespace(trajectory=traj, steps=torch.arange(3) * 10))
    monkeypatch.setattr(topics, "ar_nll", lambda ar, texts, batch=16: torch.tensor(
        [9.0 if "w8" in t else 1.0 for t in texts], dtype=torch.float64))
    args = SimpleNamespace(chains=2, tokens=4, steps=20, embed_every=10, segment=10, seed=0, n_fluency=8,
                           keep_real=0.95, repeat_share=0.5, checkpoints=str(tmp_path))
    row = ra.chain_row("m", "claim", args, ref, [1.0], False)

    assert row["record_steps"] == [0, 10, 20] and row["chains"] == 6
    assert row["labels_gated"] == [[0, 0, 1, 1, 2, 2], [4, 0, 4, -1, 3, 1], [4, -1, 1, -1, 2, 2]]
    assert row["labels_argmax"][0] == [0, 0, 1, 1, 2, 2] and row["labels_argmax"][1][:3] == [4, 0, 4]
    chapter4 = topics.label_frames(SimpleNamespace(tokenizer=_Tok()), _Embedder(), traj, torch.arange(3) * 10,
                                   every=10, clf=ref.clf, gated_clf=ref.gclf, refs=e, ref_labels=labels,
                                   regions=ra.REGIONS, k=2)
    assert row["labels_gated"] == chapter4.gated.tolist() and row["labels_argmax"] == chapter4.argmax.tolist()
    assert row["final_texts"] == chapter4.texts[12:]
    fl = row["politics_fluency"]
    sample = ["w4 w5 w6 w7", "w4 w8 w6 w7", "w4 w4 w4 w4"]                  # frames 1 and 2, after the start
    assert [x["text"] for x in fl["examples"]] == sample
    assert [x["fluent"] for x in fl["examples"]] == [True, False, False] and (fl["fluent"], fl["n"]) == (1, 3)
    gate = topics.fluency_gates(None, {"m": sample}, {"m": traps.dominance(traj.reshape(-1, 4)[[6, 8, 12]])},
                                {"m": ref.split.val_texts}, keep=0.95, repeat_share=0.5)["m"]
    assert [x["fluent"] for x in fl["examples"]] == gate.fluent.tolist()
    assert fl["median_nll"] == float(gate.nll.median())
