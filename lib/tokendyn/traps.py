"""The low-temperature landscape of a Glauber chain: perfect traps, the exp(1/tau) law, approximate
traps and repetition basins (chapter 4, Paper 1's claims 6 and 7).

Perfect traps and their leave probabilities
    A state ``x`` is a *perfect trap* when every content token is the strict argmax of its own
    masked conditional: every site margin ``m_i = l_i(x_i) - max_{v != x_i} l_i(v)`` is positive
    (:func:`margins`, :func:`is_perfect_trap`). :func:`greedy_traps` finds them by argmax sweeps
    from real starts; :func:`verify_traps` re-checks a recorded trap from the model and the ids
    alone. The exact per-step leave probability of random-scan Glauber from ``x`` is
    ``q(tau) = (1/n) sum_i P_tau(draw != x_i | x_-i)`` (:func:`log_leave_probability`), computed
    here in log space from the probabilities of the *other* tokens, so it stays exact when ``q`` is
    far below float64's ``1e-16`` resolution next to 1 (``1 - p_stay`` would round to 0 there).

The exp(1/tau) law
    As ``tau -> 0``, ``q(tau) ~ (k/n) exp(-m/tau)`` with ``m`` the smallest margin and ``k`` the
    number of (site, token) pairs that attain it, so on an Arrhenius plot (``log q`` against
    ``1/tau``) the slope tends to ``-m`` and the intercept to ``log(k/n)``
    (:func:`arrhenius_fit`, :func:`arrhenius_asymptote`). The uniform-margin bound of the paper,
    ``q <= (|V| - 1) exp(-m/tau)``, is the line every trap stays under (:func:`log_margin_bound`).
    The dwell in the exact state is Geometric(q): :func:`dwell_check` compares observed dwells
    (censored at the budget) with it, through the restricted mean ``E[min(T, S + 1)]``, which is
    exact under censoring, and the largest gap between survival curves.

Kinetic Monte Carlo
    At low temperature a plain sampler spends almost every step re-drawing the current token.
    :func:`kinetic_sample` simulates the *same* random-scan chain rejection-free (Bortz, Kalos and
    Lebowitz 1975): from ``x`` it draws the holding time ``T ~ Geometric(q(x))`` exactly, then the
    move ``(i, v)`` with probability ``p_i(v) / (n q)`` for ``v != x_i``. One move costs one
    evaluation of every site (``n`` masked passes) however many steps it spans, so dwells of
    thousands of steps cost tens of passes. :func:`state_at` reads the state at any Glauber step.

Approximate traps and repetition basins
    :func:`basin_dwell` starts chains in each trap and times their exit from its Hamming ball of
    radius ``h`` (:func:`basin_exit_times`): the dwell in the trap's basin, not only in the exact
    state. :func:`hamming_dwell` measures, for a centre state on a trajectory, how many steps the chain
    stays within Hamming distance ``h`` of it; :func:`approximate_traps` keeps centres held for at
    least ``L`` steps. :func:`dominance` (share of sites holding the most common token) marks
    repetition basins such as a run of ``!``; :func:`window_repeat` is the share of sites whose
    token occurs elsewhere in the window, the statistic the Models appendix compares between text
    and the model's first guess (:func:`head_repeat`).

Shapes: ``B`` chains or states, ``n`` content sites, ``V`` vocabulary, ``T`` temperatures or
records, ``M`` moves. Token ids are content ids (no wrapping specials), as everywhere in the book.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .checks import check_range
from .conditional import ConditionalModel, check_tokens
from .glauber import check_tau, greedy_fixed_point, make_generator, sample
from .influence import all_site_logits
from .sampling import draw
from .stats import Estimate, bootstrap

__all__ = ["margins", "is_perfect_trap", "GreedyTraps", "greedy_traps", "verify_traps", "TrapRecord",
           "trap_records", "log_exit_probabilities", "log_leave_probability", "leave_curve",
           "ArrheniusFit", "arrhenius_fit", "arrhenius_asymptote", "log_margin_bound", "margin_bound",
           "closest_leave_temperature", "tau_for_dwell",
           "restricted_mean_geometric", "geometric_survival", "DwellCheck", "dwell_check", "first_exit_times",
           "KineticRun", "kinetic_sample", "state_at", "hamming_dwell", "HeldStates",
           "approximate_traps", "durations", "dominance", "dominant_token", "window_repeat", "head_repeat",
           "fraction_estimate", "Chains", "long_chains", "census_starts", "TrapCensus", "trap_census",
           "DwellLaw", "dwell_law", "basin_exit_times", "BasinDwell", "basin_dwell"]

Temperature = float | Tensor


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
    (masked-site logits at ``tau = 1``, :func:`tokendyn.influence.all_site_logits`), ``x`` ``[B, n]``
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

    The same fixed points as :func:`tokendyn.glauber.greedy_fixed_point` (it runs one sweep at a
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
    ranked by ``seed`` (:func:`tokendyn.topics.topic_split`), their first ``n_tokens`` content
    tokens, topic after topic, cut to ``n_starts`` rows -> ``[n_starts, n_tokens]`` content ids (CPU)."""
    from .conditional import content_ids
    from .topics import topic_split

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


