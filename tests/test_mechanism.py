"""The Part II mechanism map on the exact posterior-mean generator (tokendyn.latent.mechanism):
cells whose answer is known in closed form, and the rule that reads the map."""

import math

import pytest
import torch

from tokendyn.publish import verdicts as V
from tokendyn.latent import exact, mechanism
from tokendyn.core.stats import Estimate as E
from script_runs import load_script


def cell(d, M, spacing, sigma, K, seed=0):
    mix = exact.token_mixture(d, M, spacing=spacing, sigma=sigma, seed=seed)
    return mechanism.map_cell(mix, K, spacing=spacing, windows=16, length=32, seed=seed, n_boot=200)


def test_one_step_from_pure_noise_lands_on_the_mean_of_means():
    # K = 1: t = 0, the posterior is the prior, every latent goes to the mean of the token means
    c = cell(16, 8, 4.0, 0.5, 1)
    assert math.isinf(c.s) and c.crowding == 0.0 and c.K == 1
    assert abs(c.top2.value - 2 / 8) < 1e-9 and c.bimodal.value == 0.0
    assert c.flips.value > 0.7                  # all but the tokens nearest the centre flip


def test_late_steps_commit_and_flip_nothing_when_tokens_are_far_apart():
    c = cell(16, 8, 12.0, 0.1, 16)
    assert c.flips.value == 0.0 and c.isotropic.value == 0.0 and c.top2.value > 0.999
    assert c.crowding > 10 and c.separation == pytest.approx(120.0)


def test_the_ratio_needs_tight_tokens_a_crowded_mixture_gives_about_one():
    # tokens as spread as they are apart: the residual is mostly the within-token spread, isotropic
    crowded = cell(64, 64, 2.0, 0.5, 8)
    assert crowded.ratio.lo <= 1.5 and crowded.ratio.hi >= 0.67
    # tight tokens confused by the terminal noise: flips come from mixing modes, aimed at boundaries
    tight = cell(64, 64, 2.0, 0.05, 4)
    assert tight.ratio.lo > 10 and tight.flips.value > 0.05 and tight.aim.value > 1.5 * tight.unaimed
    row = tight.row()
    assert row["ratio"] == tight.ratio.value and row["ratio_lo"] == tight.ratio.lo and row["K"] == 4


def test_the_bimodal_split_aims_at_the_line_between_the_two_modes():
    c = cell(64, 64, 2.0, 0.05, 4)
    assert c.bimodal.value > 0 and not math.isnan(c.pair_aim.value)
    # an unaimed direction has |cos| about sqrt(2 / (pi d)) = 0.1 with one line in 64 dimensions
    assert c.pair_aim.lo > 3 * math.sqrt(2 / (math.pi * 64))


def test_the_map_walks_its_grid_in_order():
    cells = list(mechanism.mechanism_map([8], [4], [2.0, 4.0], [0.5], [1, 4], windows=4, length=8, seed=0, n_boot=100))
    assert [(c.spacing, c.K) for c in cells] == [(2.0, 1), (2.0, 4), (4.0, 1), (4.0, 4)]
    assert all(c.sigma == 0.5 and c.d == 8 and c.M == 4 and c.n_tokens == 32 for c in cells)


def test_latent_separation_recovers_a_mixtures_spacing_and_spread():
    mix = exact.token_mixture(32, 16, spacing=3.0, sigma=0.4, seed=1)
    x, ids = mix.sample((100, 32), torch.Generator().manual_seed(0))
    spacing, spread, k = mechanism.latent_separation(x, ids)
    assert k == 16 and abs(spread - 0.4) < 0.01
    true = torch.cdist(mix.means, mix.means).pow(2).sum() / (16 * 15)
    assert abs(spacing - float(true.sqrt())) < 0.02
    with pytest.raises(ValueError, match="fewer than two tokens"):
        mechanism.latent_separation(x[:1, :1], ids[:1, :1])


