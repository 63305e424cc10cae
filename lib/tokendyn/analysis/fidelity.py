"""How far a cheaper arithmetic (bf16) moves what the book measures, against the fp32 reference.

Three levels, from the conditional up to the chapters' statistics:

- :func:`conditional_kl`: KL(p_ref,tau || p_test,tau) between the two site conditionals, and
  whether their argmax agrees, at every given site (:func:`logits_kl` from logits already at hand);
- :func:`paired_coupling`: coupling times of the same pairs from the same seed under both models,
  and the largest gap between the two Kaplan-Meier survival curves;
- :func:`paired_delta`: the rectangle delta of the same rectangles under both models.

:func:`compare` runs the three on given states and summarises them with intervals
(:class:`FidelitySummary`); :func:`bf16_fidelity` does so for one masked LM loaded in fp32 and in
bf16, on states drawn from real passages: the performance appendix's test.

Both models must share a tokenizer and support (the same weights in two dtypes, typically).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..core import data
from ..core.checks import check_range
from ..core.stats import Estimate, bootstrap, kolmogorov_band, wilson
from ..mcmc import glauber, sampling
from ..mcmc.censored import CensoredTimes
from ..mcmc.conditional import ConditionalModel, MLMConditional, content_ids
from ..mcmc.diagnostics import budget_steps, median_times, survival
from . import rectangle
from .experiments import start_states


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
    """Coupling times of the same pairs under two models, ``ref`` and ``test`` ([B] each, both
    censored at the budget), and the largest gap between their survival curves."""

    ref: CensoredTimes
    test: CensoredTimes
    max_survival_gap: float

    @property
    def max_steps(self) -> int:
        """The budget both runs were watched for (their cap)."""
        return self.ref.cap

    def medians(self) -> tuple[float, float]:
        """Kaplan-Meier medians (inf when more than half are censored)."""
        med = median_times({"ref": self.ref, "test": self.test})
        return med["ref"], med["test"]


def paired_coupling(ref: ConditionalModel, test: ConditionalModel, x0: Tensor, y0: Tensor, *,
                    tau: float, max_steps: int, seed: int) -> PairedCoupling:
    """Run the maximal coupling of (x0, y0) ``[B, n]`` under both models with the same seed.

    The same seed means the same site choices and uniforms, so the two runs differ only where the
    conditionals do: a sharp comparison, much tighter than two independent samples.
    """
    _same_support(ref, test)
    check_range("max_steps", max_steps, 1, None, integer=True)
    runs = [glauber.coupling_times(m, x0, y0, tau=tau, max_steps=max_steps, seed=seed).times for m in (ref, test)]
    a, b = (CensoredTimes(r.times.cpu(), r.censored.cpu(), cap=r.cap) for r in runs)
    grid = torch.arange(max_steps + 1.0)
    sa, sb = (survival(r.times, r.censored, grid).surv for r in (a, b))
    return PairedCoupling(a, b, float((sa - sb).abs().max()))


def paired_delta(ref: ConditionalModel, test: ConditionalModel, x: Tensor, *, seed: int,
                 protocol: str = "model") -> tuple[Tensor, Tensor]:
    """Rectangle deltas of the same rectangles (drawn with ``ref``) under both models: ([B], [B])."""
    _same_support(ref, test)
    r = rectangle.draw_rectangles(ref, x, protocol=protocol, seed=seed)
    d_ref = rectangle.delta(ref, x, r.i, r.j, r.a2, r.b2)
    d_test = rectangle.delta(test, x, r.i, r.j, r.a2, r.b2)
    return d_ref.cpu(), d_test.cpu()


@dataclass(frozen=True)
class FidelitySummary:
    """The three comparisons of :func:`compare`, each with its interval.

    ``kl``: tau (as given) -> mean KL(p_ref || p_test) over the sites (bootstrap); ``argmax_agree``:
    the share of sites whose argmax agrees (Wilson); ``coupling`` and its Kaplan-Meier ``medians``
    (ref, test), ``band`` the 95% two-sample Kolmogorov band its survival gap is held to, ``tau`` its
    temperature and ``n`` the pairs' length; ``deltas`` the rectangle deltas (ref, test), [R] each, and their means
    ``delta_ref``, ``delta_test`` and the mean paired difference ``delta_diff`` (test - ref).
    """

    kl: dict[float, Estimate]
    argmax_agree: Estimate
    coupling: PairedCoupling
    medians: tuple[float, float]
    band: float
    tau: float
    n: int
    deltas: tuple[Tensor, Tensor]
    delta_ref: Estimate
    delta_test: Estimate
    delta_diff: Estimate

    def conclusions_agree(self, min_argmax_agree: float = 0.95) -> bool:
        """Whether the test model leaves the chapters' conclusions as the reference draws them: the
        survival curves within the two-sample band, the test's delta interval meeting the
        reference's, and the argmax agreeing at ``min_argmax_agree`` of the sites or more."""
        return (self.coupling.max_survival_gap <= self.band
                and self.delta_test.overlaps(self.delta_ref.lo, self.delta_ref.hi)
                and self.argmax_agree.value >= min_argmax_agree)

    def record(self) -> dict[str, Any]:
        """The summary as the performance appendix records it (the reference named fp32, the test
        bf16): ``kl`` by ``str(tau)``, ``argmax_agree``, ``coupling`` (medians, gap, band, pairs,
        tau, n), ``delta`` (fp32, bf16, paired_difference), each estimate with its level, and
        ``changes_a_conclusion`` (not :meth:`conclusions_agree`)."""
        c = self.coupling
        return {"kl": {str(t): dict(vars(e)) for t, e in self.kl.items()}, "argmax_agree": dict(vars(self.argmax_agree)),
                "coupling": {"median_fp32": self.medians[0], "median_bf16": self.medians[1],
                             "max_survival_gap": c.max_survival_gap, "band": self.band, "pairs": int(c.ref.times.numel()),
                             "tau": self.tau, "n": self.n},
                "delta": {"fp32": dict(vars(self.delta_ref)), "bf16": dict(vars(self.delta_test)),
                          "paired_difference": dict(vars(self.delta_diff))},
                "changes_a_conclusion": not self.conclusions_agree()}


