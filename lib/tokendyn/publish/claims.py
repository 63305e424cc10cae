"""The papers' claims, and the book's verdict on each.

:data:`CLAIMS` numbers the sixteen claims of the two papers once, for every chapter and the
scoreboard. A chapter measures some of them and states a :class:`Finding` for each: our number
with its interval, what it rests on, and a verdict that a tested rule of :mod:`tokendyn.publish.verdicts`
computed from that number (a chapter never types one). The findings go into the chapter's results
JSON (:func:`tokendyn.publish.results.save`), the chapter's "claims at a glance" table (:func:`table`) and
the book's scoreboard (:func:`scoreboard`), each with the rule's name linked to its docstring on
the book's "Verdict rules" page; each scoreboard row also links to the section of the chapter page
that holds the claim's evidence (:func:`evidence_link`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..core.atomic import read_record
from ..core.stats import Estimate
from .verdicts import WORDS, Verdict

VERDICTS = WORDS
RULES_PAGE = "appendix_rules.html"
CLAIMS_AT_A_GLANCE = "claims-at-a-glance"
"""The id of the section that opens every chapter page with its claims table."""


@dataclass(frozen=True)
class Claim:
    """One claim of a paper: its number, the paper (1 or 2), the chapter that tests it, the claim,
    the paper's value, and ``evidence``: the id of the section of the chapter's page that measures
    it (the id Sphinx makes from the section's heading), which the scoreboard links to."""

    id: int
    paper: int
    chapter: str
    text: str
    paper_value: str
    evidence: str


CLAIMS: dict[int, Claim] = {c.id: c for c in (
    Claim(1, 1, "02_rectangle_test", "MLM conditionals are incompatible: mean rectangle delta (BERT, RoBERTa, ModernBERT)",
          "delta in [0.64, 0.80]", "the-masked-lms"),
    Claim(2, 1, "02_rectangle_test", "An autoregressive LM's conditionals are compatible (GPT-2)", "delta = 0",
          "controls"),
    Claim(3, 1, "02_rectangle_test_size", "Incompatibility persists across model size", "persists",
          "delta-against-size-a-ladder-of-two-backbones"),
    Claim(4, 1, "03_phase_transition_crossover", "High temperature mixes fast: times scale as C(tau) n log n",
          "O(n log n) for tau >~ 1", "the-shape-of-the-law-over-four-lengths"),
    Claim(5, 1, "03_phase_transition_crossover", "Slow-to-fast crossover temperature, rising with n", "tau* ~ 1.5-2",
          "tau-against-the-mixing-threshold"),
    Claim(6, 1, "04_basins", "Low temperature: metastable traps hold chains for thousands of steps",
          "1000s of steps", "perfect-traps-and-the-exp-1-tau-law"),
    Claim(7, 1, "04_basins_census", "Semantic basins: perfect and approximate traps, repetition basins", "observed",
          "a-trap-census"),
    Claim(8, 1, "04_basins_attractor", "Political content is a recurrent attractor", "observed", "the-political-attractor"),
    Claim(9, 2, "05_tube_law", "Tube law: terminal flip rate linear in s, one curve across K", "one curve, linear",
          "oracle-roll-in-on-text-flip-rate-against-s"),
    Claim(10, 2, "05_tube_law", "Structured residual flips far more tokens than isotropic of the same norm",
          "10-33x", "the-terminal-step-on-held-out-windows-both-text-models"),
    Claim(11, 2, "05_tube_law", "Terminal flip rate of the oracle roll-in, K = 4, 8, 16", "12-41%",
          "the-terminal-step-on-held-out-windows-both-text-models"),
    Claim(12, 2, "06_dabi_cci", "DABI: image decoders ~1, text decoders far above", "~1 vs 5e2 to >1e5",
          "dabi-of-the-text-decoders"),
    Claim(13, 2, "07_escapes", "Removing hard commitment collapses AR / masked-diffusion generation",
          "collapse, repetition", "the-commitment-ablation"),
    Claim(14, 2, "07_escapes", "Stochastic re-injection: SDE beats the deterministic ODE at K = 4",
          "PPL 294 (ODE) vs 50 (SDE)", "stochastic-re-injection-the-ode-against-the-sde-on-one-checkpoint"),
    Claim(15, 2, "07_escapes_decoders", "Decoder interventions (smoothing, max-margin, MLP readout) do not recover flips",
          "no recovery", "decoder-interventions-do-not-recover-flipped-tokens"),
    Claim(16, 2, "06_dabi_cci", "CCI: continuous flow 0, autoregressive and masked diffusion 1", "0 vs 1",
          "cci-each-sampler-s-own-trajectory"),
)}


@dataclass(frozen=True)
class Finding:
    """What a chapter measured on one claim.

    ``claim`` is a number from :data:`CLAIMS`, or the text of a check local to the chapter (with
    ``paper_value`` then saying what is expected). ``ours`` is the number with its interval,
    ``basis`` what it rests on (models, sample sizes), ``verdict`` one of :data:`VERDICTS`, and
    ``rule`` / ``reason`` the :mod:`tokendyn.publish.verdicts` rule that gave it and the comparison it made.
    ``headline`` (optional) is the one number per model that the book's tables show at a glance;
    ``ours`` in full, the basis and the rule's reason then fold into the row's details.
    """

    claim: int | str
    ours: str
    verdict: str
    basis: str = ""
    paper_value: str = ""
    chapter: str = ""
    rule: str = ""
    reason: str = ""
    headline: str = ""

    @property
    def text(self) -> str:
        return CLAIMS[self.claim].text if isinstance(self.claim, int) else self.claim

    @property
    def paper(self) -> str:
        return self.paper_value or (CLAIMS[self.claim].paper_value if isinstance(self.claim, int) else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def finding(claim: int | str, ours: str | Estimate, verdict: Verdict, *, basis: str = "",
            paper_value: str = "", chapter: str = "", headline: str | Estimate = "") -> Finding:
    """Check and build a :class:`Finding` (an :class:`Estimate` is formatted with its interval).

    ``verdict`` is what a rule of :mod:`tokendyn.publish.verdicts` returned; a typed word is refused.
    ``headline``: the number per model the tables show when ``ours`` holds more than that.
    """
    if isinstance(claim, int) and claim not in CLAIMS:
        raise ValueError(f"claim={claim} is not a claim number: allowed 1..{len(CLAIMS)}")
    if not isinstance(claim, (int, str)) or isinstance(claim, bool):
        raise TypeError(f"claim must be a claim number or a text, got {claim!r}")
    if not isinstance(verdict, Verdict):
        raise TypeError(f"verdict must be a tokendyn.publish.verdicts.Verdict from a rule, got {verdict!r}: "
                        "a chapter never types a verdict")
    text = ours.fmt() if isinstance(ours, Estimate) else str(ours)
    head = headline.fmt() if isinstance(headline, Estimate) else str(headline)
    return Finding(claim, text, verdict.verdict, basis, paper_value, chapter, verdict.rule, verdict.reason, head)


class Table:
    """A claims table that shows as HTML in the book and as aligned text in a checked output.

    The HTML holds one headline per row (the finding's ``headline``, else ``ours``) with the rest
    (``ours`` in full, what it rests on, the rule's comparison) folded into a details element, and
    shows ASCII maths in Unicode (:func:`tokendyn.publish.plotting.pretty`); the text form is unchanged.
    """

    columns = ("#", "claim", "paper", "ours [95% interval]", "verdict", "rule")

    def __init__(self, rows: list[dict[str, str]]) -> None:
        self.rows = rows

    def __repr__(self) -> str:
        lines = []
        for r in self.rows:
            rule = f" (rule {r['rule']}: {r['reason']})" if r.get("rule") else ""
            lines.append(f"[{r['id']}] {r['text']}\n    paper: {r['paper']} | ours: {r['ours']}"
                         f"{' (' + r['basis'] + ')' if r['basis'] else ''} | {r['verdict']}{rule}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return self.html()

    def html(self, evidence_labels: Mapping[str, str] | None = None) -> str:
        """The table as HTML. A row with an ``evidence`` link (the scoreboard's rows,
        :func:`scoreboard_from`) shows it under the claim, named by ``evidence_labels[link]`` (the
        book's build names each by its chapter and section) or else by the link itself."""
        from .plotting import pretty

        labels = evidence_labels or {}

        def esc(v: str) -> str:
            return html.escape(pretty(v))

        def claim_cell(r: dict[str, str]) -> str:
            link = r.get("evidence", "")
            if not link:
                return f"<td>{esc(r['text'])}</td>"
            return (f'<td>{esc(r["text"])}<a class="tokendyn-evidence" href="{html.escape(link)}">'
                    f"evidence: {html.escape(labels.get(link, link))}</a></td>")

        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = []
        for r in self.rows:
            cls = "tokendyn-verdict-" + r["verdict"].replace(" ", "-")
            headline = r.get("headline") or r["ours"]
            more = []
            if headline != r["ours"]:
                more.append(f"<p><strong>All numbers:</strong> {esc(r['ours'])}</p>")
            if r["basis"]:
                more.append(f"<p><strong>Rests on:</strong> {esc(r['basis'])}</p>")
            if r.get("reason"):
                more.append(f"<p><strong>Rule:</strong> {esc(r['reason'])}</p>")
            details = (f'<details class="tokendyn-details"><summary>details</summary>{"".join(more)}</details>'
                       if more else "")
            rule = r.get("rule", "")
            cells = [f"<td>{html.escape(r['id'])}</td>", claim_cell(r), f"<td>{esc(r['paper'])}</td>",
                     f'<td><span class="tokendyn-headline">{esc(headline)}</span>{details}</td>',
                     f'<td class="{cls}"><strong>{html.escape(r["verdict"])}</strong></td>',
                     f'<td><a href="{RULES_PAGE}#rule-{html.escape(rule)}" title="{html.escape(r.get("reason", ""))}">'
                     f"<code>{html.escape(rule)}</code></a></td>" if rule else "<td></td>"]
            body.append(f'<tr data-chapter="{html.escape(r.get("chapter", ""))}">' + "".join(cells) + "</tr>")
        return (f'<table class="tokendyn-claims"><thead><tr>{head}</tr></thead>'
                f'<tbody>{"".join(body)}</tbody></table>')


_NUM = r"(-?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?)"
_INTERVAL = re.compile(_NUM + r"(%?)\s*\[" + _NUM + r"%?,\s*" + _NUM + r"%?\]")
_RANGE = re.compile(r"\[" + _NUM + r"(%?),\s*" + _NUM + r"%?\]|" + _NUM + r"\s*-\s*" + _NUM + r"(%?)")


def intervals_in(text: str) -> list[tuple[str, float, float, float]]:
    """Every ``value [lo, hi]`` in a claims row's text, with the label before it (the text since the
    previous ``;``, up to the number): ``[(label, value, lo, hi)]``. Percentages become fractions."""
    out, start = [], 0
    for m in _INTERVAL.finditer(text):
        cut = max(text.rfind(";", start, m.start()), text.rfind(", ", start, m.start()))
        label = text[(cut + 1 if cut >= 0 else start):m.start()].strip(" ,").rstrip(":=").strip()
        scale = 0.01 if m.group(2) == "%" else 1.0
        v, lo, hi = (float(g.replace(",", "")) * scale for g in (m.group(1), m.group(3), m.group(4)))
        out.append((label, v, lo, hi))
        start = m.end()
    return out


def paper_range(text: str) -> tuple[float, float] | None:
    """The range a paper value states, as ``[lo, hi]`` or ``lo-hi`` (``12-41%`` as fractions), or
    None when it states none (``persists``, ``PPL 294 (ODE) vs 50 (SDE)``)."""
    m = _RANGE.search(text)
    if not m:
        return None
    lo, pct, hi = (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(4), m.group(6), m.group(5))
    scale = 0.01 if pct == "%" else 1.0
    return float(lo.replace(",", "")) * scale, float(hi.replace(",", "")) * scale


def scoreboard_points(table: Table) -> list[dict[str, Any]]:
    """The scoreboard figure's data: every claims row of ``table`` (:func:`scoreboard_from`), so
    every claim shows, each entry with the same keys.

    Where the row's paper value is a positive range (:func:`paper_range`) and its ``ours`` holds
    positive numbers with intervals (:func:`intervals_in`), each number is one entry with
    ``compared`` true: ``label``, ``value``, ``lo``, ``hi``, the range (``paper_lo``, ``paper_hi``),
    and each divided by the range's geometric middle (``ratio``, ``ratio_lo``, ``ratio_hi``,
    ``band_lo``, ``band_hi``: one log axis for every claim, 1 the paper's middle). Any other row is
    one entry with ``compared`` false and the numbers None. Every entry has ``claim`` ("<id>. <text>",
    with the chapter when a claim has rows from several), ``order``, ``verdict``, ``paper`` and
    ``evidence``."""
    rows = [r for r in table.rows if r["id"].isdigit()]
    per_claim = {r["id"]: sum(o["id"] == r["id"] for o in rows) for r in rows}
    numbers = ("label", "value", "lo", "hi", "paper_lo", "paper_hi", "ratio", "ratio_lo", "ratio_hi", "band_lo",
               "band_hi")
    pts = []
    for r in rows:
        claim = f"{r['id']}. {r['text']}" + (f" ({r['chapter']})" if per_claim[r["id"]] > 1 else "")
        common = {"claim": claim, "order": int(r["id"]), "verdict": r["verdict"], "paper": r["paper"],
                  "evidence": r.get("evidence", "")}
        paper = paper_range(r["paper"])
        ours = [(label, v, lo, hi) for label, v, lo, hi in intervals_in(r["ours"]) if lo > 0] \
            if paper and paper[0] > 0 else []
        if not ours:
            pts.append({**common, "compared": False, **dict.fromkeys(numbers)})
            continue
        lo_p, hi_p = paper
        middle = (lo_p * hi_p) ** 0.5
        for label, v, lo, hi in ours:
            pts.append({**common, "compared": True, "label": label or r["chapter"], "value": v, "lo": lo, "hi": hi,
                        "paper_lo": lo_p, "paper_hi": hi_p, "ratio": v / middle, "ratio_lo": lo / middle,
                        "ratio_hi": hi / middle, "band_lo": lo_p / middle, "band_hi": hi_p / middle})
    return pts


def _row(f: Finding | dict[str, Any]) -> dict[str, str]:
    d = f.to_dict() if isinstance(f, Finding) else dict(f)
    claim = d["claim"]
    known = CLAIMS.get(claim) if isinstance(claim, int) else None
    return {"id": str(claim) if known else "-", "text": known.text if known else str(claim),
            "paper": d.get("paper_value") or (known.paper_value if known else ""),
            "ours": d["ours"], "basis": d.get("basis", ""), "verdict": d["verdict"],
            "chapter": d.get("chapter", ""), "rule": d.get("rule", ""), "reason": d.get("reason", ""),
            "headline": d.get("headline", "")}


def table(findings: list[Finding]) -> Table:
    """A chapter's "claims at a glance", in the order given."""
    return Table([_row(f) for f in findings])


def split(findings: list[Finding], unchecked: Collection[int | str]) -> tuple[list[Finding], list[Finding]]:
    """``findings`` as ``(checked, unchecked)``, each in the order given: a finding is unchecked when
    its ``claim`` (a number, or a chapter-local text) is in ``unchecked``. A chapter prints the
    unchecked rows outside its checked cell when they rest on too small a sample
    (:mod:`tokendyn.publish.checked`, rule 3); an entry of ``unchecked`` that matches no finding is an error."""
    missing = [c for c in unchecked if all(f.claim != c for f in findings)]
    if missing:
        raise ValueError(f"unchecked={missing!r}: no finding has that claim")
    return [f for f in findings if f.claim not in unchecked], [f for f in findings if f.claim in unchecked]


def records_in(results_dir: str | Path) -> list[dict[str, Any]]:
    """Every chapter's results record in ``results_dir`` (``<chapter>.json``), in file order, each
    with its ``chapter`` (the file's stem when it holds none). A damaged record raises
    :class:`~tokendyn.core.atomic.RecordError` naming it: the scoreboard never drops a chapter's claims
    silently."""
    records = []
    for path in sorted(Path(results_dir).glob("*.json")):
        record = read_record(path, keys=("claims",), remake=f"re-execute the chapter book/{path.stem}.ipynb "
                             "(it writes this record), or delete the file to leave its claims unmeasured")
        record.setdefault("chapter", path.stem)
        records.append(record)
    return records


def evidence_link(claim: int, chapter: str) -> str:
    """Where the book shows the evidence for ``claim`` measured by ``chapter``, relative to a page
    beside the chapters: the section of :attr:`Claim.evidence` on the claim's own chapter page, or
    the claims table at the top (:data:`CLAIMS_AT_A_GLANCE`) of another chapter that measured it."""
    c = CLAIMS[claim]
    return f"{chapter}.html#{c.evidence if chapter == c.chapter else CLAIMS_AT_A_GLANCE}"


def scoreboard(results_dir: str | Path) -> Table:
    """All sixteen claims, each with every finding that a chapter's results JSON in ``results_dir``
    records (:func:`records_in`)."""
    return scoreboard_from(records_in(results_dir))


def scoreboard_from(records: list[dict[str, Any]]) -> Table:
    """All sixteen claims, each with every finding that one of ``records`` (results records, as
    :func:`tokendyn.publish.results.save` writes them) holds for it.

    A claim that no record measures shows as "not yet measured", with the chapter that will. Every
    row has an ``evidence`` link (:func:`evidence_link`).
    """
    found: dict[int, list[dict[str, str]]] = {}
    for record in records:
        for f in record.get("claims", []):
            if isinstance(f.get("claim"), int) and f["claim"] in CLAIMS:
                row = _row(f)
                row["chapter"] = record.get("chapter", "")
                row["evidence"] = evidence_link(f["claim"], row["chapter"])
                found.setdefault(f["claim"], []).append(row)
    rows = []
    for cid, c in CLAIMS.items():
        for row in found.get(cid, []):
            row = dict(row)
            row["basis"] = f"{row['chapter']}: {row['basis']}" if row["basis"] else row["chapter"]
            rows.append(row)
        if cid not in found:
            rows.append({"id": str(cid), "text": c.text, "paper": c.paper_value, "ours": "-",
                         "basis": f"no results from {c.chapter}", "verdict": "not yet measured",
                         "chapter": c.chapter, "rule": "", "reason": "", "headline": "",
                         "evidence": evidence_link(cid, c.chapter)})
    return Table(rows)
