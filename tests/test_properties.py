"""Property tests of the public API (Hypothesis): fuzzed shapes, dtypes, ids, temperatures, seeds.

Every case either runs and keeps the invariants (states stay in the support, coupled pairs stay
coupled, the first agreement time is the coupling time, a seed reproduces, a cache returns what
was stored or refuses), or raises ``ValueError``/``TypeError`` whose message names an argument that
is in fact bad. A case whose arguments are all valid must run.

The runs are derandomized (the same cases on every machine and every run, so CI cannot flake)
and keep no example database. Case counts per test are the ``max_examples`` below; run with
``--hypothesis-show-statistics`` to see them.
"""

import json
import math

import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tokendyn.core import checkpoint, data
from tokendyn.publish import sweep
from tokendyn.mcmc import toy
from tokendyn.mcmc import glauber as G
from tokendyn.mcmc import sampling as S
from tokendyn.analysis import rectangle as R

CASES = dict(derandomize=True, database=None, deadline=None, print_blob=True,
             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# How many cases each property runs.
N_SAMPLE, N_COUPLING, N_STAY, N_INVERSE, N_DELTA, N_STORE, N_FLIP, N_PARSE, N_PASSAGES = (
    250, 200, 60, 300, 200, 60, 150, 300, 60)


class Restricted:
    """A toy whose ids in ``banned`` are outside the support: logits ``-inf``, and ``unsupported``
    says so (as :class:`~tokendyn.mcmc.conditional.MLMConditional` does for special tokens)."""

    def __init__(self, base, banned):
        self.base, self.vocab_size, self.n = base, base.vocab_size, base.n
        self.unsupported = torch.zeros(base.vocab_size, dtype=torch.bool)
        self.unsupported[list(banned)] = True

    def site_logits(self, tokens, sites):
        return self.base.site_logits(tokens, sites).masked_fill(self.unsupported, -math.inf)


SCANS = ("random", "systematic")
BAD_DTYPES = (torch.int16, torch.uint8, torch.float32, torch.bool)
finite_taus = st.floats(1e-3, 1e4)
any_taus = st.one_of(finite_taus, st.floats(allow_nan=True, allow_infinity=True),
                     st.sampled_from([0.0, -1.0, 1e-4, 2e4, 0, 1, True]))
seeds = st.one_of(st.integers(0, 2**64 - 1), st.integers(-5, -1), st.just(2**64), st.just(True),
                  st.just(1.0))


@st.composite
def models(draw):
    q, n = draw(st.integers(2, 5)), draw(st.integers(2, 5))
    base = toy.potts_chain(n, q, coupling=draw(st.sampled_from([-2.0, 0.0, 1.5, 4.0])),
                           seed=draw(st.integers(0, 3)))
    banned = draw(st.lists(st.integers(0, q - 1), max_size=q - 2, unique=True))  # >= 2 supported
    return Restricted(base, banned)


@st.composite
def states(draw, model, rows=None):
    """(tensor, bad): a state for ``model``; valid in about 2 cases of 3, else broken one way."""
    q, n = model.vocab_size, model.n
    b = rows if rows is not None else draw(st.integers(0, 4))
    good = [v for v in range(q) if not model.unsupported[v]]
    outside = [v for v in range(q) if model.unsupported[v]] + [-1, q, q + 3]
    kind = draw(st.sampled_from(["id", "dtype", "columns", "flat"])) if rarely(draw, 4) else "valid"
    cols = draw(st.sampled_from([1, n + 1])) if kind == "columns" else n
    ids = draw(st.lists(st.sampled_from(good), min_size=b * cols, max_size=b * cols))
    if kind == "id" and ids:
        ids[draw(st.integers(0, len(ids) - 1))] = draw(st.sampled_from(outside))
    x = torch.tensor(ids, dtype=torch.int64).reshape(b, cols)
    dtype = draw(st.sampled_from(BAD_DTYPES)) if kind == "dtype" else \
        draw(st.sampled_from([torch.int64, torch.int32]))
    x = x.to(dtype)
    if kind == "flat":
        x = x.reshape(-1)
    bad = kind in ("dtype", "columns", "flat") or (kind == "id" and bool(ids))
    return x, bad


@st.composite
def valid_states(draw, model, rows):
    good = [v for v in range(model.vocab_size) if not model.unsupported[v]]
    ids = draw(st.lists(st.sampled_from(good), min_size=rows * model.n, max_size=rows * model.n))
    return torch.tensor(ids, dtype=draw(st.sampled_from([torch.int64, torch.int32]))).reshape(rows, model.n)


@st.composite
def temperatures(draw, b):
    if not rarely(draw, 3):
        tau = draw(finite_taus)
        return tau, False
    if draw(st.booleans()):
        tau = draw(any_taus)
        ok = (isinstance(tau, (int, float)) and not isinstance(tau, bool)
              and S.TAU_MIN <= tau <= S.TAU_MAX)
        return tau, not ok
    rows = draw(st.sampled_from([b, b, b + 1]))
    wild = rarely(draw, 4)
    vals = draw(st.lists(any_taus.filter(lambda v: not isinstance(v, bool)) if wild else finite_taus,
                         min_size=rows, max_size=rows))
    t = torch.tensor([float(v) for v in vals], dtype=draw(st.sampled_from([torch.float64, torch.float32])))
    ok = rows == b and all(S.TAU_MIN <= float(v) <= S.TAU_MAX for v in t.tolist())
    return t, not ok


def rarely(draw, k: int) -> bool:
    """True in about one case of ``k`` (Hypothesis leans to the first choice, the usual one)."""
    return draw(st.sampled_from([False] * (k - 1) + [True]))


def _seed_ok(seed):
    return isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= S.SEED_MAX


def _expect(call, bad_args: dict[str, bool]):
    """Run ``call``; if an argument is bad it must raise ValueError/TypeError naming a bad one."""
    bad = [name for name, is_bad in bad_args.items() if is_bad]
    try:
        out = call()
    except (ValueError, TypeError) as e:
        assert bad, f"valid arguments raised {type(e).__name__}: {e}"
        named = [name for name in bad if name in str(e)]
        assert named, f"{e!r} names none of the bad arguments {bad}"
        event(f"refused, naming {named[0]}")
        return None
    assert not bad, f"bad arguments {bad} ran without an error"
    event("ran")
    return out


def _in_support(model, x):
    return bool(((x >= 0) & (x < model.vocab_size)).all()) and not bool(model.unsupported[x.long()].any())


@settings(max_examples=N_SAMPLE, **CASES)
@given(st.data())
def test_sample_runs_or_names_the_bad_argument(data_):
    m = data_.draw(models())
    x0, x_bad = data_.draw(states(m))
    b = x0.shape[0] if x0.dim() == 2 else 1
    tau, tau_bad = data_.draw(temperatures(b))
    steps = data_.draw(st.sampled_from([-1, 2.0]) if rarely(data_.draw, 8) else st.integers(0, 12))
    seed = data_.draw(seeds if rarely(data_.draw, 8) else st.integers(0, 2**64 - 1))
    scan = data_.draw(st.just("sweep") if rarely(data_.draw, 10) else st.sampled_from(SCANS))
    record = data_.draw(st.just(0) if rarely(data_.draw, 10) else st.sampled_from([None, 1, 3]))
    kw = dict(steps=steps, tau=tau, seed=seed, scan=scan, record_every=record)
    res = _expect(lambda: G.sample(m, x0, **kw), {
        "x0": x_bad, "tau": tau_bad, "seed": not _seed_ok(seed), "scan": scan not in SCANS,
        "steps": not (isinstance(steps, int) and steps >= 0), "record_every": record == 0})
    if res is None:
        return
    assert res.tokens.shape == x0.shape and res.tokens.dtype == x0.dtype
    assert _in_support(m, res.tokens)
    assert torch.equal(G.sample(m, x0, **kw).tokens, res.tokens)  # a seed reproduces
    if record:
        assert torch.equal(res.trajectory[0], x0)
        if steps % record == 0:
            assert torch.equal(res.trajectory[-1], res.tokens)
        assert res.steps_recorded.tolist() == list(range(0, steps + 1, record))
        assert _in_support(m, res.trajectory)


@settings(max_examples=N_COUPLING, **CASES)
@given(st.data())
def test_coupling_times_run_or_name_the_bad_argument(data_):
    m = data_.draw(models())
    x0, x_bad = data_.draw(states(m))
    b = x0.shape[0] if x0.dim() == 2 else 1
    y0, y_bad = data_.draw(states(m, rows=b + 1 if rarely(data_.draw, 10) else b))
    if isinstance(x0, torch.Tensor) and isinstance(y0, torch.Tensor) and y0.dtype != x0.dtype and not y_bad:
        y0 = y0.to(x0.dtype) if x0.dtype in (torch.int64, torch.int32) else y0
    if not (x_bad or y_bad) and x0.shape == y0.shape and data_.draw(st.booleans()):
        same = torch.tensor(data_.draw(st.lists(st.booleans(), min_size=b, max_size=b)), dtype=torch.bool)
        y0 = torch.where(same[:, None], x0, y0)  # some pairs start equal
    tau, tau_bad = data_.draw(temperatures(b))
    max_steps = data_.draw(st.just(-3) if rarely(data_.draw, 8) else st.integers(0, 40))
    check_every = data_.draw(st.just(0) if rarely(data_.draw, 10) else st.sampled_from([64, 1, 5]))
    coupling = data_.draw(st.just("reflection") if rarely(data_.draw, 10) else st.sampled_from(tuple(G.COUPLINGS)))
    seed = data_.draw(seeds if rarely(data_.draw, 8) else st.integers(0, 2**64 - 1))
    drop = data_.draw(st.booleans())
    same_shape = isinstance(x0, torch.Tensor) and x0.shape == y0.shape
    res = _expect(lambda: G.coupling_times(m, x0, y0, tau=tau, max_steps=max_steps, seed=seed,
                                           coupling=coupling, check_every=check_every,
                                           drop_coupled=drop), {
        "x0": x_bad, "y0": y_bad or (not x_bad and not same_shape), "tau": tau_bad,
        "max_steps": max_steps < 0, "seed": not _seed_ok(seed), "coupling": coupling not in G.COUPLINGS,
        "check_every": check_every == 0})
    if res is None:
        return
    T, c = res.times.times, res.times.censored  # CensoredTimes checked its convention: censored rows at the cap
    assert T.shape == (b,) and res.times.cap == max_steps
    equal_rows = (x0 == y0).all(1)
    assert bool((T[equal_rows] == 0).all()) and not bool(c[equal_rows].any())
    assert bool((T[~equal_rows & ~c] > 0).all())  # a pair that starts apart couples at step 1 at the earliest
    again = G.coupling_times(m, x0, y0, tau=tau, max_steps=max_steps, seed=seed, coupling=coupling,
                             check_every=check_every, drop_coupled=drop)
    assert torch.equal(again.times.times, T) and torch.equal(again.times.censored, res.times.censored)


@settings(max_examples=N_STAY, **CASES)
@given(st.data())
def test_coupled_pairs_stay_coupled_from_their_coupling_time_on(data_):
    """Both chains of every pair, recorded every step (the second by swapping the starts, which
    swaps the two chains exactly): they first agree everywhere at the reported time, and agree at
    every step after it."""
    m = data_.draw(models())
    b = data_.draw(st.integers(1, 4))
    x0 = data_.draw(valid_states(m, b))
    y0 = data_.draw(valid_states(m, b)).to(x0.dtype)
    tau = data_.draw(st.floats(0.2, 50.0))
    steps = data_.draw(st.integers(1, 30))
    kw = dict(tau=tau, max_steps=steps, seed=data_.draw(st.integers(0, 2**32)), record_every=1,
              coupling=data_.draw(st.sampled_from(tuple(G.COUPLINGS))), scan=data_.draw(st.sampled_from(SCANS)))
    a = G.coupling_times(m, x0, y0, **kw)
    b_ = G.coupling_times(m, y0, x0, **kw)
    assert torch.equal(a.times.times, b_.times.times) and torch.equal(a.times.censored, b_.times.censored)
    agree = (a.trajectory == b_.trajectory).all(-1)  # [T + 1, B]: both chains equal at step t
    for r in range(b):
        t = int(a.times.times[r])
        if not a.times.censored[r]:
            assert bool(agree[t:, r].all()), "a coupled pair came apart"
            assert not bool(agree[:t, r].any()), "the pair agreed before its coupling time"
        else:
            assert not bool(agree[:, r].any())
    assert _in_support(m, a.trajectory) and _in_support(m, b_.trajectory)


@settings(max_examples=N_INVERSE, **CASES)
@given(st.data())
def test_inverse_cdf_draws_a_positive_weight_or_refuses(data_):
    b, v = data_.draw(st.integers(1, 4)), data_.draw(st.integers(1, 6))
    w = torch.tensor(data_.draw(st.lists(st.floats(0, 10), min_size=b * v, max_size=b * v)),
                     dtype=torch.float64).reshape(b, v)
    if rarely(data_.draw, 3):  # break one entry, or zero a whole row
        r, c = data_.draw(st.integers(0, b - 1)), data_.draw(st.integers(0, v - 1))
        w[r, c] = data_.draw(st.sampled_from([-1.0, math.nan, math.inf, -math.inf]))
    elif rarely(data_.draw, 4):
        w[data_.draw(st.integers(0, b - 1))] = 0.0
    u = torch.tensor(data_.draw(st.lists(st.floats(0, 1, exclude_max=True), min_size=b, max_size=b)),
                     dtype=torch.float64)
    if rarely(data_.draw, 6):
        u[0] = data_.draw(st.sampled_from([1.0, -0.1, math.nan]))
    total = w.sum(-1)
    w_bad = bool((w < 0).any()) or not bool((torch.isfinite(total) & (total > 0)).all())
    u_bad = not bool(((u >= 0) & (u < 1)).all())
    ids = _expect(lambda: S.inverse_cdf(w, u), {"weights": w_bad, "u": u_bad})
    if ids is not None:
        assert bool((w[torch.arange(b), ids] > 0).all())


@settings(max_examples=N_DELTA, **CASES)
@given(st.data())
def test_rectangle_delta_is_symmetric_or_names_the_bad_argument(data_):
    m = data_.draw(models())
    q, n = m.vocab_size, m.n
    b = data_.draw(st.integers(1, 4))
    x, x_bad = data_.draw(states(m, rows=b))
    good = [v for v in range(q) if not m.unsupported[v]]
    i = torch.tensor(data_.draw(st.lists(st.integers(0, n - 1), min_size=b, max_size=b)))
    j = (i + 1 + torch.tensor(data_.draw(st.lists(st.integers(0, n - 2), min_size=b, max_size=b)))) % n
    if rarely(data_.draw, 6):  # a site out of range, or i == j
        i[0] = data_.draw(st.sampled_from([-1, n, int(j[0])]))
    rows = torch.arange(b)
    cur_a = x[rows.clamp_max(x.shape[0] - 1), i.clamp(0, n - 1)] if not x_bad else torch.zeros(b, dtype=torch.long)
    cur_b = x[rows.clamp_max(x.shape[0] - 1), j] if not x_bad else torch.zeros(b, dtype=torch.long)
    a2 = torch.tensor([data_.draw(st.sampled_from([v for v in good if v != int(c)] or good)) for c in cur_a])
    b2 = torch.tensor([data_.draw(st.sampled_from([v for v in good if v != int(c)] or good)) for c in cur_b])
    if rarely(data_.draw, 5):  # an alternative outside the support, or equal to the current
        a2[0] = data_.draw(st.sampled_from([-1, q, int(cur_a[0])] + [v for v in range(q) if m.unsupported[v]]))
    tau = data_.draw(any_taus if rarely(data_.draw, 4) else finite_taus)
    tau_bad = not (isinstance(tau, (int, float)) and not isinstance(tau, bool) and S.TAU_MIN <= tau <= S.TAU_MAX)
    xs = x if (not x_bad) else None
    sites_ok = bool(((i >= 0) & (i < n)).all()) and bool((i != j).all())
    a2_bad = b2_bad = False
    if xs is not None and sites_ok:
        a2_bad = any(v not in good for v in a2.tolist()) or bool((a2 == xs[rows, i]).any())
        b2_bad = bool((b2 == xs[rows, j]).any())
    d = _expect(lambda: R.delta(m, x, i, j, a2, b2, tau=tau, signed=True), {
        "x": x_bad, "i": not sites_ok, "j": not sites_ok, "a_new": a2_bad, "b_new": b2_bad, "tau": tau_bad})
    if d is None:
        return
    swapped = R.delta(m, x, j, i, b2, a2, tau=tau, signed=True)  # the same rectangle, walked the other way
    torch.testing.assert_close(swapped, -d, rtol=1e-9, atol=1e-9)
    assert bool(torch.isfinite(d).all())
    if m.base.compatible:
        assert float(d.abs().max()) < 1e-6 * max(1.0, 1.0 / tau)


tensor_dicts = st.dictionaries(
    st.text("abcxyz_", min_size=1, max_size=6),
    st.tuples(st.sampled_from([torch.float32, torch.float64, torch.int64, torch.int8, torch.bool, torch.bfloat16]),
              st.lists(st.integers(0, 3), max_size=3), st.integers(0, 1000)),
    min_size=1, max_size=4)


def _make(spec):
    dtype, shape, seed = spec
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 100).to(dtype)


