"""Mixing measurements: survival curves with censoring, semantic drift, n log n scaling, crossover.

Chapter 3 turns Glauber runs into four kinds of numbers, all computed here:

- **Survival** ``P(T > t)`` of coupling (or hitting) times ``T``, with runs that never coupled inside
  the budget kept as *censored* (Kaplan-Meier), never dropped. For a coupling,
  ``d(t) <= P(T > t)``: the curve bounds the total-variation distance to stationarity.
- **Semantic drift** ``1 - cos(e(x_t), e(x_0))`` between sentence embeddings, its plateau, and a
  hitting time with the precise definition in :func:`hitting_times`.
- **Scaling** ``T / (n ln n)`` against ``n`` for each temperature: a fitted ``C(tau)`` and the
  crossover ``tau*(n)`` below which mixing leaves the budget or ``C`` blows up.
- **Exact anchors**: the coupon-collector law of the uniform model's coupling time (mean ``n H_n``,
  :func:`tokendyn.toy.coupon_collector_mean`), computed exactly, and the exact pair TV of a toy
  kernel, so the measured curves can be checked against them in the same figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from . import glauber
from .checkpoint import Store
from .checks import check_range
from .conditional import ConditionalModel

__all__ = [
    "Survival", "survival", "drift", "plateau", "hitting_times", "scaling_fit", "ScalingFit",
    "crossover", "coupon_collector_survival", "n_log_n", "pair_tv", "mixing_time",
    "coupling_grid", "coupling_drift_grid", "drift_run", "drift_grid", "DriftRun", "forgotten_drift", "start_states",
]


@dataclass(frozen=True)
class Survival:
    """A Kaplan-Meier survival curve evaluated on a grid of times.

    ``t`` [G] the grid; ``surv`` [G] the estimate of ``P(T > t)``; ``known`` [G] False where the
    estimate is undefined (beyond the last observed time when that one was censored: we only know
    ``P(T > t) <= surv`` there). ``n`` runs, ``n_censored`` of them never hit within their budget.
    """

    t: torch.Tensor
    surv: torch.Tensor
    known: torch.Tensor
    n: int
    n_censored: int

    def median(self) -> float:
        """The first grid time with ``surv <= 1/2`` (``inf`` if the known part never gets there)."""
        hit = (self.surv <= 0.5) & self.known
        return float(self.t[hit][0]) if bool(hit.any()) else math.inf


def _as_1d(name: str, x: torch.Tensor | Sequence[float]) -> torch.Tensor:
    x = torch.as_tensor(x, dtype=torch.float64).flatten()
    if x.numel() == 0:
        raise ValueError(f"{name} is empty: need at least one run")
    return x


def survival(times: torch.Tensor | Sequence[float], censored: torch.Tensor | Sequence[bool],
             grid: torch.Tensor | Sequence[float]) -> Survival:
    """Kaplan-Meier estimate of ``P(T > t)`` on ``grid`` from possibly censored times.

    ``times`` [N]: the hitting time of each run, or for a censored run the last time it was
    watched (its budget); ``censored`` [N] bool: True where the run had not hit by then. ``grid``
    [G] ascending. When every censored run shares one budget this is the plain fraction of runs
    with ``T > t`` for ``t`` below the budget; unequal budgets are handled exactly too.
    """
    t = _as_1d("times", times)
    c = torch.as_tensor(censored, dtype=torch.bool).flatten()
    g = _as_1d("grid", grid)
    if c.numel() != t.numel():
        raise ValueError(f"censored has {c.numel()} entries but times has {t.numel()}")
    if bool((t < 0).any()) or not bool(torch.isfinite(t).all()):
        raise ValueError("times must be finite and >= 0 (mark runs that never hit as censored)")
    if bool((g[1:] < g[:-1]).any()):
        raise ValueError("grid must be ascending")
    event_t = torch.unique(t[~c])
    surv_at_event = torch.ones(event_t.numel(), dtype=torch.float64)
    s = 1.0
    for k, te in enumerate(event_t.tolist()):
        at_risk = int((t >= te).sum())  # censored at te still counts as at risk at te
        deaths = int(((t == te) & ~c).sum())
        s *= 1.0 - deaths / at_risk
        surv_at_event[k] = s
    # S(g) = product over events <= g: index of the last event <= g
    idx = torch.searchsorted(event_t, g, right=True) - 1
    padded = torch.cat([torch.ones(1, dtype=torch.float64), surv_at_event])  # S = 1 before any event
    surv = padded[idx + 1]
    last_obs = float(t.max())
    last_censored = bool(c[t == last_obs].any())
    known = (g < last_obs) | ~torch.tensor(last_censored) | (surv == 0)
    return Survival(t=g, surv=surv, known=known, n=int(t.numel()), n_censored=int(c.sum()))


def drift(emb_t: torch.Tensor, emb_0: torch.Tensor) -> torch.Tensor:
    """Semantic drift ``1 - cos(e_t, e_0)``.

    ``emb_t`` [T, B, d]: embeddings of the B chains at T recorded times; ``emb_0`` [B, d]: the
    embeddings of their starting states. Returns [T, B] in [0, 2], computed in float64.
    """
    if emb_t.dim() != 3 or emb_0.dim() != 2 or emb_t.shape[1:] != emb_0.shape:
        raise ValueError(f"need emb_t [T, B, d] and emb_0 [B, d], got {tuple(emb_t.shape)} and "
                         f"{tuple(emb_0.shape)}")
    a = torch.nn.functional.normalize(emb_t.double(), dim=-1)
    b = torch.nn.functional.normalize(emb_0.double(), dim=-1)
    return 1.0 - (a * b[None]).sum(-1)


def plateau(d: torch.Tensor, *, tail: float = 0.25) -> tuple[float, bool]:
    """The drift plateau of a group of chains, and whether it was reached.

    ``d`` [T, B] drift at T recorded times. The plateau is the mean over chains and over the last
    ``tail`` fraction of the recorded times. It counts as reached when the mean over the window just
    before the tail (same length) is within two standard errors (or 5 %) of it: a drift curve still
    rising at the end of the budget has not plateaued.
    """
    check_range("tail", tail, 0.0, 0.5, lo_open=True)
    T = d.shape[0]
    k = max(1, int(round(T * tail)))
    if 2 * k > T:
        raise ValueError(f"need at least {2 * k} recorded times for tail={tail}, got {T}")
    last = d[T - k:].double().mean(0)  # [B]: per-chain tail means
    prev = d[T - 2 * k:T - k].double().mean(0)
    level = float(last.mean())
    diff = last - prev
    se = float(diff.std() / math.sqrt(diff.numel())) if diff.numel() > 1 else 0.0
    reached = abs(float(diff.mean())) <= max(2.0 * se, 0.05 * abs(level))
    return level, reached


def hitting_times(d: torch.Tensor, t: torch.Tensor | Sequence[float], *, level: float,
                  reached: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Drift hitting times: per chain, the first recorded time with drift ``>= level``.

    The chapter's definition: ``level = theta * F`` (``theta = 0.9``) where ``F`` is the
    *forgotten level* of the same (model, tau, n) group: :func:`forgotten_drift` averaged over the
    chains and the last quarter of the run. A chain hits when it is nearly as far from its own start
    as from the other chains' starts; a chain stuck near its start never does, however flat its own
    curve. ``d`` [T, B] drift at the times ``t`` [T].
    Returns ``(times [B], censored [B])``: a chain that never reaches ``level`` is censored at the
    last recorded time; if the group's plateau was not ``reached`` every chain is censored there,
    because the level itself is not yet known.
    """
    tt = _as_1d("t", t)
    if d.dim() != 2 or d.shape[0] != tt.numel():
        raise ValueError(f"d must be [T, B] with T = len(t) = {tt.numel()}, got {tuple(d.shape)}")
    above = d >= level  # [T, B]
    first = torch.where(above.any(0), above.double().argmax(0), torch.full_like(above[0], -1,
                                                                                   dtype=torch.long))
    censored = (first < 0) | (not reached)
    times = torch.where(censored, tt[-1].expand(d.shape[1]), tt[first.clamp(min=0)])
    return times, censored


