"""The contextual text latent model: windows, readout, the shipped folder and its scores."""

import json

import pytest
import torch

from tokendyn.latent import contextual
from tokendyn.latent.contextual import LinearReadout, load_context_latent, model_dir, windows


class _Tok:
    """A whitespace tokenizer with the call signature windows() uses."""

    def __call__(self, docs, add_special_tokens=False):
        return {"input_ids": [[len(w) for w in d.split()] for d in docs]}


def test_windows_are_non_overlapping_and_drop_the_tail():
    w = windows(_Tok(), ["a bb ccc dddd eeeee", "x yy"], seq_len=2)
    assert w.tolist() == [[1, 2], [3, 4], [1, 2]]
    with pytest.raises(ValueError, match="no document holds 9"):
        windows(_Tok(), ["a b"], seq_len=9)
    with pytest.raises(ValueError, match="seq_len"):
        windows(_Tok(), ["a b"], seq_len=0)


def test_chunked_decode_is_the_argmax():
    torch.manual_seed(0)
    head = LinearReadout(5, 40)
    z = torch.randn(3, 7, 5)
    assert torch.equal(head.decode(z, chunk=4), head.logits(z).argmax(-1))


def test_missing_folder_names_the_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="train_context_latent.py"):
        load_context_latent(tmp_path)


@pytest.mark.slow
def test_shipped_model_reads_back_held_out_text():
    cfg = json.loads((model_dir() / "config.json").read_text())
    assert cfg["command"].startswith("nice -n 10 .venv/bin/python scripts/train_context_latent.py")
    m = load_context_latent()
    ids = m.heldout(8, seed=0)
    assert ids.shape == (8, 32)
    z = m.autoencoder.encode(ids)
    assert z.shape == (8, 32, cfg["dim"]) and cfg["dim"] == 381
    # standardised: about unit RMS per coordinate
    assert 0.7 < float(z.pow(2).mean().sqrt()) < 1.3
    acc = float((m.autoencoder.decode(z) == ids).float().mean())
    assert acc >= cfg["reconstruction_accuracy"]["heldout"] - 0.1
    assert m.flow(z, torch.full((8,), 0.5)).shape == z.shape
    with pytest.raises(ValueError, match="n=0"):
        m.heldout(0)
    pool = contextual.window_pool("heldout", 32, cfg["data"]["seed"], cfg["data"]["heldout_every"])
    assert len(pool) == cfg["data"]["heldout_windows"]
