"""Chapter 3, "do the keys allow the alternatives?": spectra of the row-centred log-attention."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import torch

from ...model.numbering import check_count
from .style import NULL


def plot_centred_log_spectra(spectra: Mapping[str, torch.Tensor], d_v: int, ax: plt.Axes | None = None) -> plt.Axes:
    """Singular values s_k of row-centred log-attention matrices, each divided by its largest, against k.

    spectra: label -> (n,) singular values (e.g. ``torch.linalg.svdvals(keys.centred_log(A))``);
    a dashed line marks d_v: a matrix some d_v-dimensional queries and keys produce has nothing beyond it.
    """
    if not spectra:
        raise ValueError("spectra is empty: give at least one label -> singular values.")
    d_v = check_count(d_v, "d_v")
    if ax is None:
        _, ax = plt.subplots(figsize=(8.0, 4.4), layout="constrained")
    for label, values in spectra.items():
        s = torch.as_tensor(values, dtype=torch.float64).flatten()
        if s.numel() == 0 or not torch.isfinite(s).all():
            raise ValueError(f"spectrum {label!r} must be a non-empty finite vector.")
        s = s.sort(descending=True).values
        ax.semilogy(range(1, s.numel() + 1), (s / s[0]).clamp_min(1e-18).cpu().numpy(), label=label)
    ax.axvline(d_v + 0.5, color=NULL, linestyle="--", label=f"d_v = {d_v}")
    ax.set_xlabel("k (singular values of the row-centred log-attention, largest first)")
    ax.set_ylabel("s_k / s_1")
    ax.legend()
    return ax
