"""Checkpointed experiment grids over Glauber chains, and their starting states.

A *survey* runs coupled pairs of chains from real passages at every temperature of a grid, as
one batch of ``len(taus) * B`` pairs with per-pair temperatures, and optionally reads the
semantic drift of the same chains on the way (the first chain of a maximal or CRN pair is an
exact Glauber chain). Each survey is one cell of a :class:`~tokendyn.core.checkpoint.Store`, keyed
by the model itself and its parameters, so an interrupted run resumes at the first unfinished
cell and another model or retrained weights never reuse one. Coupling times come back as
:class:`~tokendyn.mcmc.censored.CensoredTimes`; a store cell holds their ``times`` and ``censored``
tensors, its ``cap`` is the cell's ``max_steps`` parameter.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..core.checkpoint import Store
from ..core.checks import check_range
from ..core.data import passages
from ..mcmc import glauber, toy
from ..mcmc.censored import CensoredTimes
from ..mcmc.conditional import ConditionalModel, content_ids, decode
from ..mcmc.diagnostics.bootstrap import bootstrap_medians, median_draws_interval
from ..mcmc.diagnostics.drift import DriftRun, drift, forgotten_drift
from ..mcmc.diagnostics.survival import Survival, mixing_time, survival
from ..mcmc.sampling import check_tau

__all__ = ["coupling_grid", "coupling_drift_grid", "start_states", "drift_readers", "survey", "coupon_anchor",
           "PottsAnchor", "potts_anchor"]

# Chapter 3's pairs: one chain from each of two disjoint topic groups, so every pair starts far apart.
FIRST_TOPICS = ("health", "sports", "food")
SECOND_TOPICS = ("politics", "science", "history")

Times = dict[float, CensoredTimes]


@dataclass(frozen=True)
class _Drift:
    """What a survey records for drift: ``records`` states over the first ``steps`` steps."""

    steps: int
    records: int
    decode: Callable[[torch.Tensor], list[str]]
    embed: Callable[[list[str]], torch.Tensor]


def _tau_grid(taus: Sequence[float]) -> list[float]:
    """Checked temperatures of a grid, as floats (at least one)."""
    taus = [float(t) for t in taus]
    if not taus:
        raise ValueError("taus must hold at least one temperature")
    for tau in taus:
        check_tau(tau)
    return taus


def _drift_cell(traj: torch.Tensor, k: int, decode: Callable[[torch.Tensor], list[str]],
                embed: Callable[[list[str]], torch.Tensor]) -> dict[str, torch.Tensor]:
    """Recorded states ``[T, k * B, n]`` (k blocks of B chains) -> ``trajectory [T, k, B, n]``,
    ``drift`` and ``forgotten`` ``[T, k, B]``, each block against its own starts."""
    T, KB, n = traj.shape
    B = KB // k
    emb = embed(decode(traj.reshape(T * KB, n))).reshape(T, k, B, -1)
    return {"trajectory": traj.reshape(T, k, B, n),
            "drift": torch.stack([drift(emb[:, j], emb[0, j]) for j in range(k)], 1),
            "forgotten": torch.stack([forgotten_drift(emb[:, j], emb[0, j]) for j in range(k)], 1)}


def _survey(model: ConditionalModel, x0: torch.Tensor, y0: torch.Tensor, *, taus: Sequence[float],
            max_steps: int, seed: int, coupling: str, drift_spec: _Drift | None, store: Store | None,
            key: str, tag: Mapping[str, object] | None) -> tuple[Times, dict[float, DriftRun]]:
    """The one survey runner behind :func:`coupling_grid` and :func:`coupling_drift_grid`."""
    taus = _tau_grid(taus)
    check_range("max_steps", max_steps, 0, integer=True)
    if x0.dim() != 2 or x0.shape != y0.shape:
        raise ValueError(f"x0 and y0 must both be [B, n], got {tuple(x0.shape)} and {tuple(y0.shape)}")
    B, k = x0.shape[0], len(taus)
    params = {"taus": taus, "max_steps": max_steps, "seed": seed, "coupling": coupling,
              "x0": x0.tolist(), "y0": y0.tolist(), **dict(tag or {})}
    record = {}
    if drift_spec is not None:
        check_range("records", drift_spec.records, 1, integer=True)
        check_range("drift_steps", drift_spec.steps, drift_spec.records, max_steps, integer=True)
        if B < 2:
            raise ValueError(f"x0 must be [B, n] with B >= 2 pairs, got {tuple(x0.shape)}")
        every = drift_spec.steps // drift_spec.records
        record = {"record_every": every, "record_steps": every * drift_spec.records}
        params.update(record_every=every, records=drift_spec.records)

    def run() -> dict[str, torch.Tensor]:
        tau = torch.tensor(taus, dtype=torch.float64, device=x0.device).repeat_interleave(B)
        r = glauber.coupling_times(model, x0.repeat(k, 1), y0.repeat(k, 1), tau=tau, max_steps=max_steps,
                                   seed=seed, coupling=coupling, drop_coupled=True, **record)
        cell = {"times": r.times.times.cpu(), "censored": r.times.censored.cpu()}
        if drift_spec is not None:
            cell.update(t=r.steps_recorded.cpu(),
                        **_drift_cell(r.trajectory.cpu(), k, drift_spec.decode, drift_spec.embed))
        return cell

    cell = (store or Store(None)).get_or_compute(key, params, run, model=model)
    rows = [slice(j * B, (j + 1) * B) for j in range(k)]
    times = {tau: CensoredTimes(cell["times"][r], cell["censored"][r], cap=max_steps) for tau, r in zip(taus, rows)}
    runs = {} if drift_spec is None else {
        tau: DriftRun(t=cell["t"], drift=cell["drift"][:, j], forgotten=cell["forgotten"][:, j],
                      trajectory=cell["trajectory"][:, j]) for j, tau in enumerate(taus)}
    return times, runs


def coupling_grid(model: ConditionalModel, x0: torch.Tensor, y0: torch.Tensor, *,
                  taus: Sequence[float], max_steps: int, seed: int, coupling: str = "maximal",
                  store: Store | None = None, key: str = "coupling",
                  tag: Mapping[str, object] | None = None) -> Times:
    """Coupling times of the row pairs ``x0``, ``y0`` [B, n] at every tau, ready for
    :func:`~tokendyn.mcmc.diagnostics.survival`.

    Returns ``{tau: CensoredTimes}`` (``[B]`` each), a pair still apart censored at ``max_steps``,
    the last step it was watched. The whole grid runs as one batch of ``len(taus) * B`` pairs,
    each with its own temperature, and pairs leave the batch once coupled. One checkpointed cell
    of ``store`` (see the module docstring); ``tag`` names anything else that should tell cells
    apart.
    """
    return _survey(model, x0, y0, taus=taus, max_steps=max_steps, seed=seed, coupling=coupling,
                   drift_spec=None, store=store, key=key, tag=tag)[0]


def coupling_drift_grid(model: ConditionalModel, x0: torch.Tensor, y0: torch.Tensor, *,
                        taus: Sequence[float], max_steps: int, drift_steps: int, records: int,
                        seed: int, decode: Callable[[torch.Tensor], list[str]],
                        embed: Callable[[list[str]], torch.Tensor], coupling: str = "maximal",
                        store: Store | None = None, key: str = "survey",
                        tag: Mapping[str, object] | None = None) -> tuple[Times, dict[float, DriftRun]]:
    """:func:`coupling_grid` and the semantic drift of the same chains, from one run.

    Each pair's first chain (started at ``x0`` [B, n], B >= 2) is recorded ``records`` times over
    the first ``drift_steps`` steps (at least one step apart), decoded by ``decode`` (tokens
    [N, n] -> N strings) and embedded by ``embed`` (N strings -> [N, d]). Returns
    ``({tau: CensoredTimes [B]}, {tau: DriftRun})``. Costs the coupling run only (pairs
    stay in the batch until the last record), instead of a coupling run plus a drift run.
    """
    return _survey(model, x0, y0, taus=taus, max_steps=max_steps, seed=seed, coupling=coupling,
                   drift_spec=_Drift(drift_steps, records, decode, embed), store=store, key=key, tag=tag)


def start_states(loaded, n: int, count: int, *, topics: Sequence[str], seed: int = 0) -> torch.Tensor:
    """Starting states from real passages: ``count`` rows [count, n] of content token ids.

    Rows cycle through ``topics`` (``tokendyn.core.data`` topics), each row the first ``n`` tokens of
    the next passage of its topic that has at least ``n`` tokens. Two calls with disjoint topic
    lists give pairs of different real passages, the paper's coupling starts.
    """
    check_range("n", n, 1, integer=True)
    check_range("count", count, 1, integer=True)
    if not topics:
        raise ValueError("topics is empty")
    pools = {t: [p for p in passages(t, n=max(40, 2 * count), seed=seed)
                 if len(loaded.tokenizer(p, add_special_tokens=False)["input_ids"]) >= n]
             for t in topics}
    texts = []
    for k in range(count):
        pool = pools[topics[k % len(topics)]]
        j = k // len(topics)
        if j >= len(pool):
            raise ValueError(f"topic {topics[k % len(topics)]!r} has only {len(pool)} passages with "
                             f">= {n} tokens; ask for fewer rows or more topics")
        texts.append(pool[j])
    return content_ids(loaded, texts, n)


def drift_readers(loaded: Any, embedder: Any) -> tuple[Callable[[torch.Tensor], list[str]],
                                                       Callable[[list[str]], torch.Tensor]]:
    """The ``decode`` and ``embed`` of :func:`coupling_drift_grid` for a loaded MLM and a sentence
    embedder: content ids [N, n] -> N strings with ``loaded``'s tokenizer, and N strings -> unit
    embeddings [N, d] with ``embedder``."""
    from ..models.embedding import embed

    return functools.partial(decode, loaded), functools.partial(embed, embedder)


def survey(mlms: Mapping[str, tuple[Any, ConditionalModel]], embedder: Any, ns: Sequence[int], *,
           taus: Sequence[float], budget: Mapping[int, int], drift_budget: Mapping[int, int], records: int,
           pairs: int, seed: int, store: Store | None = None, device: Any = "cpu",
           progress: Callable[[list, str], Any] = lambda items, what: items
           ) -> tuple[dict[tuple[str, int, float], CensoredTimes], dict[tuple[str, int, float], DriftRun]]:
    """Chapter 3's survey: for every model (``name -> (loaded, conditional)``, as
    ``tokendyn.publish.book.load_mlms`` gives) and length ``n``, ``pairs`` pairs from real passages (the
    first chain of each from :data:`FIRST_TOPICS`, the second from :data:`SECOND_TOPICS`), run at
    every tau for ``budget[n]`` steps with the first chains' drift recorded ``records`` times over
    ``drift_budget[n]`` steps (:func:`coupling_drift_grid`, one store cell per model and n).
    Returns ``(coupling, drift)`` keyed by ``(model, n, tau)``: :class:`~tokendyn.mcmc.censored.CensoredTimes` and a
    :class:`~tokendyn.mcmc.diagnostics.drift.DriftRun`. ``progress`` wraps the loop (a progress bar)."""
    starts = {(name, n): (start_states(loaded, n, pairs, topics=FIRST_TOPICS, seed=seed),
                          start_states(loaded, n, pairs, topics=SECOND_TOPICS, seed=seed))
              for name, (loaded, _) in mlms.items() for n in ns}
    coupling, drift_raw = {}, {}
    for name, n in progress([(m, n) for m in mlms for n in ns], "coupling grids"):
        loaded, cond = mlms[name]
        x0, y0 = starts[(name, n)]
        decode_, embed_ = drift_readers(loaded, embedder)  # tokens -> texts -> embeddings
        times, runs = coupling_drift_grid(cond, x0.to(device), y0.to(device), taus=taus, max_steps=budget[n],
                                          drift_steps=drift_budget[n], records=records, seed=seed, decode=decode_,
                                          embed=embed_, store=store, key=f"survey-n{n}", tag={"model": name})
        for tau in taus:
            coupling[(name, n, tau)] = times[tau]
            drift_raw[(name, n, tau)] = runs[tau]
    return coupling, drift_raw


def coupon_anchor(ns: Sequence[int], budget: Mapping[int, int], pairs: int, *, seed: int, n_boot: int,
                  store: Store | None = None) -> list[dict[str, Any]]:
    """The uniform model's coupling times against the exact coupon-collector law, one row per ``n``.

    ``pairs`` pairs start at all-0 / all-1 (every site different) on ``toy.uniform(n, 4)`` and run
    ``budget[n]`` steps: the tau -> infinity limit of any chain, where a pair couples once every
    site has been drawn. A row: the Kaplan-Meier median with its bootstrap interval (``n_boot``),
    the exact median, the largest gap between the measured and exact survival curves, and the
    censored pairs."""
    rows = []
    for n in ns:
        uni = toy.uniform(n, 4)
        xa = torch.zeros(pairs, n, dtype=torch.long)
        ya = torch.ones(pairs, n, dtype=torch.long)
        cell, = coupling_grid(uni, xa, ya, taus=[1.0], max_steps=budget[n], seed=seed, store=store,
                              key=f"uniform-n{n}", tag={"model": "uniform"}).values()
        km = survival(cell.times, cell.censored, torch.arange(cell.cap + 1.0))
        lo, hi = median_draws_interval(bootstrap_medians({n: cell}, n_boot=n_boot, seed=seed)[n])
        rows.append({"n": n, "measured_median": km.median(), "median_lo": lo, "median_hi": hi,
                     "exact_median": toy.coupon_collector_median(n),
                     "max_abs_gap_survival": float((km.surv - toy.coupon_collector_survival(n, budget[n])).abs().max()),
                     "censored": int(cell.censored.sum())})
    return rows


@dataclass(frozen=True)
class PottsAnchor:
    """A compatible Potts toy (n = 5, q = 3) whose law is exact: ``survival`` of the measured
    coupling times of the all-0/all-1 pair over ``t`` = 0..steps, ``pair_tv`` ``[steps + 1]`` the
    exact TV between the two chains' laws (the coupling inequality puts the survival above it),
    ``d`` ``[steps + 1]`` the exact worst-case distance to stationarity, ``t_mix`` its 1/4 time, and
    ``violations`` the grid points where the survival falls below ``pair_tv`` by more than 3
    standard errors."""

    survival: Survival
    pair_tv: torch.Tensor
    d: torch.Tensor
    t_mix: float
    violations: int


def potts_anchor(pairs: int, *, seed: int, steps: int = 300, store: Store | None = None) -> PottsAnchor:
    """:class:`PottsAnchor` from ``pairs`` coupled pairs run ``steps`` steps (seeded)."""
    potts = toy.potts_chain(5, 3, coupling=1.5, field=0.3, seed=seed)
    P = toy.transition_matrix(potts, 1.0)
    d = toy.tv_to_stationarity(P, toy.stationary(P), steps)
    x, y = torch.zeros(1, 5, dtype=torch.long), torch.ones(1, 5, dtype=torch.long)
    pair_tv = toy.pair_tv(P, int(toy.state_index(x, 3)), int(toy.state_index(y, 3)), steps)
    cell, = coupling_grid(potts, x.expand(pairs, 5).clone(), y.expand(pairs, 5).clone(), taus=[1.0],
                          max_steps=steps, seed=seed, store=store, key="potts", tag={"model": "potts"}).values()
    km = survival(cell.times, cell.censored, torch.arange(cell.cap + 1.0))
    return PottsAnchor(km, pair_tv, d, mixing_time(d, 0.25),
                       int(((km.surv + 3 / math.sqrt(pairs)) < pair_tv).sum()))