# --- exact leave probabilities and the exp(1/tau) law ------------------------------------------

def _tau_column(tau: Temperature, b: int, device: torch.device) -> Tensor:
    check_tau(tau, b)
    if isinstance(tau, Tensor):
        return tau.to(device=device, dtype=torch.float64).reshape(b, 1, 1)
    return torch.full((b, 1, 1), float(tau), dtype=torch.float64, device=device)


def log_exit_probabilities(logits: Tensor, x: Tensor, tau: Temperature) -> Tensor:
    """``log P_tau(draw != x_i | x_-i)`` per site: ``logits`` ``[B, n, V]``, ``x`` ``[B, n]``, ``tau``
    a float or ``[B]`` -> ``[B, n]`` float64.

    Computed as ``logsumexp_{v != x_i}(l_v / tau) - logsumexp_v(l_v / tau)``: exact in relative
    terms down to ``exp(-745)``, where ``log(1 - p_stay)`` would give ``-inf`` below ``1e-16``.
    ``-inf`` logits (tokens outside the support) have probability 0.
    """
    _check_logits(logits, x)
    s = logits.double() / _tau_column(tau, x.shape[0], logits.device)
    total = torch.logsumexp(s, -1)
    others = torch.logsumexp(s.scatter(-1, x.long().unsqueeze(-1), float("-inf")), -1)
    return others - total


def log_leave_probability(logits: Tensor, x: Tensor, tau: Temperature) -> Tensor:
    """``log q`` with ``q = (1/n) sum_i P_tau(draw != x_i | x_-i)``, the exact per-step leave
    probability of random-scan Glauber from ``x``: ``[B, n, V]``, ``[B, n]`` -> ``[B]`` float64."""
    le = log_exit_probabilities(logits, x, tau)
    return torch.logsumexp(le, -1) - math.log(x.shape[1])


def leave_curve(logits: Tensor, x: Tensor, taus: Sequence[float]) -> Tensor:
    """``log q(tau)`` over a grid ``taus`` ``[T]``: ``[B, n, V]``, ``[B, n]`` -> ``[T, B]`` float64.
    The logits do not depend on ``tau``, so the whole curve costs no model evaluation."""
    taus = [float(t) for t in taus]
    if not taus:
        raise ValueError("taus must not be empty")
    for t in taus:
        check_tau(t)
    return torch.stack([log_leave_probability(logits, x, t) for t in taus])


@dataclass(frozen=True)
class ArrheniusFit:
    """Least-squares line ``log q = intercept + slope / tau`` per state: ``slope``, ``intercept``
    ``[B]`` float64, and ``taus`` the grid it was fitted on."""

    slope: Tensor
    intercept: Tensor
    taus: tuple[float, ...]


