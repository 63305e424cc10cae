"""CensoredTimes: the one censored-times record, from the coupling kernel to the recorded runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tokendyn.core.atomic import RecordError
from tokendyn.mcmc import diagnostics, glauber, toy
from tokendyn.mcmc.censored import CensoredTimes
from tokendyn.publish import results

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


def _ct(times, censored, cap):
    return CensoredTimes(torch.tensor(times), torch.tensor(censored), cap)


def test_a_censored_row_sits_at_the_cap_and_the_record_unpacks_to_its_pair():
    cell = _ct([0, 3, 7, 7], [False, False, False, True], 7)
    times, censored = cell  # the pre-registered rules read cells as this pair
    assert times is cell.times and censored is cell.censored and len(list(cell)) == 2
    assert diagnostics.median_times({"a": cell}) == diagnostics.median_times({"a": (cell.times, cell.censored)})
    empty = CensoredTimes(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.bool), 0)
    assert empty.times.numel() == 0 and empty.cap == 0


@pytest.mark.parametrize("times,censored,cap,error,msg", [
    ([1, 2], [False, False], -1, ValueError, r"cap=-1 is out of range"),
    ([1, 2], [False, False], 2.0, TypeError, r"cap must be an integer"),
    ([1, 2], [False, False], True, TypeError, r"cap must be an integer"),
    ([1.0, 2.0], [False, False], 2, TypeError, r"times must be a 1-D torch.int64 tensor \[B\], got torch.float32"),
    ([[1, 2]], [[False, False]], 2, TypeError, r"times must be a 1-D torch.int64 tensor \[B\], got torch.int64 \(1, 2\)"),
    ([1, 2], [0, 0], 2, TypeError, r"censored must be a 1-D torch.bool tensor \[B\], got torch.int64"),
    ([1, 2], [False], 2, ValueError, r"censored has 1 entries but times has 2"),
    ([-1, 2], [False, False], 2, ValueError, r"times must be >= 0, got \[-1\]"),
    ([1, 3], [False, True], 4, ValueError, r"times of censored rows must equal cap=4, got \[3\]"),
    ([1, 5], [False, True], 4, ValueError, r"times of censored rows must equal cap=4, got \[5\]"),
    ([5, 4], [False, True], 4, ValueError, r"uncensored times must be <= cap=4, got \[5\]"),
])
def test_a_record_that_breaks_the_convention_is_refused_naming_the_field(times, censored, cap, error, msg):
    with pytest.raises(error, match=msg):
        _ct(times, censored, cap)


def test_the_fields_must_be_tensors():
    with pytest.raises(TypeError, match=r"times must be a 1-D torch.int64 tensor \[B\], got list"):
        CensoredTimes([1, 2], torch.tensor([False, False]), 2)


def test_coupling_times_censor_at_the_budget():
    m = toy.potts_chain(6, 2, coupling=4.0, seed=0)
    x0 = torch.zeros(4, 6, dtype=torch.long)
    y0 = torch.cat([torch.zeros(2, 6, dtype=torch.long), torch.ones(2, 6, dtype=torch.long)])
    r = glauber.coupling_times(m, x0, y0, tau=torch.tensor([1.0, 1.0, 0.1, 0.1]), max_steps=25, seed=0).times
    assert isinstance(r, CensoredTimes) and r.cap == 25
    assert r.times.tolist() == [0, 0, 25, 25] and r.censored.tolist() == [False, False, True, True]


def _save(path: Path, cells, params) -> Path:
    return results.save_run(path, cells, command="make it", params=params, seed=0, models=["toy"])


def test_save_and_load_run_round_trip_every_field(tmp_path):
    params = {"budget_factors": [2.0, 10.0]}
    caps = {n: diagnostics.budget_steps(10.0, n) for n in (4, 8)}
    assert caps == {4: 55, 8: 166}
    cells = {("toy", 4, 1.0): _ct([3, 55, 12], [False, True, False], 55),
             ("toy", 8, 2.5): _ct([166, 166], [True, True], 166),
             ("toy", 8, 5.0): _ct([9, 166], [False, False], 166)}  # coupled at the last step: not censored
    got, meta = results.load_run(_save(tmp_path / "run.json", cells, params))
    assert list(got) == list(cells) and meta["command"] == "make it"
    for key, cell in cells.items():
        assert torch.equal(got[key].times, cell.times) and torch.equal(got[key].censored, cell.censored)
        assert got[key].cap == cell.cap and got[key].times.dtype == torch.long
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["cells"][0] == {"model": "toy", "n": 4, "tau": 1.0, "times": [3, 55, 12],
                                  "censored": [False, True, False]}  # no cap in the file: the params give it


def test_save_run_refuses_a_cell_that_load_run_would_misread(tmp_path):
    with pytest.raises(ValueError, match=r"cell \('toy', 4, 1\) has cap 50, not the run's budget 55"):
        _save(tmp_path / "run.json", {("toy", 4, 1.0): _ct([3, 50], [False, True], 50)}, {"budget_factors": [10.0]})
    with pytest.raises(ValueError, match="budget_factors"):
        _save(tmp_path / "run.json", {("toy", 4, 1.0): _ct([3, 50], [False, True], 50)}, {})
    assert not (tmp_path / "run.json").exists()


def test_load_run_refuses_a_record_whose_cells_do_not_fit_the_cap(tmp_path):
    path = _save(tmp_path / "run.json", {("toy", 4, 1.0): _ct([3, 55], [False, True], 55)}, {"budget_factors": [10.0]})
    record = json.loads(path.read_text())
    record["provenance"]["params"]["budget_factors"] = [5.0]  # cap 28: the censored 55 no longer fits
    path.write_text(json.dumps(record))
    with pytest.raises(RecordError, match=r"cell \('toy', 4, 1\): times of censored rows must equal cap=28.*make it"):
        results.load_run(path)
    del record["provenance"]["params"]["budget_factors"]
    path.write_text(json.dumps(record))
    with pytest.raises(RecordError, match="names no budget_factors"):
        results.load_run(path)


@pytest.mark.parametrize("name", ["grid", "shape", "minilm", "mpnet"])
def test_every_recorded_chapter_3_run_loads_capped_at_its_budget_and_saves_back_the_same_cells(tmp_path, name):
    path = RUNS / f"03_phase_transition-{name}.json"
    cells, meta = results.load_run(path)
    params = meta["provenance"]["params"]
    assert {c.cap for (_, n, _), c in cells.items()} == {diagnostics.budget_steps(max(params["budget_factors"]), n)
                                                         for n in params["ns"]}
    again = _save(tmp_path / "again.json", cells, params)
    assert json.loads(again.read_text())["cells"] == json.loads(path.read_text())["cells"]
