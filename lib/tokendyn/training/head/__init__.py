"""The head recipe of the size ladder: a frozen encoder run once, its states cached, a head trained.

Every rung of :data:`tokendyn.models.shipped.HEAD_LADDER` (MiniLM cut to 1, 2, 3, 4, 6 layers, MPNet to
2, 4, 6, 10 and 12) is trained the same way, so that "across size" compares like with like. The
base-size :data:`~tokendyn.models.shipped.BASE_MODEL` uses the same code with its top layer trained too.
One module per phase, each importing only the ones before it:

- :mod:`.settings`: :class:`HeadSettings`, one run's settings, and what a cache and a checkpoint
  are bound to.
- :mod:`.cache` (phases 1 and 2): the MLM corpus (Wikipedia leads minus the held-out 5%, Wikibooks
  recipes, Moby-Dick, capped State of the Union) cut into ``seq_len``-token windows; each window
  masked ``views`` times (BERT's 80/10/10, one seeded generator per shard) and run once through the
  frozen encoder's first ``L - top_layers`` layers (:func:`build_cache`). Stored are the states at
  the masked sites (``top_layers = 0``) or of the whole windows (``top_layers > 0``), fp16, in
  safetensors shards with a ``manifest.json`` that records each finished shard's SHA-256. A killed
  run keeps every finished shard and computes only the rest; the masks do not depend on where it
  stopped, so the cache equals one built without a stop.
- :mod:`.mask_row` (stage 0, MiniLM only): all-MiniLM-L6-v2 never trained its mask token's row, so a
  head on its frozen states reads nothing at a masked site. :func:`train_mask_row` trains the row
  (and a throwaway head) through the frozen encoder for :data:`MASK_ROW_STEPS`; the learned row
  feeds the cache and ships with the head.
- :mod:`.train` (phase 3): :func:`train_head` trains the head (dense + LayerNorm + output bias; the
  decoder stays tied to the frozen word embeddings), optionally with the top ``top_layers`` layers,
  with the shipped models' optimiser (AdamW, weight decay 0.01 on matrices), warmup-stable-decay
  rate and resumable loop over the cached states. A step takes ``batch`` masked windows; the order
  is a seeded permutation per epoch, so a resumed run ends where an uninterrupted one does (on
  CPU). Checkpoints (``head.pt``) log the validation loss and the cloze probe.
- :mod:`.export` (phase 4): :func:`export_head` writes ``data/models/<name>/`` in the shipped
  format (fp16 weights of what was trained with its SHA256SUMS, model.json, tokenizer, README),
  loads it back through :func:`tokendyn.models.shipped.load_shipped` and scores it with
  :func:`tokendyn.evaluation.evaluate` into ``eval.json``.

What the cache cannot do: train the input side, and each window is seen under ``views`` fixed
maskings only. ``scripts/train_head.py`` is the command line. Every public name is importable from
here (``tokendyn.training.head.train_head``).
"""

from .cache import *  # noqa: F401,F403
from .cache import __all__ as _cache
from .export import *  # noqa: F401,F403
from .export import __all__ as _export
from .mask_row import *  # noqa: F401,F403
from .mask_row import __all__ as _mask_row
from .settings import *  # noqa: F401,F403
from .settings import __all__ as _settings
from .train import *  # noqa: F401,F403
from .train import __all__ as _train

__all__ = [*_settings, *_cache, *_mask_row, *_train, *_export]