def arrhenius_fit(taus: Sequence[float], log_q: Tensor) -> ArrheniusFit:
    """Fit ``log q`` ``[T, B]`` against ``1 / tau`` over ``taus`` ``[T]`` (at least two distinct),
    one line per column -> :class:`ArrheniusFit`."""
    taus = tuple(float(t) for t in taus)
    for t in taus:
        check_tau(t)
    if len(set(taus)) < 2:
        raise ValueError("taus must hold at least two distinct temperatures to fit a line")
    if log_q.dim() != 2 or log_q.shape[0] != len(taus):
        raise ValueError(f"log_q must be [T={len(taus)}, B], got {tuple(log_q.shape)}")
    if not bool(torch.isfinite(log_q).all()):
        raise ValueError("log_q must be finite (a leave probability of exactly 0 has no Arrhenius line)")
    u = torch.tensor([1.0 / t for t in taus], dtype=torch.float64)
    uc = u - u.mean()
    y = log_q.double()
    slope = (uc[:, None] * (y - y.mean(0))).sum(0) / (uc * uc).sum()
    return ArrheniusFit(slope=slope, intercept=y.mean(0) - slope * u.mean(), taus=taus)


def arrhenius_asymptote(logits: Tensor, x: Tensor, *, rel_tol: float = 1e-9) -> tuple[Tensor, Tensor]:
    """The ``tau -> 0`` asymptote of ``log q`` for perfect traps: ``(slope, intercept)`` ``[B]``
    float64 with ``slope = -m`` (the smallest margin) and ``intercept = log(k / n)``, ``k`` the number
    of (site, token) pairs within ``rel_tol`` of that margin."""
    _check_logits(logits, x)
    L = logits.double()
    gap = L.gather(-1, x.long().unsqueeze(-1)) - L       # [B, n, V], margins to each token
    gap = gap.scatter(-1, x.long().unsqueeze(-1), float("inf"))
    m = gap.flatten(1).amin(-1)                           # [B]
    k = (gap.flatten(1) <= m[:, None] + rel_tol * m.abs().clamp_min(1.0)[:, None]).sum(-1)
    return -m, torch.log(k.double() / x.shape[1])


def log_margin_bound(margin: float | Tensor, support_size: int, tau: float) -> float | Tensor:
    """``log[(|V| - 1) exp(-m / tau)]``, the uniform-local-margin bound on ``log q`` for a state
    whose every site has margin ``>= m`` (``margin`` a float or a tensor of them)."""
    check_range("support_size", support_size, 2, integer=True)
    check_tau(tau)
    return math.log(support_size - 1) - margin / tau


def margin_bound(margin: float, support_size: int, tau: float) -> float:
    """``(|V| - 1) exp(-m / tau)``, the exp of :func:`log_margin_bound` for one margin: ``inf`` where
    it overflows (a very negative margin: the bound says nothing), 0 for a one-token support."""
    check_range("margin", margin)
    check_range("support_size", support_size, 1, integer=True)
    check_tau(tau)
    if support_size == 1:
        return 0.0
    log_b = float(log_margin_bound(margin, support_size, tau))
    return math.exp(log_b) if log_b < 709.0 else math.inf


def closest_leave_temperature(logits: Tensor, x: Tensor, taus: Sequence[float], target: float) -> tuple[float, float]:
    """The grid temperature whose exact leave probability from one state is closest to ``target``
    on a log scale: ``logits`` ``[1, n, V]``, ``x`` ``[1, n]`` -> ``(tau, q)``, the first such tau of
    ``taus`` on a tie."""
    check_range("target", target, 0.0, 1.0, lo_open=True)
    if x.dim() != 2 or x.shape[0] != 1:
        raise ValueError(f"x must be one state [1, n], got {tuple(x.shape)}")
    if len(taus) == 0:
        raise ValueError("taus is empty")
    log_q = leave_curve(logits, x, taus)[:, 0]
    k = int(torch.argmin((log_q - math.log(target)).abs()))
    return taus[k], float(log_q[k].exp())


