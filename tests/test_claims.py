"""The claims scoreboard: registration, the strict and report modes, the records the report reads."""

import json

import numpy as np
import pytest
import torch

import helpers
from helpers.book.claims import ClaimFailed, Claims, load_records, report_table


def test_strict_mode_fails_with_every_failing_message(tmp_path):
    claims = Claims("99_test", model="tiny", mode="strict")
    assert claims.check("holds", "one claim that holds", True, paper="0.5", measured="0.6")
    assert not claims.check("fails", "one claim that does not", np.bool_(False), measured="0.1")
    with pytest.raises(ClaimFailed, match="(?s)1 of 2 claims.*fails: one claim that does not"):
        claims.enforce(tmp_path)
    record = json.loads((tmp_path / "99_test.json").read_text())  # written before failing
    assert [c["holds"] for c in record["claims"]] == [True, False]


def test_report_mode_shows_the_failure_and_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_CLAIMS", "report")
    claims = Claims("99_test")
    claims.check("fails", "does not hold", torch.tensor(False))
    board = claims.enforce(tmp_path)
    assert board.frame.set_index("id").loc["fails", "holds here"] == "NO"
    assert "verdict-not-reproduced" in board._repr_html_() and "fails: not reproduced" in repr(board)
    rows = report_table(load_records(tmp_path))
    assert rows.chapter.tolist() == ["99_test"] and rows["holds here"].tolist() == ["NO"]


def test_bad_registrations_are_refused():
    claims = Claims("99_test", mode="report")
    with pytest.raises(TypeError, match="boolean"):
        claims.check("a", "a claim", 0.7)
    with pytest.raises(TypeError, match="one boolean"):
        claims.check("a", "a claim", torch.tensor([True, False]))
    with pytest.raises(ValueError, match="lower-case"):
        claims.check("Bad Id", "a claim", True)
    claims.check("a", "a claim", True)
    with pytest.raises(ValueError, match="already registered"):
        claims.check("a", "again", True)
    with pytest.raises(ValueError, match="BOOK_CLAIMS"):
        Claims("x", mode="lenient")
    with pytest.raises(ValueError, match="no claims"):
        Claims("x", mode="report").enforce()


def test_records_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_CLAIMS_DIR", str(tmp_path / "records"))
    assert helpers.book.claims.records_dir() == tmp_path / "records"


def test_a_numeric_claim_states_value_and_threshold_once(tmp_path):
    claims = Claims("99_test", mode="report")
    assert claims.at_most("small", "the share is small", torch.tensor(0.041), 0.06, published=0.05, tolerance=0.02)
    assert not claims.at_least("large", "the share is large", np.float64(0.041), 0.5, fmt=".0%")
    assert claims.at_least("far", "holds, but far from the paper", 0.75, 0.5, published=0.93, tolerance=0.05)
    small, large, far = claims.claims
    assert small.measured == "0.04 (at most 0.06)" and small.paper == "0.05" and small.tolerance == "±0.02"
    assert small.agrees is True and small.verdict == "reproduced"
    assert large.measured == "4% (at least 50%)" and large.agrees is None and large.verdict == "not reproduced"
    assert far.agrees is False and far.verdict == "in kind"
    table = claims.table()
    assert table.loc["far", "agrees"] == "no (±0.05)" and table.loc["large", "agrees"] == "not compared"
    assert table.loc["small", "source"] == "Brunner et al. 2020"
    with pytest.raises(ValueError, match="both published and tolerance"):
        claims.at_most("x", "x", 0.1, 0.2, published=0.1)
    with pytest.raises(TypeError, match="number"):
        claims.at_most("y", "y", "0.1", 0.2)
    with pytest.raises(ValueError, match="side"):
        claims.compare("z", "z", 0.1, 0.2, "below")


def test_the_scoreboard_html_is_stable_and_wraps_in_the_column():
    claims = Claims("99_test", mode="report")
    claims.check("a-claim", "A <b> claim & more", True, paper="0.9", source="Someone et al. 2021", note="why")
    board = helpers.book.scoreboard.Scoreboard(claims.table().reset_index())
    html = board._repr_html_()
    assert html == board._repr_html_()  # no random ids: nbval compares it
    assert html.startswith('<table class="scoreboard">') and "A &lt;b&gt; claim &amp; more" in html
    assert "Someone et al. 2021" in html and '<div class="note">why</div>' in html