def n_log_n(n: int | float) -> float:
    """``n ln n``, the Dobrushin-regime mixing scale (natural log)."""
    return n * math.log(n)


@dataclass(frozen=True)
class ScalingFit:
    """``T(n) ~ C n ln n`` fitted through the origin over lengths ``ns``.

    ``ratios`` [len(ns)]: ``T(n) / (n ln n)`` (inf where T is censored); ``C`` the least-squares
    constant (inf if any T is inf); ``slope`` the exponent ``beta`` of ``ratio ~ n^beta`` (0 when
    the n ln n law holds exactly; nan with fewer than two finite points).
    """

    ns: tuple[int, ...]
    ratios: tuple[float, ...]
    C: float
    slope: float


def scaling_fit(ns: Sequence[int], times: Sequence[float]) -> ScalingFit:
    """Fit ``T = C n ln n`` (least squares through the origin) and the flatness slope.

    ``ns`` [K] lengths (>= 2) and ``times`` [K] a typical time at each (the chapter uses the
    Kaplan-Meier median, which is ``inf`` when more than half the runs are censored).
    """
    if len(ns) != len(times) or len(ns) == 0:
        raise ValueError("ns and times must be non-empty and of equal length")
    for n in ns:
        check_range("n", n, 2, None, integer=True)
    x = [n_log_n(n) for n in ns]
    ratios = tuple(float(T) / xi for T, xi in zip(times, x))
    if any(not math.isfinite(float(T)) for T in times):
        C = math.inf
    else:
        C = sum(float(T) * xi for T, xi in zip(times, x)) / sum(xi * xi for xi in x)
    fin = [(math.log(n), math.log(r)) for n, r in zip(ns, ratios) if math.isfinite(r) and r > 0]
    if len(fin) >= 2:
        mx = sum(a for a, _ in fin) / len(fin)
        my = sum(b for _, b in fin) / len(fin)
        slope = (sum((a - mx) * (b - my) for a, b in fin) / sum((a - mx) ** 2 for a, _ in fin))
    else:
        slope = math.nan
    return ScalingFit(ns=tuple(int(n) for n in ns), ratios=ratios, C=C, slope=slope)