def test_exact_generator_regime_rule_on_constructed_cells():
    good = (E(20.0, 15.0, 28.0, 32), E(0.25, 0.2, 0.3, 32))
    low = (E(2.0, 1.5, 2.5, 32), E(0.25, 0.2, 0.3, 32))
    assert V.exact_generator_regime({"a": {4: good, 8: good, 16: good}}).verdict == V.REPRODUCED
    some = V.exact_generator_regime({"a": {4: good, 8: low, 16: low}, "b": {4: low, 8: low, 16: low}})
    assert some.verdict == V.PARTLY and "a at K = [4]" in some.reason
    assert V.exact_generator_regime({"b": {4: low, 8: low, 16: low}}).verdict == V.NOT
    # the ratio alone is not enough: the flips must be in the paper's range too
    few = (E(20.0, 15.0, 28.0, 32), E(0.01, 0.005, 0.02, 32))
    assert V.exact_generator_regime({"c": {4: few, 8: few, 16: few}}).verdict == V.NOT
    # K = 1 and 2 do not count: the paper's numbers are for K = 4, 8, 16
    assert V.exact_generator_regime({"d": {1: good, 2: good, 4: low}}).verdict == V.NOT
    assert V.exact_generator_regime({}).verdict == V.NOT_MEASURED


def test_one_mixture_of_a_grid_is_remade_alone_with_its_seeds():
    grid = list(mechanism.mechanism_map([8], [4], [2.0, 4.0], [0.5], [4], windows=4, length=8, seed=0, n_boot=100))
    alone = list(mechanism.mechanism_map([8], [4], [4.0], [0.5], [4], windows=4, length=8, seed=0, n_boot=100,
                                         first_index=1))
    assert grid[1].row() == alone[0].row()


def test_record_mechanism_map_resumes_and_names_bad_input(tmp_path, monkeypatch):
    import json
    rm = load_script("scripts/record_mechanism_map.py")
    monkeypatch.setattr(rm, "ROOT", tmp_path)
    out = tmp_path / "map.json"
    argv = ["--d", "8", "--M", "4", "--sigma", "0.5", "--spacing", "2,4", "--K", "1,4", "--windows", "4", "--length",
            "8", "--n-boot", "100", "--out", str(out)]
    assert rm.main(argv) == 0
    rec = json.loads(out.read_text())
    assert len(rec["rows"]) == 4 and rec["rows"][0]["s"] is None and rec["rows"][1]["K"] == 4
    assert "--spacing 2,4 --K 1,4" in rec["command"] and rec["provenance"]["params"]["windows"] == 4
    assert len(list((tmp_path / "checkpoints" / "mechanism").glob("*.json"))) == 2
    assert json.loads(out.read_text())["rows"] == rec["rows"]
    assert rm.main(argv) == 0 and json.loads(out.read_text())["rows"] == rec["rows"]   # resumed, the same rows
    with pytest.raises(ValueError, match="sigma"):
        rm.main(["--sigma", "0"])
    with pytest.raises(SystemExit, match="--K"):
        rm.main(["--K", "a"])


def test_by_mixture_groups_recorded_rows_for_the_rule():
    cells = list(mechanism.mechanism_map([8], [4], [2.0], [0.5], [1, 4, 8], windows=4, length=8, seed=0, n_boot=100))
    rows = [c.row() for c in cells]
    got = mechanism.by_mixture(rows, n=4, ks=(4, 8))
    assert list(got) == ["d=8, M=4, sigma=0.5, spacing=2"] and sorted(got["d=8, M=4, sigma=0.5, spacing=2"]) == [4, 8]
    ratio, flips = got["d=8, M=4, sigma=0.5, spacing=2"][4]
    assert ratio.value == cells[1].ratio.value and flips.lo == cells[1].flips.lo and ratio.n == 4


def test_mechanism_figures_leave_out_lower_bounds_and_draw_our_latents():
    import pandas as pd
    from tokendyn.publish import figures
    cells = pd.DataFrame([{"K": 4, "flips": 0.2, "isotropic": 0.01, "ratio": 20.0, "separation": 10.0, "d": 64, "M": 256,
                           "sigma": 0.1, "spacing": 1.0},
                          {"K": 4, "flips": 0.05, "isotropic": 0.0, "ratio": 51.0, "separation": 40.0, "d": 64, "M": 256,
                           "sigma": 0.05, "spacing": 2.0}])
    placed = pd.DataFrame([{"generator": "flow", "K": 4, "flips": 0.11, "ratio": 2.5}])
    spec = figures.mechanism_placement(cells, placed).to_dict()
    drawn = [rows for rows in spec["datasets"].values() if rows and "separation" in rows[0]]
    assert len(drawn) == 1 and [r["ratio"] for r in drawn[0]] == [20.0]     # the lower bound is not drawn
    sep = figures.mechanism_separation(cells, {"contextual": 44.0}).to_dict()
    assert any(rows and rows[0].get("latents") == "contextual" for rows in sep["datasets"].values())
