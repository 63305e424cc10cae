"""Every figure of tokendyn.publish.figures builds a valid Vega-Lite spec from small chapter-shaped data,
and draws what its docstring says (the right rows, the right cut-offs, the right colours)."""

import math
import re

import altair as alt
import numpy as np
import pandas as pd
import pytest
import torch

from tokendyn.publish import figures
from tokendyn.mcmc import toy
from tokendyn.mcmc.diagnostics import DriftRun, survival
from tokendyn.analysis.fidelity import PairedCoupling
from tokendyn.mcmc.censored import CensoredTimes
from tokendyn.mcmc.fill import SiteConditionals
from tokendyn.publish.figures._style import tau_palette


def _spec(chart):
    """The validated Vega-Lite spec (``to_dict`` checks it against the schema)."""
    return chart.to_dict()


def _datasets(chart) -> list[list[dict]]:
    return list(_spec(chart).get("datasets", {}).values())


def _rows(chart) -> list[dict]:
    return [r for d in _datasets(chart) for r in d]


def test_tau_palette_runs_dark_to_light_over_the_grid():
    assert tau_palette(1) == ["#440154"]
    p = tau_palette(6)
    assert len(p) == 6 and p[0] == "#440154" and p[-1] == "#fde725"
    assert len(set(tau_palette(8))) == 8


def test_topic_map_and_similarity():
    scores = torch.tensor([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 1.0]])
    labels = ["a", "a", "b", "b"]
    texts = ["x" * 100, "short", "y", "z"]
    rows = _rows(figures.topic_map(scores, labels, texts))
    assert [r["topic"] for r in rows] == labels
    assert rows[0]["passage"] == "x" * 90 + "…"
    assert "params" in _spec(figures.topic_map(scores, labels, texts))   # the legend picks a topic
    C = torch.tensor([[1.0, 0.8, 0.1, 0.2], [0.8, 1.0, 0.3, 0.0], [0.1, 0.3, 1.0, 0.6], [0.2, 0.0, 0.6, 1.0]])
    sim = {(r["topic A"], r["topic B"]): r["mean cosine"] for r in _rows(figures.topic_similarity(C, labels, ["a", "b"]))}
    assert sim[("a", "a")] == pytest.approx(0.9)
    assert sim[("a", "b")] == pytest.approx(0.15) and sim[("b", "a")] == pytest.approx(0.15)
    assert sim[("b", "b")] == pytest.approx(0.8)


def test_site_entropy_one_point_per_site():
    sc = SiteConditionals(logp_current=torch.tensor([-0.1, -2.0, -0.5]), entropy=torch.tensor([0.3, 1.5, 0.9]),
                          top_ids=torch.zeros(3, 2, dtype=torch.long), top_probs=torch.zeros(3, 2),
                          is_argmax=torch.tensor([True, False, True]))
    rows = _rows(figures.site_entropy(sc, ["the", "cat", "sat"]))
    assert [(r["site"], r["token"], r["current token is the argmax"]) for r in rows] == \
        [(0, "the", True), (1, "cat", False), (2, "sat", True)]


def test_influence_curves_and_matrix():
    alpha = pd.DataFrame({"model": ["m"] * 3, "tau": [0.5, 1.0, 2.0], "alpha_hat": [3.0, 1.2, 0.4]})
    spec = _spec(figures.influence_curves(alpha))
    assert len(spec["layer"]) == 2 and spec["layer"][0]["encoding"]["y"]["scale"]["type"] == "log"
    c = torch.arange(9.0).reshape(3, 3)
    chart = figures.influence_matrix(c, model="m", tau=1.0)
    rows = _rows(chart)
    assert len(rows) == 9 and {(r["i (updated site)"], r["j (changed site)"]): r["c_ij"] for r in rows}[(1, 2)] == 5.0
    assert _spec(chart)["title"] == "m: sampled c_ij at tau = 1"