def tau_for_dwell(logits: Tensor, x: Tensor, steps: float, *, lo: float = 1e-3, hi: float = 10.0,
                  iters: int = 24) -> Tensor:
    """The temperature at which the expected dwell ``1/q`` in each perfect trap equals ``steps``:
    ``[B, n, V]``, ``[B, n]`` -> ``[B]`` float64, by bisection in ``log tau`` (``q`` rises with
    ``tau`` on a perfect trap); ``iters`` halvings of ``[log lo, log hi]`` give ``tau`` to a relative
    ``(log(hi / lo)) / 2^iters`` (``6e-7`` at the defaults). ``lo`` (``hi``) is returned where even
    ``tau = lo`` (``hi``) gives a longer (shorter) dwell."""
    check_range("steps", steps, 1.0, lo_open=True)
    check_range("iters", iters, 1, 60, integer=True)
    check_tau(lo)
    check_tau(hi)
    if not lo < hi:
        raise ValueError(f"lo={lo} must be below hi={hi}")
    target = -math.log(steps)
    a = torch.full((x.shape[0],), math.log(lo), dtype=torch.float64)
    b = torch.full((x.shape[0],), math.log(hi), dtype=torch.float64)
    for _ in range(iters):
        mid = (a + b) / 2
        lq = log_leave_probability(logits, x, torch.exp(mid).to(logits.device)).cpu()
        above = lq > target   # leaves too often: colder
        b = torch.where(above, mid, b)
        a = torch.where(above, a, mid)
    return torch.exp((a + b) / 2)


def restricted_mean_geometric(q: float, steps: int) -> float:
    """``E[min(T, S + 1)]`` for ``T ~ Geometric(q)`` on ``{1, 2, ...}`` and ``S = steps``:
    ``(1 - (1 - q)^(S + 1)) / q``. The mean dwell a budget of ``S`` steps can show, with chains still
    in the state at the end counted as ``S + 1`` (:func:`first_exit_times`)."""
    check_range("q", q, 0.0, 1.0, lo_open=True)
    check_range("steps", steps, 0, integer=True)
    return -math.expm1((steps + 1) * math.log1p(-q)) / q if q < 1 else 1.0


def geometric_survival(q: float, t: Tensor) -> Tensor:
    """``P(T > t) = (1 - q)^t`` for a Geometric(q) dwell time, at steps ``t`` ``[K]`` -> ``[K]``."""
    check_range("q", q, 0, 1)
    return (1 - q) ** t.double()


def first_exit_times(trajectory: Tensor) -> tuple[Tensor, Tensor]:
    """Steps until each chain first leaves its starting state, from states recorded every step
    ``[S + 1, B, n]`` -> (times ``[B]``, exited ``[B]`` bool); a chain still there after ``S`` steps
    is censored at ``S + 1``."""
    if trajectory.dim() != 3 or trajectory.shape[0] < 2:
        raise ValueError(f"trajectory must be [S + 1, B, n] with S >= 1, got {tuple(trajectory.shape)}")
    S = trajectory.shape[0] - 1
    moved = (trajectory[1:] != trajectory[:1]).any(-1)    # [S, B]
    exited = moved.any(0)
    first = torch.where(exited, moved.long().argmax(0) + 1, torch.full_like(exited, S + 1, dtype=torch.long))
    return first, exited


@dataclass(frozen=True)
class DwellCheck:
    """Observed dwell in one state against Geometric(q), for chains watched ``steps`` steps.

    ``observed``: mean of ``min(T, S + 1)`` with a bootstrap interval; ``predicted``: its exact
    value :func:`restricted_mean_geometric`; ``max_gap``: the largest ``|P_obs(T > t) - (1-q)^t|``
    over ``t = 0..S``; ``band``: the 95% Kolmogorov band ``1.36 / sqrt(N)`` it is judged against;
    ``censored``: chains still in the state at the end."""

    q: float
    steps: int
    observed: Estimate
    predicted: float
    max_gap: float
    band: float
    censored: int

    @property
    def consistent(self) -> bool:
        """The prediction lies in the observed interval and the survival gap within the band."""
        return self.observed.lo <= self.predicted <= self.observed.hi and self.max_gap <= self.band


