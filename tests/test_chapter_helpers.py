"""Library functions that replaced code the chapters used to define for themselves: Kaplan-Meier
medians of groups, number formatting with words, grouped summaries with intervals, the drift
readers of a survey, the dwell temperature, and the tube law's unit vectors, scores and losses."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from tokendyn.publish import book
from tokendyn.analysis import experiments, influence
from tokendyn.core import stats
from tokendyn.mcmc import toy
from tokendyn.mcmc.diagnostics import median_times, survival
from tokendyn.latent import tube


def test_median_times_equal_the_median_on_the_budget_grid():
    g = torch.Generator().manual_seed(0)
    runs = {}
    for key, budget in (("a", 30), ("b", 12), ("c", 50)):
        t = torch.randint(0, budget + 1, (25,), generator=g).double()
        c = t == budget   # runs still uncoupled at the budget are censored there
        runs[key] = (t, c)
        med = median_times(runs)[key]
        assert med == survival(t, c, torch.arange(budget + 1.0)).median()
        assert med == survival(t, c, torch.arange(4 * budget + 1.0)).median()   # any longer grid


def test_median_times_inf_when_most_runs_are_censored_and_whole_steps_only():
    t = torch.tensor([3.0, 10.0, 10.0, 10.0])
    out = median_times({("m", 8, 1.0): (t, torch.tensor([False, True, True, True]))})
    assert out == {("m", 8, 1.0): math.inf}
    assert median_times({0: (t, torch.zeros(4, dtype=torch.bool))})[0] == 10.0
    with pytest.raises(ValueError, match="whole steps"):
        median_times({0: (torch.tensor([1.5, 2.0]), torch.tensor([False, False]))})


def test_fmt_words_for_missing_and_censored_numbers():
    assert book.fmt(0.123456) == "0.123"
    assert book.fmt(np.float64(2.5), ".2f") == "2.50"
    assert book.fmt(math.inf) == "censored"
    assert book.fmt(-math.inf, inf="below") == "below"
    assert book.fmt(float("nan"), nan="above the grid") == "above the grid"
    assert book.fmt(np.float64("nan"), nan="above the grid") == "above the grid"
    assert book.fmt(None) == "censored"


def test_group_summary_quantiles_and_bootstrap_per_group():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"model": ["b"] * 20 + ["a"] * 30, "protocol": ["x", "y"] * 25,
                       "delta": rng.normal(size=50)})
    summary, ci = stats.group_summary(df, ["model", "protocol"], "delta", seed=3)
    assert list(summary.columns) == ["model", "protocol", "mean", "median", "q25", "q75", "mean 95% CI"]
    assert list(zip(summary.model, summary.protocol)) == [("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")]
    for row in summary.itertuples(index=False):
        vals = df[(df.model == row.model) & (df.protocol == row.protocol)]["delta"]
        assert row.mean == pytest.approx(vals.mean())
        assert row.q25 == pytest.approx(np.quantile(vals, 0.25))
        assert row.q75 == pytest.approx(np.quantile(vals, 0.75))
        e = ci[row.model, row.protocol]
        assert e == stats.bootstrap(vals.to_numpy(), seed=3)
        assert row[-1] == f"[{e.lo:.2f}, {e.hi:.2f}]"
    one, ci1 = stats.group_summary(df, ["model"], "delta", level=0.9)
    assert set(ci1) == {("a",), ("b",)} and "mean 90% CI" in one


def test_drift_readers_decode_with_the_model_and_embed_with_the_embedder():
    class Tok:
        def decode(self, ids):
            return "-".join(map(str, ids))

    class Loaded:
        tokenizer = Tok()

    class Embedder:
        def encode(self, texts, **kw):
            assert kw["normalize_embeddings"]
            return torch.tensor([[float(len(t)), 1.0] for t in texts])

    decode, embed = experiments.drift_readers(Loaded(), Embedder())
    texts = decode(torch.tensor([[1, 2], [30, 4]]))
    assert texts == ["1-2", "30-4"]
    assert embed(texts).tolist() == [[3.0, 1.0], [4.0, 1.0]]


def test_unit_vectors_and_zero_stays_zero():
    v = torch.tensor([[3.0, 4.0], [0.0, 0.0]])
    torch.testing.assert_close(tube.unit(v), torch.tensor([[0.6, 0.8], [0.0, 0.0]]))
    u = tube.unit(torch.randn(5, 3, 8, generator=torch.Generator().manual_seed(0)) * 7)
    torch.testing.assert_close(u.norm(dim=-1), torch.ones(5, 3))


def test_flip_score_cross_entropy_and_pixel_error_match_their_definitions():
    g = torch.Generator().manual_seed(0)
    w, b = torch.randn(7, 4, generator=g), torch.randn(7, generator=g)
    logits = lambda z: z @ w.T + b  # noqa: E731  (a linear readout)
    decode = lambda z: logits(z).argmax(-1)  # noqa: E731
    x1 = torch.randn(3, 5, 4, generator=g)
    ref = decode(x1)
    x_hat = x1 + 0.5 * torch.randn(x1.shape, generator=g)
    score = tube.flip_score(decode, ref, x1, torch.Generator().manual_seed(9))
    assert score(x_hat) == tube.residual_flips(decode, ref, x1, x_hat, torch.Generator().manual_seed(9))
    ce = tube.cross_entropy_loss(logits, ref)
    assert ce(x_hat) == pytest.approx(float(torch.nn.functional.cross_entropy(logits(x_hat).reshape(-1, 7), ref.flatten())))
    assert ce(x_hat) > ce(x1)
    clean = torch.rand(3, 1, 2, 2, generator=g)
    dec = lambda z: z.reshape(3, 1, 2, 2)  # noqa: E731
    z = clean.reshape(3, 4) + 0.1
    assert tube.pixel_error(dec, clean)(z) == pytest.approx(0.1, rel=1e-5)
    assert tube.pixel_error(dec, clean, root=False)(z) == pytest.approx(0.01, rel=1e-4)


def test_within_across_means_over_ordered_pairs():
    from tokendyn.models import embedding

    C = torch.tensor([[1.0, 0.8, 0.1], [0.8, 1.0, 0.3], [0.1, 0.3, 1.0]])
    within, across = embedding.within_across(C, ["a", "a", "b"])
    assert within == pytest.approx(0.8) and across == pytest.approx(0.2)
    with pytest.raises(ValueError, match="N = len"):
        embedding.within_across(C, ["a", "b"])
