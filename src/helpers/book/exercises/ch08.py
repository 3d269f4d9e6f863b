"""Checks for the code exercises of chapter 8."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...methods.nullspace import null_space_dimensions
from .checking import compare

__all__: list[str] = ["check_null_space_dimension"]


def _reference_dimension(T: torch.Tensor) -> int:
    """The book's dim LN([T, 1]) of one head, as an int."""
    return int(null_space_dimensions(T).with_ones)


def _value_cases(seed: int = 0) -> list[tuple[str, tuple]]:
    """Fresh T (n, d): generic ones on both sides of n = d, rank-deficient ones, ones already in span, zero."""
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    cases = [(f"a random T of {n} tokens and d = {d}", (randn(n, d),)) for n, d in ((10, 3), (7, 2), (4, 6))]
    cases.append(("a T of 12 tokens, d = 8 but rank 3", (randn(12, 3) @ randn(3, 8),)))
    with_ones = randn(8, 3)
    with_ones[:, 0] = 1.0
    cases.append(("a T of 8 tokens whose first column is all ones", (with_ones,)))
    cases.append(("a zero T of 6 tokens, d = 2", (torch.zeros(6, 2, dtype=torch.float64),)))
    return cases


def check_null_space_dimension(null_space_dimension: Callable) -> bool:
    """Check ``null_space_dimension(T) -> int``, dim LN([T, 1]) for one head's T: (n, d).

    The answer is the dimension of {x : x T = 0, x 1 = 0}, n - rank([T, 1]). The
    reference is the book's own ``helpers.methods.nullspace.null_space_dimensions``
    (its ``with_ones`` part), on six fresh matrices (seed 0), among them a
    rank-deficient T and one whose column space already holds the ones vector.
    """
    return compare("null_space_dimension", null_space_dimension, _reference_dimension, _value_cases())