def test_distance_to_stationarity_cuts_at_1e4_and_draws_finite_bounds_only():
    decay = {0.5: torch.tensor([1.0, 0.5, 1e-3, 1e-5]), 4.0: torch.tensor([1.0, 0.1, 1e-6, 0.0])}
    bounds = pd.DataFrame({"tau": [0.5, 4.0], "Dobrushin bound": [math.inf, 7.5]})
    chart = figures.distance_to_stationarity(decay, bounds, n=5, q=3)
    lines, rules = _datasets(chart)
    assert min(r["d(t)"] for r in lines) >= 1e-4 and len(lines) == 5
    assert [(r["tau"], r["Dobrushin bound"]) for r in rules] == [("4.0", 7.5)]
    assert "n=5, q=3" in _spec(chart)["title"]


def test_stationary_laws_shows_the_likeliest_states_of_the_exact_law():
    m = toy.potts_chain(3, 2, coupling=1.0, seed=0)
    states = toy.all_states(3, 2)
    exact = m.gibbs_law(1.0)
    emp = torch.full_like(exact, 1 / len(exact))
    chart = figures.stationary_laws({"potts": (states, exact, emp)}, top=3)
    rows = _rows(chart)
    top = exact.argsort(descending=True)[:3]
    assert [r["state"] for r in rows] == [str(states[k].tolist()) for k in top]
    assert [r["exact"] for r in rows] == pytest.approx(exact[top].tolist())
    assert [r["empirical"] for r in rows] == pytest.approx([1 / len(exact)] * 3)
    spec = _spec(chart)
    assert spec["spec"]["layer"][0]["encoding"]["x"]["title"] == "3 most likely states"
    # bars for the chains, ticks for the exact law: two marks, told apart by the legend's colours
    assert [layer["mark"]["type"] for layer in spec["spec"]["layer"]] == ["bar", "tick"]


def test_dwell_survival_draws_the_geometric_law():
    observed = torch.tensor([1.0, 0.9, 0.8, 0.7], dtype=torch.float64)
    rows = _rows(figures.dwell_survival(observed, 0.1, model="m", tau=0.2))
    geo = [r["P(T > t)"] for r in rows if r["curve"].startswith("Geometric")]
    assert geo == pytest.approx([0.9 ** t for t in range(4)])


def test_coupling_anchor_three_curves_and_a_rule():
    km = survival(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([False, False, True]), torch.arange(4.0))
    chart = figures.coupling_anchor(km, torch.tensor([1.0, 0.5, 0.2, 0.1]), torch.tensor([1.0, 0.4, 0.1, 0.0]), 2.0)
    curves, rule = _datasets(chart)
    assert len(curves) == 12 and {r["curve"] for r in curves} == {
        "measured P(T > t)", "exact pair TV (lower bound)", "exact d(t)"}
    assert rule == [{"t": 2.0}]


def test_survival_grid_keeps_the_step_curves_change_points_and_the_exact_law():
    coupling = {("m", 4, 1.0): CensoredTimes(torch.tensor([2, 2, 5, 9]), torch.tensor([False, False, False, True]), 9),
                ("m", 4, 2.0): CensoredTimes(torch.tensor([1, 1, 1, 3]), torch.zeros(4, dtype=torch.bool), 9)}
    chart = figures.survival_grid(coupling)  # each curve and the exact law end at the cells' cap
    rows = _rows(chart)
    low = [(r["t"], r["P(T > t)"]) for r in rows if r["curve"] == "tau=1"]
    # the first point and each side of a jump; the end at the censored last run is unknown, not drawn
    assert low == [(0.0, 1.0), (1.0, 1.0), (2.0, 0.5), (4.0, 0.5), (5.0, 0.25)]
    exact = [r for r in rows if r["curve"] == "uniform model (exact)"]
    assert len(exact) == 10 and exact[0]["P(T > t)"] == 1.0
    colour = _spec(chart)["spec"]["encoding"]["color"]["scale"]
    assert colour["domain"] == ["tau=1", "tau=2", "uniform model (exact)"]
    assert colour["range"] == tau_palette(2) + ["black"]