def dwell_check(times: Tensor, exited: Tensor, q: float | Tensor, steps: int, *, seed: int = 0,
                n_boot: int = 2000) -> DwellCheck:
    """Compare first-exit ``times`` ``[N]`` (censored at ``steps + 1`` where ``exited`` is False,
    as :func:`first_exit_times` gives them) with Geometric(``q``) -> :class:`DwellCheck`.

    ``q`` is one leave probability for every chain, or one per chain (``[N]``, chains started in
    different states): then the prediction is the mean of the chains' restricted means, the
    survival curve the mean of their Geometric survivals, and :attr:`DwellCheck.q` the mean ``q``.
    The band is the same Kolmogorov band (independent chains; conservative for discrete laws)."""
    t = times.double().flatten()
    e = exited.bool().flatten()
    if t.numel() < 2 or e.numel() != t.numel():
        raise ValueError("times and exited must hold the same N >= 2 chains")
    per_chain = isinstance(q, Tensor) and q.numel() > 1
    if per_chain:
        qv = q.detach().double().flatten().cpu()
        if qv.numel() != t.numel():
            raise ValueError(f"q holds {qv.numel()} values for {t.numel()} chains")
        if bool(((qv <= 0) | (qv > 1) | qv.isnan()).any()):
            raise ValueError("q must lie in (0, 1] for every chain")
    else:
        q = float(q)
        check_range("q", q, 0.0, 1.0, lo_open=True)
    check_range("steps", steps, 1, integer=True)
    if bool((t < 1).any()) or bool((t > steps + 1).any()) or bool((t[~e] != steps + 1).any()):
        raise ValueError(f"times must lie in [1, steps + 1 = {steps + 1}], censored ones at steps + 1")
    grid = torch.arange(steps + 1, dtype=torch.float64)
    surv_obs = (t[None, :] > grid[:, None]).double().mean(1)
    if per_chain:
        surv_geo = torch.where(qv[None, :] < 1, torch.exp(grid[:, None] * torch.log1p(-torch.where(qv < 1, qv, 0.0))[None, :]),
                               (grid[:, None] == 0).double()).mean(1)
        predicted = float(np.mean([restricted_mean_geometric(float(v), steps) for v in qv]))
        q_out = float(qv.mean())
    else:
        surv_geo = torch.exp(grid * math.log1p(-q)) if q < 1 else (grid == 0).double()
        predicted = restricted_mean_geometric(q, steps)
        q_out = q
    return DwellCheck(q=q_out, steps=int(steps), observed=bootstrap(t.numpy(), seed=seed, n_boot=n_boot),
                      predicted=predicted, max_gap=float((surv_obs - surv_geo).abs().max()),
                      band=1.36 / math.sqrt(t.numel()), censored=int((~e).sum()))


@dataclass(frozen=True)
class DwellLaw:
    """Output of :func:`dwell_law`, one temperature: ``chains`` chains started in each of ``traps``
    traps and watched ``steps`` steps. ``check``: the pooled :class:`DwellCheck` (every chain
    against Geometric of its own trap's exact ``q``); ``ratio``: observed over predicted restricted
    mean dwell, with the observed interval divided by the prediction; ``times`` and ``exited``
    ``[traps, chains]``, ``q`` ``[traps]``."""

    tau: float
    traps: int
    chains: int
    steps: int
    check: DwellCheck
    ratio: Estimate
    times: Tensor
    exited: Tensor
    q: Tensor


