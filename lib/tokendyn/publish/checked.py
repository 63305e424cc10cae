"""What a checked output may print, and the one helper that keeps a checked cell the same on every CPU.

nbval compares a chapter's ``# NBVAL_CHECK_OUTPUT`` cells with their committed outputs as text.
A seeded chain is bit-reproducible on one machine, but float32 logits depend on the order in which
the CPU's vector kernels add (another ISA, another thread count, another BLAS code path). Once in
a while a uniform lands between two machines' CDF values and that chain, rectangle or sequence
takes another path. Hence the rule (also in the README's section for contributors):

1. **Exact results may be printed as they are**: exact toys in float64, identities and bounds
   (:func:`tokendyn.publish.book.below` prints round-off as ``< 1e-12``), counts that no draw or float32
   sum can change, parameters, recorded runs read back, and verdicts that sit far from their
   thresholds.
2. **Every number that float32 arithmetic or a seeded run on a float32 model makes** is printed
   inside :meth:`Checks.agree`, which compares it with the committed output's number in the same
   place. The tolerance is never a typed percentage. It is one unit in the last printed digit of
   each (round-off moving a rounding boundary), plus what the number's **own sample** allows:

   - a number printed with its interval, ``x [lo, hi]``: the point may move as far as the
     interval reaches (``max(x - lo, hi - x)``) and each bound by the interval's width;
   - otherwise a :class:`Tolerance` that the cell attaches to the number (a regex over the
     committed text, :meth:`Checks.agree`'s ``rules``): :class:`Share` and :class:`Count`
     (binomial s.e. of a share or count of ``n`` units), :class:`StdErr` (an s.e. the cell
     computed from its sample: a bootstrap, or sd / sqrt(n)) and :class:`RelStdErr` (the s.e. of
     ``log x``, for perplexities and other positive ratios);
   - a number with neither is compared at round-off only (:data:`EXACT`).

   Every s.e.-based tolerance is :data:`Z` s.e. of the *difference* of two runs,
   ``Z * sqrt(2) * se``, with ``Z = 3`` fixed here: were the two runs independent draws of the
   same sample size, a correct rerun would still fall outside it for about 3 numbers in 1,000. A
   float-order change redraws only the few units whose path moved, so in practice it moves a
   number far less than that. Inside the tolerance the cell prints the committed text, so nbval
   passes on any machine; outside it, it prints the live text and the numbers that differ, so
   nbval fails. The words between the numbers (verdicts, True/False, inside/outside) must match
   exactly.
3. **A verdict in a checked output must not flip from one machine to the next.** A statistic
   whose sample is too small for its own interval to be useful is printed outside the checked
   text, with a line that says so; a tolerance never hides it.

The check's outcome is not printed into the reader's text: each block ends with a display output
of :data:`MIME` (rendered as nothing) whose data names the block and whose metadata holds the
outcome and the tolerances. nbval compares the data (the same on every machine) and ignores the
metadata. A block whose numbers differ prints its live text and a ``DIFFER`` line, so nbval fails.

``TOKENDYN_CHECKS=record`` (``make notebooks``) prints the live text instead: re-executing a chapter
in place makes its live numbers the committed ones.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.checks import check_range
from ..core.stats import bootstrap_replicates

Z = 3.0
"""Standard errors in every sample-based tolerance (of the difference of two runs: ``Z * sqrt(2) * se``)."""

MIME = "application/vnd.tokendyn.check+json"
"""The output type that closes each checked block: data ``{"check": key}``, outcome in its metadata."""

# A number that stands alone: not the digit of a word such as "minilm-depth2" or "x_0"; a sign only
# after a space or an opening bracket (so "3.8-4.3" is two numbers); thousands commas; an exponent.
# An exponent only where the word ends there: "71e452f4c6" (a commit) is the number 71 and a word.
_DIGITS = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+(?!\w))?|\.\d+"
_NUMBER = re.compile(rf"(?:(?:^|(?<=[\s(\[=:,/]))[-+\u2212])?(?<![\w.])(?:{_DIGITS})", re.M)
FOOTER = "(checked:"
"""How the footer line of a block began when the outcome was printed (notebooks of that time)."""


def numbers(text: str) -> tuple[list[str], list[str]]:
    """Split ``text`` into its number tokens and the words between them: ``(numbers, skeleton)``.

    ``len(skeleton) == len(numbers) + 1``; joining them back, alternately, gives ``text``.
    """
    nums, parts, _ = _tokens(text)
    return nums, parts


def _tokens(text: str) -> tuple[list[str], list[str], list[int]]:
    nums, parts, starts, last = [], [], [], 0
    for m in _NUMBER.finditer(text):
        parts.append(text[last:m.start()])
        nums.append(m.group(0))
        starts.append(m.start())
        last = m.end()
    parts.append(text[last:])
    return nums, parts, starts


def value(token: str) -> float:
    """A number token as a float (``'880,092'`` -> 880092.0, ``'−0.5'`` -> -0.5)."""
    return float(token.replace(",", "").replace("−", "-"))


def last_digit(token: str) -> float:
    """One unit in the last printed digit of ``token`` (``'0.156'`` -> 0.001, ``'4.2e+02'`` -> 10)."""
    t = token.replace(",", "").lstrip("+-−")
    mant, _, exp = t.partition("e")
    decimals = len(mant.partition(".")[2])
    return 10.0 ** (int(exp or 0) - decimals)


_SPREAD = Z * math.sqrt(2.0)


class Tolerance:
    """How far a number may move between two runs, from the sample that made it (module docstring)."""

    def allowed(self, committed: float, percent: bool) -> float:
        """The distance allowed around the ``committed`` value (printed in percent when ``percent``)."""
        raise NotImplementedError

    def describe(self) -> str:
        """The formula and the sample, the same on every machine (no live values)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Exact(Tolerance):
    """Round-off only: one unit in the last printed digit of either number."""

    def allowed(self, committed: float, percent: bool) -> float:
        return 0.0

    def describe(self) -> str:
        return "round-off only"


