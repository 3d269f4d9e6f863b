"""What a chapter's "What to remember" bullets state, and whether its verdicts support it.

Each bullet of the section ends with a marker the page does not show, naming the claims
(paper claims, findings or checks of the chapter's registry) whose verdicts it states::

    * The sink loses far more than chance ... <!-- states: model-sink-null=holds -->
    * Forward mode gets every block norm ... <!-- states: none -->

``states: none`` marks a bullet that states no verdict (a definition, an identity, advice).
:func:`remember_statements` reads them; :func:`contradictions` compares them with the verdicts
of the chapter's claim record, so that a bullet cannot assert what the scoreboard does not support
(``tests/test_remember.py`` runs it on every chapter's committed record).
"""

from __future__ import annotations

import re
from typing import NamedTuple

HEADING = "## What to remember"
MARKER = re.compile(r"<!--\s*states:\s*(?P<body>.*?)\s*-->", re.S)
BULLET = re.compile(r"^\* ", re.M)


class Statement(NamedTuple):
    """One bullet: its text (marker removed) and the verdict it states per claim id ({} for none)."""

    text: str
    verdicts: dict[str, str]


def remember_section(notebook: dict) -> str:
    """The "What to remember" section of a notebook dict, from its heading to the next heading
    (or the end of its cell). Raises when the notebook has none, or more than one."""
    cells = [
        "".join(c["source"])
        for c in notebook["cells"]
        if c["cell_type"] == "markdown" and HEADING in "".join(c["source"])
    ]
    if len(cells) != 1:
        raise ValueError(f"expected one markdown cell with {HEADING!r}, found {len(cells)}")
    section = cells[0][cells[0].index(HEADING) + len(HEADING) :]
    following = re.search(r"^#{1,6} ", section, re.M)
    return section[: following.start()] if following else section


def _parse(body: str, bullet: str) -> dict[str, str]:
    if body.strip() == "none":
        return {}
    verdicts = {}
    for item in body.split(";"):
        claim, sep, verdict = item.partition("=")
        if not sep or not claim.strip() or not verdict.strip():
            raise ValueError(f"marker item {item.strip()!r} is not 'claim-id=verdict' in bullet: {bullet[:80]!r}")
        verdicts[claim.strip()] = " ".join(verdict.split())
    return verdicts


def remember_statements(notebook: dict) -> list[Statement]:
    """The bullets of the notebook's "What to remember" and the verdicts each states.

    Every bullet must end with exactly one ``<!-- states: ... -->`` marker; a bullet without one,
    with two, or with text after it is refused (ValueError naming the bullet).
    """
    section = remember_section(notebook)
    starts = [m.start() for m in BULLET.finditer(section)]
    if not starts:
        raise ValueError(f"{HEADING!r} has no bullets")
    statements = []
    for start, end in zip(starts, starts[1:] + [len(section)], strict=True):
        bullet = section[start:end].strip()
        markers = list(MARKER.finditer(bullet))
        if len(markers) != 1:
            raise ValueError(f"bullet has {len(markers)} 'states:' markers, not one: {bullet[:80]!r}")
        if bullet[markers[0].end() :].strip():
            raise ValueError(f"text after the 'states:' marker (it must end the bullet): {bullet[:80]!r}")
        text = bullet[2 : markers[0].start()].strip()
        statements.append(Statement(text, _parse(markers[0]["body"], bullet)))
    return statements


def contradictions(statements: list[Statement], record: dict) -> list[str]:
    """What the bullets state that the chapter's record does not support, one line each ([] when all agree).

    record: a chapter's claims record (``records.committed_record``): ``claims`` with ``id`` and ``verdict``.
    A claim id the record lacks is reported too (a renamed or dropped claim).
    """
    recorded = {c["id"]: c["verdict"] for c in record["claims"]}
    problems = []
    for statement in statements:
        for claim, verdict in statement.verdicts.items():
            if claim not in recorded:
                problems.append(f"{claim}: stated {verdict!r}, but the record has no such claim")
            elif recorded[claim] != verdict:
                problems.append(f"{claim}: stated {verdict!r}, recorded {recorded[claim]!r} ({statement.text[:60]}...)")
    return problems