def basin_exit_times(model: ConditionalModel, centres: Tensor, *, tau: float, steps: int, h: int, seed: int,
                     first_segment: int = 4, max_segment: int = 1024) -> tuple[Tensor, Tensor]:
    """First exit of plain random-scan chains from the Hamming ball of radius ``h`` around their
    start: chain ``b`` starts at ``centres[b]`` (``[B, n]``) and exits at the first step its state
    differs from ``centres[b]`` at more than ``h`` sites (``h = 0``: the exact state, the trap's
    Geometric(q) dwell; ``h = 2``: the basin of Paper 1's approximate traps). Watched up to
    ``steps`` steps -> (times ``[B]`` long, censored at ``steps + 1``; exited ``[B]`` bool), on CPU.

    The chains run in segments of ``first_segment``, ``first_segment``, then doubling up to
    ``max_segment`` steps; a chain that has exited drops out and the others continue from their
    state with the next seed (``seed + segment``), the same Markov chain, so the cost is the chains'
    dwell, not ``steps`` each.
    """
    check_tokens(model, centres, "centres")
    check_tau(tau)
    check_range("steps", steps, 1, integer=True)
    check_range("h", h, 0, centres.shape[1] - 1, integer=True)
    check_range("first_segment", first_segment, 1, integer=True)
    check_range("max_segment", max_segment, first_segment, integer=True)
    B = centres.shape[0]
    t_exit = torch.full((B,), steps + 1, dtype=torch.long)
    live = torch.arange(B)
    x = centres
    done, seg, length = 0, 0, first_segment
    while done < steps and live.numel():
        s = min(length, steps - done)
        run = sample(model, x, steps=s, tau=float(tau), seed=seed + seg, record_every=1)
        far = (run.trajectory[1:].cpu() != centres[live.to(centres.device)].cpu()[None]).sum(-1) > h   # [s, b]
        e = far.any(0)
        t_exit[live[e]] = done + far.long().argmax(0)[e] + 1
        keep = (~e).to(x.device)
        x, live = run.tokens[keep], live[~e]
        done += s
        if seg >= 1:
            length = min(2 * length, max_segment)
        seg += 1
    return t_exit, t_exit <= steps


def dwell_law(model: ConditionalModel, tokens: Tensor, logits: Tensor, taus: Sequence[float], *, chains: int,
              steps: int, seed: int, first_segment: int = 4) -> dict[float, DwellLaw]:
    """The dwell law in many traps at once: ``chains`` plain random-scan chains
    (:func:`tokendyn.glauber.sample`) start in each trap ``tokens`` ``[K, n]`` at each temperature
    of ``taus``, are watched up to ``steps`` steps, and their first exit times
    (:func:`basin_exit_times` with ``h = 0``) are compared with Geometric of the trap's exact ``q`` (from its
    ``logits`` ``[K, n, V]``) by :func:`dwell_check`.

    The exit times are :func:`basin_exit_times` with ``h = 0`` (seed ``seed + 1000 j`` at the
    ``j``-th temperature): a chain still in its trap at the end of a segment restarts there with a
    fresh seed, by the Markov property the law of one uninterrupted run. -> ``{tau: DwellLaw}``."""
    check_range("chains", chains, 1, integer=True)
    check_range("steps", steps, 1, integer=True)
    check_range("first_segment", first_segment, 1, integer=True)
    if tokens.dim() != 2 or tokens.shape[0] < 1 or tokens.shape[0] * chains < 2:
        raise ValueError(f"tokens must be [K, n] with K chains >= 2, got {tuple(tokens.shape)} and chains={chains}")
    K = tokens.shape[0]
    start = tokens.repeat_interleave(chains, 0)
    out = {}
    for j, tau in enumerate(taus):
        tau = float(tau)
        check_tau(tau)
        q = log_leave_probability(logits, tokens, tau).exp().cpu()
        t_exit, exited = basin_exit_times(model, start, tau=tau, steps=steps, h=0, seed=seed + 1000 * j,
                                          first_segment=first_segment)
        chk = dwell_check(t_exit, exited, q.repeat_interleave(chains), steps, seed=seed)
        ratio = Estimate(chk.observed.value / chk.predicted, chk.observed.lo / chk.predicted,
                         chk.observed.hi / chk.predicted, chk.observed.n)
        out[tau] = DwellLaw(tau=tau, traps=K, chains=chains, steps=steps, check=chk, ratio=ratio,
                            times=t_exit.reshape(K, chains), exited=exited.reshape(K, chains), q=q)
    return out


