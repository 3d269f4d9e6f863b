"""Chapter 2's code exercises: the book's solution passes its check, a wrong version and the stub do not."""

import pytest

from helpers.book.exercises.ch02 import check_same_output_towards
from helpers.methods.linalg import left_null_space
from tests.exercise_cells import run_solution, solution_cells


def test_the_chapter_has_a_solution_cell():
    assert solution_cells("02_rank_argument"), "chapter 2 has no cell tagged exercise-solution"


@pytest.mark.parametrize("source", solution_cells("02_rank_argument"))
def test_each_solution_passes_its_check(source, capsys):
    namespace = run_solution(source)
    assert check_same_output_towards(namespace["same_output_towards"])
    assert "correct" in capsys.readouterr().out


def projector_on_the_left(A, T, B):
    """A common mistake: the projector N N^T multiplies B - A from the left (mixing queries)."""
    N = left_null_space(T.double())
    return A + N @ N.T @ (B - A)


def forgets_A(A, T, B):
    """Another: returns the step Ã instead of A + Ã."""
    N = left_null_space(T.double())
    return (B - A) @ N @ N.T


@pytest.mark.parametrize("wrong", [projector_on_the_left, forgets_A])
def test_a_wrong_version_fails(wrong):
    with pytest.raises(AssertionError, match="same_output_towards"):
        check_same_output_towards(wrong)


def test_the_stub_is_reported_open(capsys):
    def stub(A, T, B):
        raise NotImplementedError

    assert check_same_output_towards(stub) is False
    assert "not implemented yet" in capsys.readouterr().out