@settings(max_examples=N_STORE, **CASES)
@given(tensor_dicts, st.dictionaries(st.text(min_size=1, max_size=5),
                                      st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=5),
                                                st.lists(st.integers(), max_size=3)), max_size=4))
def test_a_store_returns_exactly_what_it_stored(tmp_path_factory, specs, params):
    store = checkpoint.Store(tmp_path_factory.mktemp("store"))
    want = {k: _make(s) for k, s in specs.items()}
    got = store.get_or_compute("cell", params, lambda: want)
    back = store.get_or_compute("cell", dict(reversed(list(params.items()))), lambda: 1 / 0)
    for k, t in want.items():
        assert back[k].dtype == t.dtype and back[k].shape == t.shape and torch.equal(back[k], t)
        assert got[k] is t


@settings(max_examples=N_FLIP, **CASES)
@given(st.integers(1, 10**9), st.integers(1, 255), st.sampled_from(["raise", "recompute"]))
def test_a_flipped_byte_anywhere_is_refused_or_harmless(tmp_path_factory, where, mask, mode):
    folder = tmp_path_factory.mktemp("flip")
    want = {"T": torch.tensor([1500, 1497, 3]), "censored": torch.tensor([True, False, False]),
            "d": torch.linspace(0, 1, 4, dtype=torch.float64)}
    checkpoint.Store(folder).get_or_compute("c", {"tau": 1.0}, lambda: want)
    (path,) = folder.glob("*.safetensors")
    raw = bytearray(path.read_bytes())
    raw[where % len(raw)] ^= mask
    path.write_bytes(bytes(raw))
    store = checkpoint.Store(folder, on_mismatch=mode)
    try:
        back = store.get_or_compute("c", {"tau": 1.0}, lambda: want)
    except checkpoint.CheckpointError as e:
        assert mode == "raise" and str(path) in str(e)
        return
    for k, t in want.items():  # whatever came back is the true cell, never a changed one
        assert torch.equal(back[k], t)


