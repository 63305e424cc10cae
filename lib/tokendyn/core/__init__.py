"""The ground floor: what every other package stands on, and nothing of the papers' science.

Import the module that holds what you need; this package imports none of them itself, and its
modules import only each other (and :data:`tokendyn.__version__`).

- :mod:`.atomic`: every file the project writes (temp file, fsync, rename) and every record it
  reads, with errors that name the file;
- :mod:`.checkpoint`: the content-addressed store a long run resumes from;
- :mod:`.checks`: argument checks that name the parameter and its allowed range;
- :mod:`.data`: the passage pools and corpora, and the seeded draws from them;
- :mod:`.devices`: CPU or CUDA, threads and dtype;
- :mod:`.integrity`: the SHA-256 manifests of shipped weights and fetched assets;
- :mod:`.jsonable`: JSON-safe values without importing torch;
- :mod:`.paths`: where the checkout, its data and the fetched assets are;
- :mod:`.positions`: how many content tokens a model's position table admits;
- :mod:`.stats`: estimates with intervals (bootstrap, Wilson, ratios, size slopes).
"""
