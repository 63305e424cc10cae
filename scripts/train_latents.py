"""Train the Part II latent models with a fixed seed and ship them to data/models.

    python scripts/train_latents.py text     # word autoencoder + rectified flow on its latents
    python scripts/train_latents.py image    # conv autoencoder on digits + rectified flow
    python scripts/train_latents.py faces    # conv autoencoder on lfw_subset faces + rectified flow
    python scripts/train_latents.py all

Each stage checkpoints to checkpoints/latents/<stage>-{ae,flow}.pt (``--ckpt-dir``) every few hundred steps
and resumes from there when rerun (delete the folder to start over). Progress (loss, steps/s, eta) goes to stdout.
At the end the weights go to data/models/{text,image,faces}-latent/ as safetensors with config.json
(shapes, data, training settings, held-out reconstruction accuracy) and a README. Runs on CUDA
when present, otherwise CPU; use `nice -n 10` on a shared machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from tokendyn.core.atomic import write_json, write_text
from tokendyn.latent.flow import FlowConfig
from tokendyn.latent.image import ImageAEConfig, ImageAutoencoder, digits, faces, faces_model_dir
from tokendyn.latent.image import model_dir as image_dir
from tokendyn.latent.text import (TextAEConfig, TextAutoencoder, WordTokenizer, sequences,
                                  split_documents)
from tokendyn.latent.text import model_dir as text_dir
from tokendyn.latent.tube import readout_margins
from tokendyn.core.paths import repo_root
from tokendyn.training.latents import batch_of, save_modules, train_flow
from tokendyn.training.loop import train
from tokendyn.models.weights_init import init_weights

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
CKPT = (repo_root() or Path.cwd()) / "checkpoints" / "latents"

# Sized for a shared 2-core CPU: about 20 min each at one thread under heavy sharing (measured).
TEXT = dict(seed=0, vocab_size=4096, seq_len=32, heldout_every=20, ae_steps=1500, ae_batch=32,
            ae_lr=1e-2, ae_noise=0.0, latent_dim=16, flow_steps=4000, flow_batch=64, flow_lr=2e-3)
IMAGE = dict(seed=0, heldout_every=10, ae_steps=2000, ae_batch=64, ae_lr=3e-3, flow_steps=3000,
             flow_batch=128, flow_lr=2e-3)
# 90 train faces: random horizontal flips (ae_hflip) double them for the autoencoder and the flow.
# About 0.07 s per autoencoder step and 0.11 s per flow step at one thread under load (measured).
FACES = dict(seed=0, heldout_every=10, channels=4, hidden=32, ae_steps=3000, ae_batch=32, ae_lr=3e-3,
             ae_hflip=True, flow_steps=3000, flow_batch=128, flow_lr=2e-3)


def write_readme(d: Path, title: str, body: str) -> None:
    write_text(d / "README.md", f"# {title}\n\n{body.strip()}\n")


def write_config(d: Path, stage: str, cfg: dict, losses: list[float], t_start: float) -> dict:
    """Write ``d/config.json``: ``cfg`` plus the flow's final loss, the device, the minutes since
    ``t_start`` and the rebuild command of ``stage``; return what was written."""
    cfg = {**cfg, "final_flow_loss": round(losses[-1], 5), "device": DEVICE,
           "train_minutes": round((time.time() - t_start) / 60, 1),
           "command": f"nice -n 10 .venv/bin/python scripts/train_latents.py {stage}"}
    write_json(d / "config.json", cfg, indent=2)
    return cfg


def train_text(quick: bool, ckpt: Path) -> None:
    p = dict(TEXT)
    if quick:
        p.update(ae_steps=60, flow_steps=60)
    t_start = time.time()
    train_docs = split_documents("wiki", "train", seed=p["seed"], heldout_every=p["heldout_every"])
    held_docs = split_documents("wiki", "heldout", seed=p["seed"], heldout_every=p["heldout_every"])
    tok = WordTokenizer.build(train_docs, p["vocab_size"])
    train_ids = sequences(tok, train_docs, p["seq_len"])
    held_ids = sequences(tok, held_docs, p["seq_len"])
    unk = float((train_ids == 0).float().mean())
    print(f"text: {len(train_ids)} train / {len(held_ids)} held-out sequences of {p['seq_len']} tokens, "
          f"vocabulary {len(tok)}, [unk] share {unk:.3f}", flush=True)

    g = torch.Generator().manual_seed(p["seed"])
    ae_cfg = TextAEConfig(vocab_size=len(tok), seq_len=p["seq_len"], latent_dim=p["latent_dim"])
    ae = init_weights(TextAutoencoder(ae_cfg), g).to(DEVICE)
    tag = "-quick" if quick else ""
    train(ae, lambda gen: ae.loss(batch_of(train_ids, p["ae_batch"], gen, DEVICE), p["ae_noise"], gen),
          steps=p["ae_steps"], lr=p["ae_lr"], generator=g, checkpoint=ckpt / f"text-ae{tag}.pt",
          label="text-ae")
    with torch.no_grad():
        acc = {name: float(torch.cat([(ae.decode(ae.encode(c.to(DEVICE))) == c.to(DEVICE)).float().flatten()
                                      for c in ids.split(512)]).mean())
               for name, ids in (("train", train_ids), ("heldout", held_ids))}
        latents = torch.cat([ae.encode(c.to(DEVICE)).cpu() for c in train_ids.split(512)])
    margins = readout_margins(ae.readout.weight, ae.readout.bias, latents[:256])
    print(f"text-ae reconstruction accuracy: train {acc['train']:.4f}, held-out {acc['heldout']:.4f}; "
          f"median readout margin {float(margins.median()):.3f}", flush=True)

    fcfg = FlowConfig(dim=ae_cfg.latent_dim, seq_len=p["seq_len"], width=64, depth=3, heads=4, ff=192)
    flow, losses = train_flow(latents, fcfg, seed=p["seed"], steps=p["flow_steps"], batch=p["flow_batch"],
                              lr=p["flow_lr"], checkpoint=ckpt / f"text-flow{tag}.pt", label="text-flow",
                              device=DEVICE)

    d = text_dir() if not quick else ckpt / "text-latent-quick"
    save_modules(d, autoencoder=ae, flow=flow)
    tok.save(d / "vocab.json")
    cfg = {"autoencoder": asdict(ae_cfg), "flow": asdict(fcfg),
           "data": {"source": "wiki", "seed": p["seed"], "heldout_every": p["heldout_every"],
                    "train_sequences": len(train_ids), "heldout_sequences": len(held_ids),
                    "unk_share": round(unk, 4)},
           "training": p, "reconstruction_accuracy": {k: round(v, 5) for k, v in acc.items()}}
    cfg = write_config(d, "text", cfg, losses, t_start)
    write_readme(d, "text-latent: a word-level text autoencoder with a sharp readout, and its flow", f"""
