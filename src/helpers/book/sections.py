"""Where each claim of a chapter is tested: the section anchors and the chapter's title, read from its notebook.

Read from the saved notebook (its headings and code cells), so that a scoreboard's claim ids link to
the section that tests them and the report names each chapter.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

__all__ = ["claim_sections", "chapter_title"]

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