def test_paired_survival_one_curve_per_model():
    pc = PairedCoupling(CensoredTimes(torch.tensor([1, 3]), torch.tensor([False, False]), 4),
                        CensoredTimes(torch.tensor([2, 4]), torch.tensor([False, True]), 4), 0.5)
    rows = _rows(figures.paired_survival(pc))
    assert len(rows) == 10 and {r["model dtype"] for r in rows} == {"fp32", "bf16"}  # t = 0..4, the budget


def test_drift_panels_one_row_per_model():
    def run(level):
        t = torch.arange(4.0)
        return DriftRun(t=t, drift=torch.full((4, 2), level), forgotten=torch.full((4, 2), 0.5),
                        trajectory=torch.zeros(4, 2, 3, dtype=torch.long))
    runs = {("a", 8, 1.0): run(0.1), ("a", 16, 1.0): run(0.2), ("b", 8, 1.0): run(0.3)}
    spec = _spec(figures.drift_panels(runs))
    assert len(spec["vconcat"]) == 2
    assert spec["vconcat"][1]["title"].startswith("b: semantic drift")
    rows = _rows(figures.drift_panels(runs))
    assert {r["drift to"] for r in rows} == {"own start", "other starts (forgotten level)"}


def test_scaling_ratios_adds_the_exact_uniform_median_to_every_panel():
    ratios = pd.DataFrame([{"measure": ms, "model": m, "tau": tau, "n": n, "T / (n ln n)": 1.0, "lo": 0.8,
                            "hi": 1.2, "censored": False}
                           for ms in ("coupling", "drift") for m in ("a", "b") for tau in (1.0, 2.0) for n in (8, 16)])
    exact = pd.DataFrame({"n": [8, 16], "exact_median": [toy.coupon_collector_median(8), toy.coupon_collector_median(16)]})
    chart = figures.scaling_ratios(ratios, exact)
    rows = _rows(chart)
    ex = [r for r in rows if r["tau"] == "uniform (exact median)"]
    assert len(ex) == 2 * 2 * 2
    assert ex[0]["T / (n ln n)"] == pytest.approx(toy.coupon_collector_median(8) / (8 * math.log(8)))
    assert {r["tau"] for r in rows} == {"tau=1", "tau=2", "uniform (exact median)"}


def test_crossover_vs_budget_draws_above_the_grid_at_1_2_times_the_top_tau():
    cross = pd.DataFrame({"model": ["a"] * 2, "source": ["live"] * 2, "n": [8, 16], "budget_factor": [2.0, 2.0],
                          "tau_star": [1.5, np.nan], "lo": [1.0, 3.0], "hi": [2.0, np.inf]})
    chart = figures.crossover_vs_budget(cross, taus=[1.0, 5.0])
    rows = _datasets(chart)[0]
    assert chart.to_dict()["resolve"] == {"axis": {"x": "independent"}}  # no axis under an empty wrapped cell
    assert [r["tau_star"] for r in rows] == [1.5, 6.0]
    assert [r["hi"] for r in rows] == [2.0, 6.0]


def test_ratio_vs_tau_puts_each_models_mixing_rule_in_its_own_panel():
    df = pd.DataFrame([{"model": m, "tau": t, "n": n, "T / (n ln n)": v * (2 if m == "b" else 1) * n / 8,
                        "lo": v, "hi": v, "censored": False}
                       for m in ("b", "a") for n in (8, 16) for t, v in ((1.0, 9.0), (5.0, 1.0))])
    rows = _datasets(figures.ratio_vs_tau(df, blowup=3.0, top=5.0))[0]
    levels = {(r["model"], r["n"]): r["level"] for r in rows}
    assert levels == {("b", 8): 6.0, ("a", 8): 3.0, ("b", 16): 12.0, ("a", 16): 6.0}
    with pytest.raises(ValueError, match="top=8"):
        figures.ratio_vs_tau(df, blowup=3.0, top=8.0)
    with pytest.raises(ValueError, match=re.escape("ratios lacks columns ['censored']")):
        figures.ratio_vs_tau(df.drop(columns="censored"), blowup=3.0, top=5.0)


