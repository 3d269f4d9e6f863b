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
    table = claims.enforce(tmp_path)
    assert table.loc["fails", "holds"] == "NO"
    rows = report_table(load_records(tmp_path))
    assert rows.chapter.tolist() == ["99_test"] and rows.holds.tolist() == ["NO"]


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
