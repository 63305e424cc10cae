"""The models appendix's glued words, read from the shipped models' records and the training code.

The appendix is two pages: ``appendix_models`` (what ships, training, quality, architecture
checks, reading the chapters: :func:`corpus_words`, :func:`quality_words`, :func:`stage_words`,
:func:`reading_words`, :func:`target_words`) and ``appendix_models_scale`` (the size ladder,
BERT-base, the latent models: :func:`ladder_words`, :func:`bert_gap_words`, :func:`latent_table`);
both state the training mix's size (:func:`mix_size_words`). Every number their prose states
about our models comes from here: each ``model.json`` / ``eval.json`` / ``config.json`` under
``data/models``, the training code's settings and the measured behaviour of its masking, so that
the text follows the models when they are retrained.
The functions take those records as plain mappings (what ``json.loads`` gives) and return
``dict[str, str]`` of glue key -> words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from . import count_words, join_words

__all__ = ["TOP5_TARGET", "COPY_TARGET", "BERT_PRETRAINING", "fraction_words", "corpus_words",
           "mix_size_words", "quality_words", "stage_words", "ladder_words", "bert_gap_words", "latent_table", "reading_words", "target_words"]

TOP5_TARGET = 0.60
"""The probe top-5 the default MLM is meant to reach (a goal the project set, checked on the page)."""

COPY_TARGET = 0.10
"""The probe copy rate the default MLM is meant to stay under (a goal the project set, checked on the page)."""

BERT_PRETRAINING: dict[str, Any] = {
    "words": 3.3e9,            # BooksCorpus (800M words) + English Wikipedia (2,500M words)
    "steps": 1_000_000,
    "batch": 256,              # sequences per step
    "seq_lens": ((128, 0.9), (512, 0.1)),  # (tokens per sequence, share of the steps)
}
"""BERT-base's pre-training as Devlin et al. (2019, section A.2) report it: not ours, so not in any
record here; its architecture is read from ``transformers.BertConfig()``'s defaults instead."""

_FRACTIONS = {2: "half", 3: "a third", 4: "a quarter", 5: "a fifth", 6: "a sixth", 7: "a seventh",
              8: "an eighth", 9: "a ninth", 10: "a tenth"}


def _pct(x: float) -> str:
    """A share as a whole percentage (``0.05`` -> ``"5%"``), one decimal where whole would read as 0."""
    return f"{x:.0%}" if round(x * 100) >= 1 else f"{x:.1%}"


def _lr(x: float) -> str:
    """A learning rate as the prose writes it: ``5e-4``, ``1e-3``, ``3e-4``."""
    mantissa, exponent = f"{x:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _millions(n: float) -> str:
    """A word count in millions or billions (``1631859`` -> ``"1.6 million"``)."""
    return f"{n / 1e9:.2g} billion" if n >= 1e9 else f"{n / 1e6:.2g} million"


def _under(x: float, bar: float) -> str:
    """``x`` with the fewest decimals (at least one) that do not round it onto ``bar``
    (``6.99949`` against 7 -> ``"6.9995"``): a value just under a bar must not print as the bar."""
    for d in range(1, 7):
        s = f"{x:.{d}f}"
        if float(s) != bar:
            return s
    return f"{x:.6f}"


def fraction_words(x: float) -> str:
    """A share in words: the nearest of half, a third ... a tenth, prefixed "about" unless within
    2% of it (``0.2077`` -> ``"about a fifth"``); outside ``[0.09, 0.6]`` a percentage."""
    if not 0.09 <= x <= 0.6:
        return _pct(x)
    n = min(_FRACTIONS, key=lambda k: abs(x - 1 / k))
    return _FRACTIONS[n] if abs(x * n - 1) <= 0.02 else f"about {_FRACTIONS[n]}"


def corpus_words(*, politics_leads: int, heldout_every: int, sotu_share: float, seq_len: int,
                 shares: tuple[float, float, float]) -> dict[str, str]:
    """The training data and masking in words: the Wikipedia leads of the politics pool the
    ablation removes (``politics_leads``), the held-out share ``1 / heldout_every``, the State of
    the Union cap ``sotu_share``, the window length ``seq_len`` and BERT masking's ``shares`` (mask
    token, random, unchanged: :data:`tokendyn.training.masking.BERT_SHARES`)."""
    to_mask, rnd, same = shares
    return {"politics_leads": f"{politics_leads:,}", "heldout_share": _pct(1 / heldout_every),
            "sotu_cap": _pct(sotu_share), "window_len": f"{seq_len}",
            "bert_masking": f"{_pct(to_mask)} mask token, {_pct(rnd)} random, {_pct(same)} unchanged"}


