"""How far a cheaper arithmetic (bf16) moves what the book measures, against the fp32 reference.

Three levels, from the conditional up to the chapters' statistics:

- :func:`conditional_kl`: KL(p_ref,tau || p_test,tau) between the two site conditionals, and
  whether their argmax agrees, at every given site (:func:`logits_kl` from logits already at hand);
- :func:`paired_coupling`: coupling times of the same pairs from the same seed under both models,
  and the largest gap between the two Kaplan-Meier survival curves;
- :func:`paired_delta`: the rectangle delta of the same rectangles under both models.

Both models must share a tokenizer and support (the same weights in two dtypes, typically).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.checks import check_range
from ..mcmc import glauber, sampling
from ..mcmc.conditional import ConditionalModel
from ..mcmc.diagnostics import survival
from . import rectangle


def _same_support(ref: ConditionalModel, test: ConditionalModel) -> None:
    if ref.vocab_size != test.vocab_size:
        raise ValueError(f"test: vocabulary {test.vocab_size} differs from the reference's {ref.vocab_size}")


@dataclass(frozen=True)
class KLResult:
    """Per-site KL divergences ``kl`` [T, B] (nats) at ``taus`` [T], and argmax agreement [B]."""

    taus: list[float]
    kl: Tensor
    argmax_agree: Tensor


@torch.inference_mode()
def conditional_kl(ref: ConditionalModel, test: ConditionalModel, x: Tensor, sites: Tensor,
                   taus: Sequence[float]) -> KLResult:
    """KL(p_ref,tau(. | x_-i) || p_test,tau(. | x_-i)) at each (row, site): x ``[B, n]``, sites ``[B]``.

    Computed in float64 from the float32 logits each model returns; outside the support both
    conditionals are zero and contribute nothing.
    """
    _same_support(ref, test)
    taus = [float(t) for t in taus]
    for t in taus:
        sampling.check_tau(t)
    lr = ref.site_logits(x, sites).double()
    lt = test.site_logits(x, sites).double()
    return KLResult(taus, logits_kl(lr, lt, taus).cpu(), (lr.argmax(-1) == lt.argmax(-1)).cpu())


def logits_kl(ref_logits: Tensor, test_logits: Tensor, taus: Sequence[float]) -> Tensor:
    """KL(softmax(ref/tau) || softmax(test/tau)) per row, ``[T, B]`` (nats), from logits ``[B, V]``
    already computed (float64 recommended); -inf outside the support contributes nothing."""
    kls = []
    for t in taus:
        pr = torch.log_softmax(ref_logits / t, -1)
        pt = torch.log_softmax(test_logits / t, -1)
        p = pr.exp()
        terms = torch.where(p > 0, p * (pr - pt), torch.zeros_like(p))
        kls.append(terms.sum(-1).clamp_min(0.0))
    return torch.stack(kls)


@dataclass(frozen=True)
class PairedCoupling:
    """Coupling times of the same pairs under two models (``*_ref``/``*_test``, [B] each)."""

    times_ref: Tensor
    censored_ref: Tensor
    times_test: Tensor
    censored_test: Tensor
    max_survival_gap: float
    max_steps: int

    def medians(self) -> tuple[float, float]:
        """Kaplan-Meier medians (inf when more than half are censored)."""
        grid = torch.arange(self.max_steps + 2.0)
        return (survival(self.times_ref, self.censored_ref, grid).median(),
                survival(self.times_test, self.censored_test, grid).median())


def paired_coupling(ref: ConditionalModel, test: ConditionalModel, x0: Tensor, y0: Tensor, *,
                    tau: float, max_steps: int, seed: int) -> PairedCoupling:
    """Run the maximal coupling of (x0, y0) ``[B, n]`` under both models with the same seed.

    The same seed means the same site choices and uniforms, so the two runs differ only where the
    conditionals do: a sharp comparison, much tighter than two independent samples.
    """
    _same_support(ref, test)
    check_range("max_steps", max_steps, 1, None, integer=True)
    a = glauber.coupling_times(ref, x0, y0, tau=tau, max_steps=max_steps, seed=seed)
    b = glauber.coupling_times(test, x0, y0, tau=tau, max_steps=max_steps, seed=seed)
    grid = torch.arange(max_steps + 2.0)
    ta, ca = a.times.cpu().double(), (~a.coupled).cpu()
    tb, cb = b.times.cpu().double(), (~b.coupled).cpu()
    sa = survival(ta, ca, grid)
    sb = survival(tb, cb, grid)
    gap = float((sa.surv - sb.surv).abs().max())
    return PairedCoupling(ta, ca, tb, cb, gap, max_steps)


def paired_delta(ref: ConditionalModel, test: ConditionalModel, x: Tensor, *, seed: int,
                 protocol: str = "model") -> tuple[Tensor, Tensor]:
    """Rectangle deltas of the same rectangles (drawn with ``ref``) under both models: ([B], [B])."""
    _same_support(ref, test)
    r = rectangle.draw_rectangles(ref, x, protocol=protocol, seed=seed)
    d_ref = rectangle.delta(ref, x, r.i, r.j, r.a2, r.b2)
    d_test = rectangle.delta(test, x, r.i, r.j, r.a2, r.b2)
    return d_ref.cpu(), d_test.cpu()
