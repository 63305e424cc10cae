"""Part II: small continuous-latent generators with a sharp or a smooth readout.

Paper 2 ("Why do few-step text latents fail when image latents work?") argues that a
deterministic few-step generator ends at the posterior mean, and that a sharp categorical readout
flips the token whenever that mean lands near a decision boundary (the tube law). No ELF, LangFlow or
image-VAE weights reach this offline environment, so we train small analogues with the same geometry:

- :mod:`.contextual`: the ELF analogue: frozen all-MiniLM-L6-v2 token states (381-d, standardised),
  a linear argmax readout over the 30,522-piece WordPiece vocabulary, and a flow over 32-token windows;
- :mod:`.text`: a word-level text autoencoder with 16-d latents and a 4,096-word linear readout: the
  *separated* contrast (its latents sit far from the boundaries);
- :mod:`.image`: convolutional autoencoders with a smooth decoder (the VAE analogue) on scikit-learn
  digits and on scikit-image's ``lfw_subset`` faces;
- :mod:`.flow`: a rectified-flow velocity network over a sequence of latent vectors, shared by both;
- :mod:`.samplers`: the deterministic ODE (Euler, Heun, any K) and the SDE with fresh noise at every
  step, on the same network;
- :mod:`.tube`: margins to the readout's decision boundaries, the tube mass F(r), flip rates, the
  oracle roll-in, structured against norm-matched isotropic residuals, and DABI;
- :mod:`.dabi`: boundary-aligned directions (the exact nearest boundary of a linear readout, the
  gradient of any decoder's loss), DABI over perturbation norms with paired-bootstrap intervals,
  and structured against isotropic flip rates;
- :mod:`.decoders`: image decoders, text readouts, LM heads and the identity anchor as one kind of
  object for DABI (latents, loss, structured direction);
- :mod:`.exact`: the exact posterior-mean generator of a Gaussian token mixture, and
  :mod:`.mechanism`: the map of its structured/isotropic flip ratio over latent geometries;
- :mod:`.commitment`: the categorical commitment index (CCI) of a sampler's own trajectory;
- :mod:`.bigram`: a smoothed bigram perplexity and repetition rate for generated tokens.

They are trained with :mod:`tokendyn.training` (seeded initialisation, the resumable loop).

The shipped weights (``data/models/{text,image,faces}-latent``, made by ``scripts/train_latents.py``;
``data/models/context-latent``, made by ``scripts/train_context_latent.py``) load with
:func:`.text.load_text_latent`, :func:`.image.load_image_latent`, :func:`.image.load_faces_latent`
and :func:`.contextual.load_context_latent`.

Time convention everywhere: ``t = 0`` is pure noise, ``t = 1`` is data,
``x_t = t * x1 + (1 - t) * eps``.
"""

from .commitment import Commitment, commitment_index, continuous_commitment_index, flow_trajectory
from .dabi import (DabiPoint, FlipRates, flip_rates, gradient_direction, isotropic_directions, margin_loss,
                   nearest_boundary, squared_error)
from .flow import VelocityNet, noise_to, noise_scale
from .samplers import ode_sample, posterior_mean, sde_sample

# dabi.dabi is not re-exported: a package attribute ``dabi`` would hide the submodule of that name.
__all__ = ["Commitment", "DabiPoint", "FlipRates", "VelocityNet", "commitment_index", "continuous_commitment_index",
           "flip_rates", "flow_trajectory", "gradient_direction", "isotropic_directions", "margin_loss",
           "nearest_boundary", "noise_to", "noise_scale", "ode_sample", "posterior_mean", "sde_sample",
           "squared_error"]