def mix_size_words(n_words: int) -> dict[str, str]:
    """The training mix's size ``n_words`` in millions or billions of words (both pages state it)."""
    return {"corpus_words": _millions(n_words)}


def quality_words(probe_n: int, wordpiece_coverage: float, max_len: int) -> dict[str, str]:
    """The probe's size ``probe_n``, the default (WordPiece) model's probe coverage and the tokens
    of a held-out passage pseudo-perplexity scores (``max_len``, ``heldout_scores``' default)."""
    return {"probe_n": f"{probe_n}", "wordpiece_coverage": _pct(wordpiece_coverage), "ppl_tokens": f"{max_len}"}


def _planned_steps(command: str, steps: int) -> int:
    """The ``--steps`` a stage's command asked for (``steps`` when the command names none)."""
    m = re.search(r"--steps\s+(\d+)", command)
    return int(m.group(1)) if m else steps


def stage_words(stages: Sequence[Mapping[str, Any]], *, trained_layers: int,
                copy_target: float = COPY_TARGET) -> dict[str, str]:
    """How the default was trained, in words, from its ``model.json`` stages (oldest first, as
    :func:`tokendyn.models.shipped.training_stages` lists them; a finished earlier stage carries
    its probe scores under ``eval``): ``trained_layers`` (the encoder layers training changes, in
    words), ``first_stage`` (markdown: whether plain MLM training left the copy rate above
    ``copy_target``), ``more_stages`` (how many stages followed, in words) and ``ul_stages`` (each
    later stage's unlikelihood weight, and whether it was stopped early with its copy rate)."""
    first = stages[0]
    c = first["eval"]["copy_rate"]
    if c > copy_target:
        how = "well above" if c >= 2 * copy_target else "above"
        first_md = (f"Plain masked-token training did not cure it: the default's first stage ended with a copy "
                    f"rate of {c:.2f}, {how} the {_pct(copy_target)} target")
    else:
        first_md = (f"Plain masked-token training alone brought the default's copy rate to {c:.2f} in its first "
                    f"stage, within the {_pct(copy_target)} target")
    parts = []
    for k in range(1, len(stages)):
        st, before = stages[k], stages[k - 1]
        w = f"Stage {k + 1} used weight {st.get('unlikelihood', 0.0):.1f}" if k == 1 else \
            f"stage {k + 1} used weight {st.get('unlikelihood', 0.0):.1f}"
        planned = _planned_steps(st["command"], st["steps"])
        if st["steps"] < planned:
            w += f" and was stopped early, after {st['steps']:,} of its {planned:,} steps"
            if "eval" in st and "eval" in before:
                a, b = before["eval"]["copy_rate"], st["eval"]["copy_rate"]
                w += (f", when the copy rate had not moved ({b:.2f} against {a:.2f} before it)" if abs(b - a) < 0.02
                      else f", with the copy rate at {b:.2f} (from {a:.2f})")
        else:
            w += f" for {st['steps']:,} steps"
        parts.append(w)
    return {"trained_layers": count_words(trained_layers, zero="zero", through=10), "first_stage": first_md,
            "more_stages": count_words(len(stages) - 1, zero="zero", through=10), "ul_stages": "; ".join(parts) + "." if parts else ""}


