"""Chapter 5's first page (5.1, ``book/05_tube_law.ipynb``): its glued words, tables, record and
claim rows. The models, the terminal step, the closing reasons of 5.1 and claims 9, 10 and 11, each
sentence built from the page's tables, its parameters, the models' configs and the records it reads,
so that the words stay true when the page is rerun at another scale. The terminal step's held-out
windows and table (:func:`held_out`, :func:`terminal_flips`) are this module's too: 5.2 reads the table
5.1 recorded (:func:`recorded_terminal`) or computes it the same way.

The other pages' words are :mod:`.tube_law_map` (5.2: aim, ladder, map) and :mod:`.tube_law_image`
(5.3: the image model, generation from noise); the measurements themselves are
:mod:`tokendyn.latent.tube`'s and :mod:`tokendyn.latent.geometry`'s.

The tables are the page's: ``term`` is the contextual model's structured terminal rows indexed by
``K`` (``rate``, ``lo``, ``hi``, ``ratio``, ``ratio_lo``, ``ratio_hi``, ``residual_rms``, ``n``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from ...core.checkpoint import model_fingerprint
from ...core.jsonable import plain
from ...core.stats import Estimate
from ...latent import mechanism, tube
from .. import claims, results, verdicts
from . import count_words, default, join_words

__all__ = ["span", "model_texts", "terminal_texts", "latent_rms_text", "regime_text", "separated_reason",
           "collapse_reason", "scale_reason", "HeldOut", "held_out", "terminal_flips", "terminal_table", "terminal_key",
           "recorded_terminal", "terminal_rates", "summary_table", "metrics", "findings", "measured_text"]

RECORD = "05_tube_law"
"""The page whose results record holds the terminal table (:func:`recorded_terminal`)."""

def span(values: Iterable[float], spec: str = ".2g", unit: str = "") -> str:
    """``'lo-hi'`` of ``values`` by ``spec`` with ``unit`` after it (one value when they print alike):
    the range a sentence quotes (``'1.5-2.6x'``, ``'1.2%-4.3%'``)."""
    vs = sorted(values)
    lo, hi = f"{vs[0]:{spec}}", f"{vs[-1]:{spec}}"
    return f"{lo}{unit}" if lo == hi else f"{lo}-{hi}{unit}"


def model_texts(ctx_config: Mapping[str, Any], sep_config: Mapping[str, Any], *, flow_params: int,
                image_shape: Sequence[int], terminal_steps: Sequence[int]) -> dict[str, str]:
    """The models in words, from their configs (``config.json`` of the shipped contextual and 16-d
    models): the contextual latent width (``ctx_dim``), its WordPiece vocabulary (``ctx_vocab``), its
    window (``seq_len``), its held-out windows and tokens (``heldout_windows``, ``heldout_tokens``),
    the separated model's width and vocabulary (``sep_dim``, ``sep_vocab``), the contextual flow's
    size (``flow_params``, counted from its weights) and training steps (``flow_steps``), the digits'
    shape (``digit_shape``, from ``image_shape``) and how many step counts the terminal section runs
    (``n_terminal_steps``, from the parameter ``terminal_steps``)."""
    held = ctx_config["data"]["heldout_windows"]
    return {"ctx_dim": f"{ctx_config['dim']}", "ctx_vocab": f"{ctx_config['vocab_size']:,}",
            "seq_len": f"{ctx_config['seq_len']}", "heldout_windows": f"{held:,}",
            "heldout_tokens": f"{held * ctx_config['seq_len']:,}",
            "sep_dim": f"{sep_config['autoencoder']['latent_dim']}",
            "sep_vocab": f"{sep_config['autoencoder']['vocab_size']:,}",
            "flow_params": f"{flow_params / 1e6:.3g}M", "flow_steps": f"{ctx_config['training']['flow_steps']:,}",
            "digit_shape": "x".join(str(s) for s in image_shape), "n_terminal_steps": count_words(len(terminal_steps), through=10)}


def terminal_texts(fitted_k: Iterable[int], *, n_terminal: int, heldout_windows: int, seq_len: int) -> dict[str, str]:
    """The terminal-step section's numbers: the smallest K the tube constant is fitted on
    (``term_kmin``, from ``fitted_k``, the K with a finite s), the flipped test tokens claim 9's rule
    needs at a K (``claim9_min_flips``, :func:`tokendyn.publish.verdicts.claim_9`'s ``min_flips``)
    and the windows this run's terminal step decodes (``terminal_scale``: ``n_terminal`` of the
    ``heldout_windows``, windows of ``seq_len`` tokens)."""
    scale = (f"every held-out window ({heldout_windows:,} windows, {heldout_windows * seq_len:,} tokens)"
             if n_terminal >= heldout_windows else
             f"{n_terminal:,} of the {heldout_windows:,} held-out windows ({n_terminal * seq_len:,} tokens)")
    return {"term_kmin": f"{min(fitted_k)}", "claim9_min_flips": f"{default(verdicts.claim_9, 'min_flips')}",
            "terminal_scale": scale}


def latent_rms_text(rms: Mapping[str, float]) -> str:
    """The text latents' RMS per coordinate (``rms``: model -> value) as the theory paragraph quotes it,
    e.g. ``'1.00 (contextual) and 0.98 (separated 16-d)'``."""
    return join_words(f"{v:.2f} ({name})" for name, v in rms.items())


def _where(e: Estimate, lo: float, hi: float) -> str:
    # where an interval lies against the paper's range, in the words the reasons use
    if e.hi < lo:
        return "just below" if e.hi >= 0.75 * lo else "below"
    if e.lo > hi:
        return "above"
    return "inside" if lo <= e.value <= hi else "at the edge of"


def regime_text(*, tube_mass: Mapping[str, Mapping[float, float]], term: pd.DataFrame, iso: Mapping[int, float],
                band_k: Sequence[int], fit_error: float, ctx_config: Mapping[str, Any], sep_dim: int,
                dabi: Mapping[int, float]) -> str:
    """Reason 1 of 5.1's closing note, before its link to chapter 6: the tube masses (``tube_mass``:
    ``{"contextual": {r: F(r)}, "separated": {r: F(r)}}``), the terminal flips at the first of
    ``band_k`` against the paper's range, the in-sample miss of the tube law (``fit_error``), the
    readout's accuracy and training (``ctx_config``), the residual's RMS and norm, the isotropic flips
    and ratios over ``band_k`` and the live DABI (``dabi``: K -> value). Its other half, what the
    aligned counterfactual shows, is 5.2's (:func:`.tube_law_map.geometry_reason`)."""
    ctx, sep = tube_mass["contextual"], tube_mass["separated"]
    r_sep = max(sep)
    k0 = band_k[0]
    e0 = Estimate(term.loc[k0, "rate"], term.loc[k0, "lo"], term.loc[k0, "hi"], int(term.loc[k0, "n"]))
    lo, hi = mechanism.PAPER_FLIPS
    acc, tr = ctx_config["reconstruction_accuracy"], ctx_config["training"]
    tokens = ctx_config["data"]["train_windows"] * ctx_config["seq_len"]
    rms, dim = float(term.loc[k0, "residual_rms"]), ctx_config["dim"]
    ks = "K = " + " / ".join(str(k) for k in band_k)
    return (
        "Its readout is sharp where it matters for the law: a large share of the clean latent mass lies near a boundary "
        "(" + " and ".join(f"{f:.0%} within {r:g}" for r, f in ctx.items())
        + f", against {sep[r_sep]:.1%} within {r_sep:g} for the {sep_dim}-d model), so the terminal flip rate at "
        f"K = {k0} is {e0.fmt(pct=True)}, {_where(e0, lo, hi)} the paper's 12-41%, and the tube mass predicts the "
        f"terminal flips at every K to within {fit_error:.1%} on average. But its readout is also *less* accurate than "
        f"ELF's decoder ({acc['heldout']:.0%} of held-out tokens, {acc['train']:.0%} of training tokens, after "
        f"{tr['readout_steps']:,} steps on {tokens / 1e3:.0f}k tokens): the latents that sit close to a boundary are the "
        f"same ones a random push of the residual's size (RMS {rms:.2g} per coordinate at K = {k0}, so a norm near "
        f"{rms * dim ** 0.5:.2g} in {dim} dimensions) also pushes across. Isotropic flips are therefore "
        f"{span([iso[k] for k in band_k], '.1%')} at {ks}, not ~0%, and the structured/isotropic ratio is "
        f"{span(term.loc[list(band_k), 'ratio'], unit='x')} rather than 10-33x. The generator's residual is only "
        f"partly aimed at the nearest boundary: its DABI is {' / '.join(f'{v:.2g}' for v in dabi.values())} at "
        f"K = {' / '.join(str(k) for k in dabi)}, while a push along the exact boundary normal has DABI of several hundred")
