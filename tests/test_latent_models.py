"""The text and image latent models: tokenizer, autoencoder shapes, and the shipped weights."""

import pytest
import torch

from tokendyn.latent import tube
from tokendyn.latent.image import ImageAEConfig, ImageAutoencoder, digits, load_image_latent
from tokendyn.latent.text import (TextAEConfig, TextAutoencoder, WordTokenizer, load_text_latent,
                                  sequences)
from tokendyn.models.weights_init import init_weights


def test_word_tokenizer_build_encode_decode():
    tok = WordTokenizer.build(["The cat, the dog.", "A cat!"], vocab_size=4)
    # counts: the 2, cat 2, then ',', '.', '!', a, dog with 1: ties alphabetical ('!' first).
    assert tok.words == ["[unk]", "cat", "the", "!"]
    assert tok.encode("The bird, the CAT!") == [2, 0, 0, 2, 1, 3]
    assert tok.decode([2, 1, 3]) == "the cat !"
    with pytest.raises(ValueError, match="vocab_size"):
        WordTokenizer.build(["x"], vocab_size=1)
    with pytest.raises(ValueError, match="unk"):
        WordTokenizer(["a", "b"])


def test_sequences_are_non_overlapping_windows():
    tok = WordTokenizer(["[unk]"] + list("abcdefg"))
    seqs = sequences(tok, ["a b c d e f g", "a b"], seq_len=3)
    assert seqs.tolist() == [[1, 2, 3], [4, 5, 6]]
    with pytest.raises(ValueError, match="holds"):
        sequences(tok, ["a"], seq_len=3)


def test_text_autoencoder_shapes_and_unit_rms():
    ae = init_weights(TextAutoencoder(TextAEConfig(vocab_size=50, seq_len=6)), torch.Generator().manual_seed(0))
    ids = torch.randint(50, (3, 6), generator=torch.Generator().manual_seed(1))
    z = ae.encode(ids)
    assert z.shape == (3, 6, 32)
    assert torch.allclose(z.pow(2).mean(-1), torch.ones(3, 6), atol=1e-4)
    assert ae.logits(z).shape == (3, 6, 50) and ae.decode(z).shape == (3, 6)


@pytest.mark.slow  # the first scikit-learn import alone takes seconds
def test_image_autoencoder_round_trip_shapes():
    ae = init_weights(ImageAutoencoder(ImageAEConfig()), torch.Generator().manual_seed(0))
    x = digits("heldout")[:5]
    assert x.shape == (5, 1, 8, 8) and 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    z = ae.encode(x)
    assert z.shape == (5, 16, 2)
    assert ae.decode(z).shape == (5, 1, 8, 8)
    assert len(digits("train")) + len(digits("heldout")) == 1797


@pytest.mark.slow
@torch.no_grad()
def test_shipped_text_model_reconstructs_held_out_text():
    m = load_text_latent()
    ids = m.heldout(32, seed=0)
    assert ids.shape == (32, 32)
    z = m.autoencoder.encode(ids)
    acc = float((m.autoencoder.decode(z) == ids).float().mean())
    assert acc >= m.config["reconstruction_accuracy"]["heldout"] - 0.02
    assert acc > 0.97
    # A sharp readout: every clean latent sits at a positive distance from the boundaries.
    margins = tube.readout_margins(m.autoencoder.readout.weight, m.autoencoder.readout.bias, z)
    assert float(margins.min()) >= 0.0 and float(margins.median()) > 0.05


@pytest.mark.slow
@torch.no_grad()
def test_shipped_image_model_reconstructs_held_out_digits():
    m = load_image_latent()
    x = m.heldout(64, seed=0)
    mse = float((m.autoencoder.decode(m.autoencoder.encode(x)) - x).pow(2).mean())
    assert mse < 0.01
    z = m.autoencoder.encode(digits("train"))
    # Standardised latents: per-channel mean 0 and std 1 on the training split.
    assert torch.allclose(z.mean((0, 1)), torch.zeros(2), atol=1e-3)
    assert torch.allclose(z.std((0, 1)), torch.ones(2), atol=1e-2)


@pytest.mark.slow
@torch.no_grad()
def test_golden_rollin_values_of_the_shipped_models():
    """Seeded roll-ins on the shipped weights (float32, CPU): regression values for the chapter."""
    m = load_text_latent()
    ids = m.heldout(32, seed=0)
    assert ids[0, :8].tolist() == [6, 0, 8, 6, 122, 1235, 19, 37]
    ae = m.autoencoder
    x1 = ae.encode(ids)
    ref = ae.decode(x1)
    rows = tube.rollin_curve(m.flow, x1, lambda z: (ae.decode(z) != ref).sum().item(), [0.5], [4], seed=0)
    assert abs(rows[0]["value"] - 361) <= 3  # of 1,024 tokens; a few may tie differently elsewhere

    im = load_image_latent()
    z = im.autoencoder.encode(im.heldout(32, seed=0))
    clean = im.autoencoder.decode(z)
    rmse = lambda q: float((im.autoencoder.decode(q) - clean).pow(2).mean().sqrt())  # noqa: E731
    rows = tube.rollin_curve(im.flow, z, rmse, [0.5], [4], seed=0)
    assert rows[0]["value"] == pytest.approx(0.20477, rel=1e-3)
