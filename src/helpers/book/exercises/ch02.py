"""Checks for the code exercises of chapter 2 (The rank argument)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from helpers.book.exercises.checking import compare
from helpers.methods.nullspace import same_output_towards

__all__ = ["check_same_output_towards"]


def _case(generator: torch.Generator, n: int, rank: int, d: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A row-stochastic A: (n, n), a T: (n, d) of rank ``rank`` < n and a target B: (n, n), float64."""
    A = torch.randn(n, n, generator=generator, dtype=torch.float64).softmax(-1)
    T = torch.randn(n, rank, generator=generator, dtype=torch.float64) @ torch.randn(
        rank, d, generator=generator, dtype=torch.float64
    )
    B = torch.rand(n, n, generator=generator, dtype=torch.float64)
    return A, T, B / B.sum(-1, keepdim=True)


def check_same_output_towards(function: Callable) -> bool:
    """Check the reader's ``same_output_towards(A, T, B)`` (exercise ex-02-towards).

    The reader's function returns ``A + Ã`` with the rows of ``Ã = B - A``
    projected onto the left null space LN(T), the matrix closest to ``B`` with
    the head output ``A T``. It is compared with
    :func:`helpers.methods.nullspace.same_output_towards` on fresh seeded float64
    inputs: a random row-stochastic ``A``, a ``T`` of known rank below ``n`` and a
    row-stochastic target ``B`` (n = 7, rank 3, d = 5 and n = 10, rank 4, d = 12).
    Prints "not implemented yet" and returns False on the stub, raises
    ``AssertionError`` saying what differs on a wrong answer, returns True on a
    right one.
    """
    generator = torch.Generator().manual_seed(2)
    cases = [
        ("n = 7, rank(T) = 3, d = 5", _case(generator, 7, 3, 5)),
        ("n = 10, rank(T) = 4, d = 12", _case(generator, 10, 4, 12)),
    ]
    return compare("same_output_towards", function, same_output_towards, cases, atol=1e-8)