@dataclass(frozen=True)
class BasinDwell:
    """Dwell in the basin of each trap at one temperature (:func:`basin_dwell`): ``times``
    ``[K, chains]`` first exits from the Hamming ball of radius ``h`` (censored at ``steps + 1``
    where ``exited`` ``[K, chains]`` is False), ``per_trap`` ``[K]`` each trap's median, and
    ``median`` their median over traps with a bootstrap interval over traps."""

    tau: float
    h: int
    steps: int
    chains: int
    times: Tensor
    exited: Tensor
    per_trap: Tensor
    median: Estimate


def basin_dwell(model: ConditionalModel, tokens: Tensor, taus: Sequence[float], *, h: int, chains: int, steps: int,
                seed: int) -> dict[float, BasinDwell]:
    """How long plain random-scan chains stay near each trap ``tokens`` ``[K, n]``: ``chains``
    chains start in every trap at each temperature of ``taus`` and are watched until they differ
    from it at more than ``h`` sites (:func:`basin_exit_times`), at most ``steps`` steps; seed
    ``seed + 1000 j`` at the ``j``-th temperature. A trap's statistic is the median of its chains'
    exit times (a censored median is exact while under half its chains are censored; above, it is
    ``steps + 1``, a lower bound). -> ``{tau: BasinDwell}``."""
    check_range("chains", chains, 1, integer=True)
    if tokens.dim() != 2 or tokens.shape[0] < 2:
        raise ValueError(f"tokens must be [K, n] with K >= 2 traps, got {tuple(tokens.shape)}")
    K = tokens.shape[0]
    out = {}
    for j, tau in enumerate(taus):
        t, e = basin_exit_times(model, tokens.repeat_interleave(chains, 0), tau=float(tau), steps=steps, h=h,
                                seed=seed + 1000 * j)
        t, e = t.reshape(K, chains), e.reshape(K, chains)
        per_trap = torch.from_numpy(np.median(t.double().numpy(), 1))
        out[float(tau)] = BasinDwell(tau=float(tau), h=int(h), steps=int(steps), chains=int(chains), times=t,
                                     exited=e, per_trap=per_trap,
                                     median=bootstrap(per_trap.numpy(), np.median, seed=seed))
    return out


# --- rejection-free (kinetic) simulation of the same chain --------------------------------------

@dataclass(frozen=True)
class KineticRun:
    """Output of :func:`kinetic_sample`.

    ``states`` ``[M + 1, B, n]``: the states visited, one record per move (``states[0]`` the start);
    ``times`` ``[M + 1, B]`` float64: the Glauber step at which each was entered (``times[0] = 0``);
    ``observed_until`` ``[B]`` float64: the step up to which each chain's path is known (the budget
    ``max_steps`` for a chain whose next move would pass it, else the entry time of its last state).
    A chain that stopped repeats its last state and time in later records."""

    states: Tensor
    times: Tensor
    observed_until: Tensor


