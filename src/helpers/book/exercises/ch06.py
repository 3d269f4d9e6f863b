"""Checks for the code exercises of chapter 6."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...methods.attribution import contributions_from_norms
from .checking import compare

__all__: list[str] = ["check_contributions_from_jacobian"]


def _reference_contributions(jacobian: torch.Tensor) -> torch.Tensor:
    """The book's c_ij from a full Jacobian (n, d, n, d): block norms, then ``contributions_from_norms``."""
    from ...methods.reference import frobenius_blocks

    return contributions_from_norms(frobenius_blocks(jacobian[None]))[0]


def _jacobian_cases(seed: int = 0) -> list[tuple[str, tuple]]:
    """Fresh Jacobians (n, d, n, d): random, with mixed signs, and one whose blocks differ in size by row."""
    generator = torch.Generator().manual_seed(seed)
    cases = []
    for n, d in ((3, 4), (5, 2), (4, 6)):
        jacobian = torch.randn(n, d, n, d, generator=generator, dtype=torch.float64)
        cases.append((f"a random Jacobian with n = {n}, d = {d}", (jacobian,)))
    # rows of very different scale and blocks whose entries cancel when summed
    n, d = 4, 3
    scaled = torch.randn(n, d, n, d, generator=generator, dtype=torch.float64)
    scaled = scaled * torch.logspace(0, 3, n, dtype=torch.float64)[:, None, None, None]
    scaled[:, :, 0] -= scaled[:, :, 0].mean(dim=1, keepdim=True)
    cases.append(("a Jacobian whose rows differ in scale and whose first column's blocks sum to zero", (scaled,)))
    # an identity map: every hidden token depends on its own input only
    identity = torch.einsum("ij,ab->iajb", torch.eye(3, dtype=torch.float64), torch.eye(5, dtype=torch.float64))
    cases.append(("the identity map (n = 3, d = 5)", (identity,)))
    return cases


def check_contributions_from_jacobian(contributions_from_jacobian: Callable) -> bool:
    """Check ``contributions_from_jacobian(jacobian) -> c`` for one layer.

    ``jacobian[i, a, j, b]`` is d e_{i,a} / d x_{j,b} (shape (n, d, n, d)); the answer is
    c_ij = ||J_ij||_F / sum_k ||J_ik||_F, shape (n, n), each row summing to one. The
    reference is the book's own ``helpers.methods.attribution.contributions_from_norms``
    applied to the blocks' Frobenius norms, on five fresh Jacobians (seed 0).
    """
    return compare(
        "contributions_from_jacobian",
        contributions_from_jacobian,
        _reference_contributions,
        _jacobian_cases(),
        atol=1e-6,
        rtol=1e-5,
    )
