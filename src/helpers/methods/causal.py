"""Effective attention for causal heads (decoders): one null space per row.

In a causal head, row i of A lives on positions 0..i. The head output of
position i is ``a_i^T T`` with ``a_i`` supported on 0..i, so the only
alternatives that leave it unchanged are ``a_i + x`` with x supported on
0..i and ``x^T T[:i+1] = 0``: the left null space LN(T[:i+1]), of dimension
``i + 1 - rank(T[:i+1]) >= i + 1 - d_v``. Rows up to d_v tokens are
identifiable (if T[:i+1] has full row rank); later rows are not, and the
null space grows by one dimension per token.

Effective attention of a causal head therefore projects each row onto
range(T[:i+1]), its own prefix. The whole sequence's null space LN(T) is the
wrong one: projecting a causal row onto range(T) spreads mass onto future
positions, which the head never attends to.

Grouped-query heads (Llama, Qwen2) share V within a group, so (with H of full
row rank) they share every prefix's null space; ``groups`` computes each
shared basis once.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..model.numbering import check_count, check_integer
from .effective import EffectiveAttention
from .linalg import DEFAULT_RTOL, numerical_rank, range_basis
from .prefix_gram import MIN_RTOL as GRAM_MIN_RTOL
from .prefix_gram import prefix_gram_solve

__all__ = [
    "causal_effective_attention",
    "causal_null_dimensions",
    "check_causal",
    "future_mass",
    "attention_on_position",
]


def _check_tensor(M, name: str) -> None:
    if not isinstance(M, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(M).__name__}.")
    if M.dim() < 2:
        raise ValueError(f"{name} must have shape (..., n, m); got {tuple(M.shape)}.")
    if not torch.isfinite(M).all():
        raise ValueError(f"{name} contains NaN or infinite values.")


def check_causal(A: torch.Tensor, atol: float = 1e-6) -> None:
    """Raise unless A (..., n, n) is square and puts no weight (above ``atol``) on future positions."""
    _check_tensor(A, "A")
    if A.shape[-1] != A.shape[-2] or A.shape[-1] == 0:
        raise ValueError(
            f"A must be square and non-empty in its last two dimensions, (..., n, n); got {tuple(A.shape)}."
        )
    future = future_mass(A)
    if bool((future.abs() > atol).any()):
        raise ValueError(
            f"A puts weight up to {float(future.abs().max()):.3g} on future positions: it is not a causal head. "
            "Use helpers.effective_attention for bidirectional heads."
        )


def future_mass(A: torch.Tensor) -> torch.Tensor:
    """Per row, the total weight on positions after the row's own: (..., n, n) -> (..., n)."""
    n = A.shape[-1]
    upper = torch.triu(torch.ones(n, n, dtype=torch.bool, device=A.device), diagonal=1)
    return (A * upper).sum(dim=-1)


def _value_side(
    A: torch.Tensor, T: torch.Tensor | None, V: torch.Tensor | None, H: torch.Tensor | None, rtol: float
) -> torch.Tensor:
    """The matrix whose prefixes' column spaces the rows are projected on: T, or V where LN(V H) = LN(V)."""
    if (T is None) == (V is None):
        raise ValueError("Pass either T, or V together with H.")
    if T is not None:
        if H is not None:
            raise ValueError("H goes with V, not with T.")
        M = T
    else:
        if H is None:
            raise ValueError("V needs H, to check that H has full row rank (then LN(V H) = LN(V)).")
        _check_tensor(H, "H")
        _check_tensor(V, "V")
        if H.shape[-2] != V.shape[-1]:
            raise ValueError(f"H must be (..., d_v, d) with d_v = V.shape[-1] = {V.shape[-1]}; got {tuple(H.shape)}.")
        full = numerical_rank(H, rtol) == H.shape[-2]
        M = V if bool(full.all()) else V @ H  # a rank-deficient H: use T = V H itself
    _check_tensor(M, "T" if T is not None else "V")
    if M.shape[:-2] != A.shape[:-2] or M.shape[-2] != A.shape[-1]:
        raise ValueError(
            f"T (or V) must be (..., n, m) with the leading dimensions and n of A {tuple(A.shape)}; got {tuple(M.shape)}."
        )
    return M