def _deltas():
    rng = np.random.default_rng(0)
    return pd.DataFrame({"model": ["a"] * 8 + ["b"] * 8, "protocol": ["model", "uniform"] * 8,
                         "delta": rng.random(16), "gap": [1] * 16})


def test_rectangle_figures():
    deltas = _deltas()
    spec = _spec(figures.delta_distribution(deltas, (0.64, 0.80)))
    assert spec["height"] == 220 and spec["title"].endswith("the paper's [0.64, 0.80]")
    summary = deltas.groupby(["model", "protocol"])["delta"].agg(mean="mean").reset_index()
    rows = _rows(figures.delta_vs_size(summary, {"a": 4.0, "b": 11.0}))
    assert {(r["model"], r["parameters (M)"]) for r in rows} == {("a", 4.0), ("b", 11.0)}
    bars = _datasets(figures.delta_controls({"compatible toy": 0.0, "AR": 1e-10}, summary, (0.64, 0.8)))[1]
    assert [r["case"] for r in bars] == ["compatible toy", "AR", "a [model]", "b [model]"]
    _spec(figures.delta_by_gap(pd.DataFrame({"model": ["a"], "gap": [1], "mean delta": [0.5]})))
    tau_df = pd.DataFrame({"model": ["a", "a"], "tau": [1.0, 1.0], "rectangles": ["fixed", "drawn"], "mean delta": [0.5, 0.4]})
    dash = _spec(figures.delta_vs_tau(tau_df, reference="fixed"))["layer"][0]["encoding"]["strokeDash"]
    assert dash["condition"]["value"] == [6, 4] and dash["value"] == [1, 0]   # the reference dashed, the rest solid
    with pytest.raises(ValueError, match="reference"):
        figures.delta_vs_tau(tau_df, reference="other")
    ap = pd.DataFrame({"model": ["a", "b"], "residual RMS": [0.1, 0.2], "max delta on the grid": [1.0, 2.0]})
    assert len(_rows(figures.arnold_press(ap, 4))) == 4
    line = _datasets(figures.paired_deltas(torch.tensor([0.1, 0.5]), torch.tensor([0.2, 0.4])))[1]
    assert line == [{"a": 0.0, "b": 0.0}, {"a": 0.5, "b": 0.5}]


def test_tube_figures():
    roll = pd.DataFrame({"K": ["4", "8"] * 3, "s_start": [0.1, 0.1, 0.5, 0.5, 1.0, 1.0], "s": [0.3] * 6,
                         "flip rate": [0.0, 0.0, 0.1, 0.1, 0.3, 0.3], "isotropic flip rate": [0.0] * 6})
    assert len(_spec(figures.rollin_flips(roll))["hconcat"]) == 2
    _spec(figures.tube_mass(np.array([0.1, 1.0]), np.array([0.0, 0.5])))
    _spec(figures.tube_prediction(roll, pd.DataFrame({"s_start": [0.1, 1.0], "flip rate": [0.0, 0.3]})))
    spec = _spec(figures.residual_direction(roll[roll.K == "8"], 8))
    assert spec["encoding"]["color"]["title"] == "K = 8, residual"
    term = pd.DataFrame({"K": [4, 8], "structured": [0.2, 0.1], "isotropic": [0.01, 0.0]})
    assert len(_rows(figures.terminal_flips(term))) == 4
    _spec(figures.image_rollin(pd.DataFrame({"K": ["4"], "s_start": [0.5], "pixel RMS error": [0.1]})))
    cliff = pd.DataFrame({"lambda": [0.1, 1.0], "model": ["text", "image"], "direction": ["structured"] * 2,
                          "response": [0.0, 0.2]})
    assert _spec(figures.cliff(cliff))["resolve"]["scale"]["y"] == "independent"
    gen = pd.DataFrame({"K": [1, 1], "sampler": ["ODE", "SDE"], "bigram PPL": [10.0, 20.0]})
    spec = _spec(figures.generation_perplexity(gen, 123.4))
    assert spec["title"].endswith("(dashed: held-out real text, 123)")
    # no bars on the log axis (a bar there has no baseline and draws nothing)
    assert all(layer["mark"]["type"] != "bar" for layer in spec["layer"])
    two = _rows(figures.tube_mass(np.array([0.1, 1.0]), {"a": [0.0, 0.5], "b": [0.1, 0.2]}))
    assert sorted({r["model"] for r in two}) == ["a", "b"] and len(two) == 4
    ti = pd.DataFrame({"model": ["m"] * 2, "K": [4, 4], "residual": ["structured", "isotropic"], "rate": [0.3, 0.0],
                       "lo": [0.2, 0.0], "hi": [0.4, 0.01]})
    assert len(_rows(figures.terminal_intervals(ti))) == 2


