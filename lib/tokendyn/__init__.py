"""Token Dynamics: samplers, metrics and models for the executable book.

The library is thin on purpose and built in floors; a module imports only from its own floor or
the floors below (``tests/test_imports.py`` checks it):

1. :mod:`tokendyn.core`: records, checks, data, paths, statistics;
2. :mod:`tokendyn.models`: the registry of every model the book loads;
3. :mod:`tokendyn.mcmc`: the model protocol, the Glauber kernel and its diagnostics;
4. :mod:`tokendyn.evaluation`: how good a model is (cloze probe, pseudo-perplexity, generation);
5. :mod:`tokendyn.latent`: Part II's continuous-latent generators, readouts and measures;
6. :mod:`tokendyn.training`: what turns a seed and a corpus into shipped weights;
7. :mod:`tokendyn.analysis`: Part I's analyses (rectangle test, traps, topics, surveys);
8. :mod:`tokendyn.publish`: records of runs, rules, claims, figures and the book's glue.
"""

__version__ = "0.1.0"