def test_the_report_counts_verdicts_per_chapter(tmp_path):
    for chapter, agrees in (("01_a", [True, None]), ("02_b", [False, True])):
        claims = Claims(chapter, mode="report")
        for k, value in enumerate(agrees):
            claims.check(f"c{k}", "a claim", True, agrees=value)
        claims.save(tmp_path)
    counts = helpers.book.scoreboard.verdict_counts(report_table(load_records(tmp_path)))
    assert counts.loc["01_a"].tolist() == [2, 2, 0, 0] and counts.loc["02_b"].tolist() == [2, 1, 1, 0]
    assert counts.loc["all", "claims"] == 4
    html = helpers.book.scoreboard.verdict_html(counts, links={"01_a": "01_a.html"})
    assert '<a href="01_a.html">01_a</a>' in html and "<strong>all</strong>" in html


def test_departures_are_one_line_each_and_orderings_one_line_per_chapter(tmp_path):
    claims = Claims("07_c", mode="report")
    claims.check("order-a", "a before b", True, agrees=False, tolerance="order only")
    claims.check("order-b", "c before d", True, agrees=False, tolerance="order only")
    claims.check("size", "x is large", True, measured="0.5", paper="0.9", agrees=False, note="smaller model")
    claims.check("fine", "y holds", True, agrees=True)
    claims.check("broken", "z holds", False)
    claims.save(tmp_path)
    report = report_table(load_records(tmp_path))
    html = helpers.book.scoreboard.departures_html(report, links={"07_c": "07_c.html"})
    items = html.count("<li>")
    assert items == 3  # the two orderings share one line; "fine" is not a departure
    assert "2 orderings hold (<code>order-a</code>, <code>order-b</code>)" in html
    assert "0.5 against 0.9 &mdash; smaller model" in html and "(not reproduced)" in html
    assert "fine" not in html
    assert html.index("size") < html.index("orderings hold")  # a chapter's claims, then its orderings
    assert helpers.book.scoreboard.departures_html(report[report.id == "fine"]) == "<p>None.</p>"


def test_each_claim_links_the_section_that_tests_it(tmp_path, monkeypatch):
    cells = [
        {"cell_type": "markdown", "source": ["# Title\n", "\n", "## Raw vs effective: the [CLS] case\n"]},
        {"cell_type": "code", "source": ['claims.check("a-claim", "...", True)\n']},
        {"cell_type": "markdown", "source": ["## Second part\n"]},
        {"cell_type": "code", "source": ['claims.at_most(\n    "b.claim", "...", 0.1, 0.2\n)\n']},
        {"cell_type": "markdown", "source": ["## Third part\n"]},
        {"cell_type": "code", "source": ['ordering(\n    "c-claim", "...", (1, 0))\n']},
    ]
    (tmp_path / "99_test.ipynb").write_text(json.dumps({"cells": cells}))
    sections = helpers.book.scoreboard.claim_sections(tmp_path / "99_test.ipynb")
    assert sections == {"a-claim": "raw-vs-effective-the-cls-case", "b.claim": "second-part"}
    # a claim registered through a chapter's own function is found by its id
    with_ids = helpers.book.scoreboard.claim_sections(tmp_path / "99_test.ipynb", ids={"a-claim", "c-claim"})
    assert with_ids == {"a-claim": "raw-vs-effective-the-cls-case", "c-claim": "third-part"}
    assert helpers.book.scoreboard.claim_sections(tmp_path / "missing.ipynb") == {}
    monkeypatch.chdir(tmp_path)
    claims = Claims("99_test", mode="report")
    claims.check("a-claim", "the claim", True)
    board = claims.enforce(tmp_path / "records")
    assert 'href="#raw-vs-effective-the-cls-case"' in board._repr_html_()
    record = json.loads((tmp_path / "records" / "99_test.json").read_text())
    assert record["claims"][0]["section"] == "raw-vs-effective-the-cls-case"


def test_chapter_title_reads_the_number_and_the_heading(tmp_path):
    path = tmp_path / "04_x.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": ["# Effective attention\n", "text"]}]}))
    assert helpers.book.scoreboard.chapter_title(path) == "4. Effective attention"
    (tmp_path / "05_y.ipynb").write_text(json.dumps({"cells": []}))
    with pytest.raises(ValueError, match="heading"):
        helpers.book.scoreboard.chapter_title(tmp_path / "05_y.ipynb")
