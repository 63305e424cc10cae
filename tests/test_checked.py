"""tokendyn.publish.checked: checked outputs that hold on every CPU, and fail on a real change."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tokendyn.publish import checked
from tokendyn.publish.checked import Checks

LINE = "minilm-mlm [model], 256 rectangles: raw delta mean 0.45 [0.39, 0.51], median 0.28; 171 of 384 censored\n"


def test_numbers_split_and_rejoin():
    nums, parts = checked.numbers("minilm-depth2: 3.8-4.3, x_0 +0.37 [-0.12, 880,092] 4.2e+02 11.0% K=4")
    assert nums == ["3.8", "4.3", "+0.37", "-0.12", "880,092", "4.2e+02", "11.0", "4"]
    assert "".join(p + n for p, n in zip(parts, nums + [""])) == "minilm-depth2: 3.8-4.3, x_0 +0.37 [-0.12, 880,092] 4.2e+02 11.0% K=4"
    assert checked.value("880,092") == 880092 and checked.value("−0.5") == -0.5


def test_a_commit_hash_is_a_word_not_an_exponent():
    """'71e452f4c6' once parsed as 71e452 (an overflow) and crashed the comparison of a changed line."""
    nums, _ = checked.numbers("commit 71e452f4c6, mean 0.4765 and 4.2e+02")
    assert nums == ["71", "0.4765", "4.2e+02"]
    line = "recorded at commit 71e452f4c6: mean 0.4765 [0.43, 0.52]\n"
    assert checked.compare(line, line.replace("0.4765", "0.4766")) == []
    assert checked.compare(line, line.replace("71e452f4c6", "cadd384da1")) is None   # other words: not comparable


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


def test_tolerances_come_from_the_numbers_own_sample():
    live = LINE.replace("171 of", "180 of")
    assert len(checked.compare(LINE, live)) == 1  # a bare number is compared at round-off only
    # 171 of 384: binomial s.e. sqrt(384 p (1 - p)) ~ 9.7, times Z sqrt(2): about 41
    count = checked.Count(384, "runs")
    assert checked.compare(LINE, live, rules=((r"(\d+) of 384", count),)) == []
    assert count.allowed(171, False) == pytest.approx(checked.Z * 2 ** 0.5 * (384 * (172 / 386) * (214 / 386)) ** 0.5)
    assert len(checked.compare(LINE, LINE.replace("171 of", "230 of"), rules=((r"(\d+) of 384", count),))) == 1
    # the rule covers only what its regex matches: the median 0.28 is still round-off only
    assert [d.index for d in checked.compare(LINE, live.replace("median 0.28", "median 0.33"),
                                             rules=((r"(\d+) of 384", count),))] == [4]


def test_share_reads_percent_and_smooths_zero():
    share = checked.Share(100, "tokens")
    assert share.allowed(0.5, False) == pytest.approx(checked.Z * 2 ** 0.5 * 0.05, rel=0.02)
    assert share.allowed(50.0, True) == pytest.approx(100 * share.allowed(0.5, False))
    assert share.allowed(0.0, False) > 0  # a share of 0 still has a sampling error
    assert checked.compare("flips 11.0% of 100\n", "flips 15.0% of 100\n",
                           rules=((r"flips (\S+)%", share),)) == []
    assert checked.compare("flips 11.0% of 100\n", "flips 30.0% of 100\n",
                           rules=((r"flips (\S+)%", share),)) != []


def test_stderr_and_relative_stderr_from_samples():
    se = checked.StdErr.of_mean([1.0, 2.0, 3.0, 4.0], "chains")
    assert se.se == pytest.approx(1.2909944 / 2) and "4 chains" in se.describe()
    boot = checked.StdErr.bootstrap(list(range(50)), what="chains")
    assert 2 < boot.se < 8  # the median of 0..49 has a bootstrap s.d. of a few units
    ppl = checked.RelStdErr.of_log_mean([3.9, 4.1, 4.0, 4.2, 3.8], "sequences")
    assert ppl.allowed(56.0, False) == pytest.approx(56.0 * math.expm1(checked.Z * 2 ** 0.5 * ppl.se_log))
    assert checked.compare("PPL 56\n", "PPL 46\n", rules=((r"PPL (\S+)", checked.RelStdErr(0.1, "24 sequences")),)) == []
    assert checked.compare("PPL 56\n", "PPL 46\n", rules=((r"PPL (\S+)", checked.RelStdErr(0.01, "24 sequences")),))


def test_bad_tolerances_fail_before_the_block_runs():
    with pytest.raises(TypeError, match="not allowed"):
        with Checks("t", reference={}).agree("k", rtol=0.1, default=checked.Share(10, "x")):
            raise AssertionError("the block must not run")
    with pytest.raises(TypeError, match="not allowed"):
        with Checks("t", reference={}).agree("k", tol=0.1):
            raise AssertionError("the block must not run")
    with pytest.raises(TypeError, match="Tolerance"):
        with Checks("t", reference={}).agree("k", rules=((" of", 0.1, 0),)):
            raise AssertionError("the block must not run")
    with pytest.raises(ValueError, match="regex"):
        checked.compare("a 1\n", "a 1\n", rules=(("(", checked.EXACT),))
    with pytest.raises(ValueError, match="n of Share"):
        checked.Share(0, "tokens")
    with pytest.raises(ValueError, match="se of StdErr"):
        checked.StdErr(float("nan"), "chains")


def test_a_typed_tolerance_is_refused():
    """The old typed form (rtol, atol, why) no longer exists: agree refuses it before the block runs."""
    for legacy in ({"rtol": 0.1}, {"atol": 0.05}, {"why": "float32"}):
        with pytest.raises(TypeError, match="not allowed"):
            with Checks("t", reference={}).agree("k", **legacy):
                raise AssertionError("the block must not run")
    assert not hasattr(checked, "Typed")


def test_no_chapter_types_a_tolerance():
    """Every checked tolerance in a converted chapter is built from a sample (Share, Count, StdErr,
    RelStdErr) or is round-off only, never a bare rtol/atol literal or a typed reason."""
    book = Path(__file__).resolve().parents[1] / "book"
    typed = set()
    for path in sorted(book.glob("*.ipynb")):
        for k, cell in enumerate(json.loads(path.read_text())["cells"]):
            src = "".join(cell["source"])
            if cell["cell_type"] == "code" and ".agree(" in src and re.search(r"\b(?:[ar]tol|why)\s*=", src):
                typed.add(f"{path.name} cell {k}")
    assert not typed, f"typed tolerances in {sorted(typed)}"


def test_other_words_are_never_within_tolerance():
    assert checked.compare("claim 1 | partly\n", "claim 1 | reproduced\n") is None
    assert checked.compare("a 1\n", "a 1\nb 2\n") is None


def test_agree_prints_the_committed_text_inside_the_tolerance(capsys, monkeypatch):
    monkeypatch.delenv("TOKENDYN_CHECKS", raising=False)
    chk = Checks("t", reference={"k": LINE})
    with chk.agree("k", rules=((r"(\d+) of 384", checked.Count(384, "runs")),)):
        print(LINE.replace("171 of", "175 of").replace("0.45 [", "0.47 ["), end="")
    out = capsys.readouterr().out
    assert out == LINE  # the committed text and nothing else: the outcome is not the reader's text
    assert chk.results["k"] == [] and chk.outcomes["k"].numbers == 7
    assert "binomial s.e. of a count out of 384 runs" in chk.outcomes["k"].tolerance


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
    with Checks("t", reference={"k": "old 1\n"}).agree("k"):
        print(LINE, end="")
    recorded = capsys.readouterr().out
    monkeypatch.setenv("TOKENDYN_CHECKS", "compare")
    with Checks("t", reference={"k": LINE}).agree("k"):
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
    # the current form: each block closed by a check output, which the reader's page does not show
    mark = {"output_type": "display_data", "data": {checked.MIME: {"check": "a"}}, "metadata": {}}
    nb["cells"][0]["source"] = ["with chk.agree('a'):\n", "    print(1)\n"]
    nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["x 1\n"]}, mark]
    path.write_text(json.dumps(nb))
    assert checked.committed_outputs(path) == {"a": "x 1\n"}


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


def test_rel_std_err_of_counts_is_the_log_ratio_s_e():
    e = checked.RelStdErr.of_counts([400, 25], "flipped tokens")
    assert e.se_log == pytest.approx(math.sqrt(1 / 400 + 1 / 25))
    assert checked.RelStdErr.of_counts([0], "flips").se_log == 1.0  # a zero count floored at one
    with pytest.raises(ValueError, match="of_counts"):
        checked.RelStdErr.of_counts([float("nan")], "flips")
