"""Chapter 4's code exercises: the book's solutions pass their checks, a wrong answer and a stub do not."""

from pathlib import Path

import pytest
import torch

import helpers
from helpers.book.exercises.ch04 import check_effective_part
from tests.exercise_cells import run_solution, solution_cells

NOTEBOOK = Path(__file__).resolve().parents[1] / "book" / "04_effective_attention.ipynb"


def test_the_chapter_has_a_checked_solution():
    assert any("check_effective_part(" in source for source in solution_cells("04_effective_attention"))


@pytest.mark.parametrize("source", solution_cells("04_effective_attention"))
def test_each_solution_passes_its_check(source, capsys):
    run_solution(source)
    out = capsys.readouterr().out
    assert "correct on all" in out
    assert "not implemented" not in out


def _projector(T):
    U, S, _ = torch.linalg.svd(T, full_matrices=True)
    r = int((S > helpers.methods.linalg.DEFAULT_RTOL * S[0]).sum())
    return U[:, :r] @ U[:, :r].T


def test_projecting_from_the_wrong_side_fails():
    # an easy mistake: P A projects the columns of A, not its rows (the head output changes)
    with pytest.raises(AssertionError, match="effective_part on"):
        check_effective_part(lambda A, T: _projector(T) @ A)


def test_the_null_part_instead_of_the_effective_part_fails():
    with pytest.raises(AssertionError, match="effective_part on"):
        check_effective_part(lambda A, T: A - A @ _projector(T))


def test_a_stub_is_reported_open(capsys):
    def effective_part(A, T):
        raise NotImplementedError  # your code here

    assert check_effective_part(effective_part) is False
    assert "not implemented yet" in capsys.readouterr().out
