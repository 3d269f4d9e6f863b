"""Effective attention: the part of A that reaches the head output (paper section 3.4).

For one head, with ``T = V H`` (value bias folded in, see ``helpers.model.internals``)
and ``P`` the orthogonal projector onto the column space of T:

    A_eff  = A P              (rows of A projected onto range(T))
    A_null = A (I - P)        (rows of A projected onto LN(T))

so ``A = A_eff + A_null``, ``A_null T = 0`` and ``A_eff T = A T``: the head
output, and therefore the whole network, only sees A_eff. The numerical rank
of T uses a tolerance relative to its largest singular value, on the
unpadded sequence.

Fast path: if H (d_v x d) has full row rank, ``x^T V H = 0`` iff ``x^T V = 0``,
so LN(T) = LN(V) and the SVD of V (n x d_v) replaces the SVD of T (n x d).
``effective_attention(A, V=V, H=H)`` checks the rank of every H and falls
back to T = V H for any head where it fails.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import torch

from ..model.checks import check_matrix, warn_at_caller
from .linalg import DEFAULT_RTOL, numerical_rank, range_basis


class EffectiveAttention(NamedTuple):
    """Effective and null parts of attention; both ``(..., n, n)``, ``effective + null = A``."""

    effective: torch.Tensor
    null: torch.Tensor


def check_rtol(rtol: float) -> None:
    if isinstance(rtol, bool) or not isinstance(rtol, numbers.Real) or not rtol > 0 or not rtol < 1:
        raise ValueError(f"rtol must be a number in (0, 1), relative to the largest singular value; got {rtol!r}.")


def check_attention(A: torch.Tensor) -> None:
    check_matrix(A, "A")
    if A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A must be square in its last two dimensions, (..., n, n); got {tuple(A.shape)}.")
    if A.shape[-1] == 0:
        raise ValueError("A is empty (n = 0): give at least one token.")


def working_precision(M: torch.Tensor, name: str) -> torch.Tensor:
    """M in float32 or float64: integer, bool, float16 and bfloat16 tensors become float32.

    An integer A would otherwise come back as an integer null part (all zeros
    after rounding) and a half-precision one would lose the identities.
    """
    if M.is_complex():
        raise TypeError(f"{name} must be real, got {M.dtype}.")
    if M.dtype in (torch.float32, torch.float64):
        return M
    return M.to(torch.float32)


def check_same_batch(A: torch.Tensor, M: torch.Tensor, name: str) -> None:
    if M.shape[:-2] != A.shape[:-2] or M.shape[-2] != A.shape[-1]:
        raise ValueError(
            f"{name} must have shape (..., n, m) with the leading dimensions and n of A {tuple(A.shape)}; "
            f"got {tuple(M.shape)}."
        )


def _split(A: torch.Tensor, basis: torch.Tensor, rank: torch.Tensor) -> EffectiveAttention:
    """A (..., n, n) and a zero-padded range basis (..., n, k) -> effective and null parts.

    The projection runs in float64. Where the null space is empty (rank == n)
    the null part is exactly zero and the effective part exactly A.
    """
    null = A.to(torch.float64, copy=True)  # never write into the caller's A
    null -= (null @ basis) @ basis.transpose(-1, -2)
    empty = rank == A.shape[-1]
    if bool(empty.any()):
        null[empty] = 0.0
    null = null.to(A.dtype)
    return EffectiveAttention(A - null, null)


def effective_attention(
    A: torch.Tensor,
    T: torch.Tensor | None = None,
    *,
    V: torch.Tensor | None = None,
    H: torch.Tensor | None = None,
    rtol: float = DEFAULT_RTOL,
) -> EffectiveAttention:
    """Split attention into its effective part and its part in the left null space of T.

    Batched over any leading dimensions (all layers and heads in one call).
    Pass either ``T`` (the direct path) or ``V`` and ``H`` (the fast path).

    Args:
        A: attention, ``(..., n, n)``; rows need not be stochastic.
        T: ``(..., n, d)``, the matrix the head multiplies A with (``T = V H``).
        V: ``(..., n, d_v)``, per-head values (value bias included).
        H: ``(..., d_v, d)``, the head's rows of W^O; needed with V to check that
            LN(V H) = LN(V), i.e. that every H has full row rank. Heads where it
            has not fall back to the SVD of ``V @ H`` (with a warning).
        rtol: singular values at most ``rtol * max singular value`` count as zero.

    Returns:
        ``EffectiveAttention(effective, null)``, both ``(..., n, n)`` in A's dtype, or float32
        for an integer, bool or half-precision A (computed in float64), with ``effective @ T == A @ T`` and ``null @ T == 0``.

    Raises:
        TypeError, ValueError: non-tensors, mismatched shapes, NaN/inf, bad rtol,
        or an ambiguous choice of T / V / H.
    """
    return effective_attention_and_rank(A, T, V, H, rtol)[0]


class EffectiveAndRank(NamedTuple):
    """``effective_attention`` and the numerical rank of T per head, ``rank: (...,)``."""

    attention: EffectiveAttention
    rank: torch.Tensor


def effective_attention_and_rank(
    A: torch.Tensor,
    T: torch.Tensor | None,
    V: torch.Tensor | None,
    H: torch.Tensor | None,
    rtol: float,
    full_row_rank: torch.Tensor | None = None,
) -> EffectiveAndRank:
    """effective_attention, plus the numerical rank of T per head: (...,).

    ``full_row_rank`` (bool, (...,)) lets a caller that runs the same model
    many times check the ranks of H once instead of on every call.
    """
    check_rtol(rtol)
    check_attention(A)
    A = working_precision(A, "A")
    if T is not None:
        if V is not None or H is not None:
            raise ValueError("Pass either T, or V and H (T = V H), not both.")
        check_matrix(T, "T")
        check_same_batch(A, T, "T")
        basis, rank = range_basis(T, rtol)
        return _split(A, basis, rank), rank
    if V is None:
        raise ValueError("Pass T (n x d), or V (n x d_v) with H (d_v x d).")
    if H is None:
        raise ValueError(
            "The V fast path needs H too, to check that H has full row rank (so LN(V H) = LN(V)). "
            "To split against LN(V) itself, pass it as T."
        )
    check_matrix(V, "V")
    check_matrix(H, "H")
    check_same_batch(A, V, "V")
    if H.shape[:-2] != A.shape[:-2] or H.shape[-2] != V.shape[-1]:
        raise ValueError(
            f"H must have shape (..., d_v, d) with the leading dimensions of A {tuple(A.shape[:-2])} and "
            f"d_v = {V.shape[-1]} (the last dimension of V); got {tuple(H.shape)}."
        )
    if full_row_rank is None:
        full_row_rank = numerical_rank(H.mT, rtol) == H.shape[-2]  # (...,); tall is faster for LAPACK
    basis, rank = range_basis(V, rtol)
    result = _split(A, basis, rank)
    if bool(full_row_rank.all()):
        return EffectiveAndRank(result, rank)
    bad = ~full_row_rank
    warn_at_caller(
        f"{int(bad.sum())} head(s) have an H without full row rank, so LN(V H) may be larger than "
        "LN(V); using the SVD of T = V H for them.",
        UserWarning,
    )
    slow_basis, slow_rank = range_basis(V[bad] @ H[bad], rtol)
    slow = _split(A[bad], slow_basis, slow_rank)
    effective, null, rank = result.effective.clone(), result.null.clone(), rank.clone()
    effective[bad], null[bad], rank[bad] = slow.effective, slow.null, slow_rank
    return EffectiveAndRank(EffectiveAttention(effective, null), rank)


class KeptParts(NamedTuple):
    """What effective attention keeps of each weight, split by where it comes from.

    With P the projector onto the column space of T, ``A_eff = A P``, so
    ``A_eff[i, j] = a_ij P_jj + sum_{k != j} a_ik P_kj``:

    own: ``(..., n, n)``, ``a_ij P_jj``, the part of the weight on j that stays on j;
    moved: ``(..., n, n)``, ``sum_{k != j} a_ik P_kj``, what the projection moves onto j
    from the other positions (it can be negative, or make j gain);
    leverage: ``(..., n)``, ``P_jj = ||U_r[j]||^2``, the share of a weight on j that stays.

    ``own + moved = effective``. For a random r-dimensional column space every
    leverage has expectation r / n (the leverages sum to r), so a token keeps
    r / n of its weight by chance alone and loses ``1 - r / n``.
    """

    own: torch.Tensor
    moved: torch.Tensor
    leverage: torch.Tensor


def leverage(T: torch.Tensor, rtol: float = DEFAULT_RTOL) -> torch.Tensor:
    """The leverage of every token: the diagonal of the projector onto range(T).

    T: ``(..., n, d)`` (or V, ``(..., n, d_v)``, where LN(T) = LN(V)) -> ``(..., n)``
    in float64, ``P_jj = ||U_r[j]||^2`` in [0, 1]; each head's leverages sum to its rank.
    """
    check_rtol(rtol)
    check_matrix(T, "T")
    basis, _ = range_basis(T, rtol)
    return basis.pow(2).sum(-1)


def kept_parts(A: torch.Tensor, T: torch.Tensor, rtol: float = DEFAULT_RTOL) -> KeptParts:
    """Split effective attention ``A P`` into each weight's own kept part and what is moved onto it.

    A: ``(..., n, n)``; T: ``(..., n, d)`` (or V). Returns :class:`KeptParts` in float64.
    """
    check_rtol(rtol)
    check_attention(A)
    check_matrix(T, "T")
    check_same_batch(A, T, "T")
    basis, _ = range_basis(T, rtol)
    A = working_precision(A, "A").double()
    P = basis @ basis.mT
    diagonal = torch.diagonal(P, dim1=-2, dim2=-1)  # (..., n)
    own = A * diagonal[..., None, :]
    return KeptParts(own, A @ P - own, diagonal)


def random_column_space_attention(
    A: torch.Tensor, rank: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """A projected onto a random column space of each head's rank: the control of dimension counting.

    A: ``(..., n, n)``; rank: ``(...,)`` integers in [0, n], the rank ``r`` of each head's T.
    Returns ``A Q Q^T`` in float64, ``(..., n, n)``, where the columns of ``Q`` (``(..., n, r)``)
    are an orthonormal basis of an ``r``-dimensional subspace drawn uniformly at random (QR of a
    Gaussian matrix; its first ``r`` columns span a uniform random ``r``-plane). It is what
    effective attention would be if the column space of T carried no information about A:
    it keeps ``r / n`` of ``||A||^2`` on average.
    """
    check_attention(A)
    rank = torch.as_tensor(rank, device=A.device)
    if rank.shape != A.shape[:-2]:
        raise ValueError(f"rank must have the shape {tuple(A.shape[:-2])} of A's heads; got {tuple(rank.shape)}.")
    n = A.shape[-1]
    if bool((rank < 0).any()) or bool((rank > n).any()):
        raise ValueError(f"every rank must lie in [0, n = {n}]; got {rank.min()} to {rank.max()}.")
    k = int(rank.max()) if rank.numel() else 0
    A = working_precision(A, "A").double()
    if k == 0:
        return torch.zeros_like(A)
    # cpu: drawn with a CPU generator, so the same seed gives the same subspace on every device
    gaussian = torch.randn((*A.shape[:-2], n, k), generator=generator, dtype=torch.float64)
    basis, _ = torch.linalg.qr(gaussian.to(A.device))
    keep = torch.arange(k, device=A.device) < rank[..., None]  # (..., k): the first r columns
    basis = basis * keep[..., None, :]
    return (A @ basis) @ basis.mT
