"""Chapter 5's code exercises: the book's solutions pass their checks, a wrong answer and a stub do not."""

from pathlib import Path

import pytest
import torch

from helpers.book.exercises.ch05 import check_identification_rate
from tests.exercise_cells import run_solution, solution_cells

NOTEBOOK = Path(__file__).resolve().parents[1] / "book" / "05_token_identifiability.ipynb"


def test_the_chapter_has_a_checked_solution():
    assert any("check_identification_rate(" in source for source in solution_cells("05_token_identifiability"))


@pytest.mark.parametrize("source", solution_cells("05_token_identifiability"))
def test_each_solution_passes_its_check(source, capsys):
    run_solution(source)
    out = capsys.readouterr().out
    assert "correct on all" in out
    assert "not implemented" not in out


def _rate(predicted, inputs, sequence, same_sequence=True, distance="cosine"):
    if distance == "cosine":
        scores = torch.nn.functional.normalize(predicted, dim=-1) @ torch.nn.functional.normalize(inputs, dim=-1).T
    else:
        scores = -torch.cdist(predicted, inputs)
    if same_sequence:
        scores = scores.masked_fill(sequence[:, None] != sequence[None, :], float("-inf"))
    return (scores.argmax(dim=1) == torch.arange(len(sequence))).float().mean().item()


def test_the_helper_twin_passes():
    assert check_identification_rate(_rate)


def test_searching_every_sequence_fails():
    # an easy mistake: the nearest input token among all tokens, not among those of the sequence
    with pytest.raises(AssertionError, match="identification_rate on"):
        check_identification_rate(lambda p, x, s: _rate(p, x, s, same_sequence=False))


def test_l2_instead_of_cosine_fails():
    with pytest.raises(AssertionError, match="identification_rate on"):
        check_identification_rate(lambda p, x, s: _rate(p, x, s, distance="l2"))


def test_a_count_instead_of_a_share_fails():
    with pytest.raises(AssertionError, match="identification_rate on"):
        check_identification_rate(lambda p, x, s: _rate(p, x, s) * len(s))


def test_a_stub_is_reported_open(capsys):
    def identification_rate(predicted, inputs, sequence):
        raise NotImplementedError  # your code here

    assert check_identification_rate(identification_rate) is False
    assert "not implemented yet" in capsys.readouterr().out