An ELF analogue for the tube-law chapter (book/05_tube_law.ipynb), trained by this repository.

- Data: Wikipedia lead paragraphs (`tokendyn.core.data.corpus("wiki")`, CC BY-SA), split by document
  hash into train and held-out (1 in {p['heldout_every']}); non-overlapping windows of {p['seq_len']} tokens:
  {len(train_ids)} train and {len(held_ids)} held-out sequences.
- Tokenizer (`vocab.json`): lower-cased words and punctuation marks, the {len(tok) - 1} most frequent
  training pieces plus `[unk]` (which covers {unk:.1%} of training tokens).
- Autoencoder (`autoencoder.safetensors`): embedding, one transformer layer, projection to
  {ae_cfg.latent_dim}-d latents with RMS normalisation; readout = one linear layer over the
  {len(tok)}-word vocabulary, argmax. Trained {p['ae_steps']} steps with cross-entropy
  ({f"under N(0, {p['ae_noise']}^2) latent jitter" if p['ae_noise'] else "on the clean latents, no jitter"}).
- Reconstruction accuracy (argmax of the clean latents = input token): train {acc['train']:.4f},
  held-out {acc['heldout']:.4f}.
- Flow (`flow.safetensors`): rectified-flow velocity transformer (width {fcfg.width}, depth {fcfg.depth})
  on the frozen train latents, {p['flow_steps']} steps, final loss {losses[-1]:.4f}.
