"""Checks for the code exercises of chapter 5 (token identifiability)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...methods.probes import identifiability_rate
from .checking import compare

__all__ = ["check_identification_rate"]


def _cases() -> list[tuple[str, tuple]]:
    g = torch.Generator().manual_seed(5)
    cases = []
    for label, lengths, d in (
        ("3 sequences of 4 to 6 tokens, d = 5", (4, 6, 5), 5),
        ("5 sequences of 2 to 9 tokens, d = 8", (2, 9, 3, 7, 5), 8),
    ):
        sequence = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
        # inputs of very different lengths, so that L2 and cosine choose differently
        inputs = torch.randn(len(sequence), d, generator=g) * torch.rand(len(sequence), 1, generator=g).mul(4).add(0.2)
        # noisy, rescaled copies of the inputs: many are identified, not all
        predicted = (inputs + 0.9 * torch.randn(inputs.shape, generator=g)) * torch.rand(
            len(sequence), 1, generator=g
        ).mul(3).add(0.1)
        cases.append((label, (predicted, inputs, sequence)))
    return cases


def _as_rate(function: Callable) -> Callable:
    """The reader's rate as a 0-d tensor, so that float noise in the mean is not an error."""

    def rate(*arguments):
        value = function(*arguments)
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            return value.detach().double().reshape(())
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return torch.tensor(float(value), dtype=torch.float64)
        return value

    return rate


def check_identification_rate(identification_rate: Callable) -> bool:
    """Check ``identification_rate(predicted, inputs, sequence) -> float`` against the book's probes.

    ``predicted`` is ``(N, d)`` (the mapped hidden tokens g(e_i), row i for token i),
    ``inputs`` is ``(N, d)`` (the input tokens x_i) and ``sequence`` is ``(N,)`` (the
    sequence id of each token). The answer is the share of tokens whose nearest input
    token by cosine distance, among the tokens of their own sequence, is their own:
    :func:`helpers.methods.probes.identifiability_rate` with ``distance="cosine"``.
    """

    def reference(predicted, inputs, sequence):
        return torch.tensor(identifiability_rate(predicted, inputs, sequence, "cosine"), dtype=torch.float64)

    if not callable(identification_rate):
        return compare("identification_rate", identification_rate, reference, _cases())
    return compare("identification_rate", _as_rate(identification_rate), reference, _cases(), atol=1e-6)
