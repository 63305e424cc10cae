"""How good is a language model? Cloze probe, copy rate and pseudo-perplexity on held-out text.

- :mod:`~tokendyn.evaluation.cloze`: the cloze probe (``data/probe/cloze.tsv``): top-1 / top-5
  accuracy and the copy rate of a masked LM (:func:`cloze_probe`).
- :mod:`~tokendyn.evaluation.pseudo_ppl`: pseudo-log-likelihoods and pseudo-perplexity
  (Salazar et al. 2020) and the repetition rates of text and model (:func:`heldout_scores`).
- :mod:`~tokendyn.evaluation.causal`: the same probe through a causal LM
  (:func:`causal_cloze_probe`) and its sentence log-likelihoods.
- :mod:`~tokendyn.evaluation.heldout`: the deterministic held-out split (:func:`is_heldout`,
  :func:`heldout_passages`).
- :mod:`~tokendyn.evaluation.masked`: the adapter (:func:`as_mlm`), the vocabulary head and logits
  at a mask.
- :func:`evaluate`: the summary written to each shipped model's ``eval.json``.

Masked-LM functions take ``mlm``: an :class:`~tokendyn.mcmc.conditional.MLMConditional` (the adapter
the chains use), a loaded MLM, or a ``(model, tokenizer)`` pair; :func:`cloze_probe` and
:func:`evaluate` also take ``(model, tokenizer)`` as two arguments.
"""

from .causal import (causal_cloze_probe, causal_log_likelihoods, is_word_token, right_pad, sequence_log_likelihoods,
                     start_id)
from .cloze import PROBE_FILE, ClozeItem, cloze_probe, context_words, load_probe, probe_row, probe_scores, token_word
from .heldout import HELDOUT_MOD, heldout_passages, is_heldout
from .masked import as_mlm, head_logits, masked_logits
from .pseudo_ppl import heldout_scores, pseudo_log_likelihoods, pseudo_perplexity, text_site_logits
from .summary import evaluate

__all__ = [
    "HELDOUT_MOD", "PROBE_FILE", "ClozeItem", "as_mlm", "causal_cloze_probe",
    "causal_log_likelihoods", "cloze_probe", "context_words", "evaluate", "head_logits",
    "heldout_passages", "heldout_scores", "is_heldout", "is_word_token", "load_probe",
    "masked_logits", "probe_row", "probe_scores", "pseudo_log_likelihoods", "pseudo_perplexity",
    "right_pad", "sequence_log_likelihoods", "start_id", "text_site_logits", "token_word",
]