- Training command (seed {p['seed']}, {cfg['train_minutes']} min on {DEVICE}):
  `nice -n 10 .venv/bin/python scripts/train_latents.py text`
- Load: `from tokendyn.latent.text import load_text_latent; m = load_text_latent()`.

Design notes (measured while choosing these settings on the shared 2-core CPU): 32-d latents
trained under N(0, 0.2^2) jitter reconstructed held-out text perfectly but put the median clean
latent 3.0 units from the nearest readout boundary, and (with a partly trained flow) no token
flipped at the oracle terminal step for K = 4-16; 8-d latents (jitter 0.05) reached only 83% held-out reconstruction in the same
1,500 steps. 16-d without jitter is the compromise shipped here (median margin about 2.1).
""")
    print(f"text model written to {d}", flush=True)


@torch.no_grad()
def standardise_and_score(ae: ImageAutoencoder, train_x: torch.Tensor, held_x: torch.Tensor) -> dict[str, float]:
    """Set the autoencoder's per-channel latent standardisation from the training images and return
    its reconstruction MSE per pixel on both splits."""
    raw = ae.encode_raw(train_x.to(DEVICE))
    ae.mean.copy_(raw.mean((0, 2, 3)))
    ae.std.copy_(raw.std((0, 2, 3)))
    return {name: float(((ae.decode(ae.encode(x.to(DEVICE))) - x.to(DEVICE)) ** 2).mean())
            for name, x in (("train", train_x), ("heldout", held_x))}


def train_image(quick: bool, ckpt: Path) -> None:
    p = dict(IMAGE)
    if quick:
        p.update(ae_steps=60, flow_steps=60)
    t_start = time.time()
    train_x = digits("train", heldout_every=p["heldout_every"])
    held_x = digits("heldout", heldout_every=p["heldout_every"])
    g = torch.Generator().manual_seed(p["seed"])
    ae_cfg = ImageAEConfig()
    ae = init_weights(ImageAutoencoder(ae_cfg), g).to(DEVICE)
    tag = "-quick" if quick else ""

    def ae_loss(gen: torch.Generator) -> torch.Tensor:
        x = batch_of(train_x, p["ae_batch"], gen, DEVICE)
        return ((ae.decode_raw(ae.encode_raw(x)) - x) ** 2).mean()

    train(ae, ae_loss, steps=p["ae_steps"], lr=p["ae_lr"], generator=g, checkpoint=ckpt / f"image-ae{tag}.pt",
          label="image-ae")
    mse = standardise_and_score(ae, train_x, held_x)
    with torch.no_grad():
        latents = ae.encode(train_x.to(DEVICE)).cpu()
    print(f"image-ae reconstruction MSE: train {mse['train']:.5f}, held-out {mse['heldout']:.5f}", flush=True)

    fcfg = FlowConfig(dim=ae_cfg.channels, seq_len=16, width=64, depth=2, heads=4, ff=128)
    flow, losses = train_flow(latents, fcfg, seed=p["seed"], steps=p["flow_steps"], batch=p["flow_batch"],
                              lr=p["flow_lr"], checkpoint=ckpt / f"image-flow{tag}.pt", label="image-flow",
                              device=DEVICE)

    d = image_dir() if not quick else ckpt / "image-latent-quick"
    save_modules(d, autoencoder=ae, flow=flow)
    cfg = {"autoencoder": asdict(ae_cfg), "flow": asdict(fcfg),
           "data": {"source": "sklearn.datasets.load_digits", "heldout_every": p["heldout_every"],
                    "train_images": len(train_x), "heldout_images": len(held_x)},
           "training": p, "reconstruction_mse": {k: round(v, 6) for k, v in mse.items()}}
    cfg = write_config(d, "image", cfg, losses, t_start)
    write_readme(d, "image-latent: a convolutional autoencoder on 8x8 digits, and its flow", f"""