def ladder_words(ladder: Mapping[str, tuple[str, int]], metas: Mapping[str, Mapping[str, Any]],
                 evals: Mapping[str, Mapping[str, Any]], *, base_model: str, default_copy: float,
                 package_mask: tuple[float, float], mpnet_mask: tuple[float, float], row_size: int,
                 min_span: float) -> dict[str, str]:
    """The size ladder's section in words. ``ladder``: rung -> (encoder family, layers)
    (``shipped.HEAD_LADDER``); ``metas`` / ``evals``: every rung's and ``base_model``'s
    ``model.json`` / ``eval.json``; ``default_copy``: the default MLM's probe copy rate;
    ``package_mask`` / ``mpnet_mask``: (mask-token row norm, median row norm) of the packaged MiniLM
    and of an MPNet rung; ``row_size``: the MiniLM row's length; ``min_span``: the parameter span
    chapter 2's rule for claim 3 asks for (``verdicts.claim_3``'s default)."""
    rungs = sorted(ladder, key=lambda n: metas[n]["n_params"])
    top, base = rungs[-1], metas[base_model]
    tr = metas[top]["training"]
    minilm = [n for n in rungs if ladder[n][0] == "minilm"]
    depths = {fam: join_words([str(d) for d in sorted(d for f, d in ladder.values() if f == fam)]) for fam in ("mpnet", "minilm")}
    w = {"cache_windows": f"{tr['max_windows']:,}", "mask_share": _pct(tr["mask_rate"]), "head_steps": f"{tr['steps']:,}",
         "head_batch": f"{tr['batch']}", "mpnet_depths": depths["mpnet"], "minilm_depths": depths["minilm"],
         "top_params": f"{metas[top]['n_params'] / 1e6:.1f}M", "top_head_mb": f"{metas[top]['weights_bytes'] / 1e6:.1f} MB"}
    c = evals[top]["copy_rate"]
    w["top_copy"] = (f"on {fraction_words(c)} of the probe (copy rate {c:.2f}), "
                     + (f"more than the default `minilm-mlm` ({default_copy:.2f})" if c > default_copy
                        else f"no more than the default `minilm-mlm` ({default_copy:.2f})"))
    b = base["training"]
    ratio = b["lr"] / tr["lr"]
    rel = "the ladder's" if ratio == 1 else f"{fraction_words(ratio) if ratio < 1 else f'{ratio:g}x'} the ladder's"
    w["base_recipe"] = f"{'the same ' if b['steps'] == tr['steps'] else ''}{b['steps']:,} steps (lr {_lr(b['lr'])}, {rel}"
    w["base_shipped"] = f"{base['n_shipped_params'] / 1e6:.1f}M parameters, {base['weights_bytes'] / 1e6:.1f} MB in fp16"
    row, med = mpnet_mask
    w["mpnet_row"] = f"{'longer' if row > med else 'shorter'} than the median row ({row:.2f} against {med:.2f})"
    w["minilm_row"] = fraction_words(package_mask[0] / package_mask[1])
    w["row_size"] = f"{row_size}"
    w["row_steps"] = f"{metas[minilm[0]]['training']['mask_row_steps']:,}"
    # the span of the ladder without its smallest rung (added for the rule), then with it
    params = [metas[n]["n_params"] for n in rungs]
    without, full = params[-1] / params[1], params[-1] / params[0]
    lo, hi = ladder[rungs[1]][1], ladder[top][1]
    added = count_words(ladder[rungs[0]][1], zero="zero", through=10)
    if without < min_span:
        gap = "a hair under" if without > 0.99 * min_span else "under"
        w["span"] = (f"the {lo}-to-{hi}-layer ladder spans {_under(without, min_span)}x in parameters, {gap} the "
                     f"{min_span:g}x that chapter 2's rule for claim 3 asks for, and a {added}-layer rung was added "
                     f"rather than the rule moved (the ladder now spans {full:.1f}x)")
    else:
        w["span"] = (f"the {lo}-to-{hi}-layer ladder already spans {without:.1f}x in parameters, at least the "
                     f"{min_span:g}x that chapter 2's rule for claim 3 asks for; the {added}-layer rung stretches it "
                     f"to {full:.1f}x")
    return w


def bert_gap_words(bert: Mapping[str, int], default_meta: Mapping[str, Any], stages: Sequence[Mapping[str, Any]],
                   pretraining: Mapping[str, Any] = BERT_PRETRAINING) -> dict[str, str]:
    """BERT-base against our default in words. ``bert``: ``n_params``, ``layers``, ``hidden`` (read
    from ``transformers.BertConfig()``); ``default_meta``: the default's ``model.json``; ``stages``:
    its training stages; ``pretraining``: BERT-base's
    recipe (:data:`BERT_PRETRAINING`). Compute is counted as tokens processed times parameters."""
    steps = sum(s["steps"] for s in stages)
    batches = {s["batch"] for s in stages}
    ours = sum(s["steps"] * s["batch"] * s["seq_len"] for s in stages) * default_meta["n_params"]
    per_seq = sum(length * share for length, share in pretraining["seq_lens"])
    theirs = pretraining["steps"] * pretraining["batch"] * per_seq * bert["n_params"]
    inv = theirs / ours
    inv = round(inv, -int(math.floor(math.log10(inv))) + 1)  # two significant digits
    return {"bert_params": f"{bert['n_params'] / 1e6:.0f}M", "bert_layers": f"{bert['layers']}",
            "bert_hidden": f"{bert['hidden']}", "bert_words": _millions(pretraining["words"]),
            "bert_steps": f"{pretraining['steps'] / 1e6:g}M", "bert_batch": f"{pretraining['batch']}",
            "default_share": fraction_words(default_meta["n_params"] / bert["n_params"]),
            "default_steps": f"{steps:,} steps of {'/'.join(str(b) for b in sorted(batches))}",
            "compute_share": f"1/{inv:,.0f}"}