def kinetic_sample(model: ConditionalModel, x0: Tensor, *, tau: Temperature, moves: int, seed: int,
                   max_steps: float = math.inf) -> KineticRun:
    """Random-scan Glauber from ``x0`` ``[B, n]`` at ``tau`` (float or ``[B]``), simulated one move
    (one change of state) at a time -> :class:`KineticRun` with ``moves`` records after the start.

    In state ``x`` the chain stays ``T ~ Geometric(q(x))`` steps, ``q`` the exact leave probability
    (:func:`log_leave_probability`), then moves to ``x`` with site ``i`` set to ``v != x_i`` with
    probability ``p_tau(v | x_-i) / (n q)``. That is the law of the plain random-scan chain observed
    at its changes, so every statistic of the path (the state at a given step, dwell times, the time
    spent in a region) has the plain chain's law; only the random numbers differ. Each move costs
    ``n`` masked evaluations per chain, so it pays when ``1/q > n``, at low temperature.

    A chain whose next move would come after step ``max_steps`` stops there. Seeded: the same seed
    gives the same run on the CPU.
    """
    check_tokens(model, x0, "x0")
    check_range("moves", moves, 0, integer=True)
    check_range("max_steps", max_steps, 0.0)
    b, n = x0.shape
    tau_all = tau.to(x0.device, torch.float64) if isinstance(tau, Tensor) else tau
    check_tau(tau, b)
    gen = make_generator(seed, "cpu")
    x = x0.clone()
    t = torch.zeros(b, dtype=torch.float64)
    stopped = torch.zeros(b, dtype=torch.bool)
    until = torch.full((b,), math.nan, dtype=torch.float64)
    states, times = [x.clone().cpu()], [t.clone()]
    for _ in range(moves):
        u = torch.rand(b, 3, generator=gen, dtype=torch.float64)   # drawn for every row: a row's
        act = (~stopped).nonzero().flatten()                       # stream never depends on others
        if act.numel():
            xa = x[act.to(x.device)]
            ta = tau_all[act.to(x0.device)] if isinstance(tau_all, Tensor) else tau_all
            L = all_site_logits(model, xa).double()                 # [A, n, V]
            le = log_exit_probabilities(L, xa, ta).cpu()            # [A, n]
            lq = torch.logsumexp(le, -1) - math.log(n)
            q = torch.exp(lq)
            hold = torch.floor(torch.log1p(-u[act, 0]) / torch.log1p(-q)) + 1   # Geometric(q) on {1, 2, ...}
            hold = torch.where(q > 0, hold, torch.full_like(hold, math.inf))
            t_next = t[act] + hold
            go = t_next <= max_steps
            halt = act[~go]
            stopped[halt] = True
            until[halt] = max_steps
            if bool(go.any()):
                g = go.nonzero().flatten()
                rows = act[g]
                w_site = torch.exp(le[g] - le[g].amax(-1, keepdim=True))
                site = draw(w_site, u[rows, 1])[0]
                s = L[g.to(L.device), site.to(L.device)]                 # [G, V]
                tg = ta[g.to(x0.device)].reshape(-1, 1) if isinstance(ta, Tensor) else ta
                s = s / tg
                s = s.scatter(-1, xa[g.to(xa.device), site.to(xa.device)].long().unsqueeze(-1), float("-inf"))
                w_tok = torch.exp(s - s.amax(-1, keepdim=True)).cpu()
                v = draw(w_tok, u[rows, 2])[0]
                x[rows.to(x.device), site.to(x.device)] = v.to(x.device, x.dtype)
                t[rows] = t_next[g]
        states.append(x.clone().cpu())
        times.append(t.clone())
    until = torch.where(stopped, until, t)
    return KineticRun(states=torch.stack(states), times=torch.stack(times), observed_until=until)


def state_at(run: KineticRun, step: float) -> tuple[Tensor, Tensor]:
    """The state of each chain at Glauber step ``step`` -> (tokens ``[B, n]``, known ``[B]`` bool).
    ``known`` is False where ``step`` lies past what the run observed (``observed_until``)."""
    check_range("step", step, 0.0)
    k = (run.times <= step).sum(0) - 1                       # [B], last record entered by ``step``
    tok = run.states[k, torch.arange(run.states.shape[1])]
    return tok, step <= run.observed_until


# --- approximate traps ----------------------------------------------------------------------------

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


def fraction_estimate(flags: Tensor | np.ndarray) -> tuple[int, int]:
    """``(k, N)`` of a boolean vector, for :func:`tokendyn.stats.wilson`."""
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
    ``[B]``), run as segments of ``segment`` steps, each a seeded :func:`tokendyn.glauber.sample`
    from the previous segment's end (segment ``s`` uses seed ``seed + s``). ``record_every`` must
    divide ``segment`` and ``steps``.

    With a :class:`tokendyn.checkpoint.Store` each segment is a checkpoint cell keyed by ``key``,
    the segment index, ``x0``, ``tau``, the seed, the lengths and ``tag`` (say, the model name), and
    fingerprinted with the model: a killed run resumes at the first missing segment and gives the
    same chains as an uninterrupted one.
    """
    from .checkpoint import Store

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