def separated_reason(*, sep_dim: int, sep_vocab: int, median_margin: float, tube_mass: Mapping[float, float],
                     rates: pd.DataFrame, band_k: Sequence[int]) -> str:
    """Reason 4 of the closing note: the separated model's width and vocabulary, its median margin and
    tube mass (``tube_mass``: r -> F(r)), and its terminal flips (``rates``: indexed by K with
    ``structured`` and ``isotropic`` columns) over ``band_k`` and at the coarser steps."""
    r = max(tube_mass)
    coarse = [k for k in rates.index if k < band_k[0]]
    ks = " / ".join(str(k) for k in band_k)
    st = " / ".join(f"{rates.loc[k, 'structured']:.2%}" for k in band_k)
    iso = " / ".join(f"{rates.loc[k, 'isotropic']:.2%}" for k in band_k)
    big = " / ".join(f"{rates.loc[k, 'structured']:.0%}" for k in coarse)
    return (f"*The separated model shows the other regime.* With {sep_dim}-d latents and a {sep_vocab:,}-word readout, "
            f"the median margin is {median_margin:.2g} and almost nothing lies near a boundary ({tube_mass[r]:.1%} within "
            f"{r:g}): at K = {ks} the terminal step flips {st} of tokens, an isotropic residual of the same norm {iso}, "
            f"and only the near-pure-noise steps (K = {' / '.join(str(k) for k in coarse)}: {big}) flip a lot. That is "
            "the paper's separated regime, where its theory bounds the stiffness a deterministic map needs, not the tube law.")


