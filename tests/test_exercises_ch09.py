"""Chapter 9's code exercises: the book's solution passes its check, a typical mistake fails, a stub is "not done"."""

from __future__ import annotations

import pytest
import torch

from helpers.book.exercises.ch09 import check_causal_effective_rows
from tests.exercise_cells import run_solution, solution_cells


def test_the_chapter_has_a_solution_for_its_check():
    sources = solution_cells("09_decoder_llm")
    assert sources, "chapter 9 has no cell tagged exercise-solution"
    assert any("check_causal_effective_rows(" in s for s in sources)


@pytest.mark.parametrize("source", solution_cells("09_decoder_llm"))
def test_the_book_solution_passes_its_check(source, capsys):
    namespace = run_solution(source)
    assert "correct on all" in capsys.readouterr().out
    assert check_causal_effective_rows(namespace["causal_effective_rows"]) is True


def test_the_whole_sequence_projection_fails():
    # the easy mistake: project each row onto the column space of all of T, as for BERT
    def whole_sequence(A, T):
        return A @ (T @ torch.linalg.pinv(T))

    with pytest.raises(AssertionError, match="future positions"):
        check_causal_effective_rows(whole_sequence)


def test_the_prefix_without_the_row_itself_fails():
    # an off-by-one: project row i onto range(T[:i]), leaving out position i
    def off_by_one(A, T):
        effective = torch.zeros_like(A)
        for i in range(1, A.shape[-1]):
            prefix = T[:i]
            effective[i, :i] = prefix @ torch.linalg.pinv(prefix) @ A[i, :i]
        return effective

    with pytest.raises(AssertionError, match="causal_effective_rows on"):
        check_causal_effective_rows(off_by_one)


def test_a_stub_is_not_done(capsys):
    def stub(A, T):
        raise NotImplementedError  # your code here

    assert check_causal_effective_rows(stub) is False
    assert "not implemented yet" in capsys.readouterr().out
