"""Checks for the code exercises of chapter 1 (Anatomy of a head)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from helpers.book.exercises.checking import compare
from helpers.model.internals import attention_from_qk

__all__ = ["check_attention_probabilities"]


def check_attention_probabilities(attention_probabilities: Callable) -> bool:
    """Check the reader's ``attention_probabilities(Q, K)`` (exercise ex-01-softmax).

    The reader's function maps queries and keys ``Q, K: (..., n, d_v)`` to the
    attention probabilities ``softmax(Q K^T / sqrt(d_v))``, normalised over the
    keys, ``(..., n, n)``. It is compared with
    :func:`helpers.model.internals.attention_from_qk` on fresh seeded inputs:
    one head, a (2, 3) batch of heads and a head whose size differs from its
    sequence length (so that a scale by the wrong axis shows). Prints "not
    implemented yet" and returns False on the stub, raises ``AssertionError``
    saying what differs on a wrong answer, returns True on a right one.
    """
    generator = torch.Generator().manual_seed(1)

    def draw(*shape: int) -> torch.Tensor:
        return 2 * torch.randn(*shape, generator=generator)

    cases = [
        ("one head, n = 5, d_v = 4", (draw(5, 4), draw(5, 4))),
        ("a (2, 3) batch of heads, n = 6, d_v = 8", (draw(2, 3, 6, 8), draw(2, 3, 6, 8))),
        ("one head, n = 3, d_v = 16", (draw(3, 16), draw(3, 16))),
    ]
    return compare("attention_probabilities", attention_probabilities, attention_from_qk, cases)
