"""How a scoreboard reads: one frame of the records, and its HTML for the chapter's last cell and the report.

``claims_frame`` turns claim records (dicts with the fields of ``claims.Claim``)
into the table every page shows, with the columns of ``SCOREBOARD_COLUMNS``: the
kind, the claim in full, the published figure and its source, this model's
figure with its 95% interval, the control, and the verdict. ``Scoreboard``
renders the paper's claims and the book's findings as two compact HTML tables
(text wraps inside the column; verdicts as coloured words) and the checks as one
line, and the same as plain text.
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from .verdicts import FINDING_VERDICTS, PAPER_VERDICTS

__all__ = [
    "SCOREBOARD_COLUMNS",
    "DEFAULT_SOURCE",
    "VERDICTS",
    "FINDING_VERDICTS",
    "claims_frame",
    "Scoreboard",
    "verdict_counts",
    "check_counts",
    "verdict_html",
    "departures_html",
    "claim_sections",
    "chapter_title",
]

DEFAULT_SOURCE = "Brunner et al. 2020"
SCOREBOARD_COLUMNS = (
    "id",
    "kind",
    "claim",
    "published",
    "source",
    "here",
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


def claims_frame(records: list[dict]) -> pd.DataFrame:
    """The claims table (``SCOREBOARD_COLUMNS``) of claim records (dicts with the fields of ``claims.Claim``)."""
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
                "control": c.get("control", ""),
                "verdict": c["verdict"],
                "note": c.get("note", ""),
                "section": c.get("section", ""),
                "status": c.get("status", ""),
            }
        )
    return pd.DataFrame(rows, columns=list(SCOREBOARD_COLUMNS))


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
                lines.append(
                    f"{where}{row['id']} ({kind}): {row['verdict']}\n    {row['claim']}\n"
                    f"    here: {row['here'] or '-'}; control: {row['control'] or '-'}; "
                    f"published: {row['published'] or '-'} ({row['source']})"
                )
        lines.append(self.checks_line())
        return "\n".join(lines)

    def _repr_mimebundle_(self, include=None, exclude=None):
        data = {"text/plain": repr(self), "text/html": self._repr_html_()}
        return (data, {"application/vnd.book.claims+json": self.record}) if self.record else data

    def _table(self, rows: pd.DataFrame) -> str:
        chapters = "chapter" in rows.columns
        head = ["claim", "published (source)", "here (95% interval)", "control", "verdict"]
        out = ['<div class="table-scroll"><table class="scoreboard">', "<thead><tr>"]
        if chapters:
            out.append("<th>ch.</th>")
        out += [f"<th>{h}</th>" for h in head] + ["</tr></thead>", "<tbody>"]
        for row in rows.to_dict("records"):
            verdict = row["verdict"]
            out.append(f'<tr class="verdict-{verdict.replace(" ", "-")}">')
            if chapters:
                name = html.escape(str(row["chapter"]))
                href = self.links.get(row["chapter"])
                out.append(f'<td><a href="{html.escape(href)}">{name}</a></td>' if href else f"<td>{name}</td>")
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
            published = html.escape(row["published"] or "-")
            source = f'<div class="source">{html.escape(row["source"])}</div>' if row["source"] else ""
            out += [
                f'<td><span class="id">{label}</span> {claim}</td>',
                f"<td>{published}{source}</td>",
                f"<td>{html.escape(row['here'] or '-')}</td>",
                f"<td>{html.escape(row['control'] or '-')}</td>",
                f'<td class="verdict {VERDICT_CLASS.get(verdict, "none")}">{html.escape(verdict)}</td>',
                "</tr>",
            ]
        out.append("</tbody></table></div>")
        return "".join(out)

    def _repr_html_(self) -> str:
        out = []
        for kind in ("paper", "finding"):
            rows = self.frame[self.frame["kind"] == kind]
            if len(rows):
                out.append(f'<p class="scoreboard-kind">{KIND_TITLES[kind]}</p>' + self._table(rows))
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


def _sentence(text: str) -> str:
    """``text`` as a sentence: its first letter capitalised, one full stop at the end."""
    text = text.strip().rstrip(".")
    return f"{text[:1].upper()}{text[1:]}." if text else ""


# "(bound 0.500, from the paper)" in a control's text: the threshold the claim must clear instead
_BOUND = re.compile(r"\s*\(bound ([^,()]+), from the paper\)")
# what each verdict of a paper claim says about its interval, in words
_VERDICT_READING = {
    "in direction only": "the interval clears the control, but the published figure lies outside it",
    "inconclusive": "the interval holds its bound, so it decides neither way",
    "not reproduced": "the interval clears its bound on the other side",
    "premise absent": "the premise the claim presumes is absent on this model, so its figure, shown, is counted "
    "apart from the reproductions and the failures",
    "too few sequences": "it rests on too few sequences for a verdict",
    "reversed": "the interval lies on the other side of the control",
}


def departure_sentences(row: dict) -> str:
    """One departure of ``departures_html`` in prose: the claim, the paper's figure, this model's against
    its control and what that says, then the chapter's reason (the notes that are not the verdict's)."""
    notes = [part.strip() for part in (row.get("note") or "").split("; ") if part.strip()]
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


_STRING = re.compile(r"\"([a-z0-9][a-z0-9_.-]*)\"")
_CLAIM_CALL = re.compile(r"claims\.(?:check|paper|finding|not_testable)\(\s*\"([a-z0-9][a-z0-9_.-]*)\"")


def chapter_title(notebook: Path) -> str:
    """ "4. Effective attention": the chapter's number (from its file name) and its first ``#`` heading."""
    notebook = Path(notebook)
    cells = json.loads(notebook.read_text())["cells"]
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            for line in "".join(cell.get("source", [])).splitlines():
                if line.startswith("# "):
                    return f"{int(notebook.stem[:2])}. {line[2:].strip()}"
    raise ValueError(f"{notebook.name} has no '# ' heading.")