EXACT = Exact()


def _smoothed(p: float, n: int) -> float:
    # a share of 0 or 1 still has a sampling error: (k + 1) / (n + 2), the rule of succession
    return (min(max(p, 0.0), 1.0) * n + 1.0) / (n + 2.0)


@dataclass(frozen=True)
class Share(Tolerance):
    """A proportion of ``n`` units (``what``): ``Z sqrt(2) sqrt(p (1 - p) / n)``, ``p`` smoothed.

    Printed as a fraction (``0.286``) or in percent (``11.0%``, read from the ``%`` after it).
    """

    n: int
    what: str

    def __post_init__(self) -> None:
        check_range(f"n of Share({self.what!r})", self.n, 1, None, integer=True)

    def allowed(self, committed: float, percent: bool) -> float:
        scale = 100.0 if percent else 1.0
        p = _smoothed(abs(committed) / scale, self.n)
        return scale * _SPREAD * math.sqrt(p * (1 - p) / self.n)

    def describe(self) -> str:
        return f"binomial s.e. of a share of {self.n} {self.what}"


@dataclass(frozen=True)
class Count(Tolerance):
    """A count of units out of ``n`` (``what``): ``Z sqrt(2) sqrt(n p (1 - p))``, ``p = count / n`` smoothed."""

    n: int
    what: str

    def __post_init__(self) -> None:
        check_range(f"n of Count({self.what!r})", self.n, 1, None, integer=True)

    def allowed(self, committed: float, percent: bool) -> float:
        p = _smoothed(abs(committed) / self.n, self.n)
        return _SPREAD * math.sqrt(self.n * p * (1 - p))

    def describe(self) -> str:
        return f"binomial s.e. of a count out of {self.n} {self.what}"