A VAE analogue for the tube-law chapter (its image page, book/05_tube_law_image.ipynb), trained by this repository.

- Data: scikit-learn's bundled `load_digits` (1,797 8x8 images, scaled to [0, 1]); every
  {p['heldout_every']}th image is held out: {len(train_x)} train, {len(held_x)} held-out.
- Autoencoder (`autoencoder.safetensors`): two 3x3 convolutions down to a 4x4 grid of
  {ae_cfg.channels}-channel latents (standardised per channel on the training split), decoder of
  GELU convolutions and a transposed convolution with a sigmoid: smooth, no decision boundary.
  Trained {p['ae_steps']} steps on pixel MSE.
- Reconstruction MSE per pixel (pixels in [0, 1]): train {mse['train']:.5f}, held-out {mse['heldout']:.5f}.
- Flow (`flow.safetensors`): rectified-flow velocity transformer (width {fcfg.width}, depth {fcfg.depth})
  over the 16 latent vectors, {p['flow_steps']} steps, final loss {losses[-1]:.4f}.
- Training command (seed {p['seed']}, {cfg['train_minutes']} min on {DEVICE}):
  `nice -n 10 .venv/bin/python scripts/train_latents.py image`
- Load: `from tokendyn.latent.image import load_image_latent; m = load_image_latent()`.
""")
    print(f"image model written to {d}", flush=True)


def train_faces(quick: bool, ckpt: Path) -> None:
    p = dict(FACES)
    if quick:
        p.update(ae_steps=60, flow_steps=60)
    t_start = time.time()
    train_x = faces("train", heldout_every=p["heldout_every"])
    held_x = faces("heldout", heldout_every=p["heldout_every"])
    g = torch.Generator().manual_seed(p["seed"])
    ae_cfg = ImageAEConfig(channels=p["channels"], hidden=p["hidden"], size=train_x.shape[-1], downsamples=2)
    ae = init_weights(ImageAutoencoder(ae_cfg), g).to(DEVICE)
    tag = "-quick" if quick else ""

    def ae_loss(gen: torch.Generator) -> torch.Tensor:
        x = batch_of(train_x, p["ae_batch"], gen, DEVICE)
        if p["ae_hflip"]:
            flip = (torch.rand(len(x), generator=gen) < 0.5).to(DEVICE)[:, None, None, None]
            x = torch.where(flip, x.flip(-1), x)
        return ((ae.decode_raw(ae.encode_raw(x)) - x) ** 2).mean()

    train(ae, ae_loss, steps=p["ae_steps"], lr=p["ae_lr"], generator=g, checkpoint=ckpt / f"faces-ae{tag}.pt",
          label="faces-ae")
    mse = standardise_and_score(ae, train_x, held_x)
    with torch.no_grad():
        flow_x = torch.cat([train_x, train_x.flip(-1)]) if p["ae_hflip"] else train_x
        latents = ae.encode(flow_x.to(DEVICE)).cpu()
    # Reference scale: the held-out pixel variance is the MSE of predicting each face's mean pixel.
    held_var = float(held_x.var(dim=(1, 2, 3), unbiased=False).mean())
    print(f"faces-ae reconstruction MSE: train {mse['train']:.5f}, held-out {mse['heldout']:.5f} "
          f"(held-out per-image pixel variance {held_var:.5f})", flush=True)

    fcfg = FlowConfig(dim=ae_cfg.channels, seq_len=ae_cfg.seq_len, width=64, depth=2, heads=4, ff=128)
    flow, losses = train_flow(latents, fcfg, seed=p["seed"], steps=p["flow_steps"], batch=p["flow_batch"],
                              lr=p["flow_lr"], checkpoint=ckpt / f"faces-flow{tag}.pt", label="faces-flow",
                              device=DEVICE)

    d = faces_model_dir() if not quick else ckpt / "faces-latent-quick"
    save_modules(d, autoencoder=ae, flow=flow)
    cfg = {"autoencoder": asdict(ae_cfg), "flow": asdict(fcfg),
           "data": {"source": "skimage.data.lfw_subset (images 0-99, the faces), cropped to 24x24",
                    "heldout_every": p["heldout_every"], "train_images": len(train_x),
                    "heldout_images": len(held_x), "flow_latents": len(latents)},
           "training": p, "reconstruction_mse": {k: round(v, 6) for k, v in mse.items()},
           "heldout_pixel_variance": round(held_var, 6)}
    cfg = write_config(d, "faces", cfg, losses, t_start)
    size_kb = sum(f.stat().st_size for f in d.glob("*.safetensors")) / 1024
    mirror = " and their mirror images" if p["ae_hflip"] else ""
    write_readme(d, "faces-latent: a convolutional autoencoder on 24x24 faces, and its flow", f"""
