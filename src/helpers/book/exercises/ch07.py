"""Checks for the code exercises of chapter 7."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...methods.rollout import attention_rollout
from .checking import compare

__all__: list[str] = ["check_attention_rollout"]


def _stochastic(layers: int, n: int, generator: torch.Generator, scale: float = 2.0) -> torch.Tensor:
    """Random head-averaged attention (layers, n, n): a softmax of random logits, rows summing to one."""
    return (scale * torch.randn(layers, n, n, generator=generator, dtype=torch.float64)).softmax(-1)


def _rollout_cases(seed: int = 0) -> list[tuple[str, tuple]]:
    """Fresh attention stacks: random ones of a few sizes, one peaked, one uniform, one layer alone."""
    generator = torch.Generator().manual_seed(seed)
    cases = [
        (f"random attention of {layers} layers and {n} tokens", (_stochastic(layers, n, generator),))
        for layers, n in ((3, 4), (2, 6), (5, 3))
    ]
    cases.append(("peaked attention (4 layers, 5 tokens)", (_stochastic(4, 5, generator, scale=6.0),)))
    cases.append(("uniform attention (2 layers, 5 tokens)", (torch.full((2, 5, 5), 0.2, dtype=torch.float64),)))
    cases.append(("a single layer of 4 tokens", (_stochastic(1, 4, generator),)))
    return cases


def check_attention_rollout(attention_rollout_function: Callable) -> bool:
    """Check ``attention_rollout(A_mean) -> G``, Abnar and Zuidema's rollout.

    ``A_mean`` is (L, n, n), each layer's head-averaged attention with rows summing
    to one; the answer is (L, n, n) with G^1 = M^1 and G^l = M^l G^(l-1), where
    M^l = 0.5 A^l + 0.5 I with its rows renormalised. The reference is the book's own
    ``helpers.methods.rollout.attention_rollout``, on six fresh stacks (seed 0).
    """
    return compare(
        "attention_rollout",
        attention_rollout_function,
        attention_rollout,
        _rollout_cases(),
        atol=1e-8,
        rtol=1e-6,
    )