def collapse_reason(*, ctx_config: Mapping[str, Any], spread_start: float, spread_terminal: float) -> str:
    """Reason 5 of the closing note: the flow's size (``ctx_config``) and whether the K curves meet
    against s(t0) by claim 9's rule (:func:`tokendyn.publish.verdicts.claim_9`'s ``max_spread``)."""
    limit = default(verdicts.claim_9, "max_spread")
    f, t = ctx_config["flow"], ctx_config["training"]
    meet = ("the K curves move towards one curve against s(t0) but do not meet" if spread_start >= limit
            else "the K curves meet against s(t0)")
    return (f"*Collapse.* Our flow is small ({f['depth']} layers, width {f['width']}, {t['flow_steps']:,} training steps) "
            f"and its posterior-mean estimate is not exact: {meet} (largest relative spread {spread_start:.2g}, against "
            f"{spread_terminal:.2g} against the terminal step's s; the rule asks for under {limit:g}).")


def scale_reason(*, n_text: int, seq_len: int, n_terminal: int, heldout_windows: int, setup: Any) -> str:
    """Reason 6 of the closing note: this run's scale (``n_text`` roll-in windows of ``seq_len``
    tokens, ``n_terminal`` terminal windows) against all ``heldout_windows``, and where it ran
    (``setup``: :class:`tokendyn.publish.book.Setup`)."""
    term = (f"its terminal step all {heldout_windows:,}, as the recorded run above" if n_terminal >= heldout_windows
            else f"its terminal step {n_terminal:,}; the recorded run above uses all {heldout_windows:,}")
    return (f"*Scale.* This run's roll-in uses {n_text:,} windows ({n_text * seq_len:,} tokens) and {term}. "
            f"The models run in {str(setup.dtype).removeprefix('torch.')} on {'the CPU' if str(setup.device) == 'cpu' else f'the GPU ({setup.device})'} "
            "(the exact toys in float64).")




# ---- the terminal step's windows and table, shared with 5.2 -------------------------------------------------------

