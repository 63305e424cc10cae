"""Sweeps: a grid of papermill runs that write their own results and resume."""

import json

import nbformat
import pytest

from tokendyn import sweep


def _chapter(path):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("x = 1\nseed = 0", metadata={"tags": ["parameters"]})
    body = nbformat.v4.new_code_cell(
        "from tokendyn import results\n"
        "results.save('99_toy', {'y': x * x + seed}, params={'x': x}, seed=seed, models=[])")
    nb.cells = [params, body]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_grid_and_keys():
    g = sweep.grid(tau=[0.5, 1.0], n=[8, 16])
    assert g == [{"tau": 0.5, "n": 8}, {"tau": 0.5, "n": 16}, {"tau": 1.0, "n": 8}, {"tau": 1.0, "n": 16}]
    keys = {sweep.run_key("book/03.ipynb", p) for p in g}
    assert len(keys) == 4 and sweep.run_key("other/03.ipynb", g[0]) == sweep.run_key("book/03.ipynb", g[0])
    with pytest.raises(ValueError, match="axis 'tau' is empty"):
        sweep.grid(tau=[])


@pytest.mark.slow
def test_runs_write_results_and_resume(tmp_path):
    nb = _chapter(tmp_path / "99_toy.ipynb")
    out = tmp_path / "runs"
    dirs = [sweep.run_one(nb, p, out) for p in sweep.grid(x=[2, 3])]
    got = [r["metrics"]["y"] for r in sweep.collect(out, "99_toy")]
    assert sorted(got) == [4, 9]
    assert json.loads((dirs[0] / "params.json").read_text()) == {"x": 2}
    stamp = (dirs[0] / "99_toy.json").stat().st_mtime_ns
    sweep.run_one(nb, {"x": 2}, out)  # finished: skipped, results untouched
    assert (dirs[0] / "99_toy.json").stat().st_mtime_ns == stamp


def test_chapter_parameters_reads_the_parameters_cell(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("n_chains = 64   # chains (GPU: 4096)\ntau = 1.0",
                                          metadata={"tags": ["parameters"]})]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "c.ipynb")
    rows = sweep.chapter_parameters(tmp_path / "c.ipynb")
    assert rows == [{"name": "n_chains", "default": "64", "help": "chains (GPU: 4096)"},
                    {"name": "tau", "default": "1.0", "help": ""}]
