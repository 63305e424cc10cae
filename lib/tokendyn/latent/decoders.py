"""Decoders under test for DABI: clean latents, a per-latent loss and a structured direction, in one object.

Chapter 6 compares image decoders, text readouts and an identity anchor with one protocol
(:func:`tokendyn.latent.dabi.dabi`). Each :class:`DecoderUnderTest` holds latents ``z`` ``[N, d]``
(one row per token for text, one per image for images), the decoder's loss of a latent against the
clean target ``[N, d]`` -> ``[N]``, and the unit structured direction of every latent ``[N, d]``:

- :func:`linear_readout`: a linear argmax readout; the structured direction is the exact normal
  of the nearest decision boundary of the clean decode (:func:`.dabi.nearest_boundary`), or a
  given residual (e.g. a flow's posterior-mean residual), unit-normalised;
- :func:`classifier_head`: any differentiable head (an MLM's own head on its hidden states); the
  direction is the unit gradient of the target's margin (:func:`.dabi.margin_loss`);
- :func:`image_decoder`: a smooth decoder of a latent sequence ``[N, P, c]``, squared error against
  the clean decode; the direction is a given residual, unit-normalised per image;
- :func:`identity_anchor`: the identity with squared error, whose loss increase is ``s^2`` along
  every unit direction: DABI is 1 exactly, up to round-off.

:func:`mlm_states` and :func:`ar_states` read a masked or causal LM's own hidden states and head,
so a real model's readout is tested by the same protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..checks import check_range
from .dabi import (DabiPoint, FlipRates, cross_entropy, dabi, flip_rates, gradient_direction, margin_loss,
                   nearest_boundary, squared_error)

KINDS = ("image", "text", "anchor")


def _unit_rows(v: torch.Tensor) -> torch.Tensor:
    n = v.norm(dim=1, keepdim=True)
    if bool((n == 0).any()):
        raise ValueError("a structured direction is zero for some latent: it has no direction")
    return v / n


@dataclass
class DecoderUnderTest:
    """One decoder, its clean latents ``z`` ``[N, d]``, loss ``[N, d] -> [N]`` and unit directions
    ``structured`` ``[N, d]``. ``logits`` (classifiers only) maps ``[N, d]`` -> ``[N, V]``."""

    name: str
    kind: str
    z: torch.Tensor
    loss: Callable[[torch.Tensor], torch.Tensor]
    structured: torch.Tensor
    direction: str
    logits: Callable[[torch.Tensor], torch.Tensor] | None = None

    @property
    def rms(self) -> float:
        """RMS per coordinate of the clean latents: the scale against which a norm is small."""
        return float(self.z.double().pow(2).mean().sqrt())

    def dabi(self, norms: Sequence[float], *, seed: int = 0, n_iso: int = 8, n_boot: int = 2000) -> list[DabiPoint]:
        """:func:`.dabi.dabi` at each norm, isotropic directions seeded by ``seed``."""
        return dabi(self.loss, self.z, self.structured, norms, n_iso=n_iso,
                    generator=torch.Generator().manual_seed(seed), n_boot=n_boot, seed=seed)

    def flips(self, norm: float, *, seed: int = 0) -> FlipRates:
        """Argmax flips at ``norm``, structured against one isotropic direction per latent."""
        if self.logits is None:
            raise ValueError(f"{self.name} is not a classifier: it has no argmax to flip")
        return flip_rates(self.logits, self.z, self.structured, norm, generator=torch.Generator().manual_seed(seed))


def linear_readout(name: str, weight: torch.Tensor, bias: torch.Tensor, z: torch.Tensor,
                   residual: torch.Tensor | None = None, *, dtype: torch.dtype = torch.float64) -> DecoderUnderTest:
    """A linear readout ``logits = z W^T + b`` (``weight`` ``[V, d]``) on latents ``z`` ``[N, d]``.

    The target is the clean decode. Without ``residual`` the structured direction is the nearest
    boundary's normal; with ``residual`` ``[N, d]`` it is that residual's direction. Computed in
    ``dtype`` (float64 by default: a confident readout's small loss increases round to 0 in float32).
    """
    w, b, zz = weight.to(dtype), bias.to(dtype), z.to(dtype)
    _, _, normal = nearest_boundary(w, b, zz)
    target = (zz @ w.T + b).argmax(1)

    def logits(x: torch.Tensor) -> torch.Tensor:
        return x @ w.T + b

    def loss(x: torch.Tensor) -> torch.Tensor:
        return cross_entropy(logits(x), target)

    if residual is None:
        return DecoderUnderTest(name, "text", zz, loss, normal, "nearest boundary normal", logits)
    return DecoderUnderTest(name, "text", zz, loss, _unit_rows(residual.to(dtype)), "generator residual", logits)


def classifier_head(name: str, head: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor) -> DecoderUnderTest:
    """A differentiable classifier ``head`` (``[N, d]`` -> logits ``[N, V]``) on hidden states ``z``.

    Target: the clean argmax; structured direction: the unit gradient of the margin loss (towards
    the nearest boundary to first order)."""
    with torch.no_grad():
        target = head(z).argmax(1)
    direction = gradient_direction(head, margin_loss, z, target)

    def loss(x: torch.Tensor) -> torch.Tensor:
        return cross_entropy(head(x), target)

    return DecoderUnderTest(name, "text", z, loss, direction, "margin gradient", head)


def image_decoder(name: str, decode: Callable[[torch.Tensor], torch.Tensor], z: torch.Tensor,
                  residual: torch.Tensor) -> DecoderUnderTest:
    """A smooth image decoder of latent sequences ``z`` ``[N, P, c]`` -> images; squared error against
    the clean decode; structured direction: ``residual`` ``[N, P, c]`` per image, unit-normalised."""
    if z.dim() != 3 or residual.shape != z.shape:
        raise ValueError(f"z and residual must be [N, P, c] of one shape, got {tuple(z.shape)}, {tuple(residual.shape)}")
    shape = z.shape[1:]
    with torch.no_grad():
        clean = decode(z)

    def loss(x: torch.Tensor) -> torch.Tensor:
        return squared_error(decode(x.reshape(-1, *shape).float()).double(), clean.double())

    return DecoderUnderTest(name, "image", z.flatten(1).double(), loss, _unit_rows(residual.flatten(1).double()),
                            "generator residual")


def identity_anchor(z: torch.Tensor, structured: torch.Tensor) -> DecoderUnderTest:
    """The identity decoder with squared error on ``z`` ``[N, d]``: DABI 1 for any unit ``structured``."""
    zz = z.double()

    def loss(x: torch.Tensor) -> torch.Tensor:
        return squared_error(x, zz)

    return DecoderUnderTest("identity (squared error)", "anchor", zz, loss, _unit_rows(structured.double()),
                            "any direction")


@torch.no_grad()
def mlm_states(loaded: Any, texts: Sequence[str], n_tokens: int, *, max_len: int = 64
               ) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    """A BERT-style masked LM's last hidden states at the content tokens of ``texts`` (wrapped
    ``[CLS] ... [SEP]``, truncated to ``max_len``), the first ``n_tokens`` of them ``[n_tokens, H]``,
    and its own MLM head (``[N, H]`` -> logits ``[N, V]``)."""
    check_range("n_tokens", n_tokens, 2, None, integer=True)
    model, tok = loaded.model, loaded.tokenizer
    enc = tok(list(texts), truncation=True, max_length=max_len, padding=True, return_tensors="pt",
              return_special_tokens_mask=True)
    special = enc.pop("special_tokens_mask").bool()
    h = model.base_model(**enc).last_hidden_state  # [B, T, H]
    z = h[(enc["attention_mask"].bool() & ~special)]
    if len(z) < n_tokens:
        raise ValueError(f"n_tokens={n_tokens} is out of range: these texts hold {len(z)} content tokens")
    return z[:n_tokens].float(), model.cls


@torch.no_grad()
def ar_states(loaded: Any, texts: Sequence[str], n_tokens: int, *, max_len: int = 64
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """A causal LM's final (normed) hidden states at the tokens of ``texts``, the first ``n_tokens``
    ``[n_tokens, H]``, and its linear output head's weight ``[V, H]`` (next-token logits = z W^T)."""
    check_range("n_tokens", n_tokens, 2, None, integer=True)
    model, tok = loaded.model, loaded.tokenizer
    rows = []
    for t in texts:
        ids = tok(t, return_tensors="pt", truncation=True, max_length=max_len)["input_ids"]
        rows.append(model.model(input_ids=ids).last_hidden_state[0])
        if sum(len(r) for r in rows) >= n_tokens:
            break
    z = torch.cat(rows)
    if len(z) < n_tokens:
        raise ValueError(f"n_tokens={n_tokens} is out of range: these texts hold {len(z)} tokens")
    head = model.get_output_embeddings()
    if getattr(head, "bias", None) is not None:
        raise ValueError("the causal LM's output head has a bias: use linear_readout with it")
    return z[:n_tokens].float(), head.weight.detach().float()