A second VAE analogue (smooth image decoder) for measuring DABI on image decoders, trained by this
repository with the recipe of `image-latent`.

- Data: the 100 faces of scikit-image's bundled `skimage.data.lfw_subset()` (its images 0-99;
  images 100-199 are non-face background patches and are not used), grayscale in [0, 1], each
  25x25 face cropped to 24x24 by dropping its last row and column. Face `i` is held out when
  `i % {p['heldout_every']} == 0`: {len(train_x)} train, {len(held_x)} held-out.
- License: the images are a subset of Labeled Faces in the Wild (Huang et al., University of
  Massachusetts Amherst, http://vis-www.cs.umass.edu/lfw/), redistributed in scikit-image's package
  data (scikit-image itself is BSD-3-Clause). LFW states no license of its own: its images are
  news photographs of public figures, published for face-recognition research. Use them for research.
- Autoencoder (`autoencoder.safetensors`): a 3x3 convolution and two stride-2 3x3 convolutions
  (width {ae_cfg.hidden}) down to a {ae_cfg.grid}x{ae_cfg.grid} grid of {ae_cfg.channels}-channel latents
  (standardised per channel on the training split), decoder of GELU convolutions and two transposed
  convolutions with a sigmoid: smooth, no decision boundary. Trained {p['ae_steps']} steps (batch
  {p['ae_batch']}) on pixel MSE{", with random horizontal flips" if p['ae_hflip'] else ""}.
- Reconstruction MSE per pixel (pixels in [0, 1]): train {mse['train']:.5f}, held-out {mse['heldout']:.5f}
  (only {len(held_x)} held-out faces: a noisy estimate). For scale, the held-out faces' mean per-image
  pixel variance (the MSE of a flat grey image at each face's mean) is {held_var:.5f}.
- Flow (`flow.safetensors`): rectified-flow velocity transformer (width {fcfg.width}, depth {fcfg.depth})
  over the {ae_cfg.seq_len} latent vectors of the {len(train_x)} training faces{mirror}
  ({len(latents)} latent sequences),
  {p['flow_steps']} steps, final loss {losses[-1]:.4f}. With so few faces the flow can only learn a
  rough density; it is here for roll-ins and DABI, not as a face generator.
- Weights: {size_kb:.0f} KB in all.
- Training command (seed {p['seed']}, {cfg['train_minutes']} min on {DEVICE}):
  `nice -n 10 .venv/bin/python scripts/train_latents.py faces`
- Load: `from tokendyn.latent.image import load_faces_latent; m = load_faces_latent()`;
  `m.heldout(n, seed)` gives held-out faces `[n, 1, 24, 24]`, `m.autoencoder.encode` latents
  `[n, {ae_cfg.seq_len}, {ae_cfg.channels}]`.
""")
    print(f"faces model written to {d}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", choices=["text", "image", "faces", "all"])
    ap.add_argument("--quick", action="store_true",
                    help="60 steps per stage, written under checkpoints/ (a smoke test, not shipped)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads for torch")
    ap.add_argument("--ckpt-dir", type=Path, default=CKPT, help="checkpoint folder (and --quick output)")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    if a.model in ("text", "all"):
        train_text(a.quick, a.ckpt_dir)
    if a.model in ("image", "all"):
        train_image(a.quick, a.ckpt_dir)
    if a.model in ("faces", "all"):
        train_faces(a.quick, a.ckpt_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
