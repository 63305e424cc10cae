"""The faces latent model: the lfw_subset loader, the generalised image autoencoder and the shipped weights."""

import pytest
import torch

from tokendyn.latent.image import (FACE_SIZE, FacesLatent, ImageAEConfig, ImageAutoencoder, ImageLatent,
                                   faces, faces_model_dir, load_faces_latent, load_image_latent)
from tokendyn.latent.samplers import posterior_mean
from tokendyn.models.weights_init import init_weights

# Held-out reconstruction MSE per pixel of the shipped model measured 0.00351 (train 0.00261) on its
# 10 held-out faces; the bound leaves margin for float differences, not for a worse model.
HELDOUT_MSE_BOUND = 0.006


def test_faces_loader_shapes_range_and_split():
    from skimage.data import lfw_subset

    train, held = faces("train"), faces("heldout")
    assert train.shape == (90, 1, FACE_SIZE, FACE_SIZE) and held.shape == (10, 1, 24, 24)
    assert train.dtype == torch.float32 and held.dtype == torch.float32
    for x in (train, held):
        assert 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    # Deterministic: face i (of the first 100, the faces) is held out when i % 10 == 0, cropped to 24x24.
    raw = torch.tensor(lfw_subset()[:100, :24, :24], dtype=torch.float32)
    assert torch.equal(held[:, 0], raw[::10])
    assert torch.equal(train[0, 0], raw[1]) and torch.equal(faces("train"), train)
    # Disjoint: no held-out face equals a training face.
    assert not (held.flatten(1)[:, None] == train.flatten(1)[None]).all(-1).any()
    assert len(faces("train", heldout_every=4)) == 75 and len(faces("heldout", heldout_every=4)) == 25


def test_faces_loader_rejects_bad_arguments():
    with pytest.raises(ValueError, match="split"):
        faces("test")
    with pytest.raises(ValueError, match="heldout_every"):
        faces("train", heldout_every=1)
    with pytest.raises(ValueError, match="heldout_every"):
        faces("heldout", heldout_every=101)


@torch.no_grad()
def test_generalised_autoencoder_shapes_and_checks():
    cfg = ImageAEConfig(channels=4, hidden=8, size=24, downsamples=2)
    assert (cfg.grid, cfg.seq_len) == (6, 36)
    ae = init_weights(ImageAutoencoder(cfg), torch.Generator().manual_seed(0))
    x = faces("heldout")[:3]
    assert ae.encode_raw(x).shape == (3, 4, 6, 6)
    z = ae.encode(x)
    assert z.shape == (3, 36, 4)
    y = ae.decode(z)
    assert y.shape == (3, 1, 24, 24) and float(y.min()) > 0.0 and float(y.max()) < 1.0
    assert ae.decode_raw(ae.encode_raw(x)).shape == (3, 1, 24, 24)
    with pytest.raises(ValueError, match="size"):
        ImageAEConfig(size=25, downsamples=2)
    with pytest.raises(ValueError, match="downsamples"):
        ImageAEConfig(downsamples=0)
    with pytest.raises(ValueError, match="channels"):
        ImageAEConfig(channels=0)
    with pytest.raises(ValueError, match="x must"):
        ae.encode(torch.zeros(2, 1, 8, 8))
    with pytest.raises(ValueError, match="z must"):
        ae.decode(torch.zeros(2, 16, 4))
    with pytest.raises(ValueError, match="g must"):
        ae.decode_raw(torch.zeros(2, 4, 4, 4))


def test_digits_config_keeps_the_shipped_layout():
    # The defaults are the digits model: the same tensors, by name and shape, as its shipped weights.
    from safetensors import safe_open

    from tokendyn.latent.image import model_dir

    sd = ImageAutoencoder(ImageAEConfig()).state_dict()
    with safe_open(model_dir() / "autoencoder.safetensors", "pt") as f:
        shipped = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    assert {k: tuple(v.shape) for k, v in sd.items()} == shipped


@pytest.mark.slow
@torch.no_grad()
def test_shipped_faces_model_reconstructs_held_out_faces():
    m = load_faces_latent()
    assert isinstance(m, FacesLatent) and isinstance(m, ImageLatent) and m.name == "faces-latent"
    assert m.config["autoencoder"] == {"channels": 4, "hidden": 32, "size": 24, "downsamples": 2}
    x = m.heldout(10, seed=0)
    assert x.shape == (10, 1, 24, 24)
    assert torch.equal(x.sort(0).values, faces("heldout").sort(0).values)  # all 10, in some order
    ae = m.autoencoder
    z = ae.encode(x)
    assert z.shape == (10, 36, 4)
    y = ae.decode(z)
    assert y.shape == (10, 1, 24, 24) and float(y.min()) > 0.0 and float(y.max()) < 1.0
    mse = float((y - x).pow(2).mean())
    assert mse < HELDOUT_MSE_BOUND
    assert mse == pytest.approx(m.config["reconstruction_mse"]["heldout"], rel=1e-3)
    # Standardised latents: per-channel mean 0 and std 1 on the training split.
    zt = ae.encode(faces("train"))
    assert torch.allclose(zt.mean((0, 1)), torch.zeros(4), atol=1e-3)
    assert torch.allclose(zt.std((0, 1)), torch.ones(4), atol=1e-2)
    # The flow: velocities and a posterior-mean step have the latents' shape.
    assert m.flow(z, torch.full((10,), 0.5)).shape == (10, 36, 4)
    assert posterior_mean(m.flow, torch.randn(10, 36, 4, generator=torch.Generator().manual_seed(0)),
                          0.5).shape == (10, 36, 4)
    with pytest.raises(ValueError, match="n="):
        m.heldout(11)
    with pytest.raises(ValueError, match="n="):
        m.heldout(0)


@pytest.mark.slow
def test_shipped_faces_weights_are_small_and_digits_still_load(tmp_path):
    assert sum(f.stat().st_size for f in faces_model_dir().glob("*.safetensors")) < 1_000_000
    assert load_image_latent().name == "image-latent"
    with pytest.raises(FileNotFoundError, match="train_latents.py faces"):
        load_faces_latent(tmp_path)
