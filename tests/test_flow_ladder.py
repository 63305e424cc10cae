"""scripts/train_context_latent.py flow-ladder and export-ladder, on tiny fake encoder states.

The states folder holds a few 5-token windows of 4-d "encoder states" (one coordinate constant, so
the latents are 3-d, as MiniLM's 384 are 381); the flow is 16 wide and one layer deep, so a 40-step
ladder takes well under a second. A run killed twice (mid-segment, and between a segment's last
checkpoint and its snapshot) and rerun must write the same snapshots, bit for bit, as one that never
stopped; the export must load through ``load_context_latent``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tokendyn.core.integrity import write_sums
from tokendyn.latent import contextual
from tokendyn.latent.contextual import LinearReadout, load_context_latent
from tokendyn.training import latents as training_latents
from script_runs import load_script

SEQ, RAW, VOCAB = 5, 4, 11


@pytest.fixture
def tcl(monkeypatch):
    mod = load_script("scripts/train_context_latent.py")
    for k, v in dict(seq_len=SEQ, flow_width=16, flow_depth=1, flow_ff=32, flow_batch=8, flow_lr=1e-2).items():
        monkeypatch.setitem(mod.P, k, v)
    monkeypatch.setattr(mod, "EVAL", dict(windows=8, draws=2, seed=3))
    return mod


@pytest.fixture
def states(tmp_path):
    """A finished ``encode`` folder: two shards of training states, one of held-out, ids, standardise."""
    g = torch.Generator().manual_seed(0)
    ck = tmp_path / "states"
    for split, sizes in (("train", (24, 16)), ("heldout", (12,))):
        d = ck / f"states-{split}"
        d.mkdir(parents=True)
        for i, n in enumerate(sizes):
            h = torch.randn(n, SEQ, RAW, generator=g) * 0.5 + 1.0
            h[..., 2] = 0.25  # a constant coordinate, dropped by ``keep``
            torch.save(h.half(), d / f"shard{i:03d}.pt")
        torch.save(torch.randint(VOCAB, (sum(sizes), SEQ), generator=g), d / "ids.pt")
    keep = torch.tensor([True, True, False, True])
    torch.save({"mean": torch.ones(3), "std": torch.full((3,), 0.5), "keep": keep}, ck / "standardise.pt")
    return ck


def _snapshots(folder: Path) -> dict[str, dict]:
    return {f.name: torch.load(f, weights_only=True) for f in sorted(folder.glob("flow-step*.pt"))}


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        sa, sb = a[name], b[name]
        assert sa.keys() == sb.keys()
        for k in sa:
            if k == "model":
                assert sa[k].keys() == sb[k].keys()
                for p in sa[k]:
                    assert torch.equal(sa[k][p], sb[k][p]), (name, p)
            else:
                assert sa[k] == sb[k], (name, k)


def test_ladder_snapshots_the_asked_steps_and_a_killed_run_resumes_to_the_same_snapshots(tcl, states, tmp_path,
                                                                                         monkeypatch):
    quiet = lambda m: None  # noqa: E731
    run = dict(steps=40, snapshots=[10, 30], log=quiet, checkpoint_every=5, log_every=5)
    straight = tmp_path / "straight"
    summary = tcl.flow_ladder(states, straight, **run)
    assert [r["step"] for r in summary] == [10, 30, 40]  # the last step is always a snapshot
    snaps = _snapshots(straight)
    assert list(snaps) == ["flow-step00010.pt", "flow-step00030.pt", "flow-step00040.pt"]
    for s in snaps.values():
        assert s["total_steps"] == 40 and s["eval"] == tcl.EVAL and s["train_loss"] == s["train_losses"][-1]
        assert s["heldout_flow_loss"] > 0 and s["train_fixed_flow_loss"] > 0
    assert snaps["flow-step00040.pt"]["lr_multiplier"] < 0.01 < snaps["flow-step00010.pt"]["lr_multiplier"]
    assert json.loads((straight / "losses.json").read_text())[1]["heldout_flow_loss"] == \
        snaps["flow-step00030.pt"]["heldout_flow_loss"]

    # kill 1: mid-segment, at step 23 (after the step-20 checkpoint, before the step-30 snapshot)
    killed = tmp_path / "killed"
    real_loss, calls = training_latents.flow_loss, [0]

    def dies_at_step_23(net, x1, gen):
        calls[0] += 1
        if calls[0] == 23:
            raise KeyboardInterrupt
        return real_loss(net, x1, gen)

    def killed_run(owner, name, fake, real, checkpoint_step):
        monkeypatch.setattr(owner, name, fake)
        with pytest.raises(KeyboardInterrupt):
            tcl.flow_ladder(states, killed, **run)
        monkeypatch.setattr(owner, name, real)
        assert list(_snapshots(killed)) == ["flow-step00010.pt"]
        assert torch.load(killed / "flow.pt", weights_only=True)["step"] == checkpoint_step

    killed_run(training_latents, "flow_loss", dies_at_step_23, real_loss, 20)

    # kill 2: after the step-30 checkpoint, while the snapshot's losses are computed
    real_eval = tcl.fixed_flow_loss

    def dies(*a, **kw):
        raise KeyboardInterrupt

    killed_run(tcl, "fixed_flow_loss", dies, real_eval, 30)

    tcl.flow_ladder(states, killed, **run)
    _same(_snapshots(killed), snaps)
    tcl.flow_ladder(states, killed, **run)  # a finished ladder is left as it is
    _same(_snapshots(killed), snaps)
    with pytest.raises(ValueError, match="another recipe"):
        tcl.flow_ladder(states, killed, **{**run, "steps": 50})


def test_export_ladder_writes_folders_that_load_like_the_shipped_model(tcl, states, tmp_path, monkeypatch):
    ladder = tmp_path / "ladder"
    tcl.flow_ladder(states, ladder, steps=12, snapshots=[4], log=lambda m: None, checkpoint_every=4)
    # a tiny stand-in for data/models/context-latent: its readout and standardisation are reused
    src = tmp_path / "source"
    src.mkdir()
    st = torch.load(states / "standardise.pt", weights_only=True)
    save_file({"mean": st["mean"], "std": st["std"], "keep": st["keep"].to(torch.uint8)},
              src / "standardise.safetensors")
    head = LinearReadout(3, VOCAB)
    save_file({k: v.detach().half().contiguous() for k, v in head.state_dict().items()}, src / "readout.safetensors")
    write_sums(src)
    (src / "config.json").write_text(json.dumps({"name": "context-latent", "dim": 3, "vocab_size": VOCAB,
                                                 "seq_len": SEQ, "training": dict(tcl.P),
                                                 "data": {"seed": 0, "heldout_every": 20}}))
    assert tcl.compare_standardise(states, src) == {"same_coordinates": True, "max_mean_diff_in_std": 0.0,
                                                    "max_std_rel_diff": 0.0}
    folders = tcl.export_ladder(ladder, src, ckpt=states)
    assert [d.name for d in folders] == ["model-step00004", "model-step00012"]
    monkeypatch.setattr(contextual, "load_encoder", lambda: (None, None))
    for d in folders:
        cfg = json.loads((d / "config.json").read_text())
        snap = torch.load(ladder / f"flow-step{cfg['ladder']['step']:05d}.pt", weights_only=True)
        assert cfg["training"]["flow_steps"] == cfg["ladder"]["step"] and cfg["ladder"]["total_steps"] == 12
        assert cfg["ladder"]["heldout_flow_loss"] == snap["heldout_flow_loss"]
        m = load_context_latent(d)
        for k, v in m.flow.state_dict().items():
            assert torch.equal(v, snap["model"][k].half().float()), k  # fp16 on disk, as shipped
        assert torch.equal(m.autoencoder.readout.weight, head.readout.weight.detach().half().float())
    (src / "config.json").write_text(json.dumps({"dim": 5, "training": {}}))
    with pytest.raises(ValueError, match="3-d"):
        tcl.export_ladder(ladder, src)


def test_ladder_models_names_the_rungs_in_step_order(tmp_path):
    from tokendyn.latent.contextual import ladder_models

    for step in (10000, 1000, 3000):
        (tmp_path / f"model-step{step:05d}").mkdir()
    (tmp_path / "flow-step01000.pt").write_bytes(b"")   # a snapshot that is not exported: not a rung
    got = ladder_models(tmp_path)
    assert list(got) == ["ladder, 1,000 steps", "ladder, 3,000 steps", "ladder, 10,000 steps"]
    assert got["ladder, 10,000 steps"] == (tmp_path / "model-step10000", 10000)
    assert ladder_models(tmp_path / "missing") == {}
