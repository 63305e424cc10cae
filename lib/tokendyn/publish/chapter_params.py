"""Each chapter's parameters and the values they allow, checked in one call before any compute.

A chapter's parameters cell holds small CPU defaults; papermill replaces them. The cell after it
calls :func:`check` with the chapter's name and its namespace, and a bad value fails there, named as
the reader typed it (``ns=1 is out of range: allowed [2, 510]``), before any model loads. The rules
live here, one list per chapter, in the order they are checked; a bound may depend on other
parameters (``hamming_h`` below ``min(n_tokens, attractor_tokens)``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.checks import check_choice, check_range
from ..core.data import TOPICS

Params = Mapping[str, Any]
Bound = float | None | Callable[[Params], float]
Check = Callable[[str, Any, Params], None]
"""``check(label, value, params)``: raise ``ValueError`` or ``TypeError`` naming ``label``."""


def _at(bound: Bound, p: Params) -> float | None:
    return bound(p) if callable(bound) else bound


def integer(lo: Bound = None, hi: Bound = None) -> Check:
    """An integer in ``[lo, hi]`` (a bound may be a function of the parameters)."""
    return lambda name, v, p: check_range(name, v, _at(lo, p), _at(hi, p), integer=True)


def number(lo: Bound = None, hi: Bound = None, *, lo_open: bool = False) -> Check:
    """A number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    return lambda name, v, p: check_range(name, v, _at(lo, p), _at(hi, p), lo_open=lo_open)


def each(check: Check) -> Check:
    """Every element of a list passes ``check``, named as the list."""
    def run(name: str, v: Any, p: Params) -> None:
        for x in v:
            check(name, x, p)
    return run


def choice(options: Sequence[Any] | Callable[[Params], Sequence[Any]]) -> Check:
    """One of ``options``."""
    return lambda name, v, p: check_choice(name, v, options(p) if callable(options) else options)


def tau() -> Check:
    """A temperature (``tokendyn.mcmc.sampling.check_tau``)."""
    from ..mcmc.sampling import check_tau

    return lambda name, v, p: check_tau(v)


def path_or_none() -> Check:
    """A path under ``data/`` as a string, or None."""
    def run(name: str, v: Any, p: Params) -> None:
        if v is not None and not isinstance(v, str):
            raise TypeError(f"{name} must be a path under data/ (a string) or None, got {v!r}")
    return run


def json_path(script: str) -> Check:
    """A ``.json`` path under ``data/`` that ``script`` writes."""
    def run(name: str, v: Any, p: Params) -> None:
        if not isinstance(v, str) or not v.endswith(".json"):
            raise ValueError(f"{name}={v!r}: give a .json path under data/ ({script} writes it)")
    return run


def recordable() -> Check:
    """Where this run records itself (a path under ``data/``, or None): refused now, not after the
    run, when the checkout cannot record (``tokendyn.publish.results.check_recordable``)."""
    def run(name: str, v: Any, p: Params) -> None:
        path_or_none()(name, v, p)
        if v:
            from ..core.paths import data_dir
            from .results import check_recordable

            check_recordable(data_dir() / v)
    return run


def model_list() -> Check:
    """A non-empty list of model names, hub ids or local paths."""
    def run(name: str, v: Any, p: Params) -> None:
        if isinstance(v, str) or not v or not all(isinstance(m, str) and m.strip() for m in v):
            raise ValueError(f"{name}={v!r}: give a non-empty list of model names, hub ids or local paths")
    return run


def rule(holds: Callable[[Params], bool], message: str, error: type[Exception] = ValueError) -> Check:
    """A condition over several parameters; ``message`` is formatted with them (``{taus}``)."""
    def run(name: str, v: Any, p: Params) -> None:
        if not holds(p):
            raise error(message.format(**p))
    return run