@dataclass(frozen=True)
class HeldOut:
    """The terminal step's held-out windows of both text models: ``x1`` [N, 32, 381] the clean contextual
    latents, ``ref`` [N, 32] their decode, ``margins`` [N, 32] their distances to the readout's nearest
    boundary; ``sep_x1`` [N', 32, 16], ``sep_ref`` and ``sep_margins`` the same of the separated model."""

    x1: torch.Tensor
    ref: torch.Tensor
    margins: torch.Tensor
    sep_x1: torch.Tensor
    sep_ref: torch.Tensor
    sep_margins: torch.Tensor


def held_out(text_model: Any, sep_model: Any, *, n_terminal: int, seed: int) -> HeldOut:
    """``n_terminal`` held-out windows of the contextual model (0: all 1,345) and as many of the separated
    one's (at most its 1,208), drawn by ``seed``, encoded, decoded and their margins measured once."""
    ae, sep_ae = text_model.autoencoder, sep_model.autoencoder
    x1 = ae.encode(text_model.heldout(n_terminal or 1345, seed=seed))
    sep_x1 = sep_ae.encode(sep_model.heldout(min(n_terminal or 1208, 1208), seed=seed))
    return HeldOut(x1, ae.decode(x1), tube.readout_margins(ae.readout.weight, ae.readout.bias, x1),
                   sep_x1, sep_ae.decode(sep_x1), tube.readout_margins(sep_ae.readout.weight, sep_ae.readout.bias, sep_x1))


def terminal_flips(text_model: Any, sep_model: Any, held: HeldOut, terminal_steps: Sequence[int], *,
                   seed: int) -> dict[str, list[tube.TerminalFlips]]:
    """The terminal step of each K-step generator in ``terminal_steps`` on both text models' ``held``
    windows (:func:`tokendyn.latent.tube.terminal_flips`): ``{"contextual": [...], "separated 16-d": [...]}``."""
    return {"contextual": tube.terminal_flips(text_model.autoencoder.decode, text_model.flow, held.x1, held.ref,
                                              terminal_steps, seed=seed),
            "separated 16-d": tube.terminal_flips(sep_model.autoencoder.decode, sep_model.flow, held.sep_x1, held.sep_ref,
                                                  terminal_steps, seed=seed)}


def terminal_table(flips: Mapping[str, Sequence[tube.TerminalFlips]]) -> pd.DataFrame:
    """The terminal-step table: two rows (structured, isotropic) per model and K
    (:func:`tokendyn.latent.tube.terminal_rows`), models in the order of ``flips``."""
    return pd.DataFrame([row for name, tf in flips.items() for row in tube.terminal_rows(name, tf)])


def terminal_key(text_model: Any, sep_model: Any, *, seed: int, n_terminal: int,
                 terminal_steps: Sequence[int]) -> dict[str, Any]:
    """What the terminal table depends on, JSON-able: the parameters and the fingerprints
    (:func:`tokendyn.core.checkpoint.model_fingerprint`) of both text models' autoencoders and flows.
    5.1 records it beside the table; :func:`recorded_terminal` reads the table only under the same key."""
    models = {"context-latent autoencoder": text_model.autoencoder, "context-latent flow": text_model.flow,
              "text-latent autoencoder": sep_model.autoencoder, "text-latent flow": sep_model.flow}
    return plain({"seed": seed, "n_terminal": n_terminal, "terminal_steps": list(terminal_steps),
                  "models": {name: model_fingerprint(m) for name, m in models.items()}})


def recorded_terminal(key: Mapping[str, Any], out_dir: Any = None) -> pd.DataFrame | None:
    """The terminal table 5.1 recorded (its results record's ``terminal`` rows, under ``out_dir`` or
    :func:`tokendyn.core.paths.results_dir`) when it was made under ``key`` (:func:`terminal_key`); ``None``
    when there is no record or it was made with other parameters or models (the page then computes it)."""
    try:
        record = results.load(RECORD, out_dir)
    except results.MissingRecordError:
        return None
    if record["metrics"].get("terminal_key") != plain(dict(key)):
        return None
    table = pd.DataFrame(record["metrics"]["terminal"])
    numeric = [c for c in table.columns if c not in ("model", "residual")]
    table[numeric] = table[numeric].apply(lambda col: col.astype(float) if col.dtype == object else col)   # "inf" -> inf
    return table


