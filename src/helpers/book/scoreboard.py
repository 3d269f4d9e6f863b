"""How a claims table reads: one frame of the claims, and its HTML for the chapter's last cell and the report.

``claims_frame`` turns claim records (dicts with the fields of ``claims.Claim``)
into the table every page shows, with the columns of ``SCOREBOARD_COLUMNS``:
the claim in full, this model's figure, the published figure and its source,
and the two verdicts. ``Scoreboard`` renders it as a compact HTML table (text
wraps inside the column; verdicts as words, coloured) and as plain text.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pandas as pd

__all__ = [
    "SCOREBOARD_COLUMNS",
    "DEFAULT_SOURCE",
    "VERDICTS",
    "claims_frame",
    "verdict_of",
    "Scoreboard",
    "verdict_counts",
    "verdict_html",
    "departures_html",
    "claim_sections",
    "chapter_title",
]

DEFAULT_SOURCE = "Brunner et al. 2020"
SCOREBOARD_COLUMNS = (
    "id",
    "claim",
    "this model",
    "published",
    "source",
    "holds here",
    "agrees",
    "verdict",
    "note",
    "section",
)


def verdict_of(holds: bool, agrees: bool | None) -> str:
    """ "reproduced", "in kind" (holds; the figure is outside the published tolerance) or "not reproduced"."""
    if not holds:
        return "not reproduced"
    return "in kind" if agrees is False else "reproduced"


def _agrees_text(agrees, tolerance: str) -> str:
    if agrees is None:
        return "not compared"
    word = "yes" if agrees else "no"
    return f"{word} ({tolerance})" if tolerance else word


def claims_frame(records: list[dict]) -> pd.DataFrame:
    """The claims table (``SCOREBOARD_COLUMNS``) of claim records; old records without the new fields read as defaults."""
    rows = []
    for c in records:
        agrees = c.get("agrees")
        rows.append(
            {
                "id": c["id"],
                "claim": c["claim"],
                "this model": c.get("measured", ""),
                "published": c.get("paper", ""),
                "source": c.get("source") or DEFAULT_SOURCE,
                "holds here": "yes" if c["holds"] else "NO",
                "agrees": _agrees_text(agrees, c.get("tolerance", "")),
                "verdict": verdict_of(bool(c["holds"]), agrees),
                "note": c.get("note", ""),
                "section": c.get("section", ""),
            }
        )
    return pd.DataFrame(rows, columns=list(SCOREBOARD_COLUMNS))


class Scoreboard:
    """A claims table for the page: HTML that wraps inside the column, and plain text for a console.

    ``frame``: ``claims_frame`` output (a ``chapter`` column first is allowed: the report's).
    ``links``: optional {chapter: href}; the chapter cell then links to its page.
    """

    def __init__(self, frame: pd.DataFrame, links: dict[str, str] | None = None, show_notes: bool = True):
        self.frame = frame
        self.links = links or {}
        self.show_notes = show_notes

    def __len__(self) -> int:
        return len(self.frame)

    def __repr__(self) -> str:
        lines = []
        for row in self.frame.to_dict("records"):
            where = f"[{row['chapter']}] " if "chapter" in row else ""
            lines.append(
                f"{where}{row['id']}: {row['verdict']} (holds here: {row['holds here']}; agrees: {row['agrees']})"
                f"\n    {row['claim']}\n    this model: {row['this model'] or '-'}; published: "
                f"{row['published'] or '-'} ({row['source']})"
            )
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = ["claim", "this model", "published (source)", "holds", "agrees"]
        chapters = "chapter" in self.frame.columns
        out = ['<table class="scoreboard">', "<thead><tr>"]
        if chapters:
            out.append("<th>ch.</th>")
        out += [f"<th>{h}</th>" for h in head] + ["</tr></thead>", "<tbody>"]
        for row in self.frame.to_dict("records"):
            verdict = row["verdict"].replace(" ", "-")
            out.append(f'<tr class="verdict-{verdict}">')
            if chapters:
                name = html.escape(row["chapter"])
                href = self.links.get(row["chapter"])
                out.append(f'<td><a href="{html.escape(href)}">{name}</a></td>' if href else f"<td>{name}</td>")
            claim = html.escape(row["claim"])
            label = html.escape(row["id"])
            if row.get("section"):  # the id links to the section that tests the claim
                page = self.links.get(row["chapter"], "") if chapters else ""
                href = html.escape(f"{page}#{row['section']}")
                label = f'<a href="{href}" title="the section that tests it">{label}</a>'
            if self.show_notes and row["note"]:
                claim += f'<div class="note">{html.escape(row["note"])}</div>'
            published = html.escape(row["published"] or "-")
            holds = "yes" if row["holds here"] == "yes" else "no"
            agrees = row["agrees"].split(" ")[0].replace("not", "none")
            out += [
                f'<td><span class="id">{label}</span> {claim}</td>',
                f"<td>{html.escape(row['this model'] or '-')}</td>",
                f'<td>{published}<div class="source">{html.escape(row["source"])}</div></td>',
                f'<td class="holds {holds}">{html.escape(row["holds here"])}</td>',
                f'<td class="agrees {agrees}">{html.escape(row["agrees"])}</td>',
                "</tr>",
            ]
        out.append("</tbody></table>")
        return "".join(out)


VERDICTS = ("reproduced", "in kind", "not reproduced")


def verdict_counts(report: pd.DataFrame) -> pd.DataFrame:
    """Per chapter, how many claims are reproduced, reproduced in kind only, or not: the report's first table.

    report: ``claims.report_table`` output. Returns columns ``claims`` and one per verdict
    of ``VERDICTS``, indexed by chapter, with a last row ``all``.
    """
    if "chapter" not in report.columns or "verdict" not in report.columns:
        raise ValueError("report needs the columns chapter and verdict (helpers.book.claims.report_table).")
    counts = pd.crosstab(report["chapter"], report["verdict"]).reindex(columns=list(VERDICTS), fill_value=0)
    counts.insert(0, "claims", counts.sum(axis=1))
    counts.loc["all"] = counts.sum()
    counts.columns.name = None
    return counts.astype(int)


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
    return f'<table class="verdict"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def departures_html(report: pd.DataFrame, links: dict[str, str] | None = None) -> str:
    """The claims of ``report`` (``claims.report_table``, ``chapter`` as the links' keys) that are
    not plainly reproduced, one list item each, in chapter order: chapter and claim id (linked
    to its section), this model's figure against the published one, and the chapter's reason.

    Claims compared with a published figure by order only ("order only" tolerance: another
    model or reference, so the size cannot agree) are one item per chapter, not one each.
    """
    links = links or {}
    items: list[tuple[str, int, str]] = []  # (chapter, 0 for a claim or 1 for the orderings, html)
    departures = report[report["verdict"] != "reproduced"]
    by_order = departures["agrees"].str.endswith("(order only)") & (departures["verdict"] == "in kind")
    for chapter, rows in departures[by_order].groupby("chapter", sort=False):
        ids = ", ".join(f"<code>{html.escape(i)}</code>" for i in rows["id"])
        href = html.escape(links.get(chapter, ""))
        text = (
            f'<li><a href="{href}">chapter {html.escape(str(chapter))}</a>: {len(rows)} orderings hold ({ids}); '
            "their published figures are correlations of another model with another reference, so only "
            "the order is compared.</li>"
        )
        items.append((str(chapter), 1, text))
    for row in departures[~by_order].to_dict("records"):
        href = links.get(row["chapter"], "") + (f"#{row['section']}" if row.get("section") else "")
        reason = f" &mdash; {html.escape(row['note'])}" if row["note"] else ""
        text = (
            f'<li><a href="{html.escape(href)}">chapter {html.escape(str(row["chapter"]))} '
            f"&middot; {html.escape(row['id'])}</a> ({row['verdict']}): {html.escape(row['this model'] or '-')} "
            f"against {html.escape(row['published'] or '-')}{reason}</li>"
        )
        items.append((str(row["chapter"]), 0, text))
    if not items:
        return "<p>None.</p>"

    def order(item):
        chapter, kind, _ = item
        return (0, int(chapter), "", kind) if chapter.isdigit() else (1, 0, chapter, kind)

    return f'<ul class="departures">{"".join(text for *_, text in sorted(items, key=order))}</ul>'


_STRING = re.compile(r"\"([a-z0-9][a-z0-9_.-]*)\"")
_CLAIM_CALL = re.compile(r"claims\.(?:check|at_most|at_least|compare)\(\s*\"([a-z0-9][a-z0-9_.-]*)\"")


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
    from docutils.nodes import make_id

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
                    anchor = make_id(line.lstrip("#").strip())
                    current = anchor if anchor not in seen else ""  # a repeated heading gets another id
                    seen.add(anchor)
        elif cell.get("cell_type") == "code" and current:
            named = _CLAIM_CALL.findall(source) if ids is None else [i for i in _STRING.findall(source) if i in ids]
            for claim_id in named:
                sections.setdefault(claim_id, current)
    return sections
