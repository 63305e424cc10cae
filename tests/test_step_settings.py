"""tokendyn.mcmc.step_settings: the step's attention implementation, chunk and compilation chosen by
measurement, cached per machine and model, overridable by TOKENDYN_STEP."""

from __future__ import annotations

import json

import pytest
import torch

from tokendyn.mcmc import glauber, step_settings as SS
from tokendyn.publish import results
from tokendyn.mcmc.conditional import settings_chosen
from tokendyn.models.tiny import build_tiny


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENDYN_CACHE", str(tmp_path))
    monkeypatch.delenv("TOKENDYN_STEP", raising=False)
    return tmp_path / "step-settings.json"


def test_calibration_times_every_candidate_and_keeps_the_fastest(cache):
    tiny = build_tiny("bert")
    tiny.model.set_attn_implementation("eager")
    s = SS.calibrate(tiny, batch=8, n=6, rounds=1)
    assert s.source == "measured" and s.attn in SS.ATTNS and s.chunk == 8 and s.compile is False
    # every (attention, chunk) candidate the batch allows was timed, and the choice is the fastest
    assert set(s.rates) == {f"{a}/8/eager-mode" for a in SS.ATTNS}  # chunks cut to the batch of 8
    assert s.rates[f"{s.attn}/{s.chunk}/eager-mode"] == max(s.rates.values())
    assert tiny.model.config._attn_implementation == "eager"  # left as it was


def test_first_use_measures_and_caches_then_reuses(cache, monkeypatch):
    tiny = build_tiny("bert")
    calls = []
    real = SS.calibrate

    def counting(loaded, **kw):
        calls.append(kw)
        return real(loaded, batch=8, n=6, rounds=1)

    monkeypatch.setattr(SS, "calibrate", counting)
    first = SS.settings_for(tiny)
    assert first.source == "measured" and len(calls) == 1 and cache.is_file()
    entry = json.loads(cache.read_text())["entries"]
    (key, saved), = entry.items()
    assert "tiny-bert" in key and "float32" in key and f"torch {torch.__version__}" in key
    again = SS.settings_for(tiny)
    assert again.source == "cached" and len(calls) == 1
    assert (again.attn, again.chunk, again.compile) == (first.attn, first.chunk, first.compile)
    monkeypatch.setenv("TOKENDYN_STEP", "recalibrate")
    assert SS.settings_for(tiny).source == "measured" and len(calls) == 2


def test_a_damaged_cache_is_measured_again(cache, monkeypatch):
    cache.write_text('{"kind": "step-settings", "entr')
    monkeypatch.setattr(SS, "calibrate", lambda loaded, **kw: SS.StepSettings("eager", False, 64, "measured"))
    with pytest.warns(UserWarning, match="step-settings.json"):
        assert SS.settings_for(build_tiny("bert")).source == "measured"
    assert json.loads(cache.read_text())["kind"] == "step-settings"


def test_the_environment_overrides_and_is_checked(cache, monkeypatch):
    tiny = build_tiny("bert")
    monkeypatch.setattr(SS, "calibrate", lambda *a, **k: pytest.fail("fixed settings must not be measured"))
    monkeypatch.setenv("TOKENDYN_STEP", "attn=sdpa,chunk=5,compile=0")
    s = SS.settings_for(tiny)
    assert (s.attn, s.chunk, s.compile, s.source) == ("sdpa", 5, False, "env")
    monkeypatch.setenv("TOKENDYN_STEP", "model")
    assert SS.settings_for(tiny).source == "model"
    for bad, what in [("attn=flash", "attn"), ("chunk=0", "chunk"), ("chunk=x", "chunk"),
                      ("compile=maybe", "compile"), ("speed=11", "unknown key"), ("fast", "key=value")]:
        monkeypatch.setenv("TOKENDYN_STEP", bad)
        with pytest.raises(ValueError, match=what):
            SS.settings_for(tiny)


def test_conditional_applies_the_settings_and_provenance_records_them(cache, monkeypatch):
    tiny = build_tiny("bert")
    tiny.model.set_attn_implementation("eager")
    monkeypatch.setenv("TOKENDYN_STEP", "attn=sdpa,chunk=3,compile=0")
    cond = SS.conditional(tiny)
    assert cond.chunk == 3 and tiny.model.config._attn_implementation == "sdpa"
    assert settings_chosen()["tiny-bert"]["attn"] == "sdpa"
    assert results.provenance({}, 0, ["tiny-bert"])["step_settings"]["tiny-bert"]["chunk"] == 3
    # the same chains as an unchunked conditional on the same model, up to float rounding of logits
    x0 = torch.randint(5, 40, (7, 6), generator=torch.Generator().manual_seed(0))
    out = glauber.sample(cond, x0, steps=3, tau=1.0, seed=1).tokens
    assert out.shape == (7, 6)