# ---- the page's tables, record and claim rows, assembled from its measurements -----------------------------------

def terminal_rates(term_df: pd.DataFrame, model: str) -> pd.DataFrame:
    """The flip rates of ``model`` in the terminal-step table ``term_df``
    (:func:`tokendyn.latent.tube.terminal_rows`) as a K x residual table (columns ``structured`` and
    ``isotropic``)."""
    return term_df[term_df["model"] == model].pivot(index="K", columns="residual", values="rate")


def summary_table(*, spread_start: float, spread_s: float, small_s: float, r2: float, term_fit: Mapping[str, Mapping[str, Any]],
                  ctx_term: pd.DataFrame, sep_term: pd.DataFrame, term: pd.DataFrame, dabi_k: Mapping[int, float],
                  n_windows: int) -> pd.DataFrame:
    """5.1's numbers beside the paper's, one row per quantity: the collapse spreads, the small-s R^2, the
    terminal tube-law fits (``term_fit``: model -> ``mean_abs_error``), the terminal flip rates
    (``ctx_term``/``sep_term``: K x residual rates) and ratios (``term``) at K = 4 / 8 / 16 and the live
    DABI (``dabi_k``, on ``n_windows`` roll-in windows)."""
    return pd.DataFrame([
        {"quantity": "collapse of flip-rate curves across K (largest relative spread, against s(t0))",
         "paper (ELF-B)": "one curve", "ours (contextual)": f"{spread_start:.2g} (terminal s: {spread_s:.2g})"},
        {"quantity": f"linear in s as s -> 0 (R^2, s <= {small_s})", "paper (ELF-B)": "linear",
         "ours (contextual)": f"{r2:.2g}"},
        {"quantity": "prediction F(kappa s) from margins, terminal steps, mean abs error (contextual / 16-d)",
         "paper (ELF-B)": "tube law",
         "ours (contextual)": f"{term_fit['contextual']['mean_abs_error']:.2f} / {term_fit['separated 16-d']['mean_abs_error']:.2f}"},
        {"quantity": "terminal flip rate, K = 4 / 8 / 16 (contextual; 16-d in brackets)", "paper (ELF-B)": "12-41%",
         "ours (contextual)": " / ".join(f"{ctx_term.loc[k, 'structured']:.1%} ({sep_term.loc[k, 'structured']:.1%})"
                                         for k in (4, 8, 16) if k in ctx_term.index)},
        {"quantity": "structured / isotropic flip ratio, K = 4 / 8 / 16 (terminal step)", "paper (ELF-B)": "10-33x",
         "ours (contextual)": " / ".join(("≥" if term.loc[k, "bound"] else "") + f"{term.loc[k, 'ratio']:.2g}"
                                         for k in (4, 8, 16) if k in term.index)},
        {"quantity": f"DABI of the terminal residual, K = {' / '.join(str(k) for k in dabi_k)}, live: this run's {n_windows} "
                     "roll-in windows", "paper (ELF-B)": "508 (ELF), >1e4 (LangFlow)",
         "ours (contextual)": " / ".join(f"{v:.2g}" for v in dabi_k.values())},
    ])