def _shared(M: torch.Tensor, groups: int) -> torch.Tensor:
    """One representative per group of heads along dimension -3 (heads j*groups .. (j+1)*groups - 1 share it)."""
    groups = check_count(groups, "groups (query heads per key/value head)")
    if groups == 1:
        return M
    if M.dim() < 3 or M.shape[-3] % groups:
        raise ValueError(f"groups={groups} must divide the number of heads (dimension -3 of {tuple(M.shape)}).")
    shared = M[..., ::groups, :, :]
    if not torch.equal(shared.repeat_interleave(groups, dim=-3), M):
        raise ValueError(f"The heads of a group of {groups} do not share T (or V); pass groups=1.")
    return shared


def causal_effective_attention(
    A: torch.Tensor,
    T: torch.Tensor | None = None,
    *,
    V: torch.Tensor | None = None,
    H: torch.Tensor | None = None,
    groups: int = 1,
    rtol: float = DEFAULT_RTOL,
    algorithm: str = "auto",
) -> EffectiveAttention:
    """Split causal attention row by row into the part that reaches the output and the part in LN(T[:i+1]).

    Args:
        A: causal attention, ``(..., n, n)``, zero above the diagonal.
        T: ``(..., n, d)``, ``T = V H``; or pass ``V: (..., n, d_v)`` with ``H: (..., d_v, d)``.
        groups: query heads per key/value head (grouped-query attention): heads along
            dimension -3 in runs of ``groups`` share T, so each prefix basis is computed once.
        rtol: singular values at most ``rtol * max`` count as zero (per prefix).
        algorithm: ``"gram"`` grows the m x m Gram matrix of the prefix by one rank-one term per
            row and projects with its pseudo-inverse (a Cholesky factor per prefix, an eigendecomposition
            where the factor cannot settle the rank);
            ``"svd"`` takes the SVD of every prefix (n SVDs of up to n x m per head); ``"auto"``
            (default) takes "gram" for m <= 128 (V, the fast path) and "svd" otherwise, or where
            ``rtol`` is below the Gram route's 1e-6.

    Returns:
        ``EffectiveAttention(effective, null)``, both ``(..., n, n)``, causal, in A's dtype
        (computed in float64): row i of ``effective`` is row i of A projected onto
        range(T[:i+1]); ``effective @ T == A @ T`` row by row and ``null[i, :i+1] @ T[:i+1] == 0``.
        Rows whose prefix has full row rank are returned unchanged (null part exactly 0).
    """
    check_causal(A)
    if not isinstance(rtol, (int, float)) or not 0 < rtol < 1:
        raise ValueError(f"rtol must be a number in (0, 1); got {rtol!r}.")
    if algorithm not in ("auto", "gram", "svd"):
        raise ValueError(f"algorithm must be 'auto', 'gram' or 'svd', got {algorithm!r}.")
    M = _shared(_value_side(A, T, V, H, rtol), groups).to(torch.float64)
    if algorithm == "auto":
        algorithm = "gram" if M.shape[-1] <= 128 and rtol >= GRAM_MIN_RTOL else "svd"
    A64 = A.to(torch.float64)
    if algorithm == "svd":
        effective, full = _rows_by_svd(A64, M, groups, rtol)
    else:
        effective, full = _rows_by_gram(A64, M, groups, rtol)
    effective = torch.where(full[..., None], A64, effective).to(A.dtype)  # full row rank: nothing to remove
    return EffectiveAttention(effective, A - effective)


