"""How close an estimated Hidden Token Attribution is to the exact one of the same sequence (chapter 6).

``compare_attributions`` takes two ``helpers.methods.attribution.Attribution`` results (re-exported
there) and returns an ``EstimateAgreement``.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import torch

__all__ = ["EstimateAgreement", "compare_attributions"]


class _Contributions(Protocol):
    """What ``compare_attributions`` reads of an ``Attribution``."""

    contributions: torch.Tensor  # (layers, n, n)
    layer_numbers: tuple[int, ...]


class EstimateAgreement(NamedTuple):
    """How close an estimated attribution is to the exact one (``compare_attributions``)."""

    median_relative_error: float  # median of |c_est - c| / c over every (layer, i, j)
    p95_relative_error: float  # its 95th percentile
    max_abs_error: float  # max |c_est - c|
    top_agreement: float  # share of (layer, hidden token) with the same largest contributor


def compare_attributions(estimate: _Contributions, exact: _Contributions) -> EstimateAgreement:
    """How close an estimate is to the exact contributions of the same sequence."""
    if estimate.contributions.shape != exact.contributions.shape or estimate.layer_numbers != exact.layer_numbers:
        raise ValueError("The two attributions cover different sequences or layers.")
    c_est, c = estimate.contributions.double(), exact.contributions.double()
    relative = ((c_est - c).abs() / c.clamp_min(1e-12)).flatten()
    return EstimateAgreement(
        median_relative_error=float(relative.median()),
        p95_relative_error=float(torch.quantile(relative, 0.95)),
        max_abs_error=float((c_est - c).abs().max()),
        top_agreement=float((c_est.argmax(-1) == c.argmax(-1)).double().mean()),
    )
