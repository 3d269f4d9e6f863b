"""Chapter 1's code exercises: the book's solution passes its check, a wrong version and the stub do not."""

import pytest
import torch

from helpers.book.exercises.ch01 import check_attention_probabilities
from tests.exercise_cells import run_solution, solution_cells


def test_the_chapter_has_a_solution_cell():
    assert solution_cells("01_anatomy_of_a_head"), "chapter 1 has no cell tagged exercise-solution"


@pytest.mark.parametrize("source", solution_cells("01_anatomy_of_a_head"))
def test_each_solution_passes_its_check(source, capsys):
    namespace = run_solution(source)
    assert check_attention_probabilities(namespace["attention_probabilities"])
    assert "correct" in capsys.readouterr().out


def unscaled(Q, K):
    """A common mistake: the scores are not divided by sqrt(d_v)."""
    return torch.softmax(Q @ K.transpose(-1, -2), dim=-1)


def over_queries(Q, K):
    """Another: the softmax normalises the columns (queries), not the rows."""
    return torch.softmax(Q @ K.transpose(-1, -2) / Q.shape[-1] ** 0.5, dim=-2)


@pytest.mark.parametrize("wrong", [unscaled, over_queries])
def test_a_wrong_version_fails(wrong):
    with pytest.raises(AssertionError, match="attention_probabilities"):
        check_attention_probabilities(wrong)


def test_the_stub_is_reported_open(capsys):
    def stub(Q, K):
        raise NotImplementedError

    assert check_attention_probabilities(stub) is False
    assert "not implemented yet" in capsys.readouterr().out