def _rows_by_svd(A: torch.Tensor, M: torch.Tensor, groups: int, rtol: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Row i projected onto range(M[:i+1]) from the SVD of each prefix; and whether rank(M[:i+1]) = i + 1: (..., n)."""
    n = A.shape[-1]
    effective = torch.zeros_like(A)
    full = torch.zeros(A.shape[:-1], dtype=torch.bool, device=A.device)
    for i in range(n):
        basis, rank = range_basis(M[..., : i + 1, :], rtol)  # (..., i+1, k)
        if groups > 1:
            basis, rank = basis.repeat_interleave(groups, dim=-3), rank.repeat_interleave(groups, dim=-1)
        row = A[..., i, None, : i + 1]  # (..., 1, i+1)
        effective[..., i, : i + 1] = ((row @ basis) @ basis.transpose(-1, -2))[..., 0, :]
        full[..., i] = rank == i + 1
    return effective, full


def _rows_by_gram(A: torch.Tensor, M: torch.Tensor, groups: int, rtol: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The same projection from the nested prefixes' Gram matrices G_i = M[:i+1]^T M[:i+1].

    Because A is causal, M[:i+1]^T a_i = (A M)[i] for every row at once, and the projection of
    a_i onto range(M[:i+1]) is M[:i+1] G_i^+ (A M)[i]: row i of tril((A M) G_i^+ M^T).
    G_i^+ keeps the eigenvalues above (rtol * sigma_max)^2, the squares of the singular values
    the SVD route keeps (``helpers.methods.prefix_gram``: an eigendecomposition only for the
    prefixes a Cholesky factor cannot settle). One shared head at a time.
    """
    n, m = A.shape[-1], M.shape[-1]
    batch = M.shape[:-2]
    flat_M = M.reshape(-1, n, m)
    flat_A = A.reshape(*batch, groups, n, n) if groups > 1 else A.reshape(*batch, 1, n, n)
    flat_A = flat_A.reshape(-1, flat_A.shape[-3], n, n)
    effective = torch.empty_like(flat_A)
    full = torch.empty(flat_A.shape[:-1], dtype=torch.bool, device=A.device)
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool, device=A.device))
    for b in range(flat_M.shape[0]):
        Mb = flat_M[b]  # (n, m)
        C = flat_A[b] @ Mb  # (g, n, m): row i is M[:i+1]^T a_i
        solved = prefix_gram_solve(Mb, C, rtol)  # row i: G_i^+ c_i
        effective[b] = (solved.solution @ Mb.T) * causal
        full[b] = solved.row_full[None]
    return effective.reshape(A.shape), full.reshape(A.shape[:-1])


def causal_null_dimensions(T: torch.Tensor, rtol: float = DEFAULT_RTOL) -> torch.Tensor:
    """dim LN(T[:i+1]) = i + 1 - rank(T[:i+1]) for every row i: (..., n, m) -> (..., n) integers.

    T may also be V (the same null spaces when H has full row rank).
    """
    _check_tensor(T, "T")
    n = T.shape[-2]
    ranks = torch.stack([numerical_rank(T[..., : i + 1, :], rtol) for i in range(n)], dim=-1)
    return torch.arange(1, n + 1, device=ranks.device) - ranks


class PositionAttention(NamedTuple):
    """Total raw and effective attention on one position, each (...,)."""

    raw: torch.Tensor
    effective: torch.Tensor


def attention_on_position(
    A: torch.Tensor, effective: torch.Tensor, position: int = 0, from_row: int = 0
) -> PositionAttention:
    """Total raw and effective attention that rows ``from_row..n-1`` put on one ``position``.

    A, effective: (..., n, n) -> ``(raw, effective)``, each (...,). Their ratio is the share of
    the attention on that position that reaches the head output (the rest lies in the null space).
    """
    _check_tensor(A, "A")
    if effective.shape != A.shape:
        raise ValueError(f"effective must have A's shape {tuple(A.shape)}; got {tuple(effective.shape)}.")
    n = A.shape[-1]
    position = check_integer(position, "position", 0, n - 1)
    from_row = check_integer(from_row, "from_row", 0, n - 1)
    return PositionAttention(A[..., from_row:, position].sum(dim=-1), effective[..., from_row:, position].sum(dim=-1))