def test_dabi_figures():
    d = pd.DataFrame({"decoder": ["a", "a"], "kind": ["text"] * 2, "norm": [0.1, 1.0], "DABI": [100.0, 50.0],
                      "lo": [80.0, 40.0], "hi": [120.0, 60.0]})
    spec = _spec(figures.dabi_curves(d))
    assert len(spec["layer"]) == 4
    # the "kind" legend tells kinds apart by shape (a stroke-dash legend over dotted lines did not)
    shapes = [layer["encoding"]["shape"] for layer in spec["layer"] if "shape" in layer.get("encoding", {})]
    assert shapes and len(set(shapes[0]["scale"]["range"])) == 3
    with pytest.raises(ValueError, match="lacks columns"):
        figures.dabi_curves(d.drop(columns="lo"))
    f = pd.DataFrame({"decoder": ["a"] * 2, "norm": [1.0, 1.0], "direction": ["structured", "isotropic"],
                      "rate": [0.5, 0.0], "lo": [0.4, 0.0], "hi": [0.6, 0.01]})
    assert len(_rows(figures.flip_contrast(f))) == 2
    t = pd.DataFrame({"system": ["x", "y"], "DABI": [1.0, 500.0], "CCI": [0.0, 1.0], "source": ["ours", "paper"],
                      "few-step works": ["works", "fails"]})
    assert {r["system"] for r in _rows(figures.taxonomy(t))} == {"x", "y"}
    colour = next(layer["encoding"]["color"] for layer in _spec(figures.taxonomy(t))["layer"]
                  if "color" in layer.get("encoding", {}) and "field" in layer["encoding"]["color"])
    assert dict(zip(colour["scale"]["domain"], colour["scale"]["range"])) == {"works": "#1a7f37", "fails": "#cf222e"}
    # labels on one CCI row alternate above and below it, further out each time
    crowd = pd.DataFrame({"system": list("abcd"), "DABI": [1.0, 1.1, 1.2, 1e4], "CCI": [0.0] * 4,
                          "source": ["ours"] * 4, "few-step works": ["works"] * 4})
    placed = {r["system"]: (r["label_y"], r["side"]) for r in _rows(figures.taxonomy(crowd))}
    assert len({y for y, _ in placed.values()}) == 4 and placed["d"][1] == "right" and placed["a"][1] == "left"


