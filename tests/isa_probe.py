"""Run by tests/test_checked.py in a subprocess under one float-order setting (ISA variables).

Prints one JSON line: the sha256 of the shipped MLM's site logits on real passages (so the test
can see that the setting changed the bits), the live text of a small seeded coupling summary and
of a claims table, and what :meth:`tokendyn.publish.checked.Checks.agree` printed for them against the
reference texts in ``argv[1]`` (a JSON file, or ``-`` for none).
"""

import contextlib
import hashlib
import io
import json
import sys

import torch

from tokendyn.publish import book, claims, verdicts
from tokendyn.mcmc import diagnostics, glauber
from tokendyn.analysis import experiments
from tokendyn.core import stats
from tokendyn.publish.checked import Checks, Count, StdErr

torch.set_num_threads(1)
mlms = book.load_mlms(["splade-tiny-mlm"])
loaded, cond = mlms["splade-tiny-mlm"]
x0 = experiments.start_states(loaded, 12, 8, topics=("health", "sports"), seed=0)
y0 = experiments.start_states(loaded, 12, 8, topics=("science", "history"), seed=0)
logits = cond.site_logits(x0, torch.arange(8) % 12)
digest = hashlib.sha256(logits.detach().contiguous().numpy().tobytes()).hexdigest()

r = glauber.coupling_times(cond, x0, y0, tau=2.0, max_steps=300, seed=0).times
coupled = int((~r.censored).sum())
med = diagnostics.survival(r.times, r.censored, torch.arange(r.cap + 1.0)).median()
share = stats.wilson(coupled, len(r.times))
live = {
    "coupling": (f"splade-tiny-mlm, n = 12, tau = 2: {coupled} of 8 pairs coupled within 300 steps "
                 f"({share.fmt('.2f')}); median coupling time {book.fmt(med, '.0f')}; first logit {float(logits[0, 1000]):.4f}\n"),
    "claims": repr(claims.table([claims.finding(4, share, verdicts.proportion_above(coupled, 8, 0.25),
                                                basis="8 pairs, n = 12")])) + "\n",
}
reference = json.loads(open(sys.argv[1]).read()) if sys.argv[1] != "-" else None
chk = Checks("isa-probe", reference=reference or {})
out = io.StringIO()
with contextlib.redirect_stdout(out):
    with chk.agree("coupling", rules=((r"(\d+) of 8 pairs", Count(8, "pairs")),
                                      (r"median coupling time (\S+)", StdErr.bootstrap(r.times.numpy(), what="8 pairs")),
                                      (r"first logit (\S+)", StdErr(1e-4, "float32 round-off of one logit")))):
        print(live["coupling"], end="")
    with chk.agree("claims"):
        print(live["claims"], end="")
print(json.dumps({"logits_sha256": digest, "live": live, "checked": out.getvalue()}))
