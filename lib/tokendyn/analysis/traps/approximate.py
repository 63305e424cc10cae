"""Approximate traps and repetition basins, read from trajectories.

:func:`hamming_dwell` measures, for a centre state on a trajectory, how many steps the chain stays
within Hamming distance ``h`` of it; :func:`approximate_traps` keeps centres held for at least ``L``
steps. :func:`dominance` (share of sites holding the most common token) marks repetition basins
such as a run of ``!``; :func:`window_repeat` is the share of sites whose token occurs elsewhere in
the window, the statistic the Models appendix compares between text and the model's first guess
(:func:`head_repeat`). :func:`long_chains` runs the chains these read.

Shapes: ``B`` chains or states, ``n`` content sites, ``T`` records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ...core.checks import check_range
from ...mcmc.conditional import ConditionalModel, check_tokens
from ...mcmc.glauber import check_tau, sample
from ...mcmc.sampling import Temperature
from .perfect import _check_logits

__all__ = ["hamming_dwell", "HeldStates", "approximate_traps", "durations", "dominance", "dominant_token",
           "window_repeat", "head_repeat", "fraction_estimate", "RepetitionBasins", "repetition_basins", "Chains",
           "long_chains"]

def hamming_dwell(states: Tensor, times: Tensor, observed_until: Tensor, h: int, *,
                  centres: Tensor | None = None, chunk: int | None = None) -> tuple[Tensor, Tensor]:
    """How long the chain stays within Hamming distance ``h`` of a centre state on its own path.

    ``states`` ``[K, B, n]`` records of ``B`` chains entered at ``times`` ``[K, B]`` (non-decreasing;
    for a plain trajectory recorded every step, ``times[k] = k``), ``observed_until`` ``[B]``;
    ``centres`` ``[C]`` record indices (default all ``K``). For centre ``k`` of chain ``b`` the dwell
    is ``times[j] - times[k]`` for the first ``j > k`` with ``Hamming(states[j], states[k]) > h``,
    or ``observed_until - times[k]`` (censored) when there is none -> (dwell ``[C, B]`` float64,
    censored ``[C, B]`` bool). With ``h = 0`` it is the dwell in the exact state. ``chunk``: centres
    compared at once (default: as many as keep the ``[chunk, K, B, n]`` comparison near 50 million).
    """
    if states.dim() != 3 or times.shape != states.shape[:2] or observed_until.shape != states.shape[1:2]:
        raise ValueError(f"states [K, B, n], times [K, B] and observed_until [B] must agree, got "
                         f"{tuple(states.shape)}, {tuple(times.shape)}, {tuple(observed_until.shape)}")
    check_range("h", h, 0, states.shape[2], integer=True)
    K = states.shape[0]
    chunk = max(1, int(5e7 // max(1, states.numel()))) if chunk is None else chunk
    check_range("chunk", chunk, 1, integer=True)
    cs = torch.arange(K) if centres is None else torch.as_tensor(centres, dtype=torch.long).flatten()
    if cs.numel() and (int(cs.min()) < 0 or int(cs.max()) >= K):
        raise ValueError(f"centres must be record indices in [0, {K})")
    tt = times.double()
    dwell = torch.empty(len(cs), states.shape[1], dtype=torch.float64)
    cens = torch.empty(len(cs), states.shape[1], dtype=torch.bool)
    idx = torch.arange(K)
    for s in range(0, len(cs), chunk):
        c = cs[s:s + chunk]                                              # [c]
        far = (states[None, :, :, :] != states[c][:, None]).sum(-1) > h   # [c, K, B]
        far &= (idx[None, :] > c[:, None])[:, :, None]
        any_far = far.any(1)                                             # [c, B]
        j = far.long().argmax(1)                                         # first far record
        t_far = tt.gather(0, j.clamp_max(K - 1))
        t0 = tt[c]
        dwell[s:s + chunk] = torch.where(any_far, t_far - t0, observed_until.double()[None] - t0)
        cens[s:s + chunk] = ~any_far
    return dwell, cens


@dataclass(frozen=True)
class HeldStates:
    """Per chain, the centre state held longest within Hamming ``h`` (:func:`approximate_traps`):
    ``index`` ``[B]`` its record, ``dwell`` ``[B]`` steps held, ``censored`` ``[B]`` (still held at the
    end: a lower bound), ``held`` ``[B]`` bool: ``dwell >= min_dwell``; and ``tokens`` ``[B, n]``."""

    index: Tensor
    dwell: Tensor
    censored: Tensor
    held: Tensor
    tokens: Tensor
    h: int
    min_dwell: float


def approximate_traps(states: Tensor, times: Tensor, observed_until: Tensor, *, h: int, min_dwell: float,
                      centres: Tensor | None = None) -> HeldStates:
    """``(h, L)`` approximate traps on chain paths: for each chain the centre state (among
    ``centres``, default every record) that the chain keeps within Hamming distance ``h`` for the
    longest time, and whether that time reaches ``min_dwell`` ``= L`` steps (:func:`hamming_dwell`;
    ties go to the earliest centre)."""
    check_range("min_dwell", min_dwell, 0.0)
    dwell, cens = hamming_dwell(states, times, observed_until, h, centres=centres)
    cs = torch.arange(states.shape[0]) if centres is None else torch.as_tensor(centres, dtype=torch.long).flatten()
    best = dwell.argmax(0)                                   # [B], first maximum
    b = torch.arange(states.shape[1])
    d = dwell[best, b]
    k = cs[best]
    return HeldStates(index=k, dwell=d, censored=cens[best, b], held=d >= min_dwell,
                      tokens=states[k, b], h=int(h), min_dwell=float(min_dwell))


def durations(times: Tensor, observed_until: Tensor) -> Tensor:
    """How long each record was occupied: ``times`` ``[K, B]``, ``observed_until`` ``[B]`` ->
    ``[K, B]`` float64 (the last record until ``observed_until``). Weights for time averages over a
    :class:`KineticRun`; for a plain trajectory recorded every step they are all 1 but the last 0."""
    tt = times.double()
    nxt = torch.cat([tt[1:], observed_until.double()[None]])
    return (nxt - tt).clamp_min(0)


# --- repetition --------------------------------------------------------------------------------

def _same(tokens: Tensor) -> Tensor:
    return tokens[..., :, None] == tokens[..., None, :]      # [..., n, n]


def dominance(tokens: Tensor) -> Tensor:
    """Share of sites holding the state's most common token: ``[..., n]`` -> ``[...]`` float64
    (``1/n`` when all tokens differ, 1 for ``n`` copies of one token)."""
    if tokens.dim() < 1 or tokens.shape[-1] < 1:
        raise ValueError("tokens must have a last dimension of n >= 1 sites")
    return _same(tokens).sum(-1).amax(-1).double() / tokens.shape[-1]


def dominant_token(tokens: Tensor) -> Tensor:
    """The most common token of each state (the first such site's token on ties): ``[..., n]`` ->
    ``[...]``."""
    counts = _same(tokens).sum(-1)
    return tokens.gather(-1, counts.argmax(-1, keepdim=True)).squeeze(-1)


def window_repeat(tokens: Tensor) -> Tensor:
    """Share of sites whose token also occurs at another site of the state: ``[..., n]`` ->
    ``[...]`` float64. The text-side statistic of the Models appendix's repetition check."""
    return ((_same(tokens).sum(-1) - 1) > 0).double().mean(-1)


def head_repeat(logits: Tensor, x: Tensor) -> Tensor:
    """Share of sites whose model first guess (argmax of the masked conditional) is a token found
    at another site of ``x``: ``[B, n, V]``, ``[B, n]`` -> ``[B]`` float64. Against
    :func:`window_repeat` of the text it measures the head's copying habit, one step, no dynamics."""
    _check_logits(logits, x)
    top = logits.argmax(-1)                                   # [B, n]
    hit = top[:, :, None] == x[:, None, :]                    # [B, i, j]
    hit &= ~torch.eye(x.shape[1], dtype=torch.bool, device=x.device)[None]
    return hit.any(-1).double().mean(-1)


@dataclass(frozen=True)
class RepetitionBasins:
    """Repetition basins along ``chains`` chains (:func:`repetition_basins`): ``entered``, the chains
    with a state after the start whose :func:`dominance` reaches the basin's share; ``time``, the
    share of (record, chain) pairs after the start spent in one; ``entered_within``, the chains that
    entered by step ``within``; ``late_repeat``, the mean :func:`window_repeat` over the records of
    the second half. The path, every ``stride``-th record: ``path_steps`` ``[P]`` and the chains'
    mean dominance ``path_dominance`` and window repeat ``path_repeat`` ``[P]`` float64."""

    chains: int
    entered: int
    time: float
    entered_within: int
    within: int
    late_repeat: float
    path_steps: Tensor
    path_dominance: Tensor
    path_repeat: Tensor


def repetition_basins(trajectory: Tensor, steps: Tensor, *, share: float, within: int,
                      points: int = 100) -> RepetitionBasins:
    """Repetition basins read from chains: ``trajectory`` ``[T, B, n]`` recorded at ``steps`` ``[T]``
    (record 0 the start), a basin a state with :func:`dominance` at least ``share``; ``within``: the
    step up to which entries are also counted on their own (to compare runs of unequal length over
    their common first steps); the mean path keeps about ``points`` records. -> :class:`RepetitionBasins`."""
    check_range("share", share, 0.0, 1.0, lo_open=True)
    check_range("points", points, 1, integer=True)
    st = torch.as_tensor(steps)
    if trajectory.dim() != 3 or st.numel() != trajectory.shape[0] or trajectory.shape[0] < 2:
        raise ValueError(f"trajectory [T >= 2, B, n] and steps [T] must agree, got {tuple(trajectory.shape)} and "
                         f"{tuple(st.shape)}")
    dom = dominance(trajectory)                              # [T, B]
    wr = window_repeat(trajectory)
    inside = dom[1:] >= share                                # the start is not an entry
    early = inside[st[1:] <= within]
    late = st >= st[-1] / 2
    stride = max(1, len(st) // points)
    return RepetitionBasins(chains=int(trajectory.shape[1]), entered=int(inside.any(0).sum()),
                            time=float(inside.double().mean()), entered_within=int(early.any(0).sum()), within=int(within),
                            late_repeat=float(wr[late].mean()), path_steps=st[::stride], path_dominance=dom[::stride].mean(1),
                            path_repeat=wr[::stride].mean(1))


def fraction_estimate(flags: Tensor | np.ndarray) -> tuple[int, int]:
    """``(k, N)`` of a boolean vector, for :func:`tokendyn.core.stats.wilson`."""
    f = torch.as_tensor(flags).bool().flatten()
    return int(f.sum()), int(f.numel())


# --- long chains, checkpointed in segments -------------------------------------------------------

@dataclass(frozen=True)
class Chains:
    """Output of :func:`long_chains`: ``trajectory`` ``[T, B, n]`` (CPU) at ``steps`` ``[T]``
    (``0, k, 2k, ...``), the start included."""

    trajectory: Tensor
    steps: Tensor


def long_chains(model: ConditionalModel, x0: Tensor, *, steps: int, tau: Temperature, seed: int,
                record_every: int = 1, segment: int = 500, store: Any = None, key: str = "chains",
                tag: dict[str, Any] | None = None) -> Chains:
    """Random-scan Glauber chains from ``x0`` ``[B, n]`` for ``steps`` steps at ``tau`` (float or
    ``[B]``), run as segments of ``segment`` steps, each a seeded :func:`tokendyn.mcmc.glauber.sample`
    from the previous segment's end (segment ``s`` uses seed ``seed + s``). ``record_every`` must
    divide ``segment`` and ``steps``.

    With a :class:`tokendyn.core.checkpoint.Store` each segment is a checkpoint cell keyed by ``key``,
    the segment index, ``x0``, ``tau``, the seed, the lengths and ``tag`` (say, the model name), and
    fingerprinted with the model: a killed run resumes at the first missing segment and gives the
    same chains as an uninterrupted one.
    """
    from ...core.checkpoint import Store

    check_tokens(model, x0, "x0")
    check_range("steps", steps, 1, integer=True)
    check_range("seed", seed, 0, 2**63 - 1, integer=True)
    check_range("record_every", record_every, 1, integer=True)
    check_range("segment", segment, record_every, integer=True)
    if segment % record_every or steps % record_every:
        raise ValueError(f"record_every={record_every} must divide segment={segment} and steps={steps}")
    check_tau(tau, x0.shape[0])
    store = store if store is not None else Store(None)
    x = x0
    frames = [x0.cpu()[None]]
    done = 0
    s = 0
    while done < steps:
        length = min(segment, steps - done)
        params = {"x0": x0.cpu(), "tau": tau.cpu() if isinstance(tau, Tensor) else float(tau), "seed": seed,
                  "segment": segment, "index": s, "length": length, "record_every": record_every,
                  "steps": steps, **(tag or {})}

        def run(x=x, length=length, s=s) -> dict[str, Tensor]:
            r = sample(model, x, steps=length, tau=tau, seed=seed + s, record_every=record_every)
            return {"trajectory": r.trajectory.cpu(), "final": r.tokens.cpu()}

        cell = store.get_or_compute(f"{key}-seg{s}", params, run, model=model)
        frames.append(cell["trajectory"][1:])
        x = cell["final"].to(x0.device)
        done += length
        s += 1
    traj = torch.cat(frames)
    return Chains(trajectory=traj, steps=torch.arange(traj.shape[0]) * record_every)