def test_escape_figures():
    g = pd.DataFrame({"K": [1, 4, 1, 4], "sampler": ["ODE", "ODE", "SDE", "SDE"], "ppl": [400.0, 500, 400, 300],
                      "ppl_lo": [350.0, 450, 350, 250], "ppl_hi": [450.0, 550, 450, 350], "entropy": [3.3, 3.5, 3.3, 2.9],
                      "entropy_lo": [3.1, 3.3, 3.1, 2.7], "entropy_hi": [3.5, 3.7, 3.5, 3.1]})
    spec = _spec(figures.ode_sde_curves(g, pd.DataFrame({"ppl": [70.0], "entropy": [4.7]})))
    assert len(spec["hconcat"]) == 2 and all(len(p["layer"]) == 3 for p in spec["hconcat"])
    with pytest.raises(ValueError, match="real lacks columns"):
        figures.ode_sde_curves(g, pd.DataFrame({"ppl": [70.0]}))
    a = pd.DataFrame({"generator": ["x"] * 2, "variant": ["committed", "ablated"], "score": ["judge PPL"] * 2,
                      "value": [50.0, 7000.0], "lo": [40.0, 6000.0], "hi": [60.0, 8000.0]})
    assert len(_rows(figures.ablation_panels(a))) == 2
    iv = pd.DataFrame({"readout": ["shipped", "MLP"], "flip": [0.11, 0.10], "lo": [0.10, 0.09], "hi": [0.12, 0.11],
                       "predicted": [0.11, float("nan")]})
    assert len(_spec(figures.intervention_flips(iv))["layer"]) == 3
    s = pd.DataFrame({"M": [2, 4], "partition": ["line"] * 2, "S": [0.4, 1.0], "lo": [0.4, 1.0], "hi": [0.4, 1.0]})
    assert [r["M"] for r in _rows(figures.interface_scaling(s))] == [2, 4]


def test_performance_figures_read_the_benchmark_records():
    bench = {"cpu": {"scaling": {"batch_for_by_n": 64, "n_for_by_batch": 32, "by_n": {"16": 100.0, "32": 50.0},
                                 "by_batch": {"8": 20.0, "64": 90.0}}}}
    table = figures.scaling_table(bench)
    assert table.to_dict("records")[0] == {"device": "cpu", "axis": "length n (batch 64)", "x": 16, "chain-steps/s": 100.0}
    assert len(table) == 4
    _spec(figures.step_rate_scaling(bench))
    t = pd.DataFrame({"sampler": ["(b) x", "(a) y"], "effective GFLOP/s": [1.0, 2.0]})
    spec = _spec(figures.flop_rates(t, batch=64, n=32))
    assert spec["layer"][0]["encoding"]["y"]["sort"] == ["(b) x", "(a) y"]
    rows = _rows(figures.step_rate_rounds({"ours": [1.0, 2.0]}, {"ours": "(c) ours"}))
    assert rows == [{"sampler": "(c) ours", "round": 1, "chain-steps/s": 1.0},
                    {"sampler": "(c) ours", "round": 2, "chain-steps/s": 2.0}]
    kern = pd.DataFrame({"device": ["cpu"], "chain-steps/s of (c)": [50.0], "coupled pair-steps/s": [25.0],
                         "rectangles/s": [12.0], "other": [1.0]})
    assert len(_rows(figures.kernel_rates(kern))) == 3


def test_every_figure_is_exported():
    import importlib
    import inspect
    import pkgutil

    mods = [importlib.import_module(f"tokendyn.publish.figures.{m.name}") for m in pkgutil.iter_modules(figures.__path__)
            if not m.name.startswith("_")]
    public = {n for mod in mods for n in mod.__all__}
    assert public == set(figures.__all__)
    for n in figures.__all__:
        assert inspect.getdoc(getattr(figures, n)), n
    assert isinstance(figures.topic_map(torch.zeros(2, 2), ["a", "b"], ["x", "y"]), alt.TopLevelMixin)


def test_probe_figures_draw_one_bar_per_model_head_and_metric():
    import pandas as pd

    qual = pd.DataFrame([{"model": "a", "head": "trained", "top1": 0.2, "top5": 0.5, "copy_rate": 0.1},
                         {"model": "a", "head": "untrained", "top1": 0.0, "top5": 0.1, "copy_rate": 0.0}])
    spec = figures.cloze_scores(qual).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) == 6 and {(r["model"], r["head"]) for r in rows} == {("a", "trained"), ("a", "untrained")}
    assert {r["metric"] for r in rows} == {"top-1", "top-5", "copy rate"}
    probes = {"a": {"by_register": {"food": {"top1": 0.1, "top5": 0.4}, "sports": {"top1": 0.2, "top5": 0.6}}}}
    rows = next(iter(figures.register_scores(probes, ["a"]).to_dict()["datasets"].values()))
    assert sorted((r["register"], r["top5"]) for r in rows) == [("food", 0.4), ("sports", 0.6)]


