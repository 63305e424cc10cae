"""Glauber dynamics on any :class:`~tokendyn.conditional.ConditionalModel`, batched and seeded.

One Glauber step on a state ``x`` in ``V^n``: pick a site ``i`` and replace ``x_i`` by a draw from
``p_tau(v | x_-i) ∝ exp(l_i(v) / tau)``. Each of the ``B`` rows of a batch is its own chain with
its own site (one site for the whole batch would make the ``B`` chains one draw, not ``B``).

The kernel is written BlackJAX-style, as a pure ``init`` / ``step`` pair over an explicit
:class:`GlauberState`, with the randomness passed in as a ``torch.Generator``; :func:`sample` and
:func:`coupling_times` are loops over ``step``-like updates. Nothing in a step reads a value back to
the host, so a CUDA run is not synchronised per step (:func:`coupling_times` checks for early exit
only every ``check_every`` steps).

Precision: the categorical draw is an inverse-CDF draw in float64 from ``softmax(logits / tau)``
with one uniform per chain, whatever dtype the model ran in. It is exact at ``tau = 0.05`` and at
``tau = 100`` (``-inf`` logits stay at probability 0).

Temperature: ``tau`` is a float, or a ``[B]`` tensor giving each chain its own temperature, so a
whole temperature grid runs as one batch (one forward pass per step instead of one per grid
point; on a small model the per-step overhead, not the FLOPs, is most of the cost).

Scans: ``"random"`` (the paper's chain) picks a fresh uniform site per chain per step;
``"systematic"`` visits sites ``0, 1, ..., n-1, 0, ...`` (step ``t`` updates site ``t mod n``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .checks import check_choice, check_range
from .conditional import ConditionalModel, check_tokens

__all__ = ["GlauberState", "SampleResult", "CouplingResult", "check_tau", "check_states", "check_support",
           "probabilities", "inverse_cdf", "choose_sites", "init", "step", "make_generator",
           "sample", "coupled_draw", "coupling_times", "greedy_fixed_point"]

SCANS = ("random", "systematic")
COUPLINGS = ("maximal", "crn")
TAU_MIN, TAU_MAX = 1e-3, 1e4
SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed takes at most 64 bits
DRAW_DTYPE = torch.float64


@dataclass(frozen=True)
class GlauberState:
    """The chains: ``tokens`` ``[B, n]`` content ids and ``t``, the number of steps taken."""

    tokens: Tensor
    t: int = 0


@dataclass(frozen=True)
class SampleResult:
    """Output of :func:`sample`: final ``tokens`` ``[B, n]``; with ``record_every=k``,
    ``trajectory`` ``[T, B, n]`` holds the states at ``steps_recorded`` ``[T]`` = ``0, k, 2k, ...``."""

    tokens: Tensor
    trajectory: Tensor | None = None
    steps_recorded: Tensor | None = None


@dataclass(frozen=True)
class CouplingResult:
    """Output of :func:`coupling_times`.

    ``times`` ``[B]``: the first step at which the two chains of a row agree at every site
    (``0`` if they start equal). A row that has not coupled within ``max_steps`` is censored:
    its time is ``max_steps + 1`` and ``coupled`` ``[B]`` is False. Censored rows are kept, so
    ``P(T > t)`` is read directly for every ``t <= max_steps``. With ``record_every=k``,
    ``trajectory`` ``[T, B, n]`` holds the first chain of every pair at ``steps_recorded`` ``[T]``.
    """

    times: Tensor
    coupled: Tensor
    max_steps: int
    trajectory: Tensor | None = None
    steps_recorded: Tensor | None = None


Temperature = float | Tensor


def check_tau(tau: Temperature, batch: int | None = None) -> None:
    """``tau`` (a float, or a ``[B]`` tensor of per-chain values) must lie in ``[1e-3, 1e4]``
    (0.05 and 100 are well inside; draws stay exact). ``batch``: the ``B`` a tensor must have."""
    if isinstance(tau, Tensor):
        if tau.dim() != 1 or (batch is not None and tau.shape[0] != batch):
            raise ValueError(f"tau as a tensor must have shape [{batch if batch is not None else 'B'}], "
                             f"one temperature per chain; got {tuple(tau.shape)}")
        if tau.is_complex() or tau.dtype == torch.bool:
            raise TypeError(f"tau must hold real temperatures, got a {tau.dtype} tensor")
        if tau.numel():
            for v in (float(tau.min()), float(tau.max())):
                check_range("tau", v, TAU_MIN, TAU_MAX)
        return
    check_range("tau", tau, TAU_MIN, TAU_MAX)


def _token_names(model: ConditionalModel, ids: list[int]) -> str:
    tok = getattr(model, "tokenizer", None)
    try:
        names = tok.convert_ids_to_tokens(ids) if tok is not None else None
    except Exception:  # a tokenizer that cannot name an id (padded head rows) names nothing
        names = None
    return ", ".join(f"{i} ({n})" if names and n is not None else str(i)
                     for i, n in zip(ids, names or [None] * len(ids)))


def check_states(model: ConditionalModel, tokens: Tensor, name: str = "tokens") -> None:
    """Validate states at a public entry point: ``[B, n]`` integer ids in ``[0, vocab_size)``
    that are all in the model's support. A model that leaves tokens out of its support (an
    :class:`~tokendyn.conditional.MLMConditional`: special tokens such as ``[MASK]`` and
    ``[CLS]``, and head rows past the tokenizer) says so with a boolean ``unsupported`` mask
    ``[vocab_size]``; a chain can never reach such a token, so a state holding one is refused.
    Raises ``ValueError`` naming the argument and the offending ids."""
    if not isinstance(tokens, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids [B, n], got {type(tokens).__name__}")
    check_tokens(model, tokens, name)
    n_model = getattr(model, "n", None)  # models with a fixed number of sites (the toys) say so
    if isinstance(n_model, int) and not isinstance(n_model, bool) and tokens.shape[1] != n_model:
        raise ValueError(f"{name} must have n={n_model} sites for this model, got {tokens.shape[1]}")
    check_support(model, tokens, name)


def check_support(model: ConditionalModel, ids: Tensor, name: str = "ids") -> None:
    """Token ids of any shape must be integers in ``[0, vocab_size)`` and in the model's support
    (see :func:`check_states`). Raises ``ValueError`` naming the argument and the offending ids."""
    if not isinstance(ids, Tensor) or ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{name} must be an integer tensor of token ids, got "
                         f"{ids.dtype if isinstance(ids, Tensor) else type(ids).__name__}")
    if ids.numel() == 0:
        return
    if int(ids.min()) < 0 or int(ids.max()) >= model.vocab_size:
        raise ValueError(f"{name} must lie in [0, vocab_size={model.vocab_size})")
    mask = getattr(model, "unsupported", None)
    if not (isinstance(mask, Tensor) and mask.dtype == torch.bool and mask.dim() == 1
            and mask.numel() == model.vocab_size):
        return
    bad = mask.to(ids.device)[ids.long()]
    if bool(bad.any()):
        found = sorted(set(ids[bad].tolist()))
        raise ValueError(f"{name} holds {len(found)} token id(s) outside the model's support "
                         f"(special tokens or padded vocabulary rows, which no chain can reach): "
                         f"{_token_names(model, found[:8])}{' ...' if len(found) > 8 else ''}")


def _check_distribution(name: str, w: Tensor) -> None:
    """``w`` ``[B, V]`` must be a float tensor of non-negative weights with a finite, positive
    total in every row."""
    if not isinstance(w, Tensor) or not w.is_floating_point() or w.dim() != 2:
        raise ValueError(f"{name} must be a float tensor [B, V] of weights, got "
                         f"{tuple(w.shape) if isinstance(w, Tensor) else type(w).__name__}"
                         f"{' ' + str(w.dtype) if isinstance(w, Tensor) else ''}")
    if w.shape[1] == 0:
        raise ValueError(f"{name} must have at least one column (a vocabulary of size V >= 1)")
    if w.numel() == 0:
        return
    total = w.sum(-1)
    bad = ~(torch.isfinite(total) & (total > 0))
    if bool(bad.any()):
        rows = bad.nonzero().flatten().tolist()
        raise ValueError(f"{name}: row(s) {rows[:8]}{' ...' if len(rows) > 8 else ''} have total "
                         f"{float(total[rows[0]])!r}; every row needs a finite, positive total "
                         "(a nan, inf or all -inf logit row gives none)")
    if bool((w < 0).any()):
        raise ValueError(f"{name} has negative weights; weights must be >= 0")


def probabilities(logits: Tensor, tau: Temperature) -> Tensor:
    """logits ``[B, V]`` at ``tau = 1`` -> ``[B, V]`` float64 ``softmax(logits / tau)``;
    ``tau`` a float or a ``[B]`` tensor (one temperature per row)."""
    if isinstance(tau, Tensor):
        tau = tau.to(device=logits.device, dtype=DRAW_DTYPE).unsqueeze(-1)
    return torch.softmax(logits.to(DRAW_DTYPE) / tau, dim=-1)


def _inverse_cdf(weights: Tensor, u: Tensor) -> tuple[Tensor, Tensor]:
    """:func:`inverse_cdf` unchecked -> ``(ids [B], row totals [B])``: no host sync, for loops."""
    c = weights.cumsum(-1)
    total = c[:, -1]
    target = (u.to(c.dtype) * total).unsqueeze(-1)
    # The count of cumulative sums <= target is searchsorted(right=True), and faster on CPU.
    idx = (c <= target).sum(-1)
    return idx.clamp_max(weights.shape[-1] - 1), total


def _bad_total(total: Tensor) -> Tensor:
    """``[B]`` True where a row total is not finite and positive (device-side, no sync)."""
    return ~(torch.isfinite(total) & (total > 0))


def inverse_cdf(weights: Tensor, u: Tensor) -> Tensor:
    """Draw from unnormalised non-negative ``weights`` ``[B, V]`` with uniforms ``u`` ``[B]`` in
    ``[0, 1)`` -> ``[B]`` ids. Never returns a zero-weight id when the row total is positive.

    Raises ``ValueError`` for a row whose total is not finite and positive (such a row would
    silently give id 0), negative weights, or ``u`` of the wrong shape or outside ``[0, 1)``.
    """
    _check_distribution("weights", weights)
    if not isinstance(u, Tensor) or u.shape != weights.shape[:1] or not u.is_floating_point():
        raise ValueError(f"u must be a float tensor [B]={tuple(weights.shape[:1])} of uniforms, got "
                         f"{tuple(u.shape) if isinstance(u, Tensor) else type(u).__name__}")
    if u.numel() and not bool(((u >= 0) & (u < 1)).all()):
        raise ValueError("u must lie in [0, 1)")
    return _inverse_cdf(weights, u)[0]


def _uniform(b: int, gen: torch.Generator, device: torch.device) -> Tensor:
    return torch.rand(b, generator=gen, device=device, dtype=DRAW_DTYPE)


def choose_sites(b: int, n: int, t: int, scan: str, gen: torch.Generator,
                 device: torch.device) -> Tensor:
    """Sites ``[b]`` for step ``t``: an independent uniform site per chain (``"random"``) or
    ``t mod n`` (``"systematic"``)."""
    if scan == "random":
        return torch.randint(n, (b,), generator=gen, device=device)
    return torch.full((b,), t % n, device=device, dtype=torch.long)


def init(x0: Tensor) -> GlauberState:
    """Start chains at ``x0`` ``[B, n]`` (copied)."""
    return GlauberState(tokens=x0.clone(), t=0)


def _step(model: ConditionalModel, state: GlauberState, gen: torch.Generator, tau: Temperature,
          scan: str) -> tuple[GlauberState, Tensor]:
    """:func:`step` unchecked -> ``(new state, bad [B])``, ``bad`` True where the conditional had no
    finite positive mass (kept on the device: the loops check it without a per-step sync)."""
    x = state.tokens
    b, n = x.shape
    sites = choose_sites(b, n, state.t, scan, gen, x.device)
    p = probabilities(model.site_logits(x, sites), tau)
    new, total = _inverse_cdf(p, _uniform(b, gen, x.device))
    x = x.clone()
    x[torch.arange(b, device=x.device), sites] = new.to(x.dtype)
    return GlauberState(tokens=x, t=state.t + 1), _bad_total(total)


def _raise_bad_conditionals(where: str) -> None:
    raise ValueError(f"model.site_logits gave a row with no finite probability mass {where} "
                     "(nan or +inf logits, or every logit -inf): the draw would be meaningless. "
                     "Check the model's weights and dtype.")


def step(model: ConditionalModel, state: GlauberState, gen: torch.Generator, *, tau: Temperature,
         scan: str = "random", check: bool = True) -> GlauberState:
    """One Glauber step of every chain -> the new :class:`GlauberState` (inputs untouched).

    Draws, in order, the sites (random scan) and one uniform per chain from ``gen``.

    With ``check`` (the default) the arguments are validated first (``tau`` as in
    :func:`check_tau`, ``scan``, the states by :func:`check_states`) and a conditional without
    finite positive mass raises ``ValueError``: each check reads a value back to the host. A
    hand-written loop on a GPU can validate once and pass ``check=False``; :func:`sample` and
    :func:`coupling_times` do that and check the draws without a per-step sync.
    """
    if check:
        if not isinstance(state, GlauberState):
            raise TypeError(f"state must be a GlauberState (see init), got {type(state).__name__}")
        if not isinstance(gen, torch.Generator):
            raise TypeError(f"gen must be a torch.Generator, got {type(gen).__name__}")
        check_states(model, state.tokens, "state.tokens")
        check_range("state.t", state.t, 0, integer=True)
        check_tau(tau, state.tokens.shape[0])
        check_choice("scan", scan, SCANS)
    new, bad = _step(model, state, gen, tau, scan)
    if check and bool(bad.any()):
        _raise_bad_conditionals(f"at step {state.t}")
    return new


def make_generator(seed: int, device: torch.device | str) -> torch.Generator:
    """An explicit generator on ``device`` seeded with ``seed`` (an integer in ``[0, 2**64 - 1]``)."""
    check_range("seed", seed, 0, SEED_MAX, integer=True)
    return torch.Generator(device=device).manual_seed(seed)


def sample(model: ConditionalModel, x0: Tensor, *, steps: int, tau: Temperature, seed: int,
           scan: str = "random", record_every: int | None = None) -> SampleResult:
    """Run ``steps`` Glauber steps from ``x0`` ``[B, n]`` at temperature ``tau`` (float or ``[B]``).

    Returns final tokens ``[B, n]`` and, if ``record_every=k``, the states every ``k`` steps
    (``[T, B, n]``, including step 0). The same seed gives the same chains bit for bit on CPU.
    """
    check_states(model, x0, "x0")
    check_range("steps", steps, 0, integer=True)
    check_tau(tau, x0.shape[0])
    check_choice("scan", scan, SCANS)
    if record_every is not None:
        check_range("record_every", record_every, 1, integer=True)
    gen = make_generator(seed, x0.device)
    state = init(x0)
    frames, at = ([state.tokens], [0]) if record_every else ([], [])
    bad = torch.zeros(x0.shape[0], dtype=torch.bool, device=x0.device)
    for _ in range(steps):
        state, bad_now = _step(model, state, gen, tau, scan)
        bad |= bad_now
        if record_every and state.t % record_every == 0:
            frames.append(state.tokens)
            at.append(state.t)
    if steps and bool(bad.any()):
        _raise_bad_conditionals(f"in {steps} steps")
    if not record_every:
        return SampleResult(tokens=state.tokens)
    return SampleResult(tokens=state.tokens, trajectory=torch.stack(frames),
                        steps_recorded=torch.tensor(at))


def coupled_draw(p: Tensor, q: Tensor, u1: Tensor, u2: Tensor, coupling: str) -> tuple[Tensor, Tensor]:
    """Draw ``X ~ p``, ``Y ~ q`` (``[B, V]`` each) jointly -> ``([B], [B])``.

    ``"maximal"``: with probability ``w = sum min(p, q) = 1 - TV(p, q)`` both take one draw from
    ``min(p, q) / w``; otherwise each draws from its own residual ``(p - min) / (1 - w)``
    (disjoint supports, so then ``X != Y``). ``P(X = Y) = 1 - TV``, the most any coupling allows.
    ``"crn"``: both use the inverse CDF with the same uniform ``u1``.
    """
    check_choice("coupling", coupling, COUPLINGS)
    _check_distribution("p", p)
    _check_distribution("q", q)
    if q.shape != p.shape:
        raise ValueError(f"p and q must have the same shape, got {tuple(p.shape)} and {tuple(q.shape)}")
    for name, u in (("u1", u1), ("u2", u2)):
        if not isinstance(u, Tensor) or u.shape != p.shape[:1] or not u.is_floating_point():
            raise ValueError(f"{name} must be a float tensor [B]={tuple(p.shape[:1])} of uniforms")
        if u.numel() and not bool(((u >= 0) & (u < 1)).all()):
            raise ValueError(f"{name} must lie in [0, 1)")
    x, y, _ = _coupled_draw(p, q, u1, u2, coupling)
    return x, y


def _coupled_draw(p: Tensor, q: Tensor, u1: Tensor, u2: Tensor,
                  coupling: str) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`coupled_draw` unchecked, for normalised ``p``, ``q`` -> ``(x, y, bad [B])``, ``bad``
    True where ``p`` or ``q`` holds a nan (a softmax row with no finite mass)."""
    if coupling == "crn":
        (x, tp), (y, tq) = _inverse_cdf(p, u1), _inverse_cdf(q, u1)
        return x, y, _bad_total(tp) | _bad_total(tq)
    m = torch.minimum(p, q)  # propagates nan: w is nan when p or q is
    w = m.sum(-1)
    together = _inverse_cdf(m, u2)[0]
    x = torch.where(u1 < w, together, _inverse_cdf(p - m, u2)[0])
    y = torch.where(u1 < w, together, _inverse_cdf(q - m, u2)[0])
    return x, y, ~torch.isfinite(w)


