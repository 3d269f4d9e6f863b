"""Pseudo-inverse solves with the Gram matrices of every prefix of one matrix (causal heads).

A causal head projects row i onto range(M[:i+1]), which takes ``G_i^+ c`` for the Gram matrix
``G_i = M[:i+1]^T M[:i+1]`` of every prefix. An eigendecomposition of each ``G_i`` (m x m) does it
for any rank, at a cost that dominates chapter 9's sweeps. Most prefixes need none:

* while ``M[:i+1]`` has full row rank (i + 1 <= m, linearly independent rows), the projection is the
  identity; the leading blocks of one Cholesky factor of ``K = M M^T`` show it for every such
  prefix at once;
* once ``G_i`` has full rank m, ``G_i^+ = G_i^{-1}``: a Cholesky solve.

Each shortcut is taken only where a bound proves that the eigenvalue rule would keep every
eigenvalue (``lambda > (rtol sigma_max)^2``, the squared singular values the SVD keeps): with
a Cholesky factor ``G = L L^T``, ``lambda_min >= 1 / ||L^{-1}||_F^2`` and
``lambda_max <= trace(G)``. Every other prefix (a rank-deficient one, or a bound too loose to
decide) takes the eigendecomposition, so the ranks are the eigenvalue rule's and the solutions
agree with it to rounding. That holds while ``rtol^2`` stays far above m times the machine epsilon
(``MIN_RTOL``; the default 1e-5 leaves a margin of about 10^4 in float64).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..model.checks import check_tensor

__all__ = ["MIN_RTOL", "PrefixSolve", "prefix_gram_solve"]

# the bounds must clear the rule by this factor: rounding in the factors cannot then flip a rank
_SAFETY = 1e-2
# A Gram matrix squares the condition number: below this rtol, (rtol sigma_max)^2 nears m eps lambda_max and the
# eigenvalue rule itself stops telling rank from rounding (take the SVD of each prefix instead)
MIN_RTOL = 1e-6


class PrefixSolve(NamedTuple):
    """``solution``: (..., n, m), row i is ``G_i^+ rhs_i`` (zero where ``row_full``); ``rank``: (n,)
    the rank of ``M[:i+1]``; ``row_full``: (n,) whether that rank is i + 1 (the projection of a
    row onto range(M[:i+1]) is then the row itself)."""

    solution: torch.Tensor
    rank: torch.Tensor
    row_full: torch.Tensor


def _certified(L: torch.Tensor, info: torch.Tensor, trace: torch.Tensor, rtol: float) -> torch.Tensor:
    """(batch,) whether each Cholesky factor proves every eigenvalue above rtol^2 lambda_max."""
    eye = torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)
    safe = torch.where((info == 0)[:, None, None], L, eye)  # a failed factor: anything invertible, not certified
    inverse_norm = torch.linalg.solve_triangular(safe, eye.expand_as(safe), upper=False).pow(2).sum((-2, -1))
    return (info == 0) & (trace * inverse_norm < _SAFETY / rtol**2)


def _row_full_prefixes(M: torch.Tensor, rtol: float) -> torch.Tensor:
    """(n,) True where ``M[:i+1]`` provably has full row rank i + 1 under the eigenvalue rule."""
    n, m = M.shape
    k = min(n, m)
    K = M[:k] @ M[:k].T  # (k, k): the leading (i+1) x (i+1) block is M[:i+1] M[:i+1]^T
    L, info = torch.linalg.cholesky_ex(K)
    full = torch.zeros(n, dtype=torch.bool, device=M.device)
    if int(info) != 0:
        # a leading block is singular (a repeated row, say): certify the blocks before it alone
        k = int(info) - 1
        if k == 0:
            return full
        L, info = torch.linalg.cholesky_ex(K[:k, :k])
        if int(info) != 0:
            return full
    eye = torch.eye(k, dtype=M.dtype, device=M.device)
    inverse = torch.linalg.solve_triangular(L, eye, upper=False)  # lower triangular: its leading blocks invert K's
    inverse_norms = inverse.pow(2).sum(-1).cumsum(0)  # ||L_i^{-1}||_F^2 of every leading block
    traces = torch.diagonal(K[:k, :k]).cumsum(0)
    full[:k] = traces * inverse_norms < _SAFETY / rtol**2
    return full


def prefix_gram_solve(M: torch.Tensor, rhs: torch.Tensor, rtol: float) -> PrefixSolve:
    """``G_i^+ rhs_i`` for every prefix ``M[:i+1]`` of M.

    M: (n, m) float64; rhs: (..., n, m), row i solved with prefix i. ``G_i^+`` keeps the
    eigenvalues above ``(rtol sigma_max(M[:i+1]))^2``. Returns ``PrefixSolve``.
    """
    check_tensor(M, "M", dims=2)
    if not MIN_RTOL <= rtol < 1:
        raise ValueError(
            f"rtol must lie in [{MIN_RTOL:g}, 1) for a Gram route; got {rtol!r}. Below it the squared singular "
            "values sink into rounding: use the SVD of each prefix (causal_effective_attention(..., algorithm='svd'))."
        )
    if rhs.shape[-2:] != M.shape:
        raise ValueError(f"M must be (n, m) and rhs (..., n, m); got {tuple(M.shape)} and {tuple(rhs.shape)}.")
    n, m = M.shape
    sizes = torch.arange(1, n + 1, device=M.device)
    row_full = _row_full_prefixes(M, rtol)
    rank = torch.where(row_full, sizes, 0)
    solution = torch.zeros_like(rhs)
    pending = ~row_full
    if not bool(pending.any()):
        return PrefixSolve(solution, rank, row_full)
    start = int(pending.nonzero()[0, 0])  # the Gram matrices of the prefixes from here on: (n - start, m, m)
    steps = M[start + 1 :]
    gram = torch.cat([(M[: start + 1].T @ M[: start + 1])[None], steps[:, :, None] * steps[:, None, :]]).cumsum(0)
    wide = pending & (sizes >= m)  # prefixes that can have rank m
    if bool(wide.any()):
        index = wide.nonzero()[:, 0]
        L, info = torch.linalg.cholesky_ex(gram[index - start])
        trace = M.pow(2).sum(-1).cumsum(0)[index]  # trace(G_i): the squared norms of rows 0..i
        certified = _certified(L, info, trace, rtol)
        if bool(certified.any()):
            chosen = index[certified]
            columns = rhs[..., chosen, :].reshape(-1, len(chosen), m).permute(1, 2, 0)  # (k, m, batch)
            solved = torch.cholesky_solve(columns, L[certified]).permute(2, 0, 1)  # (batch, k, m)
            solution[..., chosen, :] = solved.reshape(*rhs.shape[:-2], len(chosen), m)
            rank[chosen] = m
            pending[chosen] = False
    if bool(pending.any()):
        index = pending.nonzero()[:, 0]
        values, vectors = torch.linalg.eigh(gram[index - start])  # ascending eigenvalues
        keep = values > (rtol**2) * values[:, -1:].clamp_min(0.0)
        inverse = torch.where(keep, 1.0 / torch.where(keep, values, torch.ones_like(values)), 0.0)
        coefficients = (rhs[..., index, None, :] @ vectors)[..., 0, :] * inverse  # in each G_i's eigenbasis
        solution[..., index, :] = (vectors @ coefficients[..., None])[..., 0]
        rank[index] = keep.sum(dim=-1)
    return PrefixSolve(solution, rank, rank == sizes)
