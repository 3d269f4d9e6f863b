"""How far can each attention weight move without changing the head's output? Exact LP bounds.

For one head (A: (n, n) row-stochastic, T: (n, d)), row i of any valid
alternative with the same output is a point of the polytope

    P_i = {p in R^n : p >= 0, 1^T p = 1, p^T T = a_i^T T}.

Write Q: (n, m) for an orthonormal basis of span(columns of T, 1)
(m = rank([T, 1]) <= d_v + 1); then P_i = {p >= 0 : Q^T p = Q^T a_i}.
The attainable range of a_ij is [min p_j, max p_j] over P_i: two linear
programs per entry, 2 n^2 in all.

Fast exact path (``solver="warm"``). All LPs of one row share the
polytope, only the objective changes. Per row:

1. one cold solve with ``scipy.optimize.linprog(method="highs")`` gives a
   vertex, hence a feasible simplex basis;
2. every ``max p_j`` is solved by a revised primal simplex warm-started from
   the previous optimal basis (a handful of pivots instead of a cold solve);
3. every vertex found has at most m non-zero entries, so each one proves
   ``min p_k = 0`` for the entries where it is zero; only the remaining
   ``min p_j`` are solved, warm-started likewise.

Each warm-started optimum is certified before it is used: the basic point is
primal feasible (non-negative, satisfies the equalities) and the reduced costs
are non-negative (dual feasible), which makes it optimal. Whenever a
certificate fails or the simplex stalls, the LP is re-solved by HiGHS. The
brute-force path (``solver="highs"``, 2 HiGHS LPs per entry) is kept for
checking; the two agree to solver tolerance (tested).

This module never loads a model and never draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch
from scipy.optimize import linprog

from ..model.checks import check_attention_and_values, check_attention_distribution, is_causal_attention
from ..model.progress import progress_bar
from .linalg import DEFAULT_RTOL, range_basis, relative_output_change
from .nullspace import with_ones

FEASIBILITY_TOL = 1e-9  # basic variables above -tol count as non-negative
OPTIMALITY_TOL = 1e-9  # reduced costs above -tol count as non-negative
SOLVERS = ("warm", "highs")


class BoundsCheck(NamedTuple):
    """Worst violations over the computed bounds of :class:`AttentionBounds` and their points."""

    min_entry: float  # >= 0: every attaining point is non-negative
    row_sum_error: float  # max |sum - 1|
    output_error: float  # max |(p - a_i)^T T| / max |A T|
    attained_error: float  # max |p_j - bound|: each bound is attained by its point
    containment_error: float  # how far a_ij lies outside [lower, upper]; 0 when contained


@dataclass
class AttentionBounds:
    """Attainable range of every attention weight over all valid distributions with the same output.

    lower, upper: (n, n) float64, NaN for rows not computed. lower_points,
    upper_points: (n, n, n); ``lower_points[i, j]`` is a valid row-i
    distribution (non-negative, sums to 1, same output) whose entry j equals
    ``lower[i, j]`` (likewise for upper). ``stats`` counts the work done. The LPs run
    on the CPU in float64; the tensors are on the device of A.
    """

    lower: torch.Tensor
    upper: torch.Tensor
    lower_points: torch.Tensor
    upper_points: torch.Tensor
    rows: torch.Tensor  # (r,) the rows computed
    stats: dict = field(default_factory=dict)

    @property
    def width(self) -> torch.Tensor:
        """upper - lower: (n, n)."""
        return self.upper - self.lower

    def could_be_zero(self, tol: float = 1e-9) -> torch.Tensor:
        """(n, n) bool: some valid alternative sets this weight to zero."""
        return self.lower <= tol

    def could_exceed(self, threshold: float = 0.5) -> torch.Tensor:
        """(n, n) bool: some valid alternative puts more than ``threshold`` on this weight."""
        return self.upper > threshold

    def check(self, A: torch.Tensor, T: torch.Tensor) -> BoundsCheck:
        """Worst violations over every computed bound and its attaining point (a :class:`BoundsCheck`)."""
        check_attention_and_values(A, T)
        A64, T64 = A.detach().cpu().double(), T.detach().cpu().double()  # checked on the CPU, in float64
        rows, lower, upper = self.rows.cpu(), self.lower.cpu(), self.upper.cpu()
        lower_points, upper_points = self.lower_points.cpu(), self.upper_points.cpu()
        points = torch.cat([lower_points[rows], upper_points[rows]], dim=1)  # (r, 2n, n)
        a = A64[rows]
        bounds = torch.cat([lower[rows], upper[rows]], dim=1)  # (r, 2n)
        attained = torch.cat(
            [
                torch.diagonal(lower_points[rows], dim1=1, dim2=2),
                torch.diagonal(upper_points[rows], dim1=1, dim2=2),
            ],
            dim=1,
        )
        outside = torch.maximum(lower[rows] - a, a - upper[rows]).clamp_min(0.0)
        return BoundsCheck(
            min_entry=float(points.min()),
            row_sum_error=float((points.sum(-1) - 1).abs().max()),
            output_error=max(
                (
                    float(relative_output_change(_replace_row(A64, int(i), points[k]), A64, T64).max())
                    for k, i in enumerate(rows)
                ),
                default=0.0,
            ),
            attained_error=float((attained - bounds).abs().max()),
            containment_error=float(outside.max()),
        )


def _replace_row(A: torch.Tensor, i: int, points: torch.Tensor) -> torch.Tensor:
    """A: (n, n), points: (m, n) -> (m, n, n): A with row i replaced by each point."""
    out = A.expand(points.shape[0], *A.shape).clone()
    out[:, i] = points
    return out


def constraint_basis(T: torch.Tensor, rtol: float = DEFAULT_RTOL) -> np.ndarray:
    """Orthonormal basis Q of span(columns of T, 1), T: (n, d) -> (n, m) float64 numpy.

    The complement of ``nullspace.simplex_null_space``: the same scaling of
    [T, 1] and the same tolerance relative to the largest singular value.
    """
    basis, rank = range_basis(with_ones(T.detach().cpu()), rtol)
    return basis[:, : int(rank)].cpu().numpy()


def _highs(M: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    # HiGHS's default feasibility tolerance (1e-7) would leave entries of -1e-7 in a point that is not
    # turned into an exact vertex; ask for the book's tolerance instead
    options = {"primal_feasibility_tolerance": FEASIBILITY_TOL, "dual_feasibility_tolerance": OPTIMALITY_TOL}
    result = linprog(c, A_eq=M, b_eq=b, bounds=(0, None), method="highs", options=options)
    if result.status != 0:
        raise RuntimeError(f"HiGHS failed on an attention-bound LP: {result.message}")
    return result.x  # unclamped: entries may sit a rounding error below 0 (AttentionBounds.check reports it)


def _basis_from_point(M: np.ndarray, x: np.ndarray) -> np.ndarray | None:
    """Indices of m columns of M forming a non-singular basis that contains the support of vertex x."""
    m = M.shape[0]
    support = np.flatnonzero(x > FEASIBILITY_TOL)
    if len(support) > m:
        return None  # not a vertex
    order = np.concatenate([support, np.setdiff1d(np.arange(M.shape[1]), support)])
    chosen: list[int] = []
    G = np.zeros((m, 0))
    for k in order:
        column = M[:, k]
        residual = column - G @ (G.T @ column)
        norm = np.linalg.norm(residual)
        if norm > 1e-8 * max(np.linalg.norm(column), 1e-300):
            chosen.append(int(k))
            G = np.concatenate([G, (residual / norm)[:, None]], axis=1)
            if len(chosen) == m:
                break
    if len(chosen) < m or not set(support.tolist()) <= set(chosen):
        return None
    return np.array(chosen)


@dataclass
class _Vertex:
    """A vertex of P_i with its simplex basis: point (n,), basis (m,), B_inv (m, m)."""

    point: np.ndarray
    basis: np.ndarray
    B_inv: np.ndarray


def _vertex(M: np.ndarray, b: np.ndarray, basis: np.ndarray) -> _Vertex | None:
    """The basic solution of ``basis`` if it is non-singular and primal feasible."""
    try:
        B_inv = np.linalg.inv(M[:, basis])
    except np.linalg.LinAlgError:
        return None
    x_basic = B_inv @ b
    if x_basic.min() < -FEASIBILITY_TOL or np.abs(M[:, basis] @ x_basic - b).max() > 1e-9:
        return None
    point = np.zeros(M.shape[1])
    point[basis] = x_basic  # >= -FEASIBILITY_TOL, not clamped
    return _Vertex(point, basis, B_inv)


def _warm_simplex(
    M: np.ndarray, b: np.ndarray, j: int, sign: float, start: _Vertex, max_pivots: int, refactor_every: int = 25
) -> tuple[_Vertex, int] | None:
    """Minimise sign * p_j over {p >= 0 : M p = b}, starting from a feasible vertex.

    Revised primal simplex with an explicit basis inverse, updated after each
    pivot and recomputed from scratch every ``refactor_every`` pivots and
    for the final certificate (primal feasible and all reduced costs
    >= -tol, hence optimal). Returns (optimal vertex, pivots), or None when
    the simplex stalls or the certificate fails (the caller then asks HiGHS).
    Dantzig's rule; Bland's rule after m pivots without progress (no cycling).
    """
    basis, B_inv = start.basis.copy(), start.B_inv
    x_basic = start.point[basis]
    where = np.full(M.shape[1], -1)
    where[basis] = np.arange(len(basis))
    pivots, stalled, best, fresh = 0, 0, np.inf, True
    while True:
        position = where[j]
        if position >= 0:
            reduced = (-sign * B_inv[position]) @ M
            value = sign * x_basic[position]
        else:
            reduced = np.zeros(M.shape[1])
            value = 0.0
        reduced[j] += sign
        reduced[basis] = 0.0
        if value < best - 1e-12:
            best, stalled = value, 0
        else:
            stalled += 1
        entering = int(np.argmin(reduced))
        if reduced[entering] >= -OPTIMALITY_TOL:
            if fresh:
                if not pivots:
                    return start, 0
                if x_basic.min() < -FEASIBILITY_TOL:
                    return None
                point = np.zeros(M.shape[1])
                point[basis] = x_basic
                return _Vertex(point, basis, B_inv), pivots
            B_inv = np.linalg.inv(M[:, basis])  # re-certify on a fresh factorisation
            x_basic = B_inv @ b
            fresh = True
            continue
        if pivots >= max_pivots:
            return None
        if stalled > len(basis):  # Bland: smallest improving index
            entering = int(np.flatnonzero(reduced < -OPTIMALITY_TOL)[0])
        direction = B_inv @ M[:, entering]
        positive = direction > 1e-12
        if not positive.any():
            return None  # unbounded: impossible on a polytope, so numerical trouble
        ratios = np.full(len(basis), np.inf)
        ratios[positive] = np.maximum(x_basic[positive], 0.0) / direction[positive]
        leaving = int(np.argmin(ratios))
        if stalled > len(basis):
            ties = np.flatnonzero(ratios <= ratios[leaving] + 1e-15)
            leaving = int(ties[np.argmin(basis[ties])])
        step = ratios[leaving]
        x_basic = x_basic - step * direction
        x_basic[leaving] = step
        pivot_row = B_inv[leaving] / direction[leaving]
        B_inv = B_inv - direction[:, None] * pivot_row[None, :]
        B_inv[leaving] = pivot_row
        where[basis[leaving]] = -1
        where[entering] = leaving
        basis[leaving] = entering
        pivots += 1
        fresh = False
        if pivots % refactor_every == 0:
            B_inv = np.linalg.inv(M[:, basis])
            x_basic = B_inv @ b
            fresh = True


def attention_bounds(
    A: torch.Tensor,
    T: torch.Tensor,
    rows: Sequence[int] | None = None,
    solver: str = "warm",
    rtol: float = DEFAULT_RTOL,
    progress: bool = True,
) -> AttentionBounds:
    """[min, max] of every weight a_ij over all valid attention rows with the same head output.

    Args:
        A: (n, n) attention probabilities (non-negative, rows sum to 1).
        T: (n, d) the head's T = V H (or any matrix with the same column space).
        rows: which rows to compute (default all); the others are NaN.
        solver: ``"warm"`` (exact fast path, see module docstring) or
            ``"highs"`` (two HiGHS LPs per entry).
        rtol: relative tolerance for the rank of T.
        progress: show a progress bar over rows (``helpers.model.progress``).

    Returns:
        ``AttentionBounds`` with lower/upper (n, n) and the feasible points
        attaining them (n, n, n).
    """
    check_attention_and_values(A, T)
    check_attention_distribution(A)
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}; got {solver!r}.")
    n = A.shape[0]
    rows = list(range(n)) if rows is None else [int(i) for i in rows]
    if not rows or min(rows) < 0 or max(rows) >= n:
        raise ValueError(f"rows must be a non-empty list of indices in [0, {n}); got {rows}.")
    if any(i < n - 1 for i in rows) and is_causal_attention(A):
        i = min(rows)
        raise ValueError(
            f"A is causal (exactly zero above the diagonal): row {i}'s alternatives live on positions "
            f"0..{i} only, a polytope this whole-sequence LP does not describe. Bound it on its prefix: "
            f"attention_bounds(A[:{i + 1}, :{i + 1}], T[:{i + 1}], rows=[{i}])."
        )

    A64 = A.detach().cpu().double().numpy()
    M = constraint_basis(T, rtol).T  # (m, n)
    m = M.shape[0]
    lower = np.full((n, n), np.nan)
    upper = np.full((n, n), np.nan)
    lower_points = np.full((n, n, n), np.nan)
    upper_points = np.full((n, n, n), np.nan)
    stats = {"highs_lps": 0, "warm_lps": 0, "pivots": 0, "zero_certificates": 0, "fallbacks": 0, "m": m}

    def cold(b: np.ndarray, j: int, sign: float) -> np.ndarray:
        c = np.zeros(n)
        c[j] = sign
        stats["highs_lps"] += 1
        return _highs(M, b, c)

    for i in progress_bar(rows, "LP bounds", progress):
        a = np.clip(A64[i], 0.0, None)
        a /= a.sum()
        if m >= n:  # the polytope is the single point a: nothing moves
            lower[i], upper[i] = a, a
            lower_points[i], upper_points[i] = a, a
            continue
        b = M @ a
        if solver == "highs":
            for j in range(n):
                upper_points[i, j] = cold(b, j, -1.0)
                lower_points[i, j] = cold(b, j, +1.0)
            upper[i] = np.diagonal(upper_points[i]).copy()
            lower[i] = np.diagonal(lower_points[i]).copy()
            continue

        zero_point = np.full(n, -1)  # index into found vertices of one with p_k = 0
        found: list[_Vertex] = []  # vertices of P_i found so far
        points = np.empty((0, n))

        def solve(j: int, sign: float, found=found, b=b, zero_point=zero_point) -> np.ndarray:
            # the defaults bind this row's state; solve is only called within this iteration
            nonlocal points
            result = None
            if found:  # warm start from the vertex found so far that is best for this objective
                start = found[int(np.argmin(sign * points[:, j]))]
                result = _warm_simplex(M, b, j, sign, start, max_pivots=20 * m)
            if result is not None:
                vertex, pivots = result
                stats["warm_lps"] += 1
                stats["pivots"] += pivots
                if pivots == 0:
                    return vertex.point
            else:
                stats["fallbacks"] += bool(found)
                point = cold(b, j, sign)
                basis = _basis_from_point(M, point)
                vertex = _vertex(M, b, basis) if basis is not None else None
                if vertex is None:
                    return point
            found.append(vertex)
            points = np.concatenate([points, vertex.point[None]])
            zero_point[(vertex.point == 0.0) & (zero_point < 0)] = len(found) - 1
            return vertex.point

        for j in range(n):
            point = solve(j, -1.0)
            upper[i, j], upper_points[i, j] = point[j], point
        for j in range(n):
            if zero_point[j] >= 0:
                stats["zero_certificates"] += 1
                point = found[zero_point[j]].point
            else:
                point = solve(j, +1.0)
            lower[i, j], lower_points[i, j] = point[j], point

    # the LPs ran on the CPU in float64; the bounds go where A is
    tensors = [torch.from_numpy(values).to(A.device) for values in (lower, upper, lower_points, upper_points)]
    return AttentionBounds(*tensors, torch.tensor(rows, device=A.device), stats)


def extreme_alternative(
    A: torch.Tensor,
    T: torch.Tensor,
    objective: torch.Tensor,
    rtol: float = DEFAULT_RTOL,
    progress: bool = True,
    rows: Sequence[int] | None = None,
) -> torch.Tensor:
    """For each row i, a valid distribution with the same output that maximises ``objective[i] . p``.

    A: (n, n) attention probabilities; T: (n, d); objective: (n, n), row i
    scores the keys for query i (``-A`` asks for the alternative least like
    A); rows: which rows to solve (default all; the others are NaN). One HiGHS
    LP per row. Returns P: (n, n) float64 whose rows are vertices of the
    polytopes P_i, so ``P - A`` has every row in LN([T, 1]) and
    ``A + t (P - A)`` is valid for every t in [0, 1].
    """
    check_attention_and_values(A, T)
    check_attention_distribution(A)
    if not isinstance(objective, torch.Tensor) or objective.shape != A.shape:
        raise ValueError(
            f"objective must be a tensor of A's shape {tuple(A.shape)}; got "
            f"{tuple(objective.shape) if isinstance(objective, torch.Tensor) else type(objective).__name__}."
        )
    if not torch.isfinite(objective).all():
        raise ValueError("objective contains NaN or infinite values.")
    M = constraint_basis(T, rtol).T
    A64 = A.detach().cpu().double().numpy()
    scores = objective.detach().cpu().double().numpy()
    n = A64.shape[0]
    rows = list(range(n)) if rows is None else [int(i) for i in rows]
    if not rows or min(rows) < 0 or max(rows) >= n:
        raise ValueError(f"rows must be a non-empty list of indices in [0, {n}); got {rows}.")
    P = np.full_like(A64, np.nan)
    for i in progress_bar(rows, "extreme alternative", progress):
        a = np.clip(A64[i], 0.0, None)
        a /= a.sum()
        P[i] = a if M.shape[0] >= M.shape[1] else _highs(M, M @ a, -scores[i])
    return torch.from_numpy(P).to(A.device)
