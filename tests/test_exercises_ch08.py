"""Chapter 8's code exercises: the book's solution passes its check, a wrong version fails, a stub stays open."""

import pytest
import torch

from helpers.book.exercises.ch08 import check_null_space_dimension
from tests.exercise_cells import run_solution, solution_cells


def test_the_chapter_has_a_checked_solution():
    cells = solution_cells("08_fine_tuning")
    assert cells, "chapter 8 has no cell tagged exercise-solution"
    assert any("check_null_space_dimension(" in source for source in cells)


@pytest.mark.parametrize("source", solution_cells("08_fine_tuning"))
def test_each_solution_passes_its_check(source, capsys):
    namespace = run_solution(source)
    assert check_null_space_dimension(namespace["null_space_dimension"])
    assert "correct" in capsys.readouterr().out


def ones_forgotten(T):
    """A slip: dim LN(T), the column of ones left out."""
    return int(T.shape[0] - torch.linalg.matrix_rank(T))


def full_rank_assumed(T):
    """A slip: n - d - 1, as if T always had full column rank."""
    return max(int(T.shape[0] - T.shape[1] - 1), 0)


def right_null_space(T):
    """A slip: the null space on the other side, d + 1 - rank([T, 1])."""
    ones = torch.ones(T.shape[0], 1, dtype=T.dtype)
    return int(T.shape[1] + 1 - torch.linalg.matrix_rank(torch.cat([T, ones], dim=1)))


@pytest.mark.parametrize("wrong", [ones_forgotten, full_rank_assumed, right_null_space])
def test_a_wrong_version_fails(wrong):
    with pytest.raises(AssertionError, match="null_space_dimension"):
        check_null_space_dimension(wrong)


def test_a_stub_is_reported_open(capsys):
    def stub(T):
        raise NotImplementedError  # your code here

    assert check_null_space_dimension(stub) is False
    assert "not implemented yet" in capsys.readouterr().out
