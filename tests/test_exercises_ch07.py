"""Chapter 7's code exercises: the book's solution passes its check, a wrong version fails, a stub stays open."""

import pytest
import torch

from helpers.book.exercises.ch07 import check_attention_rollout
from tests.exercise_cells import run_solution, solution_cells


def test_the_chapter_has_a_checked_solution():
    cells = solution_cells("07_context_mixing")
    assert cells, "chapter 7 has no cell tagged exercise-solution"
    assert any("check_attention_rollout(" in source for source in cells)


@pytest.mark.parametrize("source", solution_cells("07_context_mixing"))
def test_each_solution_passes_its_check(source, capsys):
    namespace = run_solution(source)
    assert check_attention_rollout(namespace["attention_rollout"])
    assert "correct" in capsys.readouterr().out


def _mixed(A_mean):
    eye = torch.eye(A_mean.shape[-1], dtype=A_mean.dtype)
    M = 0.5 * A_mean + 0.5 * eye
    return M / M.sum(-1, keepdim=True)


def composed_top_down(A_mean):
    """A slip: each new layer multiplied on the right, G^l = G^(l-1) M^l."""
    M = _mixed(A_mean)
    rolled = [M[0]]
    for layer in M[1:]:
        rolled.append(rolled[-1] @ layer)
    return torch.stack(rolled)


def residual_forgotten(A_mean):
    """A slip: the plain product of the attention matrices, without 0.5 I."""
    rolled = [A_mean[0]]
    for layer in A_mean[1:]:
        rolled.append(layer @ rolled[-1])
    return torch.stack(rolled)


def last_layer_only(A_mean):
    """A slip: the product of all layers returned once, not the rollout after each layer."""
    return composed_top_down(A_mean)[-1]


@pytest.mark.parametrize("wrong", [composed_top_down, residual_forgotten, last_layer_only])
def test_a_wrong_version_fails(wrong):
    with pytest.raises(AssertionError, match="attention_rollout"):
        check_attention_rollout(wrong)


def test_a_stub_is_reported_open(capsys):
    def stub(A_mean):
        raise NotImplementedError  # your code here

    assert check_attention_rollout(stub) is False
    assert "not implemented yet" in capsys.readouterr().out