def coupling_times(model: ConditionalModel, x0: Tensor, y0: Tensor, *, tau: Temperature, max_steps: int,
                   seed: int, coupling: str = "maximal", scan: str = "random",
                   check_every: int = 64, drop_coupled: bool = False,
                   record_every: int | None = None, record_steps: int | None = None) -> CouplingResult:
    """Couple two Glauber chains per row (``x0``, ``y0`` ``[B, n]``): both update the same site
    each step, with a ``coupling`` (``"maximal"`` or ``"crn"``) of their two site conditionals.

    Returns :class:`CouplingResult`: each row's first all-sites agreement time, censored at
    ``max_steps + 1`` (``coupled`` False). Once equal, two chains stay equal. The loop stops early
    when every row has coupled, checked every ``check_every`` steps (the only host syncs).
    ``P(T > t)`` bounds the distance to stationarity ``d(t)`` from these two starts.

    ``tau`` is a float or a ``[B]`` tensor (one temperature per pair). ``drop_coupled=True``
    removes coupled pairs from the batch at each check: a coupled pair stays equal forever, so
    this changes no pair's law, only which random numbers each pair draws (still deterministic
    for a seed), and saves the work a mixed-temperature grid would spend on finished pairs.

    ``record_every=k`` records the first chain of each pair every ``k`` steps up to
    ``record_steps`` (default ``max_steps``; the loop runs at least that long). A maximal or CRN
    coupling leaves each chain's own law untouched, so these are exact Glauber trajectories: a
    semantic-drift measurement gets them for free instead of running chains of its own. No pair
    is dropped before the last record.
    """
    check_states(model, x0, "x0")
    check_states(model, y0, "y0")
    if x0.shape != y0.shape:
        raise ValueError(f"x0 and y0 must have the same shape, got {tuple(x0.shape)} and {tuple(y0.shape)}")
    check_tau(tau, x0.shape[0])
    check_range("max_steps", max_steps, 0, integer=True)
    check_choice("coupling", coupling, COUPLINGS)
    check_choice("scan", scan, SCANS)
    check_range("check_every", check_every, 1, integer=True)
    if record_every is not None:
        check_range("record_every", record_every, 1, integer=True)
        record_steps = max_steps if record_steps is None else record_steps
        check_range("record_steps", record_steps, 0, max_steps, integer=True)
    gen = make_generator(seed, x0.device)
    b, n = x0.shape
    dev = x0.device
    x, y = x0.clone(), y0.clone()
    frames, at = ([x0.clone()], [0]) if record_every else ([], [])
    recording = bool(record_every) and record_steps > 0
    times = torch.where((x == y).all(1), 0, max_steps + 1).to(dev)
    live = torch.arange(b, device=dev)  # rows of the full batch still in x, y
    tau_live = tau.to(dev) if isinstance(tau, Tensor) else tau
    bad = torch.zeros((), dtype=torch.bool, device=dev)  # any draw without finite mass so far
    for t in range(max_steps):
        m = x.shape[0]
        rows = torch.arange(m, device=dev)
        sites = choose_sites(m, n, t, scan, gen, dev)
        logits = model.site_logits(torch.cat([x, y]), torch.cat([sites, sites]))
        probs = probabilities(logits, torch.cat([tau_live, tau_live])
                              if isinstance(tau_live, Tensor) else tau_live)
        u1, u2 = _uniform(m, gen, dev), _uniform(m, gen, dev)
        vx, vy, bad_now = _coupled_draw(probs[:m], probs[m:], u1, u2, coupling)
        bad |= bad_now.any()
        x[rows, sites] = vx.to(x.dtype)
        y[rows, sites] = vy.to(y.dtype)
        t_live = times[live]
        times[live] = torch.where((x == y).all(1) & (t_live > max_steps), t + 1, t_live)
        if recording:
            if (t + 1) % record_every == 0:
                frames.append(x.clone())
                at.append(t + 1)
            recording = ((t + 1) // record_every + 1) * record_every <= record_steps
            continue  # every pair runs (and nothing is dropped) until the last record
        if (t + 1) % check_every == 0:
            if bool(bad):
                _raise_bad_conditionals(f"by step {t + 1}")
            open_ = times[live] > max_steps
            if not bool(open_.any()):
                break
            if drop_coupled and not bool(open_.all()):
                live, x, y = live[open_], x[open_], y[open_]
                if isinstance(tau_live, Tensor):
                    tau_live = tau_live[open_]
    if bool(bad):
        _raise_bad_conditionals(f"within {max_steps} steps")
    if record_every:
        return CouplingResult(times=times, coupled=times <= max_steps, max_steps=max_steps,
                              trajectory=torch.stack(frames), steps_recorded=torch.tensor(at))
    return CouplingResult(times=times, coupled=times <= max_steps, max_steps=max_steps)


def greedy_fixed_point(model: ConditionalModel, x0: Tensor, *, max_sweeps: int = 50) -> tuple[Tensor, Tensor]:
    """The ``tau -> 0`` limit: systematic sweeps setting each site to its argmax until nothing
    changes. x0 ``[B, n]`` -> (tokens ``[B, n]``, converged ``[B]`` bool). A converged row is a
    *perfect trap*: every token is the model's argmax given the rest."""
    check_states(model, x0, "x0")
    check_range("max_sweeps", max_sweeps, 1, integer=True)
    x = x0.clone()
    b, n = x.shape
    rows = torch.arange(b, device=x.device)
    converged = torch.zeros(b, dtype=torch.bool, device=x.device)
    for _ in range(max_sweeps):
        before = x.clone()
        for i in range(n):
            sites = torch.full((b,), i, device=x.device, dtype=torch.long)
            x[rows, sites] = model.site_logits(x, sites).argmax(-1).to(x.dtype)
        converged = (x == before).all(1)
        if bool(converged.all()):
            break
    return x, converged
