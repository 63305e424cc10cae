"""Training: everything that turns a seed and a corpus into shipped weights.

Import the module that holds what you need; this package imports none of them itself. Training
sits above :mod:`tokendyn.models` and :mod:`tokendyn.latent` and imports from them, never the other
way (seeded re-initialisation, :func:`tokendyn.models.weights_init.init_weights`, is the models').

- :mod:`.schedule`: learning-rate schedules (warmup-stable-decay :func:`~.schedule.lr_at`, warmup-cosine);
- :mod:`.loop`: the resumable optimiser loop (:func:`~.loop.run_steps`), :func:`~.loop.train` for a
  module whose loss draws from one generator, atomic checkpoint writes and a timestamped log;
- :mod:`.masking`: BERT masking of token windows, logits at the masked sites only, the special-token
  mask and the context-copy unlikelihood penalty;
- :mod:`.distill`: soft targets from the causal teacher (prompts, generation, word alignment,
  scoring, loading the shards) and the distillation loss;
- :mod:`.corpus`: the MLM training corpus, its tokenizer and windows, sentence splitting, batches
  of similar length, and how much of the cloze probe a set of training sentences contains;
- :mod:`.mlm`: the recipe of the shipped masked LMs (defaults, what is trained, optimiser,
  resumable run);
- :mod:`.latents`: the shared stages of the Part II latent models (flow training, saving weights).

Every random draw comes from an explicit ``torch.Generator``, so a seeded run is reproducible and
a resumed one ends where an uninterrupted one would (on CPU).
"""
