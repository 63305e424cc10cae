"""A chapter refuses a bad parameter in its first cell, by the name the reader typed, before any
model loads (papermill, as a researcher reruns it)."""

import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CASES = [
    ("00_getting_started.ipynb", {"fill_topic": "nonsense"}, "fill_topic='nonsense' is not allowed"),
    ("00_getting_started.ipynb", {"n_tokens": 1}, "n_tokens=1 is out of range"),
    ("03_phase_transition.ipynb", {"ns": [8, 1]}, "ns=1 is out of range"),
    ("03_phase_transition_crossover.ipynb", {"shape_run": "runs/other.json"}, "shape_run='runs/other.json': must be one of"),
    ("04_basins.ipynb", {"hamming_h": -1}, "hamming_h=-1 is out of range"),
    ("05_tube_law.ipynb", {"method": "rk4"}, "method='rk4' is not allowed"),
    ("05_tube_law_map.ipynb", {"recorded_ladder": 5}, "recorded_ladder must be a path under data/"),
    ("06_dabi_cci.ipynb", {"reference_norm": 0.5}, "reference_norm=0.5 is not allowed"),
    ("06_dabi_cci.ipynb", {"recorded_ladder": 5}, "recorded_ladder must be a path under data/"),
    ("07_escapes.ipynb", {"reference_k": 3}, "reference_k=3 is not allowed"),
    ("07_escapes_decoders.ipynb", {"retrain_lr": 2.0}, "retrain_lr=2.0 is out of range"),
]


@pytest.mark.parametrize("chapter,params,message", CASES, ids=[f"{c[:2]}-{next(iter(p))}" for c, p, _ in CASES])
def test_bad_parameter_fails_first_and_by_name(tmp_path, monkeypatch, chapter, params, message):
    import papermill
    from papermill.exceptions import PapermillExecutionError

    monkeypatch.setenv("TOKENDYN_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("TOKENDYN_PROGRESS", "0")
    t0 = time.perf_counter()
    with pytest.raises(PapermillExecutionError) as err:
        papermill.execute_notebook(str(ROOT / "book" / chapter), str(tmp_path / "out.ipynb"),
                                   parameters=params, kernel_name="python3", cwd=str(ROOT / "book"),
                                   progress_bar=False)
    assert err.value.ename in ("ValueError", "TypeError")
    assert message in err.value.evalue
    # It failed in the cell right after the injected parameters, before anything was loaded.
    assert err.value.exec_count <= 4, f"failed late, in cell {err.value.exec_count}"
    assert not (tmp_path / "results").exists()
    assert time.perf_counter() - t0 < 120