def compare(ref: ConditionalModel, test: ConditionalModel, x_sites: Tensor, x0: Tensor, y0: Tensor, x_rect: Tensor, *,
            taus: Sequence[float], tau: float, max_steps: int, seed: int) -> FidelitySummary:
    """The three comparisons on given states, summarised with intervals (:class:`FidelitySummary`).

    ``x_sites`` [P, n]: every site of every row gives a KL at each of ``taus``; ``x0``, ``y0`` [B, n]:
    the pairs coupled at ``tau`` for up to ``max_steps`` steps; ``x_rect`` [R, n]: one rectangle per
    row (drawn with ``ref``). ``seed`` seeds the coupling, the rectangles and every bootstrap.
    """
    p, n = x_sites.shape
    kl = conditional_kl(ref, test, x_sites.repeat_interleave(n, 0), torch.arange(n).repeat(p), taus)
    kl_est = {t: bootstrap(kl.kl[k].numpy(), seed=seed) for k, t in enumerate(taus)}
    agree = wilson(int(kl.argmax_agree.sum()), kl.argmax_agree.numel())
    pc = paired_coupling(ref, test, x0, y0, tau=tau, max_steps=max_steps, seed=seed)
    # two-sample Kolmogorov-Smirnov at 95%, c sqrt(2 / B) for B runs on each side: conservative for paired runs
    band = kolmogorov_band(1) * math.sqrt(2 / x0.shape[0])
    d_ref, d_test = paired_delta(ref, test, x_rect, seed=seed)
    return FidelitySummary(kl_est, agree, pc, pc.medians(), band, tau, int(x0.shape[1]), (d_ref, d_test),
                           bootstrap(d_ref.numpy(), seed=seed), bootstrap(d_test.numpy(), seed=seed),
                           bootstrap((d_test - d_ref).numpy(), seed=seed))


# The coupling pairs start from passages of disjoint topics (as chapter 3's starts do).
PAIR_TOPICS = (("health", "sports", "food"), ("politics", "science", "history"))


def bf16_fidelity(ref: Any, test: Any, *, n: int, passages: int, taus: Sequence[float], pairs: int, tau: float,
                  budget_factor: float, rectangles: int, seed: int, per_topic: int = 60) -> FidelitySummary:
    """:func:`compare` for one masked LM loaded twice (``ref`` in fp32, ``test`` in bf16: loaded
    models, :func:`tokendyn.models.load_mlm`), on real passages of ``n`` content tokens.

    The KL at every site of the first ``passages`` of the ``per_topic`` passages of each topic
    (those of at least ``2 n`` words), ``pairs`` coupled pairs from :data:`PAIR_TOPICS` under a
    budget of ``budget_factor * n ln n`` steps, and one rectangle on each of the first
    ``rectangles`` of the same passages. Raises ``ValueError`` where fewer passages qualify than
    asked for (raise ``per_topic``).
    """
    texts = [t for topic in data.TOPICS for t in data.passages(topic, per_topic, seed=seed)]
    texts = [t for t in texts if len(t.split()) >= 2 * n]  # room for n content tokens after tokenizing
    for name, count in (("passages", passages), ("rectangles", rectangles)):
        if count > len(texts):
            raise ValueError(f"{name}={count}: only {len(texts)} passages of at least {2 * n} words at "
                             f"per_topic={per_topic}; ask for fewer or raise per_topic")
    x0, y0 = (start_states(ref, n, pairs, topics=t, seed=seed) for t in PAIR_TOPICS)
    max_steps = budget_steps(budget_factor, n)
    return compare(MLMConditional(ref), MLMConditional(test), content_ids(ref, texts[:passages], n), x0, y0,
                   content_ids(ref, texts[:rectangles], n), taus=taus, tau=tau, max_steps=max_steps, seed=seed)
