"""Numerical rank, left null spaces, shared input checks and small statistics.

Ranks use a tolerance relative to the largest singular value. The input
checks here are the ones every method module shares (public, so no module
imports another's private names).
"""

from __future__ import annotations

import torch

DEFAULT_RTOL = 1e-5


def check_tensor(M, name: str, dims: int | None = None, min_dims: int | None = None) -> None:
    """Raise unless ``M`` is a finite tensor with ``dims`` (or at least ``min_dims``) dimensions."""
    if not isinstance(M, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(M).__name__}.")
    if dims is not None and M.dim() != dims:
        raise ValueError(f"{name} must have {dims} dimensions; got shape {tuple(M.shape)}.")
    if min_dims is not None and M.dim() < min_dims:
        raise ValueError(f"{name} must have at least {min_dims} dimensions; got shape {tuple(M.shape)}.")
    if not torch.isfinite(M).all():
        raise ValueError(f"{name} contains NaN or infinite values.")


def check_matrix(M, name: str = "M") -> None:
    """Raise unless ``M: (..., n, m)`` is a finite tensor of matrices."""
    if isinstance(M, torch.Tensor) and M.dim() < 2:
        raise ValueError(f"{name} must have shape (..., n, m); got {tuple(M.shape)}.")
    check_tensor(M, name, min_dims=2)


def check_attention_and_values(A: torch.Tensor, T: torch.Tensor) -> None:
    """Raise unless ``A: (n, n)`` and ``T: (n, d)`` are finite and fit together."""
    check_tensor(A, "A", dims=2)
    check_tensor(T, "T", dims=2)
    n = A.shape[0]
    if A.shape != (n, n):
        raise ValueError(f"A must be square (n, n); got {tuple(A.shape)}.")
    if T.shape[0] != n:
        raise ValueError(f"A is {tuple(A.shape)} but T has {T.shape[0]} rows; T must be (n, d) with n = {n}.")


def check_attention_distribution(A: torch.Tensor, atol: float = 1e-5) -> None:
    """Raise unless every row of ``A: (..., n, n)`` is a probability distribution (to ``atol``)."""
    if float(A.min()) < -atol:
        raise ValueError(f"A has negative entries (min {float(A.min()):.3g}); attention rows must be non-negative.")
    row_error = float((A.sum(-1) - 1).abs().max())
    if row_error > atol:
        raise ValueError(f"The rows of A do not sum to 1 (max error {row_error:.3g}); pass attention probabilities.")


def relative_output_change(alternatives: torch.Tensor, A: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    """How much an alternative attention changes the head output: max|(A' - A) T| / max|A T|.

    alternatives: (..., n, n); A: (n, n); T: (n, d) -> (...,) float64, one
    value per alternative (0 for exactly the same output).
    """
    check_attention_and_values(A, T)
    check_tensor(alternatives, "alternatives", min_dims=2)
    if alternatives.shape[-2:] != A.shape:
        raise ValueError(f"alternatives must end in A's shape {tuple(A.shape)}; got {tuple(alternatives.shape)}.")
    A64, T64 = A.double(), T.double()
    change = ((alternatives.double() - A64) @ T64).abs().amax(dim=(-2, -1))
    return change / (A64 @ T64).abs().max()


def pearson(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """Pearson correlation of the entries of each matrix pair: (..., n, m) twice -> (...,).

    Computed in float64. A constant matrix has no correlation: NaN there.
    """
    check_matrix(X, "X")
    check_matrix(Y, "Y")
    if X.shape != Y.shape:
        raise ValueError(f"X and Y must have the same shape; got {tuple(X.shape)} and {tuple(Y.shape)}.")
    x = X.to(torch.float64, copy=True).flatten(-2)  # a copy: centred in place below
    x -= x.mean(dim=-1, keepdim=True)
    y = Y.to(torch.float64, copy=True).flatten(-2)
    y -= y.mean(dim=-1, keepdim=True)
    return torch.einsum("...i,...i->...", x, y) / (x.norm(dim=-1) * y.norm(dim=-1))


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
    check_matrix(M)
    S = torch.linalg.svdvals(M.double() if M.dtype == torch.float32 else M)
    return (S > singular_value_tolerance(S, rtol)[..., None]).sum(dim=-1)


def left_null_space(M: torch.Tensor, rtol: float = DEFAULT_RTOL) -> torch.Tensor:
    """Orthonormal basis of LN(M) = {x : x^T M = 0} for one matrix.

    M: (n, m) -> (n, n - rank(M)); columns are orthonormal and x^T M ~ 0.
    Computed in float64 from the full SVD M = U S V^T: the columns of U past
    the numerical rank.
    """
    check_matrix(M)
    if M.dim() != 2:
        raise ValueError(
            f"left_null_space takes one matrix (n, m); got {tuple(M.shape)}. Loop or use effective_attention for batches."
        )
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
    check_matrix(M)
    U, S, _ = torch.linalg.svd(M.double(), full_matrices=False)
    rank = (S > singular_value_tolerance(S, rtol)[..., None]).sum(dim=-1)
    keep = torch.arange(S.shape[-1], device=S.device) < rank[..., None]  # (..., k)
    return U * keep[..., None, :].to(U.dtype), rank
