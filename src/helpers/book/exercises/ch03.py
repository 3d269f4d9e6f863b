"""Checks for the code exercises of chapter 3."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...methods.nullspace import null_direction, step_range
from .checking import compare

__all__ = ["check_step_range"]


def _as_pair(result) -> torch.Tensor:
    """The reader's ``(t_low, t_high)`` as a float64 tensor of two entries."""
    try:
        values = [float(x) for x in result]
    except TypeError as error:
        raise AssertionError(
            f"step_range should return two numbers (t_low, t_high), got {type(result).__name__}."
        ) from error
    if len(values) != 2:
        raise AssertionError(f"step_range should return two numbers (t_low, t_high), got {len(values)}.")
    return torch.tensor(values, dtype=torch.float64)


def _cases() -> list[tuple[str, tuple[torch.Tensor, torch.Tensor]]]:
    draws = torch.Generator().manual_seed(3)
    cases = []
    for n, d in ((5, 2), (8, 3), (12, 5)):
        A = torch.softmax(2 * torch.randn(n, n, generator=draws, dtype=torch.float64), dim=-1)
        T = torch.randn(n, d, generator=draws, dtype=torch.float64)
        seed = int(torch.randint(0, 10_000, (), generator=draws))
        D = null_direction(T, seed=seed)
        cases.append((f"a softmax A ({n} x {n}) and a direction D with rows in LN([T, 1]), T: ({n}, {d})", (A, D)))
    A = torch.softmax(torch.randn(6, 6, generator=draws, dtype=torch.float64), dim=-1)
    cases.append(("a direction D = A that pushes no weight down (t_high = inf)", (A, A.clone())))
    return cases


def check_step_range(step_range_of: Callable) -> bool:
    """Check the reader's ``step_range_of(A, D) -> (t_low, t_high)`` against ``helpers.methods.nullspace.step_range``.

    Fresh inputs (fixed seed): softmax attention matrices of 5 to 12 tokens with a
    direction whose rows lie in LN([T, 1]) for a random T, and one direction that
    never pushes a weight toward zero, whose ``t_high`` is infinite.
    """

    def reference(A, D):
        return torch.tensor(list(step_range(A, D)), dtype=torch.float64)

    def reader(A, D):
        return _as_pair(step_range_of(A.clone(), D.clone()))

    try:
        return compare("step_range", reader, reference, _cases(), atol=1e-10, rtol=1e-8)
    except AssertionError as error:  # name the entry: (0,) is t_low, (1,) is t_high
        message = str(error).replace("entry (0,)", "t_low").replace("entry (1,)", "t_high")
        raise AssertionError(message) from None