@dataclass(frozen=True)
class Derived:
    """A check of a value derived from the parameters, not of one parameter: ``label`` names the
    expression in the error (``toy_q ** toy_n``), ``reads`` the parameters it needs (each must be
    defined), ``value`` computes it and ``check`` judges it."""

    label: str
    reads: tuple[str, ...]
    value: Callable[[Params], Any]
    check: Check


def _every_step_count(p: Params) -> None:
    # a page that embeds states (4.3) needs whole strides of embed_every; page 4.2 records every record_every
    every, what = (p["embed_every"], "embed_every") if "embed_every" in p else (p["record_every"], "record_every")
    for name, steps in p["attractor_steps"].items():
        check_range(f"attractor_steps[{name!r}]", steps, every, None, integer=True)
        if steps % every or steps % p["record_every"]:
            raise ValueError(f"attractor_steps[{name!r}]={steps} must be a multiple of {what}={every}")


def _spacings(name: str, v: Any, p: Params) -> None:
    if not isinstance(v, dict) or not v:
        raise TypeError(f"toy_spacings must be a non-empty dict regime -> spacing, got {v!r}")
    for regime, sp in v.items():
        check_range(f"toy_spacings[{regime!r}]", sp, 0.0, None, lo_open=True)


def _runs_listed(name: str, v: Any, p: Params) -> None:
    if v is not None and p["recorded_runs"] and v not in p["recorded_runs"]:
        raise ValueError(f"{name}={v!r}: must be one of recorded_runs {p['recorded_runs']} (or None: this run)")


SEED = ("seed", integer(0))
_SURVEY = (
    SEED, ("ns", each(integer(2, 510))), ("taus", each(tau())),
    Derived("len(taus)", ("taus",), lambda p: len(p["taus"]), integer(2)),
    ("n_pairs", integer(2)), ("budget_factors", each(number(1.0))),
    ("drift_budget_factor", number(0.5, lambda p: max(p["budget_factors"]))), ("records", integer(4)),
    ("theta", number(0.0, 1.0, lo_open=True)),
)
"""Chapter 3's coupling survey (page 3.1 runs it, page 3.2 reads it from the page store): its lengths,
temperatures, pairs, budgets, drift records and mixing threshold."""

_CHAIN_STARTS = (
    ("attractor_tokens", integer(4, 510)), ("chains_per_cell", integer(1)), ("region_topics", each(choice(TOPICS))),
    Derived("'politics' in region_topics", ("region_topics",), lambda p: "politics", choice(lambda p: p["region_topics"])),
    ("start_topics", each(choice(lambda p: [r for r in p["region_topics"] if r != "politics"]))),
    ("n_train", integer(2)), ("n_val", integer(2)),
)
"""The long chains' starts (chapter 4's pages 4.2 and 4.3 draw the same ones): their length, chains a
start topic, and the topic split they come from."""

