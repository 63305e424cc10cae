"""Chapter 5's third page (5.3, ``book/05_tube_law_image.ipynb``): the image model and generation from
noise. Its glued words, tables, record and closing list: the digits' pixel range, the cliff against no
cliff, the image roll-in's numbers and the separated model's generation beside the paper's, each built
from the page's tables so that the words stay true when the page is rerun at another scale.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

__all__ = ["pixel_range_text", "cliff_texts", "summary_table", "metrics", "measured_text"]


def pixel_range_text(images: Any) -> str:
    """The range of the held-out digits' pixels (``images``, a tensor), as ``'[lo, hi]'``."""
    return f"[{float(images.min()):g}, {float(images.max()):g}]"


def cliff_texts(cliff: pd.DataFrame, short: float) -> dict[str, str]:
    """The cliff paragraph's numbers: the contextual readout's structured flips at the grid's push
    nearest ``short`` (``cliff_short``) and, at the longest push, how many times a random direction's
    flips the structured direction gives (``cliff_long``). ``cliff``: rows with ``lambda``, ``model``
    (``'text: ...'`` or ``'image: ...'``), ``direction`` and ``response``."""
    text = cliff[cliff["model"].str.startswith("text")].pivot(index="lambda", columns="direction", values="response")
    lam_s = min(text.index, key=lambda v: abs(v - short))
    lam_l = max(text.index)
    iso = text.loc[lam_l, "isotropic"]
    times = f"{text.loc[lam_l, 'structured'] / iso:.2g} times" if iso > 0 else "infinitely"
    return {"cliff_short": f"{text.loc[lam_s, 'structured']:.1%} at λ = {lam_s:.2g}",
            "cliff_long": f"at the longest push (λ = {lam_l:.2g}) the structured direction flips {times} as many tokens "
                          "as a random one of the same length"}


# ---- the page's tables, record and closing list, assembled from its measurements ---------------------------------

def _ode_sde(gen: pd.DataFrame, k: int) -> tuple[float, float]:
    # the bigram PPL of the ODE and the SDE at K = k
    ode, sde = gen[gen["K"] == k].set_index("sampler").loc[["ODE", "SDE"], "bigram PPL"]
    return float(ode), float(sde)


def summary_table(*, gen: pd.DataFrame, img_term: pd.DataFrame) -> pd.DataFrame:
    """5.3's numbers beside the paper's: the bigram PPL of ODE and SDE generation at K = 4 (``gen``: rows
    with ``K``, ``sampler``, ``bigram PPL``) and the image DABI at the terminal step (``img_term``)."""
    return pd.DataFrame([
        {"quantity": "generative PPL, ODE vs SDE at K = 4 (ours: bigram PPL, 16-d model)", "paper (ELF-B)": "294 vs 50",
         "ours": "{:.3g} vs {:.3g}".format(*_ode_sde(gen, 4))},
        {"quantity": f"DABI image, K = {' / '.join(str(k) for k in img_term['K'])}", "paper (ELF-B)": "~1",
         "ours": " / ".join(f"{d:.3g}" for d in img_term["DABI"])},
    ])


def metrics(*, img_term: pd.DataFrame, img_recon: float, img_spread: float, img_rows: pd.DataFrame, gen: pd.DataFrame,
            real_ppl: float) -> dict[str, Any]:
    """5.3's record (``metrics`` of :func:`tokendyn.publish.results.save`): the image model's terminal
    DABI (``img_term``), reconstruction error (``img_recon``), collapse spread (``img_spread``) and
    roll-in rows (``img_rows``), and the separated model's generation (``gen``, its examples left out)
    beside held-out text's bigram PPL (``real_ppl``)."""
    return {"dabi_image": {int(r.K): r.DABI for r in img_term.itertuples()},
            "generation_separated": gen.drop(columns="example").to_dict("records"), "real_bigram_ppl": real_ppl,
            "image_reconstruction_rmse": img_recon, "image_collapse_spread": img_spread,
            "rollin_image": img_rows.to_dict("records")}


def measured_text(*, img_term: pd.DataFrame, gen: pd.DataFrame, real_ppl: float, k_gen: int = 4) -> str:
    """5.3's closing list of what we measured (Markdown): the image model's terminal pixel errors and
    DABI (``img_term``) and the separated model's ODE and SDE generation at ``k_gen`` steps (``gen``)
    beside held-out text (``real_ppl``)."""
    ks = " / ".join(str(k) for k in img_term["K"])
    ode, sde = _ode_sde(gen, k_gen)
    return f'''
- **Image model.** The same roll-in on the digit autoencoder gives pixel RMS errors of
  **{' / '.join(f"{v:.3g}" for v in img_term['structured'])}** at the terminal step (K = {ks}), almost the
  same under an isotropic residual, and DABI **{' / '.join(f"{d:.3g}" for d in img_term["DABI"])}**: no cliff.
- **Generation from noise** (separated 16-d model, smoothed bigram judge). At K = {k_gen} the ODE's bigram PPL is
  **{ode:.3g}** and the SDE's **{sde:.3g}**, against {real_ppl:.3g} for held-out text (the paper, ELF-B's generative
  PPL: 294 against 50); chapter 7 scores the contextual model with a real language model.
'''
