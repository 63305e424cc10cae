"""Sweeps: a grid of papermill runs that write their own results and resume."""

import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from tokendyn.publish import cli, sweep


def _chapter(path):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("x = 1\nseed = 0", metadata={"tags": ["parameters"]})
    body = nbformat.v4.new_code_cell(
        "from tokendyn.publish import results\n"
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


# --- the sweep command line -----------------------------------------------------------

def test_grid_values_parse_like_the_command_line_means_them():
    assert sweep.parse_axis("tau=0.5,1,2") == ("tau", [0.5, 1, 2])
    assert sweep.parse_axis("ns=[8,16],[32]") == ("ns", [[8, 16], [32]])
    assert sweep.parse_axis('topic=science,"a,b",None,true') == ("topic", ["science", "a,b", None, True])
    assert sweep.parse_grid(["tau=0.5,1", "n=8"]) == {"tau": [0.5, 1], "n": [8]}
    assert sweep.parse_params(["mlm_names=['a', 'b']", "x=1e3"]) == {"mlm_names": ["a", "b"], "x": 1000.0}
    for bad, msg in (("tau", "NAME=V1,V2"), ("tau=", "empty value"), ("tau=1,,2", "empty value"),
                     ("2x=1", "not a parameter name")):
        with pytest.raises(ValueError, match=msg):
            sweep.parse_axis(bad)
    with pytest.raises(ValueError, match="given twice"):
        sweep.parse_grid(["tau=1", "tau=2"])


def test_each_ray_point_asks_for_a_gpu_when_the_cluster_has_one():
    assert sweep.task_resources({"CPU": 16.0, "GPU": 1.0}) == {"num_gpus": 1}
    assert sweep.task_resources({"CPU": 2.0}) == {"num_cpus": 1}
    assert sweep.task_resources({"CPU": 2.0, "GPU": 8.0}, num_gpus=0.5) == {"num_gpus": 0.5}
    assert sweep.task_resources({"CPU": 2.0, "GPU": 8.0}, num_gpus=0) == {"num_cpus": 1}


def test_command_line_errors_come_before_any_run(tmp_path, capsys):
    nb = _chapter(tmp_path / "99_toy.ipynb")
    out = tmp_path / "out"
    cases = [(["--grid", "tau=1,2"], "'tau' is not a parameter of 99_toy.ipynb: its parameters cell sets x, seed"),
             (["--grid", "x=1", "-p", "x=2"], "both a grid axis and a fixed parameter"),
             (["--grid", "x=1", "--address", "auto"], "need --backend ray"),
             ([], "at least one --grid"),
             (["--grid", "x"], "NAME=V1,V2")]
    for extra, msg in cases:
        assert cli.main(["sweep", str(nb), "--out", str(out), *extra]) == 2
        assert msg in capsys.readouterr().err
    assert cli.main(["sweep", str(tmp_path / "nope.ipynb"), "--grid", "x=1"]) == 2
    assert "neither a notebook file nor a chapter" in capsys.readouterr().err
    assert not out.exists()  # nothing ran, nothing was written
    with pytest.raises(SystemExit):
        cli.main(["sweep", str(nb), "--grid", "x=1", "--backend", "dask"])


def test_point_keys_follow_the_chapters_code_not_its_outputs(tmp_path, capsys):
    nb_path = _chapter(tmp_path / "99_toy.ipynb")
    before = sweep.point_dir(nb_path, {"x": 1}, tmp_path)
    nb = nbformat.read(nb_path, as_version=4)
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="re-executed\n")]
    nb.cells[1].execution_count = 7
    nbformat.write(nb, nb_path)
    assert sweep.point_dir(nb_path, {"x": 1}, tmp_path) == before  # executing in place keeps keys
    nb.cells[1].source += "\n# edited"
    nbformat.write(nb, nb_path)
    assert sweep.point_dir(nb_path, {"x": 1}, tmp_path) != before  # editing the code does not
    assert cli.main(["sweep", str(nb_path), "--grid", "x=1,2", "-p", "seed=3", "--out", str(tmp_path / "o"),
                     "--dry-run"]) == 0
    shown = capsys.readouterr().out
    assert "2 points" in shown and "99_toy-" in shown and "False" in shown


