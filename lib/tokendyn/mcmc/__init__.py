"""Paper 1's machinery: the model protocol, the Glauber kernel and what reads its chains.

Import the module that holds what you need; this package imports none of them itself. It stands
on :mod:`tokendyn.core` only.

- :mod:`.conditional`: the narrow protocol every sampler calls (``site_logits``) and its adapter
  over masked LMs, with the last layer run at the sites only (:mod:`.site_encoder`);
- :mod:`.step_settings`: attention, chunk and compilation of the step, chosen by measurement;
- :mod:`.sampling`: the tempered categorical draw, exact and in one place;
- :mod:`.glauber`: the kernel, an ``init`` / ``step`` / ``coupled_step`` triple over an explicit
  state, and ``run``, which drives them;
- :mod:`.toy`: exact small models (compatible and incompatible) that share the kernel with MLMs;
- :mod:`.fill`: the exact fill of a masked site, for the influence and rectangle estimates;
- :mod:`.diagnostics`: coupling-time survival and bootstrap, semantic drift, n log n scaling and
  the shape of the mixing-time law.
"""
