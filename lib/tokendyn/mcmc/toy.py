"""Exact toy models: conditionals we can enumerate, with known joints (or known incompatibility).

:class:`PairwiseConditional` has logits ``l_i(v | x_-i) = h[i, v] + sum_{k != i} A[i, k, v, x_k]``.

- Compatible when ``A[k, i] = A[i, k]^T`` for all pairs: then the conditionals are those of the
  Gibbs law ``pi(x) ∝ exp(E(x))`` with ``E(x) = sum_i h[i, x_i] + sum_{i<k} A[i, k, x_i, x_k]``, and
  Glauber at temperature ``tau`` has stationary law ``pi_tau ∝ exp(E / tau)``
  (:func:`potts_chain`, including the Ising chain at ``q = 2``).
- Otherwise no joint has these conditionals. For sites ``i, j`` the rectangle discrepancy is
  exactly ``|I(A[i, j] - A[j, i]^T)|`` with the interaction contrast
  ``I(M) = M[a', b'] - M[a', b] - M[a, b'] + M[a, b]`` (:meth:`PairwiseConditional.exact_delta`).
  :func:`incompatible_ising` makes every rectangle on a bond of an Ising chain have
  ``delta = 8 * skew``.
- :func:`uniform` is the ``tau = inf`` model: every conditional uniform over ``q`` tokens.

The exact Markov kernels (:func:`transition_matrix`) and stationary laws (:func:`stationary`) are
computed by enumerating all ``q^n`` states in float64, for checks and the theory chapter. Exact
laws to check measured curves against: the coupon-collector coupling time of the uniform model
(:func:`coupon_collector_mean`, :func:`coupon_collector_survival`) and the exact pair TV of a
kernel (:func:`pair_tv`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..core.checks import check_choice, check_range
from .conditional import check_shapes

MAX_STATES = 200_000


class PairwiseConditional:
    """Pairwise conditionals on ``n`` sites with ``q`` tokens; a :class:`ConditionalModel`.

    ``h`` ``[n, q]`` fields, ``A`` ``[n, n, q, q]`` couplings (``A[i, k, v, u]``: how token ``u`` at
    ``k`` shifts logit ``v`` at ``i``; the diagonal ``A[i, i]`` is ignored). float64 throughout.
    """

    def __init__(self, h: Tensor, A: Tensor, name: str = "pairwise") -> None:
        n, q = h.shape
        if A.shape != (n, n, q, q):
            raise ValueError(f"A must have shape [n, n, q, q]={(n, n, q, q)}, got {tuple(A.shape)}")
        self.h = h.double()
        eye = torch.eye(n, dtype=torch.bool)[:, :, None, None]
        self.A = A.double().masked_fill(eye, 0.0)
        # A_rows[i, k, u, :] = A[i, k, :, u]: the logit shift row picked by token u at site k.
        self._rows = self.A.permute(0, 1, 3, 2).contiguous()
        self.n, self.q, self.vocab_size, self.name = n, q, q, name

    @property
    def compatible(self) -> bool:
        """True iff ``A[k, i] = A[i, k]^T`` for every pair (then a joint exists)."""
        return bool(torch.allclose(self.A, self.A.permute(1, 0, 3, 2), atol=1e-12))

    def site_logits(self, tokens: Tensor, sites: Tensor) -> Tensor:
        """tokens ``[B, n]``, sites ``[B]`` -> ``[B, q]`` float64 logits at ``tau = 1``."""
        check_shapes(tokens, sites)
        if tokens.shape[1] != self.n:
            raise ValueError(f"tokens must have n={self.n} sites, got {tokens.shape[1]}")
        dev = tokens.device
        rows, h = self._rows.to(dev), self.h.to(dev)
        ks = torch.arange(self.n, device=dev)
        blocks = rows[sites[:, None], ks[None, :], tokens]  # [B, n, q]
        return h[sites] + blocks.sum(1)

    def energy(self, states: Tensor) -> Tensor:
        """states ``[S, n]`` -> ``[S]`` ``E(x)`` (log of the unnormalised joint at ``tau = 1``).

        Only meaningful for a compatible model; raises ``ValueError`` otherwise.
        """
        if not self.compatible:
            raise ValueError("this model's conditionals are incompatible: no joint energy exists")
        dev = states.device
        A, h = self.A.to(dev), self.h.to(dev)
        e = h[torch.arange(self.n, device=dev), states].sum(1)
        iu, ku = torch.triu_indices(self.n, self.n, 1, device=dev)
        return e + A[iu, ku, states[:, iu], states[:, ku]].sum(1)

    def gibbs_law(self, tau: float = 1.0) -> Tensor:
        """The exact stationary law ``pi_tau ∝ exp(E / tau)`` over :func:`all_states` -> ``[q^n]``."""
        check_range("tau", tau, 0, lo_open=True)
        return torch.softmax(self.energy(all_states(self.n, self.q)) / tau, 0)

    def exact_delta(self, i: Tensor, j: Tensor, a: Tensor, b: Tensor, a2: Tensor,
                    b2: Tensor) -> Tensor:
        """Exact rectangle discrepancy at ``tau = 1`` for rows of sites ``i, j`` ``[B]``, current
        tokens ``a, b`` ``[B]`` and alternatives ``a2, b2`` ``[B]`` -> ``[B]`` float64."""
        D = self.A[i, j] - self.A[j, i].transpose(-1, -2)  # [B, q, q]
        r = torch.arange(i.shape[0])
        return (D[r, a2, b2] - D[r, a2, b] - D[r, a, b2] + D[r, a, b]).abs()


def _check_finite(**values: float) -> None:
    # an infinite coupling or field makes every conditional nan, silently
    for name, v in values.items():
        check_range(name, v, -math.inf, math.inf, lo_open=True, hi_open=True)


def _chain_couplings(n: int, q: int, J: Tensor) -> Tensor:
    """Nearest-neighbour couplings ``[n, n, q, q]`` from per-bond matrices ``J`` ``[n-1, q, q]``."""
    A = torch.zeros(n, n, q, q, dtype=torch.float64)
    for i in range(n - 1):
        A[i, i + 1] = J[i]
        A[i + 1, i] = J[i].T
    return A


def potts_chain(n: int, q: int, *, coupling: float = 1.0, field: float = 0.5,
                seed: int = 0) -> PairwiseConditional:
    """A compatible Potts chain: ``E(x) = sum_i h[i, x_i] + coupling * sum_i [x_i == x_{i+1}]``
    plus a small random symmetric bond term, with ``h ~ field * N(0, 1)`` (seeded).
    ``q = 2`` is an Ising chain."""
    check_range("n", n, 2, integer=True)
    check_range("q", q, 2, integer=True)
    _check_finite(coupling=coupling, field=field)
    check_range("field", field, 0)
    check_range("seed", seed, 0, integer=True)
    g = torch.Generator().manual_seed(seed)
    h = field * torch.randn(n, q, generator=g, dtype=torch.float64)
    noise = 0.1 * torch.randn(n - 1, q, q, generator=g, dtype=torch.float64)
    J = coupling * torch.eye(q, dtype=torch.float64) + noise
    return PairwiseConditional(h, _chain_couplings(n, q, J), name=f"potts(n={n},q={q})")


def incompatible_ising(n: int, *, coupling: float = 1.0, skew: float = 0.25, field: float = 0.5,
                       seed: int = 0) -> PairwiseConditional:
    """An Ising chain (spins ``s = 2 x - 1``) whose site ``i`` feels its right neighbour with
    ``coupling + skew`` but the neighbour feels ``i`` with ``coupling - skew``. No joint exists;
    every rectangle on a bond ``(i, i+1)`` with ``a' != a, b' != b`` has
    ``delta = |I(2 skew s s^T)| = 8 * skew``, and sites further apart have ``delta = 0``."""
    check_range("n", n, 2, integer=True)
    _check_finite(coupling=coupling, skew=skew, field=field)
    check_range("field", field, 0)
    check_range("seed", seed, 0, integer=True)
    g = torch.Generator().manual_seed(seed)
    s = torch.tensor([-1.0, 1.0], dtype=torch.float64)
    h = field * torch.randn(n, 1, generator=g, dtype=torch.float64) * s  # [n, 2]
    spin = torch.outer(s, s)  # M[v, u] = s_v s_u
    A = torch.zeros(n, n, 2, 2, dtype=torch.float64)
    for i in range(n - 1):
        A[i, i + 1] = (coupling + skew) * spin
        A[i + 1, i] = (coupling - skew) * spin
    return PairwiseConditional(h, A, name=f"incompatible-ising(n={n},skew={skew})")


def uniform(n: int, q: int) -> PairwiseConditional:
    """Every conditional uniform over ``q`` tokens (the ``tau = inf`` limit of any model)."""
    check_range("n", n, 1, integer=True)
    check_range("q", q, 2, integer=True)
    return PairwiseConditional(torch.zeros(n, q), torch.zeros(n, n, q, q), name=f"uniform(n={n},q={q})")


def all_states(n: int, q: int) -> Tensor:
    """Every state of ``q^n`` in lexicographic order (site 0 most significant) -> ``[q^n, n]``."""
    check_range("n", n, 1, integer=True)
    check_range("q", q, 2, integer=True)
    if q ** n > MAX_STATES:
        raise ValueError(f"q^n={q ** n} states exceed MAX_STATES={MAX_STATES}")
    idx = torch.arange(q ** n)
    powers = q ** torch.arange(n - 1, -1, -1)
    return (idx[:, None] // powers) % q


def state_index(states: Tensor, q: int) -> Tensor:
    """states ``[..., n]`` -> ``[...]`` their row in :func:`all_states`."""
    n = states.shape[-1]
    powers = q ** torch.arange(n - 1, -1, -1, device=states.device)
    return (states * powers).sum(-1)


def site_kernel(model: PairwiseConditional, i: int, tau: float) -> Tensor:
    """The exact kernel ``[q^n, q^n]`` that resamples site ``i`` from ``p_tau(. | x_-i)``."""
    check_range("i", i, 0, model.n - 1, integer=True)
    check_range("tau", tau, 0, lo_open=True)
    S = all_states(model.n, model.q)
    probs = torch.softmax(model.site_logits(S, torch.full((len(S),), i)) / tau, -1)  # [S, q]
    P = torch.zeros(len(S), len(S), dtype=torch.float64)
    for v in range(model.q):
        y = S.clone()
        y[:, i] = v
        P[torch.arange(len(S)), state_index(y, model.q)] += probs[:, v]
    return P


def transition_matrix(model: PairwiseConditional, tau: float, scan: str = "random") -> Tensor:
    """The exact Glauber kernel over :func:`all_states` -> ``[q^n, q^n]`` float64.

    ``scan="random"``: one step with a uniform site, ``(1/n) sum_i P_i``.
    ``scan="systematic"``: one sweep ``P_0 P_1 ... P_{n-1}``.
    """
    check_range("tau", tau, 0, lo_open=True)
    check_choice("scan", scan, ("random", "systematic"))
    kernels = [site_kernel(model, i, tau) for i in range(model.n)]
    if scan == "random":
        return torch.stack(kernels).mean(0)
    P = kernels[0]
    for K in kernels[1:]:
        P = P @ K
    return P


def stationary(P: Tensor) -> Tensor:
    """The stationary law of an irreducible kernel ``P`` ``[S, S]`` -> ``[S]`` (solves
    ``pi P = pi``, ``sum pi = 1`` by least squares in float64)."""
    S = P.shape[0]
    M = torch.cat([P.T.double() - torch.eye(S, dtype=torch.float64),
                   torch.ones(1, S, dtype=torch.float64)])
    rhs = torch.zeros(S + 1, dtype=torch.float64)
    rhs[-1] = 1.0
    pi = torch.linalg.lstsq(M, rhs[:, None]).solution[:, 0]
    return pi.clamp_min(0) / pi.clamp_min(0).sum()


def tv_to_stationarity(P: Tensor, pi: Tensor, steps: int) -> Tensor:
    """Worst-case total variation ``d(t) = max_x TV(P^t(x, .), pi)`` for ``t = 0..steps`` -> ``[steps + 1]``."""
    check_range("steps", steps, 0, integer=True)
    out = []
    Pt = torch.eye(P.shape[0], dtype=torch.float64)
    for _ in range(steps + 1):
        out.append(0.5 * (Pt - pi[None]).abs().sum(1).max())
        Pt = Pt @ P
    return torch.stack(out)


def coupon_collector_mean(n: int) -> float:
    """``n * H_n``: the mean time to visit all ``n`` sites with uniform random picks."""
    check_range("n", n, 1, integer=True)
    return n * math.fsum(1.0 / k for k in range(1, n + 1))


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


def coupon_collector_median(n: int) -> int:
    """The exact median of the coupon-collector time over ``n`` sites: the first ``t`` with
    ``P(T > t) <= 1/2`` (what a Kaplan-Meier median of coupling times estimates)."""
    check_range("n", n, 1, None, integer=True)
    t_max = int(4 * coupon_collector_mean(n)) + 2
    surv = coupon_collector_survival(n, t_max)
    return int((surv <= 0.5).nonzero()[0, 0])


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