def test_residual_aim_draws_the_aim_and_its_worth():
    align = pd.DataFrame({"generator": ["g"] * 2, "K": [4, 8], "mean_abs_cos": [0.1, 0.2], "lo": [0.09, 0.18],
                          "hi": [0.11, 0.22], "unaimed": [0.04, 0.04]})
    ratios = pd.DataFrame({"generator": ["g"] * 4, "K": [4, 8, 4, 8], "kind": ["own", "own", "along n", "along n"],
                           "ratio": [2.0, 1.5, 20.0, 28.0], "lo": [1.8, 1.3, 18.0, 25.0], "hi": [2.2, 1.7, 22.0, 31.0]})
    spec = _spec(figures.residual_aim(align, ratios))
    assert len(spec["hconcat"]) == 2
    with pytest.raises(ValueError, match="lacks columns"):
        figures.residual_aim(align.drop(columns="unaimed"), ratios)


def test_generator_ladder_draws_one_point_per_generator_and_refuses_a_missing_k():
    rows = [{"generator": g, "train_steps": st, "K": k, "flow_loss": loss, "mean_abs_cos": 0.1 + 0.01 * i,
             "abs_lo": 0.09, "abs_hi": 0.12, "unaimed_abs_cos": 0.04, "flips": 0.1, "flips_lo": 0.09,
             "flips_hi": 0.11, "ratio": 2.5, "ratio_lo": 2.3, "ratio_hi": 2.7}
            for i, (g, st, loss) in enumerate([("shipped (3,000 steps)", 3000, 1.38), ("ladder, 1,000 steps", 1000, 1.5),
                                               ("ladder, 10,000 steps", 10000, 1.3)]) for k in (4, 8)]
    df = pd.DataFrame(rows)
    spec = _spec(figures.generator_ladder(df, 4))
    assert len(spec["hconcat"]) == 3
    points = [layer for layer in spec["hconcat"][0]["layer"] if layer["mark"]["type"] == "point"]
    assert len(points) == 1
    data = spec["datasets"]
    assert any(len(v) == 3 and {r["generator"] for r in v} == set(df.generator) and {r["K"] for r in v} == {4}
               for v in data.values())
    with pytest.raises(ValueError, match="k=16 is not a K"):
        figures.generator_ladder(df, 16)
    with pytest.raises(ValueError, match="lacks columns"):
        figures.generator_ladder(df.drop(columns="flow_loss"), 4)


def test_ode_sde_ladder_keeps_the_generator_order_and_draws_both_panels():
    gens = ["ladder, 1,000 steps", "shipped (3,000 steps)", "ladder, 10,000 steps"]
    scores = pd.DataFrame([{"generator": g, "K": k, "sampler": smp, "ppl": 500.0 - 10 * i, "ppl_lo": 480.0,
                            "ppl_hi": 520.0} for i, g in enumerate(gens) for k in (4, 8) for smp in ("ODE", "SDE")])
    matched = pd.DataFrame([{"generator": g, "K": k, "ratio": 1.4, "ratio_lo": 1.3, "ratio_hi": 1.6}
                            for g in gens for k in (4, 8)])
    spec = _spec(figures.ode_sde_ladder(scores, matched))
    assert len(spec["hconcat"]) == 2
    xs = [layer["encoding"]["x"] for panel in spec["hconcat"] for layer in panel["layer"] if "x" in layer.get("encoding", {})]
    assert xs and all(x["sort"] == gens for x in xs)
    with pytest.raises(ValueError, match="lacks columns"):
        figures.ode_sde_ladder(scores.drop(columns="ppl_lo"), matched)