def metrics(*, recon: float, margins: Any, sep_margins: Any, spread_start: float, spread_s: float, slope: float,
            r2: float, kappa: float, err: Mapping[str, float], kappa_half: float, heldout_error: float,
            heldout: pd.DataFrame, term_fit: Mapping[str, Any], term_df: pd.DataFrame, terminal_key: Mapping[str, Any],
            band: pd.DataFrame, dabi_k: Mapping[int, float], roll: pd.DataFrame) -> dict[str, Any]:
    """5.1's record (``metrics`` of :func:`tokendyn.publish.results.save`), from its measurements under
    the names the page gives them: the readout's flip rate on clean latents (``recon``), the clean
    latents' ``margins`` and ``sep_margins`` (tensors), the roll-in's collapse spreads, small-s fit and
    kappa fit (``err``: K -> mean miss), the held-out tube law (``heldout`` rows), the terminal-step table
    ``term_df`` (:func:`terminal_table`) with its key (``terminal_key``, :func:`terminal_key`: 5.2 reads the
    table back under it) and its fits (``term_fit``), the K = 8 levels in the paper's band (``band``), the
    live DABI (``dabi_k``) and the roll-in rows (``roll``)."""
    ctx_rows = term_df[(term_df["model"] == "contextual") & (term_df["residual"] == "structured")]
    ctx_term, sep_term = terminal_rates(term_df, "contextual"), terminal_rates(term_df, "separated 16-d")
    return {
        "text_reconstruction_accuracy": 1 - recon,
        "median_margin": float(margins.median()), "median_margin_separated": float(sep_margins.median()),
        "collapse_spread_start_s": spread_start, "collapse_spread_terminal_s": spread_s,
        "small_s_slope": slope, "small_s_r2": r2, "kappa": kappa,
        "prediction_mean_abs_error": err,
        "tube_heldout": {"kappa": kappa_half, "mean_abs_error": heldout_error, "points": heldout.to_dict("records")},
        "terminal_tube_fit": term_fit,
        "terminal_flip_rate": {int(r.K): r.rate for r in ctx_rows.itertuples()},
        "isotropic_flip_rate": {int(k): v for k, v in ctx_term["isotropic"].items()},
        "structured_isotropic_ratio": {int(r.K): r.ratio for r in ctx_rows.itertuples()},
        "terminal_flip_rate_separated": {int(k): v for k, v in sep_term["structured"].items()},
        "terminal": term_df.to_dict("records"), "terminal_key": dict(terminal_key),
        "ratio_in_paper_band": band["ratio (isotropic floored at one token)"].tolist(),
        "dabi_text": {int(k): v for k, v in dabi_k.items()},
        "rollin_text": roll.to_dict("records"),
    }


def findings(*, spread_start: float, r2: float, small_s: float, small: pd.DataFrame, n_roll: int, heldout: pd.DataFrame,
             half: int, n_windows: int, n_test: int, term: pd.DataFrame, band_k: Sequence[int],
             median_margin: float) -> list[claims.Finding]:
    """5.1's claim rows. Claim 9 (:func:`tokendyn.publish.verdicts.claim_9`): the collapse
    spread and small-s R^2 of the roll-in (``small``: its levels with s(t0) <= ``small_s``, flip rates
    of ``n_roll`` tokens) and the held-out tube law (``heldout`` rows: kappa fitted on ``half`` of
    ``n_windows`` windows, tested on the rest's ``n_test`` tokens a K). Claims 10 and 11
    (:func:`~tokendyn.publish.verdicts.claim_10`, :func:`~tokendyn.publish.verdicts.claim_11`): the
    terminal ratios and rates at ``band_k`` (``term``, indexed by K), with the ``median_margin`` in
    claim 11's basis. The residual's aim and the aligned counterfactual, quoted beside claim 10, are
    5.2's rows (:func:`.tube_law_map.findings`)."""
    n_small = int(round((small["flip rate"] * n_roll).sum()))
    rows = [
        claims.finding(9, f"collapse spread {spread_start:.2f}; R^2 {r2:.2f} for s(t0) <= {small_s}",
                       verdicts.claim_9(spread_start, r2, {int(r.K): (Estimate(r.measured, r.lo, r.hi, n_test), float(r.predicted))
                                                           for r in heldout.itertuples()}),
                       basis=f"contextual model, {n_small} flipped tokens in the s -> 0 range; independent noise per point; "
                             f"held out: kappa fitted on {half} windows, F(kappa s) against the flips of the other "
                             f"{n_windows - half} ({n_test} tokens a K), predicted / measured "
                             + ", ".join(f"{pm:.2f} at K={k}" for k, pm in zip(heldout["K"], heldout["predicted / measured"]))),
        claims.finding(10, "; ".join(f"K={k}: {'≥' if term.loc[k, 'bound'] else ''}{term.loc[k, 'ratio']:.2g} "
                                     f"[{term.loc[k, 'ratio_lo']:.2g}, {term.loc[k, 'ratio_hi']:.2g}]" for k in band_k),
                       verdicts.claim_10({k: Estimate(term.loc[k, "ratio"], term.loc[k, "ratio_lo"], term.loc[k, "ratio_hi"],
                                                      int(term.loc[k, "n"])) for k in band_k}),
                       basis=f"terminal step, contextual model, {int(term['n'].iloc[0])} tokens; isotropic floored at one token; "
                             "the residual's aim and the readout's amplification of an aimed push (a geometric check, not "
                             "a claim): section 5.2's rows"),
        claims.finding(11, "; ".join(f"K={k}: {term.loc[k, 'rate']:.1%} [{term.loc[k, 'lo']:.1%}, {term.loc[k, 'hi']:.1%}]"
                                     for k in band_k),
                       verdicts.claim_11({k: Estimate(term.loc[k, "rate"], term.loc[k, "lo"], term.loc[k, "hi"],
                                                      int(term.loc[k, "n"])) for k in band_k}),
                       basis=f"contextual model, {int(term['n'].iloc[0])} held-out tokens; median margin {median_margin:.2g}"),
    ]
    return rows


