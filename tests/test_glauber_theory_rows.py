"""Chapter 1's claim rows (tokendyn.publish.chapters.glauber_theory) on constructed tables: each exact
check passes when its numbers hold and fails when one does not."""

from __future__ import annotations

import math

import pytest

from tokendyn.core.stats import kolmogorov_band
from tokendyn.publish.chapters import glauber_theory

TOY = [{"tau": 0.5, "alpha": 1.4, "t_mix exact": 90, "Dobrushin bound": math.inf},
       {"tau": 2.0, "alpha": 0.6, "t_mix exact": 12, "Dobrushin bound": 40.0}]
LAW = [{"model": "Potts", "TV(empirical, exact)": 0.02, "TV of an exact sample": 0.015}]


def _rows(toy=TOY, law=LAW, gap=0.05, brackets=None):
    brackets = brackets or {"m": (1.0, 1.5)}
    return glauber_theory.findings(toy, law, {"m": 1.2}, {"m": (1.0, 1.6)}, brackets, n_contexts=16, n_tokens=12,
                                   n_chains_toy=4000, gap_max=gap, dwell_chains=192, tau_dwell=0.3)


def test_every_row_holds_on_numbers_that_hold():
    rows = _rows()
    assert [r.rule for r in rows] == ["dobrushin_crossing", "exact_match", "exact_match", "exact_match"]
    assert rows[0].ours == "m: alpha_hat falls through 1 at tau 1.2 [1, 1.6]"
    assert rows[2].ours == "tau=2: 40 vs 12"  # only where alpha < 1
    assert rows[3].ours == f"max survival gap 0.05 vs band {kolmogorov_band(192):.2f}"
    assert all(r.verdict != "not reproduced" for r in rows)


def test_each_exact_check_fails_on_its_own_wrong_number():
    loose = [dict(TOY[1], **{"Dobrushin bound": 5.0})]  # a bound below the exact t_mix
    assert _rows(toy=loose)[2].verdict == "not reproduced"
    noisy = [dict(LAW[0], **{"TV(empirical, exact)": 0.04})]  # beyond twice the noise floor
    assert _rows(law=noisy)[1].verdict == "not reproduced"
    assert _rows(gap=kolmogorov_band(192) + 0.01)[3].verdict == "not reproduced"
    no_cross = _rows(brackets={"m": (12.0, math.inf)})[0]
    assert no_cross.ours == "m: alpha_hat >= 1 on the whole grid"


def test_kolmogorov_band_is_the_asymptotic_critical_value():
    assert kolmogorov_band(100) == pytest.approx(0.136) and kolmogorov_band(100, 0.99) == pytest.approx(0.163)
    with pytest.raises(ValueError, match="level"):
        kolmogorov_band(100, 0.9)
    with pytest.raises(ValueError, match="n must be"):
        kolmogorov_band(0)