@dataclass(frozen=True)
class StdErr(Tolerance):
    """A standard error ``se`` computed by the cell from the number's own sample (``what``).

    Build it with :meth:`of_mean` (sd / sqrt(n)) or :meth:`bootstrap` (the s.d. of a seeded
    bootstrap of any statistic), or pass an s.e. that the analysis already has.
    """

    se: float
    what: str
    percent_points: bool = False
    """Whether ``se`` is in percentage points (a share printed in percent)."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.se) and self.se >= 0):
            raise ValueError(f"se of StdErr({self.what!r}) must be finite and >= 0, got {self.se}")

    @classmethod
    def of_mean(cls, values: Sequence[float] | np.ndarray, what: str, *, scale: float = 1.0) -> StdErr:
        """The s.e. of the mean of ``values`` [n], sd / sqrt(n), times ``scale`` (100 for percent)."""
        x = np.asarray(values, dtype=np.float64).ravel()
        x = x[np.isfinite(x)]
        if x.size < 2:
            raise ValueError(f"values of StdErr.of_mean({what!r}): need at least 2 finite values, got {x.size}")
        return cls(scale * float(x.std(ddof=1)) / math.sqrt(x.size), f"the mean of {x.size} {what}")

    @classmethod
    def bootstrap(cls, values: Sequence[float] | np.ndarray, stat: Any = np.median, what: str = "values", *,
                  n_boot: int = 1000, seed: int = 0) -> StdErr:
        """The s.d. of ``stat`` over ``n_boot`` seeded resamples of ``values`` [n] (NaN-free draws only)."""
        x = np.asarray(values, dtype=np.float64).ravel()
        if x.size < 2:
            raise ValueError(f"values of StdErr.bootstrap({what!r}): need at least 2 values, got {x.size}")
        reps = bootstrap_replicates(x, stat, n_boot, seed)
        reps = reps[np.isfinite(reps)]
        se = float(reps.std(ddof=1)) if reps.size >= 2 else 0.0
        return cls(se, f"a bootstrap over {x.size} {what}")

    def allowed(self, committed: float, percent: bool) -> float:
        return _SPREAD * self.se

    def describe(self) -> str:
        return f"s.e. of {self.what}"


@dataclass(frozen=True)
class RelStdErr(Tolerance):
    """The s.e. of ``log x`` for a positive number ``x`` (a perplexity, a ratio): allowed
    ``|x| (exp(Z sqrt(2) se_log) - 1)``. :meth:`of_log_mean` builds it for ``exp(mean(values))``."""

    se_log: float
    what: str

    def __post_init__(self) -> None:
        if not (math.isfinite(self.se_log) and self.se_log >= 0):
            raise ValueError(f"se_log of RelStdErr({self.what!r}) must be finite and >= 0, got {self.se_log}")

    @classmethod
    def of_log_mean(cls, values: Sequence[float] | np.ndarray, what: str) -> RelStdErr:
        """For ``exp(mean(values))`` (a perplexity from per-unit NLLs [n]): se_log = sd / sqrt(n)."""
        e = StdErr.of_mean(values, what)
        return cls(e.se, e.what)

    @classmethod
    def of_counts(cls, counts: Sequence[float] | np.ndarray, what: str) -> RelStdErr:
        """For a ratio of Poisson counts [k] (flipped tokens of two kinds, say): se_log = sqrt(sum 1 / k),
        each count floored at one (a share's count of zero still has a sampling error)."""
        k = np.maximum(np.asarray(counts, dtype=np.float64).ravel(), 1.0)
        if k.size < 1 or not np.isfinite(k).all():
            raise ValueError(f"counts of RelStdErr.of_counts({what!r}) must be finite, at least one, got {counts!r}")
        return cls(float(np.sqrt((1.0 / k).sum())), what)

    def allowed(self, committed: float, percent: bool) -> float:
        return abs(committed) * math.expm1(_SPREAD * self.se_log)

    def describe(self) -> str:
        return f"s.e. of the log of {self.what}"


@dataclass(frozen=True)
class Difference:
    """One number outside its tolerance: where it stands, both values and the tolerance."""

    index: int
    committed: str
    live: str
    tolerance: float

    def __str__(self) -> str:
        return f"number {self.index + 1}: committed {self.committed}, live {self.live} (tolerance {self.tolerance:.3g})"


Rule = tuple[str, Tolerance]
"""``(regex, tolerance)``: every number inside a match of ``regex`` over the committed text (inside
its first group, when it has one) gets ``tolerance``; the first rule that covers a number wins."""


def _bare(part: str) -> str:
    return part.replace("%", "").strip()


def interval_spreads(nums: list[str], skeleton: list[str]) -> dict[int, float]:
    """Tolerances that a printed interval gives its own numbers: index -> tolerance.

    For ``x [lo, hi]`` (a point and its 95% interval, percentages too) a rerun's point may land
    anywhere the committed interval allows, ``max(x - lo, hi - x)``, and each bound may move by
    the interval's width ``hi - lo``: that is the sampling error the chapter itself reports.
    """
    out: dict[int, float] = {}
    for k in range(len(nums) - 2):
        if (_bare(skeleton[k + 1]) == "[" and _bare(skeleton[k + 2]) == ","
                and skeleton[k + 3].lstrip("%").startswith("]")):
            x, lo, hi = (value(t) for t in nums[k:k + 3])
            if not all(map(math.isfinite, (x, lo, hi))):
                continue
            out[k] = max(out.get(k, 0.0), abs(x - lo), abs(hi - x))
            out[k + 1] = out[k + 2] = abs(hi - lo)
    return out


def _check_rules(rules: Sequence[Rule], default: Tolerance) -> None:
    if not isinstance(default, Tolerance):
        raise TypeError(f"default must be a tokendyn.publish.checked.Tolerance (Share, Count, StdErr, RelStdErr, "
                        f"EXACT), got {default!r}")
    for rule in rules:
        if not (isinstance(rule, tuple) and len(rule) == 2 and isinstance(rule[0], str)
                and isinstance(rule[1], Tolerance)):
            raise TypeError(f"rules: each rule is (regex, Tolerance), got {rule!r}")
        try:
            re.compile(rule[0])
        except re.error as e:
            raise ValueError(f"rules: {rule[0]!r} is not a regex: {e}") from None


def tolerances(committed: str, *, default: Tolerance = EXACT, rules: Sequence[Rule] = ()) -> list[Tolerance]:
    """The :class:`Tolerance` of each number of ``committed``, in order (:data:`Rule`)."""
    _check_rules(rules, default)
    nums, _, starts = _tokens(committed)
    out: list[Tolerance | None] = [None] * len(nums)
    for pattern, tol in rules:
        for m in re.finditer(pattern, committed, re.M):
            lo, hi = m.span(1) if m.groups() else m.span()
            for k, s in enumerate(starts):
                if out[k] is None and lo <= s < hi:
                    out[k] = tol
    return [t if t is not None else default for t in out]


def compare(committed: str, live: str, *, default: Tolerance = EXACT,
            rules: Sequence[Rule] = ()) -> list[Difference] | None:
    """The numbers of ``live`` that differ from ``committed``'s beyond the tolerance.

    Number ``k`` may differ by what its :class:`Tolerance` allows (``rules``, else ``default``),
    or what the committed interval around it allows (:func:`interval_spreads`), whichever is
    larger, plus one unit in the last printed digit of each. Returns None when the words between
    the numbers differ (another verdict, another line, another count of numbers): then no
    number-by-number comparison means anything.
    """
    tols = tolerances(committed, default=default, rules=rules)
    cn, cs = numbers(committed)
    ln, ls = numbers(live)
    if cs != ls:
        return None
    spread = interval_spreads(cn, cs)
    out = []
    for k, (c, x) in enumerate(zip(cn, ln)):
        cv, xv = value(c), value(x)
        percent = cs[k + 1].startswith("%")
        tol = max(tols[k].allowed(cv, percent), spread.get(k, 0.0)) + last_digit(c) + last_digit(x)
        if not (abs(cv - xv) <= tol or (math.isnan(cv) and math.isnan(xv))):
            out.append(Difference(k, c, x, tol))
    return out


def _mode() -> str:
    mode = os.environ.get("TOKENDYN_CHECKS", "compare").strip() or "compare"
    if mode not in ("compare", "record"):
        raise ValueError(f"TOKENDYN_CHECKS={mode!r} is not allowed: choose 'compare' or 'record'")
    return mode


_KEY = re.compile(r"\.agree\(\s*[\"']([^\"']+)[\"']")


def committed_outputs(notebook: str | Path) -> dict[str, str]:
    """The committed text of every :meth:`Checks.agree` block in ``notebook``: key -> text.

    A block's text is the stdout printed before the :data:`MIME` output that closes it (or, in a
    notebook of the older form, before its ``(checked: ...)`` footer line).
    """
    nb = json.loads(Path(notebook).read_text())
    out: dict[str, str] = {}
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        keys = _KEY.findall("".join(cell.get("source", "")))
        if not keys:
            continue
        blocks, cur = [], []
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream" and o.get("name") == "stdout":
                for line in "".join(o.get("text", "")).splitlines(keepends=True):
                    if line.startswith(FOOTER):
                        blocks.append("".join(cur))
                        cur = []
                    else:
                        cur.append(line)
            elif MIME in o.get("data", {}):
                blocks.append("".join(cur))
                cur = []
        for key, block in zip(keys, blocks):
            if key in out:
                raise ValueError(f"{notebook}: the check key {key!r} is used twice")
            out[key] = block
    return out


@dataclass
class Outcome:
    """What one checked block found: the differences (None: its words differ) and its tolerances."""

    differences: list[Difference] | None
    numbers: int
    tolerance: str
    notes: dict[str, Any] = field(default_factory=dict)


def _display(key: str, outcome: Outcome) -> None:
    meta = {"numbers": outcome.numbers, "tolerance": outcome.tolerance,
            "agree": outcome.differences == [],
            "differences": [str(d) for d in outcome.differences or []]}
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and type(shell).__name__ == "ZMQInteractiveShell":  # a kernel, not a terminal
        display({MIME: {"check": key}}, metadata={MIME: meta}, raw=True)


class Checks:
    """A chapter's checked outputs, compared with the committed ones under their samples' tolerances.

    ``Checks("03_phase_transition")`` reads the committed outputs from ``book/<chapter>.ipynb`` in
    the checkout; ``reference`` (key -> text) replaces them (tests, or a notebook elsewhere).
    """

    def __init__(self, chapter: str, *, reference: dict[str, str] | None = None,
                 notebook: str | Path | None = None) -> None:
        self.chapter = chapter
        self.mode = _mode()
        if reference is not None:
            self.reference = dict(reference)
        else:
            from ..core.paths import repo_root

            path = Path(notebook) if notebook is not None else (
                (repo_root() or Path.cwd()) / "book" / f"{chapter}.ipynb")
            self.reference = committed_outputs(path) if path.is_file() else {}
        self.results: dict[str, list[Difference] | None] = {}
        self.outcomes: dict[str, Outcome] = {}

    @contextlib.contextmanager
    def agree(self, key: str, *, default: Tolerance = EXACT, rules: Sequence[Rule] = (),
              **legacy: Any) -> Iterator[None]:
        """Print what the block prints, checked against the committed text (module docstring, rule 2).

        ``rules`` attach a :class:`Tolerance` from each number's own sample to the numbers they
        match; the others get ``default`` (round-off only unless the cell says otherwise).
        Nothing about the check is printed when the numbers agree: the outcome goes into the
        metadata of a :data:`MIME` output. When they differ, the live text and a ``DIFFER`` line
        are printed.
        """
        if legacy:
            raise TypeError(f"agree({key!r}): {sorted(legacy)} are not allowed: a tolerance comes from the "
                            f"number's own sample (default=/rules= with Share, Count, StdErr, RelStdErr)")
        _check_rules(rules, default)  # bad tolerances fail before the block runs
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            yield
        live = buf.getvalue()
        if live and not live.endswith("\n"):
            live += "\n"
        committed = self.reference.get(key)
        basis = committed if committed is not None else live
        tols = tolerances(basis, default=default, rules=rules)
        described = "; ".join(sorted({t.describe() for t in tols})) or "no numbers"
        tol_text = (f"one unit in the last digit, plus each interval's own width, plus {Z:g} sqrt(2) "
                    f"s.e. where a sample is named: {described}")
        diffs: list[Difference] | None = []
        if self.mode == "record" or committed is None:
            shown = live
        else:
            diffs = compare(committed, live, default=default, rules=rules)
            shown = committed if diffs == [] else live
        self.results[key] = diffs
        outcome = Outcome(diffs, len(numbers(shown)[0]), tol_text,
                          {"committed": committed is not None, "mode": self.mode})
        self.outcomes[key] = outcome
        print(shown, end="")
        if diffs != []:
            print(f"{FOOTER} DIFFER from the committed run: " + ("; ".join(map(str, diffs[:4])) if diffs else
                  "its words or lines differ") + f"; tolerance {tol_text})")
        elif committed is None and self.mode == "compare":
            print(f"{FOOTER} no committed run to compare with)")
        _display(key, outcome)