def crossover(ratios: Mapping[float, float], *, blowup: float = 3.0) -> tuple[float, float]:
    """The crossover temperature for one length n, bracketed on the tau grid.

    ``ratios`` maps tau -> ``T / (n ln n)`` at this n (inf when censored past the budget). The
    reference ``C_inf`` is the ratio at the highest tau. A temperature *mixes* when its ratio is
    finite and at most ``blowup * C_inf``. Returns ``(tau_lo, tau_hi)``: ``tau_hi`` the smallest
    grid tau from which every higher tau mixes, ``tau_lo`` the grid point just below it (``nan``
    when even the lowest tau mixes: the crossover is below the grid; ``tau_hi`` is ``nan`` when the
    highest tau does not mix, so the crossover is above the grid).
    """
    check_range("blowup", blowup, 1.0, None)
    if not ratios:
        raise ValueError("ratios is empty")
    taus = sorted(ratios)
    ref = ratios[taus[-1]]
    if not math.isfinite(ref):
        return taus[-1], math.nan
    hi_idx = len(taus) - 1
    for k in range(len(taus) - 1, -1, -1):
        r = ratios[taus[k]]
        if math.isfinite(r) and r <= blowup * ref:
            hi_idx = k
        else:
            break
    return (taus[hi_idx - 1] if hi_idx > 0 else math.nan), taus[hi_idx]


def coupon_collector_survival(n: int, t_max: int) -> torch.Tensor:
    """Exact ``P(T > t)`` for t = 0..t_max, T the coupon-collector time over n sites.

    This is the law of the maximal-coupling time of two uniform-model chains whose n sites all
    start different: a chosen site couples with probability 1 and stays coupled. Computed by
    dynamic programming over the number of uncovered sites (stable, unlike inclusion-exclusion).
    Returns [t_max + 1] float64.
    """
    check_range("n", n, 1, None, integer=True)
    check_range("t_max", t_max, 0, None, integer=True)
    p = torch.zeros(n + 1, dtype=torch.float64)  # p[m] = P(m sites still uncovered)
    p[n] = 1.0
    m = torch.arange(n + 1, dtype=torch.float64)
    out = torch.empty(t_max + 1, dtype=torch.float64)
    out[0] = 1.0 - p[0]
    for t in range(1, t_max + 1):
        cover = p * m / n  # mass that covers a new site this step
        p = p - cover
        p[:-1] += cover[1:]
        out[t] = 1.0 - p[0]
    return out


