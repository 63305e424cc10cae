"""Paper 1's analyses, built from the kernel in :mod:`tokendyn.mcmc` and the scores in
:mod:`tokendyn.evaluation`.

Import the module that holds what you need; this package imports none of them itself.

- :mod:`.rectangle`: the rectangle test of incompatible conditionals (delta);
- :mod:`.influence`: site margins, influence and the leave probability of a site;
- :mod:`.experiments`: checkpointed coupling and drift surveys, and the exact anchors (uniform
  model, Potts toy) chapter 3 scales against;
- :mod:`.traps`: metastable states: perfect traps, Arrhenius and dwell laws, the kinetic
  sampler, approximate traps;
- :mod:`.topics`: topic regions of the chains' text and the political-attractor test;
- :mod:`.fidelity`: how exact the chains are (the kernel against exact toy laws);
- :mod:`.size`: statistics over a ladder of model sizes.
"""
