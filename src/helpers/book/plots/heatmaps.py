"""Token-by-token heatmaps (attention maps, attributions)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch


def as_numpy(matrix, ndim: int | None = 2) -> np.ndarray:
    """A tensor or array as a float numpy array; with ``ndim``, check its number of dimensions."""
    if isinstance(matrix, torch.Tensor):
        matrix = matrix.detach().cpu().numpy()
    matrix = np.asarray(matrix, dtype=float)
    if ndim is not None and matrix.ndim != ndim:
        what = "matrix (n, m)" if ndim == 2 else "array"
        raise ValueError(f"Expected a {ndim}-D {what}, got shape {matrix.shape}.")
    return matrix


def token_heatmap(
    matrix,
    row_tokens: list[str] | None = None,
    col_tokens: list[str] | None = None,
    ax: plt.Axes | None = None,
    title: str | None = None,
    center: float | None = None,
    cmap: str | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    cbar: bool = True,
    max_labels: int = 40,
) -> plt.Axes:
    """Draw ``matrix: (n, m)`` with token labels on both axes.

    Rows are queries / hidden tokens, columns keys / input tokens. With
    ``center`` set (signed data such as effective or null attention) a
    diverging map is used. Labels are thinned past ``max_labels`` tokens.
    """
    values = as_numpy(matrix)
    if row_tokens is not None and len(row_tokens) != values.shape[0]:
        raise ValueError(f"{len(row_tokens)} row labels for {values.shape[0]} rows.")
    if col_tokens is None:
        col_tokens = row_tokens if values.shape[0] == values.shape[1] else None
    if col_tokens is not None and len(col_tokens) != values.shape[1]:
        raise ValueError(f"{len(col_tokens)} column labels for {values.shape[1]} columns.")
    if ax is None:
        size = min(9.0, 2.5 + 0.22 * max(values.shape))
        _, ax = plt.subplots(figsize=(size + 1.0, size))
    if cmap is None:
        cmap = "RdBu_r" if center is not None else "Blues"

    def labels(tokens, count):
        if tokens is None:
            return False
        step = max(1, int(np.ceil(count / max_labels)))
        return [t if i % step == 0 else "" for i, t in enumerate(tokens)]

    sns.heatmap(
        values,
        ax=ax,
        cmap=cmap,
        center=center,
        vmin=vmin,
        vmax=vmax,
        cbar=cbar,
        square=values.shape[0] == values.shape[1],
        xticklabels=labels(col_tokens, values.shape[1]),
        yticklabels=labels(row_tokens, values.shape[0]),
        linewidths=0,
    )
    ax.tick_params(axis="both", labelsize=7, length=0)
    ax.set_xticklabels(ax.get_xticklabels(), rotation=90)
    ax.set_yticklabels(ax.get_yticklabels(), rotation=0)
    if title:
        ax.set_title(title)
    return ax
