"""The prefix solver's shortcuts against an eigendecomposition of every prefix's Gram matrix, and its
ranks against the SVD of every prefix."""

from __future__ import annotations

import pytest
import torch

from helpers.methods.linalg import DEFAULT_RTOL
from helpers.methods.prefix_gram import prefix_gram_solve


def direct(M: torch.Tensor, rhs: torch.Tensor, rtol: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Row i: G_i^+ rhs_i from an eigendecomposition of every G_i (the rule: eigenvalues above
    (rtol lambda_max^(1/2))^2 kept); and the ranks, from the SVD of every prefix M[:i+1]."""
    n, m = M.shape
    solution, ranks = torch.zeros_like(rhs), []
    for i in range(n):
        S = torch.linalg.svdvals(M[: i + 1])
        ranks.append(int((S > rtol * S[0]).sum()))
        values, vectors = torch.linalg.eigh(M[: i + 1].T @ M[: i + 1])
        keep = values > rtol**2 * values[-1]
        pinv = (vectors[:, keep] / values[keep]) @ vectors[:, keep].T
        solution[..., i, :] = rhs[..., i, :] @ pinv
    return solution, torch.tensor(ranks)


def matrices() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)

    def normal(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    repeated = normal(40, 12)
    repeated[9] = repeated[3]  # the prefixes from row 9 on lose a rank: no prefix of 12 rows has full row rank
    scaled = normal(40, 12) * torch.logspace(0, -3, 12, dtype=torch.float64)  # ill-conditioned, still full rank
    near = normal(40, 12)
    near[:, -1] = near[:, 0] + 3 * DEFAULT_RTOL * normal(40)  # a singular value near the rule's threshold
    return {
        "generic": normal(40, 12),
        "repeated row": repeated,
        "rank 7 throughout": normal(40, 7) @ normal(7, 12),
        "ill-conditioned": scaled,
        "near the threshold": near,
        "shorter than m": normal(9, 12),
    }


@pytest.mark.parametrize("name", list(matrices()))
def test_prefix_solve_matches_the_pseudo_inverse_of_every_prefix(name):
    M = matrices()[name]
    n = len(M)
    # as the chapters use it: rhs_i = M[:i+1]^T x_i, x causal (a row of attention, or a position's indicator)
    X = torch.tril(torch.randn(3, n, n, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    rhs = X @ M
    solved = prefix_gram_solve(M, rhs, DEFAULT_RTOL)
    expected, ranks = direct(M, rhs, DEFAULT_RTOL)
    assert torch.equal(solved.rank, ranks)
    assert torch.equal(solved.row_full, ranks == torch.arange(1, n + 1))
    # where the prefix has full row rank the projection is the identity: no solution is needed there
    rows = ~solved.row_full
    if rows.any():
        # the projections M[:i+1] G_i^+ M[:i+1]^T x_i (M's later rows are masked out by the causal X)
        mine, theirs = solved.solution[..., rows, :] @ M.T, expected[..., rows, :] @ M.T
        # near the threshold cond(G_i) is about 1e10: any Gram route is then good to 1e-16 * 1e10
        tolerance = 1e-5 if name == "near the threshold" else 1e-8
        assert (mine - theirs).abs().max() <= tolerance * X.abs().max()
        if name != "near the threshold":  # G_i^+ itself carries the squared condition number there
            error = (solved.solution[..., rows, :] - expected[..., rows, :]).abs().max()
            assert error <= 1e-9 * expected.abs().max()


def test_prefix_solve_projects_like_the_prefix_projector():
    """The use it serves: M[:i+1] G_i^+ M[:i+1]^T a_i is the projection of a_i onto range(M[:i+1])."""
    generator = torch.Generator().manual_seed(2)
    M = torch.randn(30, 8, generator=generator, dtype=torch.float64)
    A = torch.tril(torch.rand(30, 30, generator=generator, dtype=torch.float64))
    A = A / A.sum(-1, keepdim=True)
    solved = prefix_gram_solve(M, (A @ M)[None], DEFAULT_RTOL)
    for i in (3, 8, 20, 29):
        basis = torch.linalg.qr(M[: i + 1]).Q  # (i+1, min(i+1, 8))
        projected = basis @ (basis.T @ A[i, : i + 1])
        mine = A[i, : i + 1] if solved.row_full[i] else M[: i + 1] @ solved.solution[0, i]
        assert torch.allclose(mine, projected, atol=1e-10)


def test_prefix_solve_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match=r"rhs \(\.\.\., n, m\)"):
        prefix_gram_solve(torch.ones(5, 3, dtype=torch.float64), torch.ones(2, 5, 4, dtype=torch.float64), 1e-5)
    with pytest.raises(ValueError, match="2 dimensions"):
        prefix_gram_solve(torch.ones(2, 5, 3, dtype=torch.float64), torch.ones(2, 5, 3, dtype=torch.float64), 1e-5)


def test_prefix_solve_refuses_a_tolerance_the_gram_route_cannot_honour():
    M = torch.randn(6, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="SVD"):
        prefix_gram_solve(M, M[None], 1e-8)
