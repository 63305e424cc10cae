"""Readouts retrained on frozen latents: the decoder interventions of Paper 2 (chapter 7's groundwork).

The paper retrains a sharp text readout three ways and finds none recovers flipped tokens:

- ``"smooth"``: cross-entropy with label smoothing ``epsilon`` (logit smoothing);
- ``"hinge"``: the multiclass max-margin (Crammer-Singer) loss ``max(0, margin - (l_y - max_{k != y} l_k))``;
- an MLP readout (:class:`ResidualMLPReadout`): ``z -> z + B gelu(A z)`` then the linear readout,
  so it starts as the linear one (``B = 0``) and can bend its boundaries.

``"ce"`` (plain cross-entropy) is the reference. :func:`retrain` warm-starts from a given linear
readout and takes ``steps`` AdamW steps on batches of frozen ``(latent, id)`` pairs, seeded.
:func:`tokendyn.latent.decoders.argmax_decoder` turns any head into the decode function the
tube-law measures take; :func:`tokendyn.latent.decoders.logit_gaps` reads how sharp a head is.
:func:`measure_readouts` measures a set of heads the way chapter 7 compares them (terminal flips,
DABI, margins, the judge's perplexity of one generator's samples decoded by each, the tube law's
prediction).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import nn

from ..core.checks import check_choice, check_range
from ..evaluation.generation import score_seeds
from ..latent import tube
from ..latent.decoders import argmax_decoder, classifier_head, linear_readout, logit_gaps
from ..latent.flow import VelocityNet
from .loop import train

OBJECTIVES = ("ce", "smooth", "hinge")


def objective(name: str, *, epsilon: float = 0.1, margin: float = 1.0
              ) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The loss ``(logits [N, V], ids [N]) -> scalar`` of one readout objective (see the module)."""
    check_choice("objective", name, OBJECTIVES)
    check_range("epsilon", epsilon, 0.0, 1.0)
    check_range("margin", margin, 0.0, None, lo_open=True)
    if name == "ce":
        return nn.functional.cross_entropy
    if name == "smooth":
        def smooth(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
            return nn.functional.cross_entropy(logits, ids, label_smoothing=epsilon)
        return smooth

    def hinge(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        own = logits.gather(1, ids[:, None])[:, 0]
        other = logits.scatter(1, ids[:, None], float("-inf")).max(1).values
        return (margin - (own - other)).clamp_min(0).mean()
    return hinge


class ResidualMLPReadout(nn.Module):
    """``logits = W (z + B gelu(A z)) + b``: a 2-layer MLP in front of a linear readout ``[..., d] -> [..., V]``.

    ``A`` is ``[hidden, d]``, ``B`` ``[d, hidden]`` and starts at zero, so the module starts as the
    given linear readout exactly."""

    def __init__(self, linear: nn.Linear, hidden: int, generator: torch.Generator):
        super().__init__()
        check_range("hidden", hidden, 1, None, integer=True)
        d = linear.in_features
        self.readout = nn.Linear(d, linear.out_features)
        self.readout.load_state_dict(linear.state_dict())
        self.a = nn.Linear(d, hidden)
        self.b = nn.Linear(hidden, d)
        with torch.no_grad():
            self.a.weight.copy_(torch.randn(hidden, d, generator=generator) / d ** 0.5)
            self.a.bias.zero_()
            self.b.weight.zero_()
            self.b.bias.zero_()

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.readout(z + self.b(nn.functional.gelu(self.a(z))))


def retrain(head: nn.Module, z: torch.Tensor, ids: torch.Tensor, loss_name: str, *, steps: int, batch: int = 512,
            lr: float = 1e-3, seed: int = 0, epsilon: float = 0.1, margin: float = 1.0) -> list[float]:
    """Train ``head`` (``[N, d] -> [N, V]``, e.g. a copy of a linear readout or a
    :class:`ResidualMLPReadout`) in place on latents ``z`` ``[N, d]`` and ids ``[N]`` with objective
    ``loss_name``; returns the logged losses. Seeded batches; no checkpoint (minutes at most)."""
    if z.dim() != 2 or ids.shape != z.shape[:1]:
        raise ValueError(f"z must be [N, d] and ids [N], got {tuple(z.shape)} and {tuple(ids.shape)}")
    check_range("steps", steps, 1, None, integer=True)
    check_range("batch", batch, 1, None, integer=True)
    loss = objective(loss_name, epsilon=epsilon, margin=margin)
    g = torch.Generator().manual_seed(seed)

    def step_loss(gen: torch.Generator) -> torch.Tensor:
        rows = torch.randint(len(z), (batch,), generator=gen)
        return loss(head(z[rows]), ids[rows])

    return train(head, step_loss, steps=steps, lr=lr, generator=g, log_every=max(steps // 4, 1),
                 label=f"readout-{loss_name}", log=lambda msg: None)


@dataclass(frozen=True)
class ReadoutMeasures:
    """What :func:`measure_readouts` returns. ``table``: one row per head, indexed by ``readout``
    (``accuracy``, ``changed``, ``flip`` with ``lo``/``hi``, ``flipped``, ``tokens``, ``isotropic``,
    ``logit_gap``, ``dabi`` with ``dabi_lo``/``dabi_hi``, ``median_margin``, ``ode_ppl`` with
    ``ode_ppl_lo``/``ode_ppl_hi``, ``predicted``; NaN where a nonlinear head has no margin);
    ``margins``: each linear head's clean margins ``[B, L]``; ``kappa``: the tube constant fitted on
    the first head; ``s``: the effective noise scale of the terminal step behind the flips."""

    table: pd.DataFrame
    margins: dict[str, torch.Tensor]
    kappa: float
    s: float


def measure_readouts(heads: Mapping[str, nn.Module], flow: VelocityNet, ids: torch.Tensor, x1: torch.Tensor,
                     judged: torch.Tensor, *, steps: int, n_dabi: int, judge: Any,
                     decode_text: Callable[[torch.Tensor], str], seed: int = 0) -> ReadoutMeasures:
    """Measure each head of ``heads`` (name -> ``[N, d] -> [N, V]``; the first is the reference,
    and must be linear) on clean latents ``x1`` ``[B, L, d]`` of the windows ``ids`` ``[B, L]``: its
    clean accuracy, the share of its clean decodes that differ from the first head's, the terminal
    flips of the ``steps``-step oracle roll-in through ``flow`` against its own clean decode
    (:func:`tokendyn.latent.tube.terminal_flips`), its median top-2 logit gap, DABI at one latent
    RMS along its sharpest direction on the first ``n_dabi`` token latents, its clean margins when
    it is linear, and the perplexity ``judge`` (a loaded causal LM: ``.model``, ``.tokenizer``)
    gives the generator's latents ``judged`` ``[S, n, L, d]`` (``S >= 2`` seeds) decoded by it into
    ids and then by ``decode_text`` into text. The tube law's ``kappa`` is fitted once, on the first
    head, and predicts every linear head's flips from its own margins. Seeded by ``seed``."""
    if x1.dim() != 3 or ids.shape != x1.shape[:2]:
        raise ValueError(f"x1 must be [B, L, d] and ids [B, L], got {tuple(x1.shape)} and {tuple(ids.shape)}")
    if judged.dim() != 4 or judged.shape[-1] != x1.shape[-1]:
        raise ValueError(f"judged must be [S, n, L, d] with d = {x1.shape[-1]}, got {tuple(judged.shape)}")
    first = next(iter(heads), None)
    if not isinstance(heads.get(first), nn.Linear):
        raise ValueError(f"heads: the first head is the reference the tube constant is fitted on and must be a "
                         f"torch.nn.Linear, got {type(heads.get(first)).__name__}")
    check_range("n_dabi", n_dabi, 1, None, integer=True)
    rows, margins, reference = [], {}, None
    for name, head in heads.items():
        decode = argmax_decoder(head)
        clean = decode(x1)                                   # [B, L]: what this head reads from clean latents
        reference = clean if reference is None else reference
        tf = tube.terminal_flips(decode, flow, x1, clean, [steps], seed=seed)[0]
        z = x1.flatten(0, 1)[:n_dabi]
        linear = isinstance(head, nn.Linear)
        dut = linear_readout(name, head.weight, head.bias, z) if linear else classifier_head(name, head, z)
        with torch.enable_grad():                            # the sharpest direction of a nonlinear head is a gradient
            d = dut.dabi([dut.rms], seed=seed, n_iso=4)[0].ratio
        if linear:
            margins[name] = tube.readout_margins(head.weight, head.bias, x1)
        judged_ids = decode(judged)                          # [S, n, L]
        sc = score_seeds(judge.model, judge.tokenizer, [[decode_text(r) for r in b] for b in judged_ids],
                         [b.tolist() for b in judged_ids], seed=seed)
        rows.append({"readout": name, "accuracy": float((clean == ids).double().mean()),
                     "changed": float((clean != reference).double().mean()),
                     "flip": tf.structured.value, "lo": tf.structured.lo, "hi": tf.structured.hi,
                     "flipped": tf.k_structured, "tokens": tf.n_tokens, "isotropic": tf.isotropic.value,
                     "logit_gap": float(logit_gaps(head, x1.flatten(0, 1)).median()),
                     "dabi": d.value, "dabi_lo": d.lo, "dabi_hi": d.hi,
                     "median_margin": float(margins[name].median()) if linear else float("nan"),
                     "ode_ppl": sc.ppl.value, "ode_ppl_lo": sc.ppl.lo, "ode_ppl_hi": sc.ppl.hi})
        s = tf.s
    table = pd.DataFrame(rows).set_index("readout")
    kappa = tube.fit_tube_constant(margins[first], [s], [table.loc[first, "flip"]])
    table["predicted"] = [float(tube.predict_flips(margins[n], [s], kappa)[0]) if n in margins else float("nan")
                          for n in table.index]
    return ReadoutMeasures(table, margins, kappa, s)
