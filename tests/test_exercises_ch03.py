"""Chapter 3's exercise checks: the book's solution passes, a wrong answer fails, a stub stays open."""

import pytest
import torch

import helpers
from helpers.book.exercises.ch03 import check_step_range
from tests.exercise_cells import solution_cells


def test_the_chapter_has_a_checked_solution():
    cells = solution_cells("03_simplex_null_spaces")
    assert cells, "chapter 3 should have at least one code cell tagged exercise-solution"
    assert any("check_step_range(" in source for source in cells)


@pytest.mark.parametrize("source", solution_cells("03_simplex_null_spaces"))
def test_the_books_solution_passes_its_check(source, capsys):
    namespace = {"helpers": helpers}
    exec(compile(source.replace("check_step_range(", "result = check_step_range(", 1), "solution", "exec"), namespace)
    assert namespace["result"] is True
    assert "correct" in capsys.readouterr().out


def _right(A, D):
    down, up = D < 0, D > 0
    t_high = float((A[down] / -D[down]).min()) if down.any() else float("inf")
    t_low = -float((A[up] / D[up]).min()) if up.any() else float("-inf")
    return t_low, t_high


def test_a_right_answer_passes():
    assert check_step_range(_right)


def test_a_forgotten_sign_fails():
    # an easy mistake: t_low = min a_ij / d_ij over d_ij > 0, without the minus sign
    def wrong(A, D):
        t_low, t_high = _right(A, D)
        return -t_low, t_high

    with pytest.raises(AssertionError, match="t_low"):
        check_step_range(wrong)


def test_ratios_over_every_entry_fail():
    # another: the ratio a_ij / |d_ij| over every entry, not only those D pushes toward zero
    def wrong(A, D):
        t = float((A / D.abs()).min())
        return -t, t

    with pytest.raises(AssertionError):
        check_step_range(wrong)


def test_a_missing_infinite_bound_fails():
    def wrong(A, D):
        down, up = D < 0, D > 0
        t_high = float((A[down] / -D[down]).min()) if down.any() else 0.0
        return -float((A[up] / D[up]).min()), t_high

    with pytest.raises(AssertionError, match="t_high"):
        check_step_range(wrong)


def test_a_stub_stays_open(capsys):
    def stub(A, D):
        raise NotImplementedError  # your code here

    assert check_step_range(stub) is False
    assert "not implemented yet" in capsys.readouterr().out


def test_a_wrong_return_type_says_so():
    with pytest.raises(AssertionError, match="two numbers"):
        check_step_range(lambda A, D: torch.zeros(3))