def pair_tv(P: torch.Tensor, ix: int, iy: int, steps: int) -> torch.Tensor:
    """Exact ``TV(P^t(x, .), P^t(y, .))`` for t = 0..steps from a kernel ``P`` [S, S] -> [steps + 1].

    For any coupling of chains started at x and y this is at most ``P(T_xy > t)``: the exact
    lower curve the measured coupling survival must lie above.
    """
    check_range("steps", steps, 0, integer=True)
    S = P.shape[0]
    for name, i in (("ix", ix), ("iy", iy)):
        check_range(name, i, 0, S - 1, integer=True)
    rows = torch.zeros(2, S, dtype=torch.float64)
    rows[0, ix] = rows[1, iy] = 1.0
    out = torch.empty(steps + 1, dtype=torch.float64)
    for t in range(steps + 1):
        out[t] = 0.5 * (rows[0] - rows[1]).abs().sum()
        rows = rows @ P.double()
    return out


def mixing_time(d: torch.Tensor, eps: float = 0.25) -> float:
    """The first t with ``d[t] <= eps`` for a curve ``d`` [T+1] indexed by t (``inf`` if never)."""
    check_range("eps", eps, 0.0, 1.0, lo_open=True)
    hit = (d <= eps).nonzero()
    return float(hit[0, 0]) if hit.numel() else math.inf


def _tau_grid(taus: Sequence[float]) -> list[float]:
    """Checked temperatures of a grid, as floats (at least one)."""
    taus = [float(t) for t in taus]
    if not taus:
        raise ValueError("taus must hold at least one temperature")
    for tau in taus:
        glauber.check_tau(tau)
    return taus


def _per_row(taus: list[float], rows: int, device: torch.device) -> torch.Tensor:
    """``[len(taus) * rows]`` temperatures: each tau repeated for its block of rows."""
    return torch.tensor(taus, dtype=torch.float64, device=device).repeat_interleave(rows)


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


def _times_by_tau(cell: Mapping[str, torch.Tensor], taus: list[float],
                  B: int) -> dict[float, tuple[torch.Tensor, torch.Tensor]]:
    """A grid cell's ``times`` and ``censored`` ``[len(taus) * B]`` -> ``{tau: (times [B], censored [B])}``."""
    return {tau: (cell["times"][k * B:(k + 1) * B], cell["censored"][k * B:(k + 1) * B])
            for k, tau in enumerate(taus)}


def _runs_by_tau(cell: Mapping[str, torch.Tensor], taus: list[float]) -> dict[float, "DriftRun"]:
    """A grid cell's drift ``[T, len(taus), B, ...]`` -> ``{tau: DriftRun}``."""
    return {tau: DriftRun(t=cell["t"], drift=cell["drift"][:, j], forgotten=cell["forgotten"][:, j],
                          trajectory=cell["trajectory"][:, j]) for j, tau in enumerate(taus)}


def coupling_grid(model: ConditionalModel, x0: torch.Tensor, y0: torch.Tensor, *,
                  taus: Sequence[float], max_steps: int, seed: int, coupling: str = "maximal",
                  store: Store | None = None, key: str = "coupling",
                  tag: Mapping[str, object] | None = None) -> dict[float, tuple[torch.Tensor, torch.Tensor]]:
    """Coupling times of the row pairs ``x0``, ``y0`` [B, n] at every tau, ready for :func:`survival`.

    Returns ``{tau: (times [B], censored [B])}`` with a censored pair's time set to ``max_steps``,
    the last step it was watched. The whole grid runs as one batch of ``len(taus) * B`` pairs,
    each with its own temperature, and pairs leave the batch once coupled
    (:func:`~tokendyn.glauber.coupling_times` with ``drop_coupled``). The grid is one
    checkpointed cell of ``store``, so an interrupted survey resumes at the first unfinished
    (model, n). The cell is keyed by the model itself (its configuration, weights, dtype and the
    library version: :func:`tokendyn.checkpoint.model_fingerprint`), so another model or
    retrained weights never reuse it; ``tag`` names anything else that should tell cells apart.
    """
    store = store or Store(None)
    taus = _tau_grid(taus)
    B = x0.shape[0]
    params = {"taus": taus, "max_steps": max_steps, "seed": seed, "coupling": coupling,
              "x0": x0.tolist(), "y0": y0.tolist(), **dict(tag or {})}

    def run() -> dict[str, torch.Tensor]:
        k = len(taus)
        tau = _per_row(taus, B, x0.device)
        r = glauber.coupling_times(model, x0.repeat(k, 1), y0.repeat(k, 1), tau=tau,
                                   max_steps=max_steps, seed=seed, coupling=coupling,
                                   drop_coupled=True)
        return {"times": torch.where(r.coupled, r.times, max_steps).cpu(),
                "censored": (~r.coupled).cpu()}

    cell = store.get_or_compute(key, params, run, model=model)
    return _times_by_tau(cell, taus, B)


