"""Perfect traps: states where every content token is the strict argmax of its own masked conditional.

Every site margin ``m_i = l_i(x_i) - max_{v != x_i} l_i(v)`` is positive (:func:`margins`,
:func:`is_perfect_trap`). :func:`greedy_traps` finds them by argmax sweeps from real starts and
:func:`trap_census` from many starts in chunks (:func:`census_starts`); :func:`verify_traps`
re-checks a recorded trap from the model and the ids alone; :func:`trap_records` writes them out.

Shapes: ``B`` states, ``n`` content sites, ``V`` vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ...core.checks import check_range
from ...mcmc.conditional import ConditionalModel, check_tokens
from ...mcmc.glauber import greedy_fixed_point
from ..influence import all_site_logits

__all__ = ["margins", "is_perfect_trap", "GreedyTraps", "greedy_traps", "verify_traps", "TrapRecord",
           "trap_records", "census_starts", "TrapCensus", "trap_census"]

def _check_logits(logits: Tensor, x: Tensor) -> None:
    if not isinstance(logits, Tensor) or logits.dim() != 3 or not logits.is_floating_point():
        raise ValueError(f"logits must be a float tensor [B, n, V], got "
                         f"{tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__}")
    if not isinstance(x, Tensor) or x.shape != logits.shape[:2] or x.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"x must be integer ids [B, n]={tuple(logits.shape[:2])}, got "
                         f"{tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
    if x.numel() and (int(x.min()) < 0 or int(x.max()) >= logits.shape[2]):
        raise ValueError(f"x must lie in [0, V={logits.shape[2]})")


# --- margins and perfect traps -------------------------------------------------------------------

def margins(logits: Tensor, x: Tensor) -> Tensor:
    """Logit margin of each current token over its best alternative: ``logits`` ``[B, n, V]``
    (masked-site logits at ``tau = 1``, :func:`tokendyn.analysis.influence.all_site_logits`), ``x`` ``[B, n]``
    -> ``[B, n]`` float64. Positive at every site iff ``x`` is a perfect trap."""
    _check_logits(logits, x)
    L = logits.double()
    cur = L.gather(-1, x.long().unsqueeze(-1)).squeeze(-1)
    other = L.scatter(-1, x.long().unsqueeze(-1), float("-inf")).amax(-1)
    return cur - other


def is_perfect_trap(site_margins: Tensor) -> Tensor:
    """``[B, n]`` margins -> ``[B]`` bool: every margin strictly positive (a tie is not a trap)."""
    if site_margins.dim() != 2:
        raise ValueError(f"site_margins must be [B, n], got {tuple(site_margins.shape)}")
    return (site_margins > 0).all(-1)


@dataclass(frozen=True)
class GreedyTraps:
    """Output of :func:`greedy_traps`: ``tokens`` ``[B, n]``, ``converged`` ``[B]`` (a sweep changed
    nothing), ``sweeps`` ``[B]`` (sweeps run on each row, the last one included)."""

    tokens: Tensor
    converged: Tensor
    sweeps: Tensor


def greedy_traps(model: ConditionalModel, x0: Tensor, *, max_sweeps: int = 12) -> GreedyTraps:
    """Argmax sweeps from ``x0`` ``[B, n]`` (the ``tau -> 0`` limit; sites ``0..n-1`` in turn), each
    row until a sweep changes nothing, at most ``max_sweeps``.

    The same fixed points as :func:`tokendyn.mcmc.glauber.greedy_fixed_point` (it runs one sweep at a
    time), but a row that has converged leaves the batch, so the cost is the sum of the rows'
    sweeps rather than the slowest row's times ``B``. A converged row has every token equal to the
    first argmax of its conditional; :func:`margins` says whether the argmax is strict.
    """
    check_tokens(model, x0, "x0")
    check_range("max_sweeps", max_sweeps, 1, integer=True)
    x = x0.clone()
    b = x.shape[0]
    converged = torch.zeros(b, dtype=torch.bool)
    sweeps = torch.zeros(b, dtype=torch.long)
    live = torch.arange(b)
    for _ in range(max_sweeps):
        if live.numel() == 0:
            break
        new, done = greedy_fixed_point(model, x[live], max_sweeps=1)
        x[live] = new
        sweeps[live] += 1
        done = done.cpu()
        converged[live[done]] = True
        live = live[~done]
    return GreedyTraps(tokens=x, converged=converged, sweeps=sweeps)


def verify_traps(model: ConditionalModel, ids: Tensor) -> tuple[Tensor, Tensor]:
    """Re-check recorded traps from the model and their content ids alone: ``ids`` ``[B, n]`` ->
    (``perfect`` ``[B]`` bool, ``min_margin`` ``[B]`` float64). ``B n`` masked evaluations."""
    check_tokens(model, ids, "ids")
    m = margins(all_site_logits(model, ids), ids)
    return is_perfect_trap(m), m.min(-1).values


def census_starts(loaded: Any, start_topics: Sequence[str], *, n_tokens: int, n_starts: int,
                  seed: int = 0) -> Tensor:
    """The real starts of the trap census: ``ceil(n_starts / len(start_topics))`` passages per topic
    ranked by ``seed`` (:func:`tokendyn.analysis.topics.topic_split`), their first ``n_tokens`` content
    tokens, topic after topic, cut to ``n_starts`` rows -> ``[n_starts, n_tokens]`` content ids (CPU)."""
    from ...mcmc.conditional import content_ids
    from ..topics import topic_split

    check_range("n_starts", n_starts, len(start_topics), integer=True)
    per = math.ceil(n_starts / len(start_topics))
    starts = topic_split(loaded, start_topics, n_tokens=n_tokens, n_start=per, n_train=0, n_val=0, seed=seed).starts
    x0 = torch.cat([content_ids(loaded, starts[t], n_tokens) for t in start_topics])[:n_starts]
    if x0.shape[0] < n_starts:
        raise ValueError(f"n_starts={n_starts}: the topics hold only {x0.shape[0]} passages of {n_tokens} tokens")
    return x0


@dataclass(frozen=True)
class TrapCensus:
    """Output of :func:`trap_census`.

    ``greedy``: the argmax sweeps from every start; ``perfect`` ``[B]`` (CPU): the end state is a
    perfect trap; ``keep`` ``[K]``: for each distinct perfect trap, the first start that found it
    (in start order); ``tokens`` ``[K, n]``, ``logits`` ``[K, n, V]`` and ``margins`` ``[K, n]`` of
    those traps, on the model's device; ``min_margin`` ``[K]`` (CPU), each trap's depth."""

    greedy: GreedyTraps
    perfect: Tensor
    keep: Tensor
    tokens: Tensor
    logits: Tensor
    margins: Tensor

    @property
    def min_margin(self) -> Tensor:
        return self.margins.min(-1).values.cpu() if len(self.margins) else torch.zeros(0, dtype=torch.float64)


def trap_census(model: ConditionalModel, x0: Tensor, *, max_sweeps: int = 12, chunk: int = 64) -> TrapCensus:
    """Chapter 4's trap search: argmax sweeps from each start ``x0`` ``[B, n]``
    (:func:`greedy_traps`), the exact margins of every end state from one masked pass per site, and
    the distinct perfect traps among them, each kept at the first start that found it.

    The margins are computed ``chunk`` end states at a time (``B n`` masked evaluations in all); only
    the logits of the distinct perfect traps are kept. -> :class:`TrapCensus`."""
    check_range("chunk", chunk, 1, integer=True)
    g = greedy_traps(model, x0, max_sweeps=max_sweeps)
    ms, kept_logits = [], []
    for a in range(0, g.tokens.shape[0], chunk):
        lg = all_site_logits(model, g.tokens[a:a + chunk])
        m = margins(lg, g.tokens[a:a + chunk])
        ms.append(m)
        kept_logits.append(lg[is_perfect_trap(m)])
    m = torch.cat(ms)
    perfect = is_perfect_trap(m)
    found = g.tokens[perfect]
    if len(found):
        _, inverse = torch.unique(found, dim=0, return_inverse=True)
        first = sorted(int((inverse == k).nonzero()[0, 0]) for k in range(int(inverse.max()) + 1))
    else:
        first = []
    first_t = torch.tensor(first, dtype=torch.long)
    keep = perfect.nonzero().flatten().cpu()[first_t]
    logits = torch.cat(kept_logits)[first_t.to(m.device)]
    return TrapCensus(greedy=g, perfect=perfect.cpu(), keep=keep, tokens=g.tokens[keep.to(g.tokens.device)],
                      logits=logits, margins=m[keep.to(m.device)])


@dataclass(frozen=True)
class TrapRecord:
    """One trap as the results file records it: enough to re-check it with the model alone.

    ``ids`` are content ids without the wrapping special tokens; ``min_margin`` is in nats at
    ``tau = 1``."""

    model: str
    ids: list[int]
    text: str
    min_margin: float

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "ids": list(self.ids), "text": self.text, "min_margin": self.min_margin}


def trap_records(model_name: str, tokens: Tensor, site_margins: Tensor, texts: Sequence[str],
                 *, digits: int = 4) -> list[TrapRecord]:
    """One :class:`TrapRecord` per row of ``tokens`` ``[B, n]`` with its ``site_margins``
    ``[B, n]`` and decoded ``texts`` (``B`` strings); margins rounded to ``digits`` decimals."""
    if tokens.shape != site_margins.shape or len(texts) != tokens.shape[0]:
        raise ValueError(f"tokens {tuple(tokens.shape)}, site_margins {tuple(site_margins.shape)} and "
                         f"{len(texts)} texts must describe the same B states")
    check_range("digits", digits, 0, 12, integer=True)
    return [TrapRecord(model_name, [int(v) for v in row.tolist()], str(t), round(float(m.min()), digits))
            for row, m, t in zip(tokens, site_margins, texts)]