def latent_table(configs: Mapping[str, Mapping[str, Any]], *, text_margin: float, digit_size: int) -> str:
    """Part II's latent models as a markdown table, from each model's ``config.json`` (``configs``
    keyed ``context-latent``, ``text-latent``, ``image-latent``, ``faces-latent``); ``text_margin``:
    the text latent's median held-out margin (measured; its config records none); ``digit_size``:
    the side of the digit images."""
    def cmd(c: Mapping[str, Any]) -> str:
        return "`" + c["command"][c["command"].index("scripts/"):] + "`"

    ctx, txt, img, fac = (configs[k] for k in ("context-latent", "text-latent", "image-latent", "faces-latent"))
    g_img, g_fac = math.isqrt(img["flow"]["seq_len"]), math.isqrt(fac["flow"]["seq_len"])
    rows = [
        ("`context-latent` (the ELF analogue)",
         f"frozen all-MiniLM-L6-v2 states of {ctx['seq_len']}-token windows, {ctx['dim']}-d, standardised",
         f"linear, argmax over {ctx['vocab_size']:,} WordPiece ids",
         f"{ctx['reconstruction_accuracy']['heldout']:.1%} of tokens read back; median margin {ctx['median_heldout_margin']:.2f}",
         cmd(ctx)),
        ("`text-latent` (the separated contrast)", f"{txt['autoencoder']['latent_dim']}-d, one transformer layer over words",
         f"linear, argmax over {txt['autoencoder']['vocab_size']:,} words",
         f"{txt['reconstruction_accuracy']['heldout']:.1%} read back; median margin {text_margin:.1f}", cmd(txt)),
        ("`image-latent`", f"{g_img}x{g_img} grid of {img['autoencoder']['channels']} channels ({digit_size}x{digit_size} digits)",
         "smooth convolutional, sigmoid", f"pixel RMS error {math.sqrt(img['reconstruction_mse']['heldout']):.3f}", cmd(img)),
        ("`faces-latent`", f"{g_fac}x{g_fac} grid of {fac['autoencoder']['channels']} channels "
                           f"({fac['autoencoder']['size']}x{fac['autoencoder']['size']} `lfw_subset` faces)",
         "smooth convolutional, sigmoid",
         f"pixel MSE {fac['reconstruction_mse']['heldout']:.2g} ({fac['data']['heldout_images']} faces)", cmd(fac)),
    ]
    head = "| model | latents | decoder | scores (held-out) | rebuilt by |\n|---|---|---|---|---|\n"
    return head + "\n".join("| " + " | ".join(r) + " |" for r in rows)


def reading_words(bar: float, family: Mapping[str, int], top5: Mapping[str, float]) -> dict[str, str]:
    """The science chapters' model choice in words: ``bar`` (the probe top-5 a model must reach,
    ``shipped.CONTEXT_TOP5``), the model family ``family`` (name -> depth) and each member's probe
    top-5 (``top5``). ``family`` is markdown naming the family, its depths and the members below the bar."""
    names = sorted(family, key=family.get)
    prefix = re.sub(r"\d+$", "", names[0])
    label = f"`{prefix}{'/'.join(str(family[n]) for n in names)}`"
    short = [n for n in names if top5[n] < bar]
    if short:
        note = (join_words([f"`{n}` (top-5 {top5[n]:.2f})" for n in short])
                + (" falls" if len(short) == 1 else " fall") + " short of the bar and"
                + (" is" if len(short) == 1 else " are") + " marked where it appears")
    else:
        note = "every member clears the bar"
    md = f"{label} (all-MiniLM-L6-v2 cut to {join_words([str(family[n]) for n in names])} layers, one recipe; {note})"
    return {"context_bar": f"{bar:.2f}", "family": md}


def target_words(top5_target: float = TOP5_TARGET, copy_target: float = COPY_TARGET) -> dict[str, str]:
    """The default's targets as percentages: ``top5_target``, ``copy_target``."""
    return {"top5_target": _pct(top5_target), "copy_target": _pct(copy_target)}
