"""The shared core of the chapters' exercise checks (helpers.book.exercises.compare)."""

import pytest
import torch

from helpers.book.exercises.checking import compare


def reference(x):
    return x.softmax(-1)


CASES = [("a 3 x 4 matrix", (torch.randn(3, 4, generator=torch.Generator().manual_seed(0)),))]


def test_a_right_answer_passes(capsys):
    assert compare("softmax", lambda x: torch.exp(x) / torch.exp(x).sum(-1, keepdim=True), reference, CASES)
    assert "correct on all 1 checks" in capsys.readouterr().out


def test_a_stub_says_so_and_does_not_raise(capsys):
    def stub(x):
        raise NotImplementedError

    assert not compare("softmax", stub, reference, CASES)
    assert "not implemented yet" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda x: x.softmax(0), "entry"),
        (lambda x: x.softmax(-1)[0], "shape"),
        (lambda x: x.softmax(-1).tolist(), "expected a tensor"),
    ],
)
def test_a_wrong_answer_says_what_is_wrong(wrong, message):
    with pytest.raises(AssertionError, match=message):
        compare("softmax", wrong, reference, CASES)


def test_not_a_function():
    with pytest.raises(TypeError, match="pass your function"):
        compare("softmax", 3, reference, CASES)