@dataclass(frozen=True)
class DriftRun:
    """Drift along B chains recorded at T times.

    ``t`` [T] steps; ``drift`` [T, B] ``1 - cos`` to each chain's own start; ``forgotten``
    [T, B] the mean ``1 - cos`` to the *other* chains' starts (the drift a chain shows once it has
    forgotten where it started); ``trajectory`` [T, B, n] the recorded states.
    """

    t: torch.Tensor
    drift: torch.Tensor
    forgotten: torch.Tensor
    trajectory: torch.Tensor


def forgotten_drift(emb_t: torch.Tensor, emb_0: torch.Tensor) -> torch.Tensor:
    """Mean ``1 - cos(e(x_t^b), e(x_0^c))`` over the other chains ``c != b``.

    ``emb_t`` [T, B, d], ``emb_0`` [B, d] with B >= 2 -> [T, B] float64. A chain that has forgotten
    its start is as far from its own start as from the others': ``drift`` reaches this level.
    """
    if emb_0.shape[0] < 2:
        raise ValueError("forgotten_drift needs at least 2 chains (B >= 2)")
    a = torch.nn.functional.normalize(emb_t.double(), dim=-1)
    b = torch.nn.functional.normalize(emb_0.double(), dim=-1)
    cos = torch.einsum("tbd,cd->tbc", a, b)  # [T, B, B]
    B = emb_0.shape[0]
    off = ~torch.eye(B, dtype=torch.bool)
    return 1.0 - (cos * off).sum(-1) / (B - 1)


def drift_run(model: ConditionalModel, x0: torch.Tensor, *, tau: float, steps: int,
              record_every: int, seed: int, decode: Callable[[torch.Tensor], list[str]],
              embed: Callable[[list[str]], torch.Tensor], store: Store | None = None,
              key: str = "drift", tag: Mapping[str, object] | None = None) -> DriftRun:
    """Semantic drift along Glauber chains started at ``x0`` [B, n] (B >= 2).

    ``decode`` maps tokens [N, n] to N strings and ``embed`` maps N strings to [N, d] embeddings.
    Returns a :class:`DriftRun` recorded every ``record_every`` steps including t = 0.
    Checkpointed as one cell of ``store``.
    """
    check_range("record_every", record_every, 1, integer=True)
    if x0.dim() != 2 or x0.shape[0] < 2:
        raise ValueError(f"x0 must be [B, n] with B >= 2 chains, got {tuple(x0.shape)}")
    params = {"tau": float(tau), "steps": steps, "record_every": record_every, "seed": seed,
              "x0": x0.tolist(), **dict(tag or {})}

    def run() -> dict[str, torch.Tensor]:
        res = glauber.sample(model, x0, steps=steps, tau=tau, seed=seed, record_every=record_every)
        traj = res.trajectory.cpu()  # [T, B, n]
        T, B, n = traj.shape
        emb = embed(decode(traj.reshape(T * B, n))).reshape(T, B, -1)
        return {"t": res.steps_recorded.cpu(), "drift": drift(emb, emb[0]),
                "forgotten": forgotten_drift(emb, emb[0]), "trajectory": traj}

    cell = (store or Store(None)).get_or_compute(key, params, run, model=model)
    return DriftRun(t=cell["t"], drift=cell["drift"], forgotten=cell["forgotten"],
                    trajectory=cell["trajectory"])


