"""How a scoreboard reads: one frame of the records, and its HTML for the chapter's last cell and the report.

``claims_frame`` turns claim records (dicts with the fields of ``claims.Claim``)
into the table every page shows, with the columns of ``SCOREBOARD_COLUMNS``: the
kind, the claim in full, the published figure and its source, this model's
figure with its 95% interval and the quantity it is (from the claims registry),
the control, and the verdict. ``Scoreboard`` renders the paper's claims and the
book's findings as two HTML tables, the verdict first (a coloured word: red only
for a paper claim not reproduced; a finding of the book's that does not hold is a
result, shown in a neutral colour), and the checks as one line, and the same as
plain text. A table of more than ``GROUP_ABOVE`` rows is grouped by verdict, each
group a collapsible ``<details>`` ("reproduced (14)"): a group holding more than
half of the rows starts closed (its count says enough), the others, the
departures a reader looks for, start open.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import NamedTuple

import pandas as pd

from ..model.token_names import own_token_names
from .registry import Registry, load_registry

# re-exported where the report and the tests have always found them; documented in helpers.book.sections
from .sections import chapter_title as chapter_title
from .sections import claim_sections as claim_sections
from .verdicts import FINDING_VERDICTS, PAPER_VERDICTS

__all__ = [
    "SCOREBOARD_COLUMNS",
    "DEFAULT_SOURCE",
    "VERDICTS",
    "FINDING_VERDICTS",
    "GROUP_ABOVE",
    "claims_frame",
    "Scoreboard",
    "verdict_counts",
    "check_counts",
    "verdict_html",
    "departures_html",
]

DEFAULT_SOURCE = "Brunner et al. 2020"
SCOREBOARD_COLUMNS = (
    "id",
    "kind",
    "claim",
    "published",
    "source",
    "here",
    "quantity",
    "control",
    "verdict",
    "note",
    "section",
    "status",
)
KIND_TITLES = {
    "paper": "The paper's claims (and later work's)",
    "finding": "The book's findings",
    "check": "Checks",
}
VERDICT_CLASS = {
    "reproduced": "yes",
    "holds": "yes",
    "passes": "yes",
    "in direction only": "part",
    "inconclusive": "open",
    "not reproduced": "no",
    "does not hold": "no",
    "fails": "no",
    "premise absent": "none",
    "too few sequences": "none",
    "not testable here": "none",
}
GROUP_ABOVE = 8
"""A table of more rows than this is grouped by verdict; a shorter one stays flat."""
HEAD = ("verdict", "claim", "published (source)", "here (95% interval)", "control")


def verdict_class(kind: str, verdict: str) -> str:
    """The colour class of a verdict: a finding of the book's that does not hold is a result like any other
    ("neutral"), not a failure of the book; a paper claim not reproduced stays red ("no")."""
    return "neutral" if (kind, verdict) == ("finding", "does not hold") else VERDICT_CLASS.get(verdict, "none")


def registered_quantity(
    registry: Registry | None = None, special_tokens: dict[str, str] | None = None
) -> Callable[[str, str], str]:
    """(chapter, id) -> the quantity the registry names for that claim ("" where it names none), with
    BERT's special tokens written as ``special_tokens`` names them (a record's ``special_tokens``)."""
    registry = registry if registry is not None else load_registry()
    if not special_tokens:
        return registry.quantity
    return lambda chapter, id: own_token_names(registry.quantity(chapter, id), special_tokens)


def claims_frame(
    records: list[dict], chapter: str = "", quantity: Callable[[str, str], str] | None = None
) -> pd.DataFrame:
    """The claims table (``SCOREBOARD_COLUMNS``) of claim records (dicts with the fields of ``claims.Claim``).

    chapter: the chapter the records are of, where a record does not name its own (the report's do).
    quantity: (chapter, id) -> what the figure is; default the book's registry (:func:`registered_quantity`).
    """
    quantity = quantity or registered_quantity()
    rows = []
    for c in records:
        for key in ("kind", "verdict"):
            if key not in c:
                raise ValueError(
                    f"claim record {c.get('id')!r} has no {key}: it predates the three kinds; rerun its chapter"
                )
        rows.append(
            {
                "id": c["id"],
                "kind": c["kind"],
                "claim": c["claim"],
                "published": c.get("published", ""),
                "source": c.get("source") or (DEFAULT_SOURCE if c["kind"] == "paper" else ""),
                "here": c.get("measured", ""),
                "quantity": quantity(c.get("chapter") or chapter, c["id"]) if c["kind"] != "check" else "",
                "control": c.get("control", ""),
                "verdict": c["verdict"],
                "note": c.get("note", ""),
                "section": c.get("section", ""),
                "status": c.get("status", ""),
            }
        )
    return pd.DataFrame(rows, columns=list(SCOREBOARD_COLUMNS))


def verdict_groups(rows: pd.DataFrame, order: tuple[str, ...]) -> list[tuple[str, pd.DataFrame]]:
    """The rows by verdict, in the order of ``order`` (verdicts not in it last, by first appearance)."""
    seen = list(dict.fromkeys(rows["verdict"]))
    ranked = [v for v in order if v in seen] + [v for v in seen if v not in order]
    return [(verdict, rows[rows["verdict"] == verdict]) for verdict in ranked]


class Scoreboard:
    """A chapter's (or the report's) records for the page: paper claims and findings as tables, checks as one line.

    ``frame``: ``claims_frame`` output (a ``chapter`` column first is allowed: the report's).
    ``links``: optional {chapter: href}; the chapter cell then links to its page.
    ``record``: the chapter's JSON record, carried in the output's metadata so that a test
    can read the committed scoreboard of every chapter.
    """

    def __init__(
        self,
        frame: pd.DataFrame,
        links: dict[str, str] | None = None,
        show_notes: bool = True,
        record: dict | None = None,
    ):
        self.frame = frame
        self.links = links or {}
        self.show_notes = show_notes
        self.record = record

    @classmethod
    def of_record(cls, record: dict, registry: Registry | None = None) -> Scoreboard:
        """The scoreboard of a chapter's record (``Claims.record``), its quantities from ``registry`` (default
        the book's): what ``Claims.enforce`` returns, and what ``helpers.book.rerender`` rebuilds from the
        record a committed scoreboard carries."""
        quantity = registered_quantity(registry, record.get("special_tokens"))
        frame = claims_frame(record["claims"], record["chapter"], quantity)
        return cls(frame, record=record)

    def __len__(self) -> int:
        return len(self.frame)

    def checks_line(self) -> str:
        """ "All 6 checks pass." or "5 of 6 checks pass; fails: x."."""
        checks = self.frame[self.frame["kind"] == "check"]
        failed = checks[checks["verdict"] != "passes"]
        if len(checks) == 0:
            return "No checks."
        if len(failed) == 0:
            return f"All {len(checks)} checks pass." if len(checks) > 1 else "The one check passes."
        return f"{len(checks) - len(failed)} of {len(checks)} checks pass; failing: {', '.join(failed['id'])}."

    def __repr__(self) -> str:
        lines = []
        for kind in ("paper", "finding"):
            for row in self.frame[self.frame["kind"] == kind].to_dict("records"):
                where = f"[{row['chapter']}] " if "chapter" in row else ""
                here = f"here, {row['quantity']}" if row.get("quantity") and row["here"] else "here"
                lines.append(
                    f"{where}{row['id']} ({kind}): {row['verdict']}\n    {row['claim']}\n"
                    f"    {here}: {row['here'] or '-'}; control: {row['control'] or '-'}; "
                    f"published: {row['published'] or '-'} ({row['source']})"
                )
        lines.append(self.checks_line())
        return "\n".join(lines)

    def _repr_mimebundle_(self, include=None, exclude=None):
        data = {"text/plain": repr(self), "text/html": self._repr_html_()}
        return (data, {"application/vnd.book.claims+json": self.record}) if self.record else data

    def _claim_cell(self, row: dict, chapters: bool) -> str:
        """The id (linked to the section that tests it), the claim and its note."""
        claim = html.escape(row["claim"])
        label = html.escape(row["id"])
        if row.get("section"):  # the id links to the section that tests the claim
            page = self.links.get(row["chapter"], "") if chapters else ""
            href = html.escape(f"{page}#{row['section']}")
            label = f'<a href="{href}" title="the section that tests it">{label}</a>'
        if row.get("status") == "exploratory":
            label += ' <span class="status" title="posed after a look at the data">exploratory</span>'
        if self.show_notes and row["note"]:
            claim += f'<div class="note">{html.escape(row["note"])}</div>'
        return f'<td><span class="id">{label}</span> {claim}</td>'

    def _chapter_cell(self, chapter) -> str:
        name = html.escape(str(chapter))
        href = self.links.get(chapter)
        return (
            f'<td class="chapter"><a href="{html.escape(href)}">{name}</a></td>'
            if href
            else (f'<td class="chapter">{name}</td>')
        )

    @staticmethod
    def _here_cell(row: dict) -> str:
        """This model's figure, then (where there is one) the quantity it is, on a small line of its own."""
        quantity = row.get("quantity") if row["here"] else ""
        named = f'<div class="quantity">{html.escape(quantity)}</div>' if quantity else ""
        return f"<td>{html.escape(row['here'] or '-')}{named}</td>"

    def _row(self, row: dict, chapters: bool) -> str:
        verdict = row["verdict"]
        published = html.escape(row["published"] or "-")
        source = f'<div class="source">{html.escape(row["source"])}</div>' if row["source"] else ""
        cells = [
            f'<tr class="verdict-{verdict.replace(" ", "-")}">',
            f'<td class="verdict {verdict_class(row["kind"], verdict)}">{html.escape(verdict)}</td>',
            self._chapter_cell(row["chapter"]) if chapters else "",
            self._claim_cell(row, chapters),
            f"<td>{published}{source}</td>",
            self._here_cell(row),
            f"<td>{html.escape(row['control'] or '-')}</td>",
            "</tr>",
        ]
        return "".join(cells)

    def _table(self, rows: pd.DataFrame) -> str:
        chapters = "chapter" in rows.columns
        head = [f'<th class="verdict">{HEAD[0]}</th>'] + (['<th class="chapter">ch.</th>'] if chapters else [])
        head += [f"<th>{h}</th>" for h in HEAD[1:]]
        body = "".join(self._row(row, chapters) for row in rows.to_dict("records"))
        return (
            f'<div class="table-scroll"><table class="scoreboard"><thead><tr>{"".join(head)}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>"
        )

    def _grouped(self, rows: pd.DataFrame, kind: str) -> str:
        """``_table`` per verdict, each in a ``<details>``: a group of more than half the rows starts closed."""
        order = PAPER_VERDICTS if kind == "paper" else FINDING_VERDICTS
        out = []
        for verdict, group in verdict_groups(rows, order):
            colour = verdict_class(kind, verdict)
            is_open = "" if 2 * len(group) > len(rows) else " open"
            out.append(
                f'<details class="scoreboard-group"{is_open}><summary><span class="verdict {colour}">'
                f"{html.escape(verdict)}</span> ({len(group)})</summary>{self._table(group)}</details>"
            )
        return "".join(out)

    def _repr_html_(self) -> str:
        out = []
        for kind in ("paper", "finding"):
            rows = self.frame[self.frame["kind"] == kind]
            if len(rows):
                table = self._grouped(rows, kind) if len(rows) > GROUP_ABOVE else self._table(rows)
                out.append(f'<p class="scoreboard-kind">{KIND_TITLES[kind]}</p>' + table)
        checks = self.frame[self.frame["kind"] == "check"]
        names = ", ".join(html.escape(i) for i in checks["id"])
        line = html.escape(self.checks_line())
        out.append(
            f'<details class="scoreboard-checks"><summary>{line}</summary><p>{names}</p></details>'
            if len(checks)
            else f"<p>{line}</p>"
        )
        return "".join(out)


VERDICTS = PAPER_VERDICTS


def verdict_counts(report: pd.DataFrame, kind: str = "paper") -> pd.DataFrame:
    """Per chapter, how many records of ``kind`` have each verdict: the report's tables.

    report: ``claims.report_table`` output. Returns a column ``claims`` (or ``findings``) and
    one per verdict of that kind, indexed by chapter, with a last row ``all``.
    """
    if "chapter" not in report.columns or "verdict" not in report.columns or "kind" not in report.columns:
        raise ValueError("report needs the columns chapter, kind and verdict (helpers.book.claims.report_table).")
    verdicts = {"paper": VERDICTS, "finding": FINDING_VERDICTS}[kind]
    rows = report[report["kind"] == kind]
    counts = pd.crosstab(rows["chapter"], rows["verdict"]).reindex(columns=list(verdicts), fill_value=0)
    counts.insert(0, "claims" if kind == "paper" else "findings", counts.sum(axis=1))
    counts.loc["all"] = counts.sum()
    counts.columns.name = None
    return counts.astype(int)


class CheckCount(NamedTuple):
    """How many of a report's checks pass."""

    passing: int
    total: int


def check_counts(report: pd.DataFrame) -> CheckCount:
    """The passing and all checks of ``report``."""
    checks = report[report["kind"] == "check"]
    return CheckCount(int((checks["verdict"] == "passes").sum()), len(checks))


def verdict_html(counts: pd.DataFrame, links: dict[str, str] | None = None) -> str:
    """``verdict_counts`` as a small HTML table, chapter names linked to their pages."""
    links = links or {}
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in ["chapter", *counts.columns])
    rows = []
    for chapter, row in counts.iterrows():
        href = links.get(chapter)
        name = html.escape(str(chapter))
        cell = f'<a href="{html.escape(href)}">{name}</a>' if href else f"<strong>{name}</strong>"
        rows.append("<tr><td>" + cell + "</td>" + "".join(f"<td>{int(v)}</td>" for v in row) + "</tr>")
    return (
        f'<div class="table-scroll"><table class="verdict"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


# "; " outside brackets: "a (b; c); d" splits into "a (b; c)" and "d"
_TOP_LEVEL_SEMICOLON = re.compile(r";\s+(?![^(]*\))")


def _sentence(text: str) -> str:
    """``text`` as a sentence: its first letter capitalised, one full stop at the end."""
    text = text.strip().rstrip(".")
    return f"{text[:1].upper()}{text[1:]}." if text else ""


# "(bound 0.500, from the paper)" in a control's text: the threshold the claim must clear instead
_BOUND = re.compile(r"\s*\(bound ([^,()]+), from the paper\)")
# what each verdict of a paper claim says about its interval, in words
_VERDICT_READING = {
    "in direction only": "the interval clears the control, but the published figure lies outside it",
    "inconclusive": "the interval contains its bound, so it decides neither way",
    "not reproduced": "the interval clears its bound on the other side",
    "premise absent": "the premise the claim presumes is absent on this model, so its figure, shown, is counted "
    "apart from the reproductions and the failures",
    "too few sequences": "it rests on too few sequences for a verdict",
    "reversed": "the interval lies on the other side of the control",
}


def departure_sentences(row: dict) -> str:
    """One departure of ``departures_html`` in prose: the claim, the paper's figure, this model's against
    its control and what that says, then the chapter's reason (the notes that are not the verdict's)."""
    notes = [part.strip() for part in _TOP_LEVEL_SEMICOLON.split(row.get("note") or "") if part.strip()]
    reversed_ = any(part.startswith("reversed") for part in notes)
    reasons = [part for part in notes if not part.startswith("reversed")]
    if row["verdict"] == "not testable here":
        return " ".join([_sentence(row["claim"]), *(_sentence(r) for r in reasons)])
    text = [_sentence(row["claim"])]
    if row.get("published"):
        text.append(f"Published: {row['published'].rstrip('.')}.")
    if row.get("here"):
        control_text = str(row["control"])
        bound = _BOUND.search(control_text)  # a threshold from the paper, stricter than the control
        control_text = _BOUND.sub("", control_text)
        control_text, _, paired = control_text.partition("; paired difference ")
        description, _, value = control_text.rpartition(": ")
        if paired:
            value += f" (the paired difference, this model's figure less the control's per sequence: {paired})"
        control = f"the control, {description}, gives {value}" if description else f"the control gives {value}"
        if bound and not reversed_ and row["verdict"] == "not reproduced":
            reading = f"the interval lies wholly on the other side of the published bound, {bound[1]}"
        elif bound and row["verdict"] == "inconclusive":  # which interval, which bound: the figure's, the paper's
            reading = f"this model's interval contains the published bound, {bound[1]}, so it decides neither way"
        elif paired and row["verdict"] == "inconclusive":
            span = re.search(r"\[(-?[\d.]+), (-?[\d.]+)\]", paired)
            reading = (
                "the paired difference's interval contains zero, so it decides neither way"
                if span and float(span[1]) <= 0 <= float(span[2])
                else "the paired difference clears the control, but this model's interval contains the claim's "
                "threshold, so it decides neither way"
            )
        else:
            reading = _VERDICT_READING["reversed" if reversed_ else row["verdict"]]
        text.append(f"Here: {row['here']}; {control}, and {reading}.")
    text += [_sentence(r) for r in reasons]
    return " ".join(text)


def departures_html(report: pd.DataFrame, links: dict[str, str] | None = None) -> str:
    """The paper claims of ``report`` (``claims.report_table``) not plainly reproduced, one item each.

    Each item: the chapter (linked to the section that tests the claim) and the verdict, then
    ``departure_sentences``: the claim, the published figure, this model's figure against the control and
    what that says, and the chapter's reason.
    """
    links = links or {}
    departures = report[(report["kind"] == "paper") & (report["verdict"] != "reproduced")]
    if not len(departures):
        return "<p>None.</p>"
    items = []
    for row in departures.to_dict("records"):
        href = links.get(row["chapter"], "") + (f"#{row['section']}" if row.get("section") else "")
        reversed_ = "reversed" in (row.get("note") or "")
        verdict = row["verdict"] + (", reversed" if reversed_ and row["verdict"] == "not reproduced" else "")
        items.append(
            (
                _chapter_order(str(row["chapter"])),
                f'<li><a href="{html.escape(href)}">Chapter {html.escape(str(row["chapter"]))}</a>, '
                f"<em>{html.escape(verdict)}</em>. {html.escape(departure_sentences(row))}</li>",
            )
        )
    return f'<ul class="departures">{"".join(text for _, text in sorted(items, key=lambda item: item[0]))}</ul>'


def _chapter_order(chapter: str) -> tuple:
    return (0, int(chapter), "") if chapter.isdigit() else (1, 0, chapter)