RULES: dict[str, list[tuple[str, Check] | Derived]] = {
    "00_getting_started": [
        SEED, ("topics", each(choice(TOPICS))), ("n_per_topic", integer(2)), ("fill_topic", choice(TOPICS)),
        ("mask_fraction", number(0.0, 1.0, lo_open=True)), ("n_tokens", integer(2, 510)),
    ],
    "01_glauber_theory": [
        SEED, ("toy_n", integer(2, 7)), ("toy_q", integer(2, 6)),  # q^n states are enumerated exactly
        Derived("toy_q ** toy_n", ("toy_q", "toy_n"), lambda p: p["toy_q"] ** p["toy_n"], integer(4, 4096)),
        ("toy_coupling", number(0.0)), ("toy_taus", each(tau())), ("mlm_taus", each(tau())),
        ("eps", number(0.0, 1.0, lo_open=True)), ("n_chains_toy", integer(100)), ("n_tokens", integer(4, 510)),
        ("n_contexts", integer(2)), ("n_alt", integer(1)), ("topic", choice(TOPICS)),
        ("target_q", number(0.0, 1.0, lo_open=True)), ("dwell_chains", integer(10)), ("dwell_steps", integer(1)),
    ],
    "02_rectangle_test": [
        SEED, ("n_tokens", integer(lambda p: max(p["gaps"]) + 2, 510)), ("topics", each(choice(TOPICS))),
        ("n_rect", integer(2)), ("n_per_gap", integer(2)), ("n_tau_rect", integer(2)),
        ("n_ar", integer(1)), ("gaps", each(integer(1, lambda p: p["n_tokens"] - 1))),
        ("taus", each(number(0.0, lo_open=True))),
        ("taus", rule(lambda p: 1.0 in p["taus"] and len(set(p["taus"])) >= 2,
                      "taus={taus} must hold 1.0 (the fixed rectangles are drawn there) and another temperature")),
        Derived("paper_range[0]", ("paper_range",), lambda p: p["paper_range"][0],
                number(0.0, lambda p: p["paper_range"][1])),
        ("recorded_ladder", json_path("scripts/record_size_ladder.py")),
    ],
    "02_rectangle_test_size": [
        SEED, ("n_tokens", integer(2, 510)), ("topics", each(choice(TOPICS))),  # a rectangle needs two sites
        ("n_rect", integer(2)), ("ap_k", integer(2)), ("n_grid", integer(1)),
        Derived("paper_range[0]", ("paper_range",), lambda p: p["paper_range"][0],
                number(0.0, lambda p: p["paper_range"][1])),
        ("recorded_ladder", json_path("scripts/record_size_ladder.py")),
    ],
    "03_phase_transition": [
        *_SURVEY, ("anchor_pairs", integer(10)), ("n_boot", integer(100)), ("record_to", recordable()),
    ],
    "03_phase_transition_crossover": [
        *_SURVEY, ("blowup", number(1.0)),
        ("recorded_runs", rule(lambda p: not isinstance(p["recorded_runs"], str),
                               "recorded_runs={recorded_runs!r}: give a list of paths under data/ (or [])")),
        ("shape_run", _runs_listed), ("crossover_run", _runs_listed),
        ("n_boot", integer(100)),
    ],
    "04_basins": [
        ("mlm_names", model_list()), ("n_tokens", integer(4, 510)),
        ("recorded_trap_ladder", json_path("scripts/record_traps.py")),
        ("n_starts", integer(lambda p: len(p["start_topics"]))), ("max_sweeps", integer(1)),
        ("arrhenius_taus", each(tau())), ("basin_taus", each(tau())),
        ("fit_taus", integer(2, lambda p: len(p["arrhenius_taus"]))), ("dwell_q", each(number(0.0, 0.5, lo_open=True))),
        ("dwell_chains", integer(10)), ("dwell_steps", integer(1)), ("basin_traps", integer(1)),
        ("basin_moves", integer(1)), ("hamming_h", integer(0, lambda p: p["n_tokens"] - 1)),
        ("start_topics", each(choice([t for t in TOPICS if t != "politics"]))), SEED,
        ("recorded_traps", path_or_none()), ("recorded_basin", path_or_none()),
    ],
    "04_basins_census": [
        ("mlm_names", model_list()),
        Derived("attractor_steps", ("attractor_steps",), lambda p: list(p["attractor_steps"]), model_list()),
        ("n_tokens", integer(4, 510)), ("n_starts", integer(lambda p: len(p["start_topics"]))), ("max_sweeps", integer(1)),
        ("attractor_taus", each(tau())), ("basin_moves", integer(1)),
        ("approx_starts", integer(1, lambda p: p["n_starts"])), ("approx_tau", tau()),
        ("hamming_h", integer(0, lambda p: min(p["n_tokens"], p["attractor_tokens"]) - 1)), ("min_dwell", integer(1)),
        ("repeat_share", number(0.0, 1.0, lo_open=True)), ("record_every", integer(1)),
        ("segment_steps", integer(lambda p: p["record_every"])),
        ("attractor_steps", lambda name, v, p: _every_step_count(p)),
        ("record_every", rule(lambda p: not p["segment_steps"] % p["record_every"],
                              "record_every={record_every} must divide segment_steps={segment_steps}")),
        *_CHAIN_STARTS, SEED,
    ],
    "04_basins_attractor": [
        Derived("attractor_steps", ("attractor_steps",), lambda p: list(p["attractor_steps"]), model_list()),
        ("attractor_taus", each(tau())), ("repeat_share", number(0.0, 1.0, lo_open=True)), ("record_every", integer(1)),
        ("embed_every", integer(lambda p: p["record_every"])), ("segment_steps", integer(lambda p: p["record_every"])),
        ("attractor_steps", lambda name, v, p: _every_step_count(p)),
        ("record_every", rule(lambda p: not (p["embed_every"] % p["record_every"] or p["segment_steps"] % p["record_every"]),
                              "record_every={record_every} must divide embed_every={embed_every} and "
                              "segment_steps={segment_steps}")),
        Derived("ablation['with']", ("ablation", "attractor_steps"), lambda p: p["ablation"].get("with"),
                choice(lambda p: list(p["attractor_steps"]))),
        Derived("ablation['without']", ("ablation", "attractor_steps"), lambda p: p["ablation"].get("without"),
                choice(lambda p: list(p["attractor_steps"]))),
        *_CHAIN_STARTS, ("keep_real", number(0.0, 1.0, lo_open=True)),
        ("knn", integer(1, lambda p: p["n_train"])), ("n_null", integer(10)), ("n_fluency", integer(4)), SEED,
        ("recorded_attractor", path_or_none()),
    ],
    "05_tube_law": [
        SEED, ("n_text", integer(2, 1345)), ("n_terminal", integer(0, 1345)),
        ("n_terminal", rule(lambda p: p["n_terminal"] != 1, "n_terminal=1 is out of range: allowed 0 (all) or [2, 1345]")),
        ("steps", each(integer(2, 1024))), ("terminal_steps", each(integer(1, 4096))),
        ("steps", rule(lambda p: 8 in p["steps"], "steps={steps!r} is not allowed: it must include 8 (kappa is fitted on K = 8)")),
        ("t0_grid", each(number(0.0, 1.0, lo_open=True))), ("method", choice(["euler", "heun"])),
        ("small_s", number(0.0, lo_open=True)), ("recorded_terminal", path_or_none()), ("record_to", recordable()),
    ],
    "05_tube_law_map": [
        SEED, ("n_text", integer(2, 1345)), ("n_terminal", integer(0, 1345)),
        ("n_terminal", rule(lambda p: p["n_terminal"] != 1, "n_terminal=1 is out of range: allowed 0 (all) or [2, 1345]")),
        ("terminal_steps", each(integer(1, 4096))), ("geometry_steps", each(integer(2, 1024))),
        ("geometry_steps", rule(lambda p: set(p["geometry_steps"]) <= set(p["terminal_steps"]),
                                "geometry_steps={geometry_steps!r} is not allowed: each must be in "
                                "terminal_steps={terminal_steps!r}")),
        ("toy_d", integer(2, 4096)), ("toy_tokens", integer(2, 4096)), ("toy_sigma", number(0.0, lo_open=True)),
        ("toy_spacings", _spacings), ("toy_dims", each(integer(1, 4096))), ("toy_windows", integer(2, 100_000)),
        ("recorded_ladder", path_or_none()), ("recorded_map", path_or_none()),
    ],
    "05_tube_law_image": [
        SEED, ("n_text", integer(2, 1345)), ("n_images", integer(2, 180)), ("steps", each(integer(2, 1024))),
        ("t0_grid", each(number(0.0, 1.0, lo_open=True))), ("method", choice(["euler", "heun"])),
    ],
    "06_dabi_cci": [
        SEED, ("n_tokens", integer(64, 16384)), ("n_digits", integer(2, 180)), ("n_faces", integer(2, 10)),
        ("norms", each(number(0.0, lo_open=True))),
        ("reference_norm", rule(lambda p: p["reference_norm"] in p["norms"],
                                "reference_norm={reference_norm!r} is not allowed: it must be one of norms={norms}")),
        ("n_iso", integer(1, 64)), ("terminal_k", integer(2, 1024)), ("n_generate", integer(2, 256)),
        ("gen_len", integer(2, 128)), ("recorded_curves", path_or_none()), ("recorded_ladder", path_or_none()),
        ("recorded_map", path_or_none()),
    ],
    "07_escapes": [
        SEED, ("n_seeds", integer(2, 64)), ("n_per_seed", integer(2, 1345)), ("steps", each(integer(1, 1024))),
        ("reference_k", rule(lambda p: p["reference_k"] in p["steps"],
                             "reference_k={reference_k!r} is not allowed: it must be one of steps={steps}")),
        ("reference_k", integer(2, 1024)), ("n_ablation", integer(2, 256)), ("ablation_len", integer(2, 128)),
        ("diffusion_steps", integer(1, lambda p: p["ablation_len"])), ("recorded_ode_sde", path_or_none()),
        ("recorded_ode_sde_ladder", path_or_none()), ("recorded_ladder", path_or_none()),
        ("recorded_commitment", path_or_none()),
    ],
    "07_escapes_decoders": [
        SEED, ("n_seeds", integer(2, 64)), ("n_per_seed", integer(2, 1345)), ("reference_k", integer(2, 1024)),
        ("n_train", integer(16, 25357)), ("retrain_steps", integer(1, 100000)), ("retrain_batch", integer(8, 65536)),
        ("retrain_lr", number(0.0, 1.0, lo_open=True)), ("smoothing", number(0.0, 1.0, lo_open=True)),
        ("hinge_margin", number(0.0, lo_open=True)), ("mlp_hidden", integer(1, 65536)), ("n_eval", integer(2, 1345)),
        ("n_dabi", integer(16, 43040)), ("modes", each(integer(2, 65536))), ("n_mc", integer(1000, 10**7)),
        ("recorded_interventions", path_or_none()), ("record_to", recordable()),
    ],
    "appendix_models": [
        ("n_examples", integer(1, 121)), ("n_passages", integer(1)), ("arch_rect", integer(2)),
    ],
    "appendix_models_scale": [("ar_candidates", integer(5))],
    "appendix_performance": [
        ("fidelity_n", integer(4)), ("fidelity_passages", integer(2)), ("fidelity_pairs", integer(2)),
        ("fidelity_rect", integer(2)), ("fidelity_taus", each(number(0.0, lo_open=True))),
        ("fidelity_tau_coupling", number(0.0, lo_open=True)),
        ("fidelity_budget_factor", number(1.0)),
    ],
}


def check(chapter: str, namespace: Mapping[str, Any]) -> None:
    """Check every parameter of ``chapter`` (a key of :data:`RULES`, the notebook's name) as found
    in ``namespace`` (the notebook's ``globals()``), in order: the first bad one raises
    ``ValueError`` or ``TypeError`` naming it and its allowed values. A parameter missing from the
    namespace is a ``KeyError`` naming it (the parameters cell and the rules disagree)."""
    if chapter not in RULES:
        raise KeyError(f"chapter {chapter!r} has no parameter rules: one of {sorted(RULES)}")
    for entry in RULES[chapter]:
        name, reads = (entry.label, entry.reads) if isinstance(entry, Derived) else (entry[0], (entry[0],))
        missing = [r for r in reads if r not in namespace]
        if missing:
            raise KeyError(f"{chapter}: parameter {missing[0]!r} is not defined (the parameters cell and "
                           "tokendyn.publish.chapter_params.RULES disagree)")
        if isinstance(entry, Derived):
            entry.check(name, entry.value(namespace), namespace)
        else:
            entry[1](name, namespace[name], namespace)
