"""The top floor: what turns runs into the book. Nothing below imports from here.

Import the module that holds what you need; this package imports none of them itself.

- :mod:`.book`: a chapter's setup (threads, device, figure numbering) and its small helpers;
- :mod:`.chapter_params`: every chapter's parameters, checked in one call before any compute;
- :mod:`.checked`: outputs checked against the committed run with tolerances from their own sample;
- :mod:`.results`: records of runs with their provenance (model, parameters, seed, version,
  commit), saved atomically and resumed row by row;
- :mod:`.verdicts`: the claims' rules, one function each; :mod:`.claims`: the claims tables;
- :mod:`.quantities`: the numbers shown on several pages, one registry and one text each;
- :mod:`.typed_numbers`: the numbers typed into a page's prose instead of glued from its run;
- :mod:`.preregistration`: which recorded run each rule judges, and the check that it came first;
- :mod:`.plotting` and :mod:`.figures`: the charts, offline;
- :mod:`.sweep` and :mod:`.cli`: chapters at scale on Ray, from the command line.
"""