def _anchor(heading: str) -> str:
    """The id docutils gives a heading (``docutils.nodes.make_id``, without importing docutils)."""
    text = unicodedata.normalize("NFKD", " ".join(heading.lower().split())).encode("ascii", "ignore").decode()
    return re.sub(r"^[-0-9]+|-+$", "", re.sub(r"[^a-z0-9]+", "-", text))


def claim_sections(notebook: Path, ids=None) -> dict[str, str]:
    """Claim id -> the anchor of the section (the last heading above it) whose cells register it.

    Read from the saved notebook; the anchors are the ids docutils gives headings
    ("## Raw vs effective attention" -> "raw-vs-effective-attention"). Without ``ids``
    a claim is found by its registering call (``claims.check("id", ...)``); with the
    registered ``ids``, by the first code cell that names it as a string, so a claim
    registered through a chapter's own function (``ordering("id", ...)``) is found too.
    Empty when the notebook is not there (a copy run elsewhere): the scoreboard then
    has no links.
    """
    try:
        cells = json.loads(Path(notebook).read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return {}
    sections, current, seen = {}, "", set()
    for cell in cells:
        source = "".join(cell.get("source", []))
        if cell.get("cell_type") == "markdown":
            for line in source.splitlines():
                if re.match(r"#{1,3} ", line):
                    anchor = _anchor(line.lstrip("#").strip())
                    current = anchor if anchor not in seen else ""  # a repeated heading gets another id
                    seen.add(anchor)
        elif cell.get("cell_type") == "code" and current:
            named = _CLAIM_CALL.findall(source) if ids is None else [i for i in _STRING.findall(source) if i in ids]
            for claim_id in named:
                sections.setdefault(claim_id, current)
    return sections


def model_comparison_html(
    comparison: pd.DataFrame, links: dict[str, str] | None = None, short: dict[str, str] | None = None
) -> str:
    """``records.model_comparison`` as an HTML table: a row per paper claim, per model its verdict (coloured
    as in the scoreboards) above its figure and interval; chapters by number (``short``), linked (``links``)."""
    links, short = links or {}, short or {}
    models = [c for c in comparison.columns if c not in ("chapter", "id", "claim", "holds") and ": figure" not in c]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["chapter", "claim", *models])
    rows = []
    for _, row in comparison.iterrows():
        number = short.get(row["chapter"], row["chapter"])
        href = links.get(number)
        chapter = f'<a href="{html.escape(href)}">{html.escape(number)}</a>' if href else html.escape(number)
        cells = [f"<td>{chapter}</td>", f'<td><span class="id">{html.escape(row["id"])}</span> '
                 f"{html.escape(row['claim'])}</td>"]  # fmt: skip
        for model in models:
            verdict = row[model]
            cells.append(
                f'<td class="verdict {VERDICT_CLASS.get(verdict, "none")}">{html.escape(verdict)}'
                f'<div class="note">{html.escape(str(row[f"{model}: figure"]))}</div></td>'
            )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<div class="table-scroll"><table class="scoreboard"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
