"""tokendyn.checked: checked outputs that hold on every CPU, and fail on a real change."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokendyn import checked
from tokendyn.checked import Checks

LINE = "minilm-mlm [model], 256 rectangles: raw delta mean 0.45 [0.39, 0.51], median 0.28; 171 of 384 censored\n"


def test_numbers_split_and_rejoin():
    nums, parts = checked.numbers("minilm-depth2: 3.8-4.3, x_0 +0.37 [-0.12, 880,092] 4.2e+02 11.0% K=4")
    assert nums == ["3.8", "4.3", "+0.37", "-0.12", "880,092", "4.2e+02", "11.0", "4"]
    assert "".join(p + n for p, n in zip(parts, nums + [""])) == "minilm-depth2: 3.8-4.3, x_0 +0.37 [-0.12, 880,092] 4.2e+02 11.0% K=4"
    assert checked.value("880,092") == 880092 and checked.value("−0.5") == -0.5


def test_last_digit():
    assert [checked.last_digit(t) for t in ("0.156", "4.2e+02", "880,092", "1e-12", "11.0")] == \
        pytest.approx([1e-3, 10, 1, 1e-12, 0.1])


def test_round_off_in_the_last_digit_agrees_and_a_real_change_does_not():
    assert checked.compare("cosine 0.156\n", "cosine 0.157\n") == []  # a rounding boundary moved
    diffs = checked.compare("cosine 0.156\n", "cosine 0.160\n")
    assert len(diffs) == 1 and diffs[0].committed == "0.156" and diffs[0].live == "0.160"


def test_an_interval_sets_the_tolerance_of_its_own_numbers():
    assert checked.compare(LINE, LINE.replace("0.45 [0.39, 0.51]", "0.50 [0.44, 0.57]")) == []
    # a point outside what the committed interval allows is a difference
    assert [d.index for d in checked.compare(LINE, LINE.replace("0.45 [", "0.60 ["))] == [1]
    assert checked.interval_spreads(*checked.numbers("11.0% [10.3%, 11.6%]")) == pytest.approx(
        {0: 0.7, 1: 1.3, 2: 1.3})


def test_rtol_atol_and_rules():
    live = LINE.replace("171 of", "180 of")
    assert len(checked.compare(LINE, live)) == 1
    assert checked.compare(LINE, live, rtol=0.1) == []
    assert checked.compare(LINE, live, rules=((" of $", 0, 10),)) == []
    with pytest.raises(ValueError, match="rtol"):
        checked.compare(LINE, LINE, rtol=-1)


def test_other_words_are_never_within_tolerance():
    assert checked.compare("claim 1 | partly\n", "claim 1 | reproduced\n") is None
    assert checked.compare("a 1\n", "a 1\nb 2\n") is None


def test_agree_prints_the_committed_text_inside_the_tolerance(capsys, monkeypatch):
    monkeypatch.delenv("TOKENDYN_CHECKS", raising=False)
    chk = Checks("t", reference={"k": LINE})
    with chk.agree("k", rtol=0.1, why="test"):
        print(LINE.replace("171 of", "175 of").replace("0.45 [", "0.47 ["), end="")
    out = capsys.readouterr().out
    assert out.startswith(LINE)
    assert out.splitlines()[-1] == ("(checked: 7 numbers agree with the committed run; tolerance one unit in the "
                                    "last digit, plus 10%: test)")
    assert chk.results["k"] == []


def test_agree_prints_the_live_text_and_the_numbers_that_differ(capsys, monkeypatch):
    monkeypatch.delenv("TOKENDYN_CHECKS", raising=False)
    chk = Checks("t", reference={"k": LINE})
    with chk.agree("k"):
        print(LINE.replace("171 of", "250 of"), end="")
    out = capsys.readouterr().out
    assert "250 of 384" in out and "DIFFER" in out and "committed 171, live 250" in out
    assert len(chk.results["k"]) == 1


def test_record_mode_prints_what_a_comparison_would(capsys, monkeypatch):
    monkeypatch.setenv("TOKENDYN_CHECKS", "record")
    with Checks("t", reference={"k": "old 1\n"}).agree("k", rtol=0.1, why="w"):
        print(LINE, end="")
    recorded = capsys.readouterr().out
    monkeypatch.setenv("TOKENDYN_CHECKS", "compare")
    with Checks("t", reference={"k": LINE}).agree("k", rtol=0.1, why="w"):
        print(LINE, end="")
    assert capsys.readouterr().out == recorded
    monkeypatch.setenv("TOKENDYN_CHECKS", "replay")
    with pytest.raises(ValueError, match="TOKENDYN_CHECKS"):
        Checks("t", reference={})


def test_committed_outputs_read_from_a_notebook(tmp_path):
    footer = "(checked: 1 numbers agree with the committed run; tolerance x)\n"
    nb = {"cells": [{"cell_type": "code", "source": ["with chk.agree('a'):\n", "    print(1)\n",
                                                      "with chk.agree(\"b\", rtol=0.1):\n", "    print(2)\n"],
                     "outputs": [{"output_type": "stream", "name": "stdout",
                                  "text": ["x 1\n", footer, "y 2\n", footer]}]}]}
    path = tmp_path / "ch.ipynb"
    path.write_text(json.dumps(nb))
    assert checked.committed_outputs(path) == {"a": "x 1\n", "b": "y 2\n"}


def test_every_chapter_check_has_its_committed_output():
    """A checked block whose committed output is missing would print 'no committed run'."""
    book = Path(__file__).resolve().parents[1] / "book"
    for path in sorted(book.glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        n_blocks = sum("".join(c["source"]).count(".agree(") for c in cells if c["cell_type"] == "code")
        found = checked.committed_outputs(path)
        assert len(found) == n_blocks, path.name
        for key, text in found.items():
            assert text.strip(), f"{path.name}: check {key!r} has no committed output"


def _probe(env_extra: dict[str, str], reference: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")}
    env.update(env_extra)
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("isa_probe.py")), reference],
                         env=env, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_checked_text_is_the_same_under_two_float_orders(tmp_path):
    """A seeded coupling summary and a claims table on the shipped splade-tiny-mlm, computed under this
    machine's kernels and under ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=AVX2, print the same
    checked text, although the second setting changes the logits' bits."""
    native = _probe({"TOKENDYN_CHECKS": "record"}, "-")
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps(native["live"]))
    other = _probe({"TOKENDYN_CHECKS": "compare", "ATEN_CPU_CAPABILITY": "default",
                    "ONEDNN_MAX_CPU_ISA": "AVX2"}, str(ref))
    assert native["logits_sha256"] != other["logits_sha256"], "the ISA setting did not change the float order"
    assert other["checked"] == native["checked"]
    assert "DIFFER" not in other["checked"]
