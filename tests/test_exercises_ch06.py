"""Chapter 6's code exercises: the book's solution passes its check, a wrong version fails, a stub stays open."""

import pytest

from helpers.book.exercises.ch06 import check_contributions_from_jacobian
from tests.exercise_cells import run_solution, solution_cells


def test_the_chapter_has_a_checked_solution():
    cells = solution_cells("06_hidden_token_attribution")
    assert cells, "chapter 6 has no cell tagged exercise-solution"
    assert any("check_contributions_from_jacobian(" in source for source in cells)


@pytest.mark.parametrize("source", solution_cells("06_hidden_token_attribution"))
def test_each_solution_passes_its_check(source, capsys):
    namespace = run_solution(source)
    assert namespace["contributions_from_jacobian"] is not None
    assert check_contributions_from_jacobian(namespace["contributions_from_jacobian"])
    assert "correct" in capsys.readouterr().out


def normalised_over_columns(jacobian):
    """A slip: divide by the column sums (over hidden tokens) instead of the row sums."""
    norms = jacobian.pow(2).sum(dim=(1, 3)).sqrt()
    return norms / norms.sum(0, keepdim=True)


def squared_norms(jacobian):
    """A slip: normalise the squared Frobenius norms (the square root forgotten)."""
    squares = jacobian.pow(2).sum(dim=(1, 3))
    return squares / squares.sum(-1, keepdim=True)


def summed_gradient(jacobian):
    """The substitute the chapter warns against: the gradient of the summed output units."""
    norms = jacobian.sum(1).pow(2).sum(-1).sqrt()
    return norms / norms.sum(-1, keepdim=True)


@pytest.mark.parametrize("wrong", [normalised_over_columns, squared_norms, summed_gradient])
def test_a_wrong_version_fails(wrong):
    with pytest.raises(AssertionError, match="contributions_from_jacobian"):
        check_contributions_from_jacobian(wrong)


def test_a_stub_is_reported_open(capsys):
    def stub(jacobian):
        raise NotImplementedError  # your code here

    assert check_contributions_from_jacobian(stub) is False
    assert "not implemented yet" in capsys.readouterr().out