def measured_text(*, band: pd.DataFrame, term: pd.DataFrame, spread_start: float, spread_s: float, small_s: float,
                  slope: float, r2: float, term_fit: Mapping[str, Mapping[str, Any]], err: Mapping[str, float],
                  sep_term: pd.DataFrame, dabi_k: Mapping[int, float], n_windows: int) -> str:
    """5.1's closing list of what we measured (Markdown), from this run's numbers: the collapse spreads,
    the small-s slope and R^2, the terminal tube-law fits (``term_fit``) and the roll-in's misses (``err``:
    ``'4'``, ``'8'``, ``'16'`` -> mean miss), the terminal rates and ratios at K = 4, 8, 16 (``term``; the
    separated model's ``sep_term``), the K = 8 levels in the paper's band (``band``) and the live DABI
    (``dabi_k``, on ``n_windows`` roll-in windows)."""
    band_txt = ", ".join(f"{v:.2g}x" for v in band["ratio (isotropic floored at one token)"]) or "none"
    t_ = {k: term.loc[k] for k in (4, 8, 16) if k in term.index}
    return f'''
- **Collapse.** Against the roll-in noise scale $s(t_0)$ the contextual model's flip-rate curves for
  K = 4, 8, 16 have a largest relative spread of **{spread_start:.2g}**, against **{spread_s:.2g}** when the
  same points are drawn against the terminal step's $s$: much closer to one curve, not one curve.
- **Linear as s -> 0.** For $s(t_0) \\le {small_s}$ a line through the origin fits with slope
  **{slope:.2g}** flips per unit $s$ and $R^2$ = **{r2:.2g}**.
- **Prediction from the margins.** The tube mass $F(\\kappa s)$ of the clean latents' margins, one fitted
  constant per model, predicts the terminal flip rates at every K within **{term_fit['contextual']['mean_abs_error']:.1%}**
  on average (contextual, $\\kappa$ = {term_fit['contextual']['kappa']:.2g}) and
  **{term_fit['separated 16-d']['mean_abs_error']:.1%}** (separated 16-d, $\\kappa$ = {term_fit['separated 16-d']['kappa']:.2g}).
  On the roll-in, with $\\kappa$ fitted on K = 8 alone, the mean miss is {err['4']:.2g} / {err['8']:.2g} / {err['16']:.2g}.
- **Terminal flip rates** (contextual, {int(term['n'].iloc[0])} held-out tokens):
  **{' / '.join(f"{r.rate:.1%} [{r.lo:.1%}, {r.hi:.1%}]" for r in t_.values())}** for K = 4 / 8 / 16, against the
  paper's **12-41%**; the separated 16-d model: {' / '.join(f"{sep_term.loc[k, 'structured']:.2%}" for k in t_)}.
- **Structured against isotropic.** At the terminal step the generator's residual flips
  **{' / '.join(f"{r.ratio:.2g}x" for r in t_.values())}** as many tokens as a norm-matched isotropic residual
  (K = 4 / 8 / 16; the paper: **10-33x**); along the K = 8 roll-in, where flips are in the paper's
  12-41% band, the ratio is {band_txt}. DABI of the terminal residual is
  {' / '.join(f"{v:.2g}" for v in dabi_k.values())} on this run's {n_windows} roll-in windows (live; the recorded
  generator ladder's is in [section 5.2](05_tube_law_map.ipynb)), K = {' / '.join(str(k) for k in dabi_k)} (the paper: 508 for ELF).
'''
