"""Numerical rank and left null spaces with a tolerance relative to the largest singular value."""
from __future__ import annotations

import torch

DEFAULT_RTOL = 1e-5


def _check_matrix(M: torch.Tensor, name: str = "M") -> None:
    if not isinstance(M, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(M).__name__}.")
    if M.dim() < 2:
        raise ValueError(f"{name} must have shape (..., n, m); got {tuple(M.shape)}.")
    if not torch.isfinite(M).all():
        raise ValueError(f"{name} contains NaN or infinite values.")


def singular_value_tolerance(S: torch.Tensor, rtol: float = DEFAULT_RTOL) -> torch.Tensor:
    """rtol * largest singular value, per matrix: S (..., k) -> (...,)."""
    if not rtol > 0:
        raise ValueError(f"rtol must be positive, got {rtol}.")
    return rtol * S.amax(dim=-1)


def numerical_rank(M: torch.Tensor, rtol: float = DEFAULT_RTOL) -> torch.Tensor:
    """Number of singular values above ``rtol * max singular value``.

    M: (..., n, m) -> (...,) integer ranks. The relative tolerance keeps
    the rank independent of the overall scale of M (an absolute threshold,
    as in some public code, inflates the null space of small matrices).
    """
    _check_matrix(M)
    S = torch.linalg.svdvals(M.double() if M.dtype == torch.float32 else M)
    return (S > singular_value_tolerance(S, rtol)[..., None]).sum(dim=-1)


def left_null_space(M: torch.Tensor, rtol: float = DEFAULT_RTOL) -> torch.Tensor:
    """Orthonormal basis of LN(M) = {x : x^T M = 0} for one matrix.

    M: (n, m) -> (n, n - rank(M)); columns are orthonormal and x^T M ~ 0.
    Computed in float64 from the full SVD M = U S V^T: the columns of U past
    the numerical rank.
    """
    _check_matrix(M)
    if M.dim() != 2:
        raise ValueError(f"left_null_space takes one matrix (n, m); got {tuple(M.shape)}. Loop or use effective_attention for batches.")
    U, S, _ = torch.linalg.svd(M.double(), full_matrices=True)
    rank = int((S > singular_value_tolerance(S, rtol)).sum())
    return U[:, rank:].to(M.dtype)


def range_basis(M: torch.Tensor, rtol: float = DEFAULT_RTOL) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched orthonormal basis of the column space of M, with its numerical rank.

    M: (..., n, m) -> ``(U, rank)`` with ``U: (..., n, min(n, m))`` in float64
    and ``rank: (...,)``. The first ``rank`` columns of U are the left singular
    vectors above ``rtol * max singular value``; the remaining columns are zero,
    so ``U @ U^T`` is the orthogonal projector onto range(M) for every matrix of
    the batch at once (its complement projects onto LN(M)).
    """
    _check_matrix(M)
    U, S, _ = torch.linalg.svd(M.double(), full_matrices=False)
    rank = (S > singular_value_tolerance(S, rtol)[..., None]).sum(dim=-1)
    keep = torch.arange(S.shape[-1], device=S.device) < rank[..., None]  # (..., k)
    return U * keep[..., None, :].to(U.dtype), rank