json_scalars = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False),
                         st.booleans(), st.none(), st.text(max_size=8))


@settings(max_examples=N_PARSE, **CASES)
@given(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True),
       st.lists(st.one_of(json_scalars, st.lists(json_scalars, max_size=3)), min_size=1, max_size=4))
def test_grid_specs_round_trip_through_the_command_line(name, values):
    spec = f"{name}=" + ",".join(json.dumps(v) for v in values)
    got_name, got = sweep.parse_axis(spec)
    assert got_name == name and got == values
    pts = sweep.grid(**{name: got})
    assert len(pts) == len(values)
    keys = {sweep.run_key("c.ipynb", p) for p in pts}
    assert len(keys) == len({json.dumps(v, sort_keys=True) for v in values})


@settings(max_examples=N_PASSAGES, **CASES)
@given(st.data())
def test_passages_are_deterministic_or_name_the_bad_argument(data_):
    topic = data_.draw(st.text(max_size=6) if rarely(data_.draw, 5) else st.sampled_from(data.TOPICS))
    n = data_.draw(st.sampled_from([0, -2, 10**6, 2.0, True]) if rarely(data_.draw, 5) else st.integers(1, 50))
    seed = data_.draw(st.sampled_from([-1, 1.5]) if rarely(data_.draw, 5) else st.integers(0, 10**12))
    bad = {"topic": topic not in data.TOPICS,
           "n": not (isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 10**5),
           "seed": not (isinstance(seed, int) and seed >= 0)}
    got = _expect(lambda: data.passages(topic, n, seed=seed), bad)
    if got is None:
        return
    assert len(got) == n == len(set(got)) and got == data.passages(topic, n, seed=seed)
    assert data.passages(topic, max(1, n // 2), seed=seed) == got[: max(1, n // 2)]
