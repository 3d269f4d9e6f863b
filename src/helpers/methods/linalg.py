"""Numerical rank, left null spaces and small statistics.

Ranks use a tolerance relative to the largest singular value.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..model.checks import check_attention_and_values, check_matrix, check_tensor

DEFAULT_RTOL = 1e-5


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


class RangeBasis(NamedTuple):
    """An orthonormal basis of a column space: ``basis: (..., n, min(n, m))`` float64, ``rank: (...,)``."""

    basis: torch.Tensor
    rank: torch.Tensor


def range_basis(M: torch.Tensor, rtol: float = DEFAULT_RTOL) -> RangeBasis:
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
    return RangeBasis(U * keep[..., None, :].to(U.dtype), rank)


def _ranks(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(x, axis=-1)


def row_spearman(scores: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Spearman correlation of each row of ``scores`` with the same row of ``reference``: (..., n, n) -> (..., n).

    Ties get average ranks; a constant row gives NaN.
    """
    if scores.shape != reference.shape or scores.dim() < 2:
        raise ValueError(
            f"scores and reference must have the same shape (..., n, n); got {tuple(scores.shape)} and "
            f"{tuple(reference.shape)}."
        )
    a = _ranks(scores.detach().double().cpu().numpy())
    b = _ranks(reference.detach().double().cpu().numpy())
    a = a - a.mean(-1, keepdims=True)
    b = b - b.mean(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (a * b).sum(-1) / np.sqrt((a * a).sum(-1) * (b * b).sum(-1))
    return torch.from_numpy(rho).to(scores.device)


def cosine_distance(u: torch.Tensor, v: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """1 - cos(u, v) along ``dim``, computed as 0.5 ||u/|u| - v/|v|||^2: (..., d) twice -> (...,).

    The two are equal in exact arithmetic, but ``1 - cos`` subtracts two numbers
    close to 1 and loses every digit of a distance near float32's epsilon (1e-7):
    a distance of 1e-8 comes out as 0 or as noise. The squared distance of the unit
    vectors keeps its relative precision however small it is. A zero vector raises.
    """
    if not isinstance(u, torch.Tensor) or not isinstance(v, torch.Tensor):
        raise TypeError("u and v must be tensors.")
    nu, nv = u.norm(dim=dim, keepdim=True), v.norm(dim=dim, keepdim=True)
    if (nu == 0).any() or (nv == 0).any():
        raise ValueError("The cosine distance of a zero vector is not defined.")
    return 0.5 * (u / nu - v / nv).pow(2).sum(dim)


def spearman(a, b) -> float:
    """Spearman correlation of two 1-D sequences of the same length."""
    # cpu: two sequences of numbers, ranked with NumPy
    a, b = (
        torch.from_numpy(np.asarray(v.detach().cpu() if isinstance(v, torch.Tensor) else v, dtype=float))
        for v in (a, b)
    )
    if a.dim() != 1 or a.shape != b.shape or len(a) < 2:
        raise ValueError(
            f"Expected two 1-D sequences of the same length >= 2; got {tuple(a.shape)} and {tuple(b.shape)}."
        )
    return float(row_spearman(a[None, None], b[None, None])[0, 0])


def orthonormal_samples(n: int, d: int, k: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """k random orthonormal directions per token, Haar-distributed: (n, k, d), on the CPU.

    With U_j the k x d samples of token j, (d / k) ||U_j J||_F^2 is an unbiased
    estimate of ||J||_F^2 for any d x d block J, and exact when k = d.
    """
    if not 1 <= k <= d:
        raise ValueError(f"samples must be between 1 and d = {d}; got {k}.")
    generator = torch.Generator().manual_seed(seed)
    gaussian = torch.randn(n, d, k, generator=generator, dtype=torch.float64)  # cpu: seeded CPU draws, any device
    q, r = torch.linalg.qr(gaussian)  # (n, d, k)
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]
    return q.transpose(1, 2).to(dtype)
