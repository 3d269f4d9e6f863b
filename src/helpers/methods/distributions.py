"""Distributions with the same output: the critics' question (chapter 4).

Effective attention is not a probability distribution: it has negative entries,
and its rows need not sum to 1. Critics of the paper (Naim & Asher 2024) ask for
an explanation that is one. For one head (A: (n, n) row-stochastic, T: (n, d)),
the distributions with the same output as row i form chapter 3's polytope

    P_i = {p >= 0 : Q^T p = Q^T a_i},   Q an orthonormal basis of span(T, 1).

* ``simplex_effective_attention``: A Q Q^T, effective attention with the bias
  column (the projection onto span(T, 1)); its rows sum to 1, entries may be
  negative. It is the point of smallest norm among all weightings with the same
  output and the same row sum, so it lies in P_i only when it is non-negative.
* ``closest_distribution``: per row, the point of P_i closest to a target row in
  the L1 norm (twice the total-variation distance), one linear program per row,
  solved by HiGHS as in ``helpers.methods.lp_bounds``. The optimum is a vertex of
  P_i, so it has zero weights.
* ``max_entropy_distribution``: per row, the point of P_i of largest entropy (the KL
  projection of the uniform distribution onto P_i). Its weights are all positive and
  its logs lie in span(T, 1): p = softmax(Q lambda), found by Newton's method on the
  convex dual min_lambda logsumexp(Q lambda) - lambda^T Q^T a_i.

Tensors in, tensors out; this module never loads a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
from scipy.optimize import linprog

from ..model.checks import check_attention_and_values, check_attention_distribution
from ..model.numbering import check_integer
from .linalg import DEFAULT_RTOL
from .lp_bounds import FEASIBILITY_TOL, constraint_basis

__all__ = ["simplex_effective_attention", "ClosestDistribution", "closest_distribution", "max_entropy_distribution"]


def simplex_effective_attention(A: torch.Tensor, T: torch.Tensor, rtol: float = DEFAULT_RTOL) -> torch.Tensor:
    """Effective attention with the bias column: A Q Q^T, Q a basis of span(T, 1). A: (n, n), T: (n, d) -> (n, n) float64.

    Same output as A (A_eff T = A T) and rows that sum to 1; negative entries where
    A's null part was needed to keep the weights non-negative.
    """
    check_attention_and_values(A, T)
    Q = torch.from_numpy(constraint_basis(T, rtol))  # cpu: the basis is computed in float64 on the CPU
    return (A.double().cpu() @ Q @ Q.T).to(A.device)


class ClosestDistribution(NamedTuple):
    """Per row, the distribution with the head's output closest to a target row (L1).

    ``points: (r, n)`` float64, one row per solved row i, in the polytope P_i;
    ``distance: (r,)`` the L1 distance of each to its target row.
    """

    points: torch.Tensor
    distance: torch.Tensor


def closest_distribution(
    A: torch.Tensor,
    T: torch.Tensor,
    target: torch.Tensor,
    rows: Sequence[int] | None = None,
    rtol: float = DEFAULT_RTOL,
) -> ClosestDistribution:
    """argmin ||p - target_i||_1 over P_i for each row i. A, target: (n, n); T: (n, d).

    ``rows``: the rows to solve (default all); the result has one row per entry,
    ``points: (r, n)``, ``distance: (r,)``.

    Each row is one LP in (p, s): minimise sum(s) subject to -s <= p - t <= s,
    Q^T p = Q^T a_i, p >= 0. The optimum is a vertex of the lifted problem, so its
    point usually has zero entries (no finite logits produce it).

    Raises:
        ValueError: shapes that do not match, a non-stochastic A.
        RuntimeError: HiGHS fails on a row (it should not: a_i itself is feasible).
    """
    check_attention_and_values(A, T)
    check_attention_distribution(A)
    if not isinstance(target, torch.Tensor) or target.shape != A.shape:
        raise ValueError(
            f"target must be a tensor of A's shape {tuple(A.shape)}; got {getattr(target, 'shape', None)}."
        )
    n = A.shape[-1]
    rows = list(range(n)) if rows is None else [check_integer(i, "row", 0, n - 1) for i in rows]
    Q = constraint_basis(T, rtol)  # (n, m)
    a, t = A.double().cpu().numpy(), target.double().cpu().numpy()
    eye = np.eye(n)
    A_ub = np.block([[eye, -eye], [-eye, -eye]])  # p - s <= t, -p - s <= -t
    A_eq = np.hstack([Q.T, np.zeros_like(Q.T)])
    c = np.concatenate([np.zeros(n), np.ones(n)])
    options = {"primal_feasibility_tolerance": FEASIBILITY_TOL}
    points, distance = np.zeros((len(rows), n)), np.zeros(len(rows))
    for k, i in enumerate(rows):
        result = linprog(
            c,
            A_ub=A_ub,
            b_ub=np.concatenate([t[i], -t[i]]),
            A_eq=A_eq,
            b_eq=Q.T @ a[i],
            bounds=(0, None),
            method="highs",
            options=options,
        )
        if result.status != 0:
            raise RuntimeError(f"HiGHS failed on row {i}: {result.message}")
        points[k] = result.x[:n].clip(min=0)
        distance[k] = np.abs(points[k] - t[i]).sum()
    return ClosestDistribution(torch.from_numpy(points).to(A.device), torch.from_numpy(distance).to(A.device))


def max_entropy_distribution(
    A: torch.Tensor,
    T: torch.Tensor,
    rows: Sequence[int] | None = None,
    rtol: float = DEFAULT_RTOL,
    tol: float = 1e-9,
    max_steps: int = 200,
) -> torch.Tensor:
    """argmax H(p) over P_i for each row i. A: (n, n) row-stochastic, T: (n, d) -> (r, n) float64.

    ``rows``: the rows to solve (default all), one output row per entry. The maximiser is
    softmax(Q lambda_i) with lambda_i minimising the dual f(lambda) = logsumexp(Q lambda) -
    lambda^T Q^T a_i (gradient Q^T (p - a_i), Hessian Q^T (diag p - p p^T) Q); damped Newton
    steps until the constraint residual ||Q^T (p - a_i)|| is below ``tol`` (a_i renormalised in
    float64). Every a_i of a softmax is strictly positive, so P_i has interior points and
    lambda_i is finite; in a thin polytope some weights of the optimum are tiny (1e-20 and below).

    Raises:
        ValueError: shapes that do not match, a non-stochastic A, a row with a zero weight
            (P_i may then have no interior point).
        RuntimeError: Newton's method does not reach ``tol`` in ``max_steps`` steps.
    """
    check_attention_and_values(A, T)
    check_attention_distribution(A)
    n = A.shape[-1]
    rows = list(range(n)) if rows is None else [check_integer(i, "row", 0, n - 1) for i in rows]
    Q = torch.from_numpy(constraint_basis(T, rtol))  # cpu: the basis is computed in float64 on the CPU
    a = A.detach().double().cpu()[rows]  # (r, n)
    a = a / a.sum(-1, keepdim=True)  # float32 rows sum to 1 only to ~1e-7: the constraints must be consistent
    if bool((a <= 0).any()):
        raise ValueError("A row has a zero weight: the maximum-entropy point needs strictly positive attention.")
    target = a @ Q  # (r, m): the constraints Q^T p = Q^T a_i
    lam = torch.zeros_like(target)  # lambda = 0: the uniform distribution
    points = torch.softmax(lam @ Q.T, dim=-1)

    def dual(lam):  # (r,) the dual objective per row
        return torch.logsumexp(lam @ Q.T, dim=-1) - (lam * target).sum(-1)

    for _ in range(max_steps):
        gradient = points @ Q - target  # (r, m)
        if float(gradient.norm(dim=-1).max()) < tol:
            return points.to(A.device)
        covariance = torch.diag_embed(points) - points[:, :, None] * points[:, None, :]  # (r, n, n)
        hessian = Q.T @ covariance @ Q  # (r, m, m); singular only along Q's ones direction
        hessian = hessian + 1e-14 * torch.eye(Q.shape[1], dtype=Q.dtype, device=Q.device)
        step = torch.linalg.lstsq(hessian, gradient[..., None]).solution[..., 0]
        size = torch.ones(len(rows), dtype=Q.dtype, device=Q.device)
        before = dual(lam)
        slack = 1e-13 * before.abs().clamp_min(1)  # near the optimum the dual only moves at rounding level
        for _ in range(60):  # backtracking: the dual must fall (Armijo), up to rounding
            trial = lam - size[:, None] * step
            worse = dual(trial) > before - 1e-4 * size * (gradient * step).sum(-1) + slack
            if not bool(worse.any()):
                break
            size = torch.where(worse, size / 2, size)
        lam = lam - size[:, None] * step
        points = torch.softmax(lam @ Q.T, dim=-1)
    raise RuntimeError(f"Newton's method did not reach a residual of {tol:g} in {max_steps} steps.")
