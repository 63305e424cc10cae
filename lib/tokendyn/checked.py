"""What a checked output may print, and the one helper that keeps a checked cell the same on every CPU.

nbval compares a chapter's ``# NBVAL_CHECK_OUTPUT`` cells with their committed outputs as text.
A seeded chain is bit-reproducible on one machine, but float32 logits depend on the order in which
the CPU's vector kernels add (AVX-512 and AVX2 machines of one kind differ; so do
``ATEN_CPU_CAPABILITY=default`` and ``ONEDNN_MAX_CPU_ISA=AVX2`` on one machine). Once in about a
million draws a uniform lands between two machines' CDF values and that chain takes another path.
Hence the rule (also in the README's section for contributors):

1. **Exact results may be printed as they are**: exact toys in float64, identities and bounds
   (:func:`tokendyn.book.below` prints round-off as ``< 1e-12``), counts that no draw or float32
   sum can change, parameters, and verdicts that sit far from their thresholds. In float64 a
   path change needs a uniform within about 1e-16 of a CDF value, which a chapter's draws never
   come near.
2. **Every number that float32 arithmetic or a seeded run on a float32 model makes** is printed
   inside :meth:`Checks.agree`. It compares each number with the committed output's number in
   the same place under a stated tolerance: one unit in the last printed digit (float32 round-off
   moving a rounding boundary), plus ``rtol``/``atol`` where the cell justifies them from its own
   sampling error (``why``); a number printed with its 95% interval, ``x [lo, hi]``, may move as
   far as that interval says a rerun's would. Inside the tolerance it prints the committed text, so nbval passes on
   any machine; outside it, it prints the live text and the numbers that differ, so nbval fails.
   The words between the numbers (verdicts, True/False, inside/outside) must match exactly.
3. **A verdict in a checked output must not flip from one machine to the next.** Where one sits on
   its threshold, the chapter says so in its text; a tolerance never hides it.

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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .checks import check_range

# A number that stands alone: not the digit of a word such as "minilm-depth2" or "x_0"; a sign only
# after a space or an opening bracket (so "3.8-4.3" is two numbers); thousands commas; an exponent.
_DIGITS = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?|\.\d+"
_NUMBER = re.compile(rf"(?:(?:^|(?<=[\s(\[=:,/]))[-+\u2212])?(?<![\w.])(?:{_DIGITS})", re.M)
FOOTER = "(checked:"


def numbers(text: str) -> tuple[list[str], list[str]]:
    """Split ``text`` into its number tokens and the words between them: ``(numbers, skeleton)``.

    ``len(skeleton) == len(numbers) + 1``; joining them back, alternately, gives ``text``.
    """
    nums, parts, last = [], [], 0
    for m in _NUMBER.finditer(text):
        parts.append(text[last:m.start()])
        nums.append(m.group(0))
        last = m.end()
    parts.append(text[last:])
    return nums, parts


def value(token: str) -> float:
    """A number token as a float (``'880,092'`` -> 880092.0, ``'−0.5'`` -> -0.5)."""
    return float(token.replace(",", "").replace("−", "-"))


def last_digit(token: str) -> float:
    """One unit in the last printed digit of ``token`` (``'0.156'`` -> 0.001, ``'4.2e+02'`` -> 10)."""
    t = token.replace(",", "").lstrip("+-−")
    mant, _, exp = t.partition("e")
    decimals = len(mant.partition(".")[2])
    return 10.0 ** (int(exp or 0) - decimals)


@dataclass(frozen=True)
class Difference:
    """One number outside its tolerance: where it stands, both values and the tolerance."""

    index: int
    committed: str
    live: str
    tolerance: float

    def __str__(self) -> str:
        return f"number {self.index + 1}: committed {self.committed}, live {self.live} (tolerance {self.tolerance:.3g})"


Rule = tuple[str, float, float]


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


def compare(committed: str, live: str, *, rtol: float = 0.0, atol: float = 0.0,
            rules: tuple[Rule, ...] = ()) -> list[Difference] | None:
    """The numbers of ``live`` that differ from ``committed``'s beyond the tolerance.

    Number ``k`` of ``live`` may differ from number ``k`` of ``committed`` by
    ``max(atol, rtol * |committed|)``, or what the committed interval around it allows
    (:func:`interval_spreads`), plus one unit in the last printed digit of each. A rule
    ``(pattern, rtol, atol)`` replaces the two for a number whose following words (up to the next
    number) match ``pattern`` (``("% of resamples", 0, 10)``: a share of resamples, in percent).
    Returns None when the words between the numbers differ (another verdict, another line,
    another count of numbers): then no number-by-number comparison means anything.
    """
    check_range("rtol", rtol, 0.0, None)
    check_range("atol", atol, 0.0, None)
    for pattern, r, a in rules:
        check_range(f"rtol of rule {pattern!r}", r, 0.0, None)
        check_range(f"atol of rule {pattern!r}", a, 0.0, None)
    cn, cs = numbers(committed)
    ln, ls = numbers(live)
    if cs != ls:
        return None
    spread = interval_spreads(cn, cs)
    out = []
    for k, (c, x) in enumerate(zip(cn, ln)):
        cv, xv = value(c), value(x)
        r, a = next(((r, a) for p, r, a in rules if re.match(p, cs[k + 1])), (rtol, atol))
        tol = max(a, r * abs(cv), spread.get(k, 0.0)) + last_digit(c) + last_digit(x)
        if not (abs(cv - xv) <= tol or (math.isnan(cv) and math.isnan(xv))):
            out.append(Difference(k, c, x, tol))
    return out


def _mode() -> str:
    mode = os.environ.get("TOKENDYN_CHECKS", "compare").strip() or "compare"
    if mode not in ("compare", "record"):
        raise ValueError(f"TOKENDYN_CHECKS={mode!r} is not allowed: choose 'compare' or 'record'")
    return mode


def committed_outputs(notebook: str | Path) -> dict[str, str]:
    """The committed text of every :meth:`Checks.agree` block in ``notebook``: key -> text (footer dropped)."""
    nb = json.loads(Path(notebook).read_text())
    key_re = re.compile(r"\.agree\(\s*[\"']([^\"']+)[\"']")
    out: dict[str, str] = {}
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        keys = key_re.findall("".join(cell.get("source", "")))
        if not keys:
            continue
        text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", [])
                       if o.get("output_type") == "stream" and o.get("name") == "stdout")
        # one cell may hold several blocks: each ends with its own footer line
        blocks, cur = [], []
        for line in text.splitlines(keepends=True):
            if line.startswith(FOOTER):
                blocks.append("".join(cur))
                cur = []
            else:
                cur.append(line)
        for key, block in zip(keys, blocks):
            if key in out:
                raise ValueError(f"{notebook}: the check key {key!r} is used twice")
            out[key] = block
    return out


class Checks:
    """A chapter's checked outputs, compared with the committed ones under stated tolerances.

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
            from .paths import repo_root

            path = Path(notebook) if notebook is not None else (
                (repo_root() or Path.cwd()) / "book" / f"{chapter}.ipynb")
            self.reference = committed_outputs(path) if path.is_file() else {}
        self.results: dict[str, list[Difference] | None] = {}

    @contextlib.contextmanager
    def agree(self, key: str, *, rtol: float = 0.0, atol: float = 0.0, rules: tuple[Rule, ...] = (),
              why: str = "float32 round-off") -> Iterator[None]:
        """Print what the block prints, checked against the committed text (module docstring, rule 2).

        Ends with one footer line that states the tolerance and ``why`` it is justified; that
        line is the same on every machine whenever the numbers agree.
        """
        compare("", "", rtol=rtol, atol=atol, rules=rules)  # bad tolerances fail before the block runs
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            yield
        live = buf.getvalue()
        if live and not live.endswith("\n"):
            live += "\n"
        tol = "one unit in the last digit" + (f", plus {rtol:.0%}" if rtol else "") + (
            f", plus {atol:g}" if atol else "") + "".join(
            f"; {r:.0%} + {a:g} before {p!r}" for p, r, a in rules)
        committed = self.reference.get(key)
        diffs: list[Difference] | None = []
        if self.mode == "record":  # prints what a comparison against this very run would print
            shown, state = live, "agree with the committed run"
        elif committed is None:
            shown, state = live, "have no committed run to compare with"
        else:
            diffs = compare(committed, live, rtol=rtol, atol=atol, rules=rules)
            if diffs == []:
                shown, state = committed, "agree with the committed run"
            else:
                shown = live
                state = ("DIFFER from the committed run: " + ("; ".join(map(str, diffs[:4])) if diffs else
                         "its words or lines differ") + " (expected when the parameters are not the CPU defaults)")
        self.results[key] = diffs
        print(shown, end="")
        print(f"{FOOTER} {len(numbers(shown)[0])} numbers {state}; tolerance {tol}: {why})")
