"""tokendyn.publish.chapter_params: every chapter's defaults pass, every rule names a parameter of its
chapter, and bad values fail by name (fast: the parameters cells are executed, nothing loads)."""

import json
from pathlib import Path

import pytest

from tokendyn.publish import chapter_params

BOOK = Path(__file__).resolve().parents[1] / "book"


def defaults(chapter: str) -> dict:
    nb = json.loads((BOOK / f"{chapter}.ipynb").read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    ns: dict = {}
    exec("".join(cell["source"]), ns)  # noqa: S102 - the book's own parameters cell
    return {k: v for k, v in ns.items() if not k.startswith("__")}


@pytest.mark.parametrize("chapter", sorted(chapter_params.RULES))
def test_defaults_pass_and_every_rule_names_a_parameter(chapter):
    p = defaults(chapter)
    chapter_params.check(chapter, p)
    for entry in chapter_params.RULES[chapter]:
        reads = entry.reads if isinstance(entry, chapter_params.Derived) else (entry[0],)
        assert reads and set(reads) <= set(p), f"{chapter}: rule {entry!r} reads {reads}, not all parameters"


def test_every_chapter_checks_its_parameters_in_one_call():
    for chapter in chapter_params.RULES:
        text = (BOOK / f"{chapter}.ipynb").read_text()
        assert f'chapter_params.check(\\"{chapter}\\", globals())' in text, chapter


@pytest.mark.parametrize("chapter, change, message", [
    ("01_glauber_theory", {"toy_q": 7}, "toy_q=7 is out of range: allowed [2, 6]"),
    ("01_glauber_theory", {"toy_n": 7, "toy_q": 6}, "toy_q ** toy_n=279936 is out of range"),
    ("02_rectangle_test", {"taus": [0.5, 2.0]}, "must hold 1.0"),
    ("02_rectangle_test", {"n_tokens": 3}, "n_tokens=3 is out of range"),
    ("02_rectangle_test_size", {"ap_k": 1}, "ap_k=1 is out of range"),
    ("03_phase_transition", {"drift_budget_factor": 50.0}, "drift_budget_factor=50.0 is out of range"),
    ("03_phase_transition_crossover", {"recorded_runs": "runs/x.json"}, "give a list of paths"),
    ("04_basins", {"hamming_h": 40}, "hamming_h=40 is out of range"),
    ("04_basins_census", {"hamming_h": 16}, "hamming_h=16 is out of range"),
    ("04_basins_census", {"segment_steps": 7, "record_every": 2}, "record_every=2 must divide segment_steps=7"),
    ("04_basins_census", {"attractor_steps": {"minilm-mlm": 201}, "record_every": 2}, "must be a multiple of record_every=2"),
    ("04_basins_attractor", {"embed_every": 7}, "must be a multiple of embed_every=7"),
    ("04_basins_attractor", {"ablation": {"with": "nope", "without": "x"}}, "ablation['with']='nope' is not allowed"),
    ("05_tube_law", {"n_terminal": 1}, "n_terminal=1 is out of range"),
    ("05_tube_law_map", {"toy_spacings": {}}, "toy_spacings must be a non-empty dict"),
    ("06_dabi_cci", {"reference_norm": 0.123}, "reference_norm=0.123 is not allowed"),
    ("07_escapes", {"diffusion_steps": 10_000}, "diffusion_steps=10000 is out of range"),
    ("07_escapes_decoders", {"n_mc": 10}, "n_mc=10 is out of range"),
    ("appendix_performance", {"fidelity_tau_coupling": 0.0}, "fidelity_tau_coupling=0.0 is out of range"),
])
def test_a_bad_value_fails_by_name(chapter, change, message):
    p = defaults(chapter) | change
    with pytest.raises((ValueError, TypeError), match=None) as err:
        chapter_params.check(chapter, p)
    assert message in str(err.value)


def test_a_missing_parameter_or_chapter_is_named():
    p = defaults("00_getting_started")
    del p["n_tokens"]
    with pytest.raises(KeyError, match="'n_tokens' is not defined"):
        chapter_params.check("00_getting_started", p)
    p = defaults("04_basins_attractor")
    del p["ablation"]  # read only by derived checks, which name what they read
    with pytest.raises(KeyError, match="'ablation' is not defined"):
        chapter_params.check("04_basins_attractor", p)
    with pytest.raises(KeyError, match="no parameter rules"):
        chapter_params.check("99_nowhere", p)