def test_gather_reads_finished_points_and_writes_one_table(tmp_path):
    nb = _chapter(tmp_path / "99_toy.ipynb")
    out = tmp_path / "out"
    pts = sweep.grid(x=[1, 2, 3])
    for p in pts[:2]:  # as run_one leaves them: results JSON, then the done marker
        d = sweep.point_dir(nb, p, out)
        d.mkdir(parents=True)
        (d / "99_toy.json").write_text(json.dumps({
            "chapter": "99_toy", "metrics": {"y": p["x"] ** 2, "T": "inf", "fit": {"C": 1.5, "ns": [8, 16]}},
            "provenance": {"params": p, "seed": 0, "models": ["a", "b"], "tokendyn_version": "0.1.0"}}))
        (d / "done").write_text("ok\n")
    table = sweep.gather(nb, pts, out)
    assert table["status"].tolist() == ["done", "done", "missing"]
    assert table["y"].tolist()[:2] == [1, 4] and table["T"].tolist()[:2] == [float("inf")] * 2
    assert table["fit.C"].tolist()[:2] == [1.5, 1.5] and table["fit.ns"][0] == "[8, 16]"
    assert table["provenance.models"][0] == "a, b" and "provenance.params" not in table
    for fmt in ("parquet", "csv"):
        path = sweep.write_table(table, out / "t", fmt)
        back = pd.read_parquet(path) if fmt == "parquet" else pd.read_csv(path)
        assert back["x"].tolist() == [1, 2, 3] and path.suffix == f".{fmt}"


@pytest.mark.slow
def test_local_sweep_keeps_going_past_a_failed_point_and_retries_it(tmp_path, capsys):
    nb = _chapter(tmp_path / "99_toy.ipynb")
    out = tmp_path / "out"
    # x=0 fails inside the chapter; the other point finishes and is kept
    nbf = nbformat.read(nb, as_version=4)
    nbf.cells[1].source = "assert x != 0, 'x must not be 0'\n" + nbf.cells[1].source
    nbformat.write(nbf, nb)
    code = cli.main(["sweep", str(nb), "--grid", "x=0,3", "--out", str(out), "--format", "csv", "--no-progress"])
    shown = capsys.readouterr().out
    assert code == 1 and "2 points: 1 ran, 0 already done, 1 failed" in shown and "x must not be 0" in shown
    table = pd.read_csv(out / "99_toy-table.csv")
    assert table["status"].tolist() == ["missing", "done"] and table["y"].tolist()[1] == 9
    res = sweep.run_sweep(nb, {"x": [0, 3]}, out=out, progress=False)  # the failed one is retried
    assert res.skipped == [table["point"][1]] and list(res.failed) == [table["point"][0]]


def _params_notebook(tmp_path, source: str, stamps=None):
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell, nbformat.v4.new_code_cell("x = 1")]
    for c, s in zip(nb.cells, stamps or []):
        c.metadata["execution"] = s
    path = tmp_path / "09_demo.ipynb"
    nbformat.write(nb, path)
    return path


def test_gpu_scale_is_read_from_the_parameters_cell_and_checked_against_it(tmp_path):
    nb = _params_notebook(tmp_path, "# GPU scale (papermill -y): {n: 4096,\n#   taus: [0.5, 1.0]}\nn = 16\ntaus = [1.0]\n")
    assert sweep.gpu_scale(nb) == {"n": 4096, "taus": [0.5, 1.0]}
    assert sweep.rerun_command(nb) == ("TOKENDYN_DEVICE=cuda papermill book/09_demo.ipynb 09_demo-gpu.ipynb "
                                       "--cwd book -y '{n: 4096, taus: [0.5, 1.0]}'")
    bad = _params_notebook(tmp_path, "# GPU scale (papermill -y): {m: 3}\nn = 16\n")
    with pytest.raises(ValueError, match="'m', which is not a parameter"):
        sweep.gpu_scale(bad)
    assert sweep.gpu_scale(_params_notebook(tmp_path, "n = 16\n")) == {}


def test_every_chapter_gpu_scale_names_its_own_parameters():
    book = Path(__file__).resolve().parents[1] / "book"
    for nb in sorted(book.glob("*.ipynb")):
        values = sweep.gpu_scale(nb)  # raises on a key the chapter does not have
        assert nb.stem == "appendix_scale" or values, f"{nb.name} gives no GPU-scale values"


def test_recorded_run_time_spans_the_kernel_stamps(tmp_path):
    stamps = [{"iopub.execute_input": "2026-12-01T10:00:00.5Z", "shell.execute_reply": "2026-12-01T10:00:01Z"},
              {"iopub.execute_input": "2026-12-01T10:00:02Z", "shell.execute_reply": "2026-12-01T10:01:30.5Z"}]
    assert sweep.recorded_run_time(_params_notebook(tmp_path, "n = 1\n", stamps)) == pytest.approx(90.0)
    assert sweep.recorded_run_time(_params_notebook(tmp_path, "n = 1\n")) is None
