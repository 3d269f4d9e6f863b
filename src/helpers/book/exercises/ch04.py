"""Checks for the code exercises of chapter 4 (effective attention)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...methods.effective import effective_attention
from ...methods.linalg import DEFAULT_RTOL
from .checking import compare

__all__ = ["check_effective_part"]


def _attention(n: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randn(n, n, generator=generator, dtype=torch.float64).mul(2).softmax(dim=-1)


def _cases() -> list[tuple[str, tuple]]:
    g = torch.Generator().manual_seed(4)
    rank_two = torch.randn(7, 2, generator=g, dtype=torch.float64) @ torch.randn(2, 5, generator=g, dtype=torch.float64)
    return [
        # n > d: a null space of dimension n - d
        ("n = 6 tokens, T of shape (6, 3)", (_attention(6, g), torch.randn(6, 3, generator=g, dtype=torch.float64))),
        # n <= d: no null space, A_eff = A
        ("n = 4 tokens, T of shape (4, 8)", (_attention(4, g), torch.randn(4, 8, generator=g, dtype=torch.float64))),
        # T = V H with d_v = 2 < d: rank 2, the rank must come from the singular values
        ("n = 7 tokens, T = V H of rank 2, shape (7, 5)", (_attention(7, g), rank_two)),
    ]


def _reference(A: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    return effective_attention(A, T, rtol=DEFAULT_RTOL).effective


def check_effective_part(effective_part: Callable) -> bool:
    """Check ``effective_part(A, T) -> A_eff`` for one head against :func:`helpers.effective_attention`.

    ``A`` is ``(n, n)`` attention, ``T`` is ``(n, d)``; the answer is the ``(n, n)``
    effective attention ``A U_r U_r^T``, with the rank ``r`` counted as the singular
    values of ``T`` above ``DEFAULT_RTOL`` times the largest. Three fresh heads are
    drawn with a fixed seed: one with a null space, one without, one where ``T`` has
    rank below both of its sides.
    """
    return compare("effective_part", effective_part, _reference, _cases(), atol=1e-6)
