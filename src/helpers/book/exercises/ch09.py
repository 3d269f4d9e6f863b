"""Checks for the code exercises of chapter 9 (a decoder LLM).

``check_causal_effective_rows`` tests a reader's row-by-row effective attention of one
causal head against :func:`helpers.methods.causal.causal_effective_attention`, on small
random heads drawn with a fixed seed (no model is loaded).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...methods.causal import causal_effective_attention, future_mass
from .checking import compare

__all__ = ["check_causal_effective_rows"]


def _causal_head(n: int, m: int, seed: int, repeat: tuple[int, int] | None = None):
    """A causal attention matrix (n, n) and a value-side matrix T (n, m), float64, from ``seed``.

    ``repeat=(i, j)`` copies row j of T into row i (a repeated token: a rank-deficient prefix).
    """
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, n, generator=generator, dtype=torch.float64)
    future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    A = logits.masked_fill(future, float("-inf")).softmax(dim=-1)
    T = torch.randn(n, m, generator=generator, dtype=torch.float64)
    if repeat is not None:
        T[repeat[0]] = T[repeat[1]]
    return A, T


def _cases():
    return [
        ("a causal head of 7 tokens with d_v = 3", _causal_head(7, 3, seed=9)),
        ("a head whose token 2 repeats token 0 (n = 6, d_v = 3)", _causal_head(6, 3, seed=19, repeat=(2, 0))),
        ("a head of 4 tokens with d_v = 5 (every row identifiable)", _causal_head(4, 5, seed=29)),
    ]


def _reference(A: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    return causal_effective_attention(A, T).effective


def _hint(function: Callable, cases) -> str:
    """What a wrong answer most likely got wrong, read from its output on the first case."""
    A, T = cases[0][1]
    try:
        got = function(A, T)
    except Exception:  # the comparison already said what failed
        return ""
    if not isinstance(got, torch.Tensor) or got.shape != A.shape:
        return ""
    got = got.detach().double()
    if float(future_mass(got).abs().max()) > 1e-8:
        return (
            "Your rows put weight on future positions: project row i onto the column space of its "
            "own prefix T[:i+1], not of the whole T."
        )
    if not torch.allclose(got @ T, A @ T, atol=1e-6):
        return (
            "Your rows change the head output (A_eff T differs from A T): project each row onto "
            "range(T[:i+1]) instead of removing or rescaling weight."
        )
    return ""


def check_causal_effective_rows(causal_effective_rows: Callable) -> bool:
    """Check ``causal_effective_rows(A, T) -> A_eff`` against the book's causal effective attention.

    ``A``: ``(n, n)`` causal attention of one head; ``T``: ``(n, d_v)`` (its values, or ``V H``).
    The answer must be ``(n, n)``: row i of ``A`` projected onto range(T[:i+1]). Three random heads
    (seeded) are compared, one with a repeated token and one short enough to be identifiable.
    Prints "not implemented yet" for the stub, raises ``AssertionError`` (with a hint) on a wrong
    answer, returns True on a right one.
    """
    cases = _cases()
    try:
        return compare("causal_effective_rows", causal_effective_rows, _reference, cases, atol=1e-8, rtol=1e-6)
    except AssertionError as error:
        hint = _hint(causal_effective_rows, cases)
        raise AssertionError(f"{error} {hint}".strip()) from None
