"""Slow, obviously-correct versions of the helpers' methods, for tests and benchmarks."""
from __future__ import annotations

import torch

# ---- Causal effective attention (helpers.causal), one row and one head at a time ----


def causal_effective_attention_reference(A: torch.Tensor, T: torch.Tensor, rtol: float = 1e-5) -> torch.Tensor:
    """Effective part of one causal head, row by row: A (n, n), T (n, d) -> (n, n), float64.

    Row i: remove from ``A[i, :i+1]`` its component in the left null space of
    ``T[:i+1]`` (a basis from the full SVD of that prefix: the left singular
    vectors past its numerical rank).
    """
    n = A.shape[-1]
    A = A.double()
    effective = torch.zeros_like(A)
    for i in range(n):
        prefix = T[: i + 1].double()
        U, S, _ = torch.linalg.svd(prefix, full_matrices=True)
        rank = int((S > rtol * S.max()).sum())
        null_basis = U[:, rank:]  # (i+1, i+1-rank)
        row = A[i, : i + 1]
        effective[i, : i + 1] = row - null_basis @ (null_basis.T @ row)
    return effective
