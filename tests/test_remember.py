"""Every chapter's "What to remember" states only verdicts its scoreboard gives (helpers.book.remember)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.book.records import committed_record
from helpers.book.remember import contradictions, remember_statements
from helpers.book.verdicts import CHECK_VERDICTS, FINDING_VERDICTS, PAPER_VERDICTS

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = sorted(BOOK.glob("0*.ipynb"))


def _notebook(markdown: str) -> dict:
    return {"cells": [{"cell_type": "markdown", "source": markdown}]}


RECORD = {"claims": [{"id": "a", "verdict": "holds"}, {"id": "b", "verdict": "not reproduced"}]}


def test_markers_are_read_per_bullet():
    notebook = _notebook(
        "## What to remember\n\n* One\n  line. <!-- states: a=holds; b=not  reproduced -->\n"
        "* Advice. <!-- states: none -->\n\n## Exercises\n\n* not a bullet of the section\n"
    )
    statements = remember_statements(notebook)
    assert [s.verdicts for s in statements] == [{"a": "holds", "b": "not reproduced"}, {}]
    assert statements[0].text == "One\n  line."
    assert contradictions(statements, RECORD) == []


def test_a_bullet_that_asserts_another_verdict_is_caught():
    statements = remember_statements(_notebook("## What to remember\n\n* B holds. <!-- states: b=reproduced -->"))
    (problem,) = contradictions(statements, RECORD)
    assert "recorded 'not reproduced'" in problem
    statements = remember_statements(_notebook("## What to remember\n\n* C. <!-- states: c=holds -->"))
    assert "no such claim" in contradictions(statements, RECORD)[0]


@pytest.mark.parametrize(
    "markdown, message",
    [
        ("## What to remember\n\n* Unmarked bullet.", "0 'states:' markers"),
        ("## What to remember\n\n* Two. <!-- states: none --> <!-- states: none -->", "2 'states:' markers"),
        ("## What to remember\n\n* Late. <!-- states: none --> and more", "text after"),
        ("## What to remember\n\n* Bad. <!-- states: a holds -->", "not 'claim-id=verdict'"),
        ("## Elsewhere\n\n* x <!-- states: none -->", "expected one markdown cell"),
    ],
)
def test_careless_markers_are_refused(markdown, message):
    with pytest.raises(ValueError, match=message):
        remember_statements(_notebook(markdown))


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_what_to_remember_agrees_with_the_scoreboard(chapter):
    statements = remember_statements(json.loads(chapter.read_text()))
    for statement in statements:
        assert set(statement.verdicts.values()) <= {*PAPER_VERDICTS, *FINDING_VERDICTS, *CHECK_VERDICTS}, statement
    assert contradictions(statements, committed_record(chapter)) == []