def drift_grid(model: ConditionalModel, x0: torch.Tensor, *, taus: Sequence[float], steps: int,
               record_every: int, seed: int, decode: Callable[[torch.Tensor], list[str]],
               embed: Callable[[list[str]], torch.Tensor], store: Store | None = None,
               key: str = "drift", tag: Mapping[str, object] | None = None) -> dict[float, DriftRun]:
    """:func:`drift_run` at every tau of a grid, as one batch of ``len(taus) * B`` chains.

    Returns ``{tau: DriftRun}``; each tau's chains start at ``x0`` [B, n] (B >= 2) and their
    forgotten level is computed among themselves. One checkpointed cell of ``store``.
    """
    check_range("record_every", record_every, 1, integer=True)
    if x0.dim() != 2 or x0.shape[0] < 2:
        raise ValueError(f"x0 must be [B, n] with B >= 2 chains, got {tuple(x0.shape)}")
    taus = _tau_grid(taus)
    B = x0.shape[0]
    params = {"taus": taus, "steps": steps, "record_every": record_every, "seed": seed,
              "x0": x0.tolist(), **dict(tag or {})}

    def run() -> dict[str, torch.Tensor]:
        k = len(taus)
        tau = _per_row(taus, B, x0.device)
        res = glauber.sample(model, x0.repeat(k, 1), steps=steps, tau=tau, seed=seed,
                             record_every=record_every)
        return {"t": res.steps_recorded.cpu(), **_drift_cell(res.trajectory.cpu(), k, decode, embed)}

    cell = (store or Store(None)).get_or_compute(key, params, run, model=model)
    return _runs_by_tau(cell, taus)


def coupling_drift_grid(model: ConditionalModel, x0: torch.Tensor, y0: torch.Tensor, *,
                        taus: Sequence[float], max_steps: int, drift_steps: int, records: int,
                        seed: int, decode: Callable[[torch.Tensor], list[str]],
                        embed: Callable[[list[str]], torch.Tensor], coupling: str = "maximal",
                        store: Store | None = None, key: str = "survey",
                        tag: Mapping[str, object] | None = None
                        ) -> tuple[dict[float, tuple[torch.Tensor, torch.Tensor]], dict[float, DriftRun]]:
    """:func:`coupling_grid` and the semantic drift of the same chains, from one run.

    Each coupled pair's first chain (started at ``x0`` [B, n], B >= 2) is an exact Glauber chain
    whatever the coupling does to the pair, so its drift is read from the coupling run: it is
    recorded ``records`` times over the first ``drift_steps`` steps (at least one step apart),
    decoded and embedded. Returns ``({tau: (times [B], censored [B])}, {tau: DriftRun})``, one
    checkpointed cell of ``store``. Costs the coupling run only (pairs stay in the batch until the
    last record), instead of a coupling run plus a separate drift run.
    """
    store = store or Store(None)
    taus = _tau_grid(taus)
    check_range("records", records, 1, integer=True)
    check_range("drift_steps", drift_steps, records, max_steps, integer=True)
    if x0.dim() != 2 or x0.shape[0] < 2:
        raise ValueError(f"x0 must be [B, n] with B >= 2 pairs, got {tuple(x0.shape)}")
    B = x0.shape[0]
    every = drift_steps // records
    params = {"taus": taus, "max_steps": max_steps, "record_every": every, "records": records,
              "seed": seed, "coupling": coupling, "x0": x0.tolist(), "y0": y0.tolist(), **dict(tag or {})}

    def run() -> dict[str, torch.Tensor]:
        k = len(taus)
        tau = _per_row(taus, B, x0.device)
        r = glauber.coupling_times(model, x0.repeat(k, 1), y0.repeat(k, 1), tau=tau,
                                   max_steps=max_steps, seed=seed, coupling=coupling,
                                   drop_coupled=True, record_every=every,
                                   record_steps=every * records)
        return {"times": torch.where(r.coupled, r.times, max_steps).cpu(), "censored": (~r.coupled).cpu(),
                "t": r.steps_recorded.cpu(), **_drift_cell(r.trajectory.cpu(), k, decode, embed)}

    cell = store.get_or_compute(key, params, run, model=model)
    return _times_by_tau(cell, taus, B), _runs_by_tau(cell, taus)


def start_states(loaded, n: int, count: int, *, topics: Sequence[str], seed: int = 0) -> torch.Tensor:
    """Starting states from real passages: ``count`` rows [count, n] of content token ids.

    Rows cycle through ``topics`` (``tokendyn.data`` topics), each row the first ``n`` tokens of
    the next passage of its topic that has at least ``n`` tokens. Two calls with disjoint topic
    lists give pairs of different real passages, the paper's coupling starts.
    """
    from .conditional import content_ids
    from .data import passages

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
