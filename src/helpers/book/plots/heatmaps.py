"""Token-by-token heatmaps (attention maps, attributions), and the token labels they draw."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch

# What the tokenizers write for white space: byte-level BPE (GPT-2, Llama 3) marks a leading
# space "Ġ", a newline "Ċ", a tab "ĉ"; SentencePiece marks a leading space "▁".
# WordPiece's "##" (continues the previous word) means something to a reader of BERT and stays.
_MARKERS = {"Ġ": "", "▁": "", "Ċ": "\\n", "ĉ": "\\t", "ċ": "\\r"}

LABEL_POINTS = 10.0  # the smallest text of any figure, in points: legible at the book's column width
COLUMN_INCHES = 10.0  # the widest figure that keeps LABEL_POINTS legible in the book's column


def readable_token(token) -> str:
    """A token as a reader writes it: tokenizer space markers removed, a newline shown as ``\\n``.

    ``"Ġdawn"`` -> ``"dawn"``, ``"▁dawn"`` -> ``"dawn"``, ``"Ċ"`` -> ``"\\n"``, ``"##ing"`` stays;
    a token that was only a space marker shows as ``"␣"``. A ``$`` is escaped so matplotlib
    does not read it as mathematics.
    """
    text = str(token)
    for marker, shown in _MARKERS.items():
        text = text.replace(marker, shown)
    if not text.strip():
        text = "␣"
    return text.replace("$", r"\$")


def readable_tokens(tokens: Sequence | None) -> list[str] | None:
    """:func:`readable_token` of each token (None stays None)."""
    return None if tokens is None else [readable_token(t) for t in tokens]


def label_step(count: int, length_inches: float, max_labels: int | None = None, points: float = LABEL_POINTS) -> int:
    """Label every k-th of ``count`` ticks along ``length_inches`` so labels of ``points`` do not overlap."""
    room = max(1, int(length_inches * 72 / (1.3 * points)))
    limit = room if max_labels is None else max(1, min(room, max_labels))
    return max(1, int(np.ceil(count / limit)))


class Inches(NamedTuple):
    """A width and a height in inches."""

    width: float
    height: float


def axes_inches(ax: plt.Axes) -> Inches:
    """The width and height of ``ax``'s cell of its grid in inches (layouts shrink the axes a little later).

    The cell, not the axes as placed now, so every panel of one grid gets the same labels.
    """
    spec = ax.get_subplotspec() if hasattr(ax, "get_subplotspec") else None
    box = spec.get_position(ax.figure) if spec is not None else ax.get_position()
    width, height = ax.figure.get_size_inches()
    return Inches(box.width * width, box.height * height)


def token_ticks(ax: plt.Axes, axis: str, tokens: Sequence, max_labels: int | None = None, shrink: float = 0.75):
    """Every k-th token (cleaned) as tick labels of a line plot's ``axis`` ("x" or "y"), k for 10-pt labels."""
    tokens = readable_tokens(tokens)
    width, height = axes_inches(ax)
    step = label_step(len(tokens), shrink * (width if axis == "x" else height), max_labels)
    ticks = np.arange(0, len(tokens), step)
    if axis == "x":
        ax.set_xticks(ticks, [tokens[i] for i in ticks], rotation=90, fontsize=LABEL_POINTS)
    else:
        ax.set_yticks(ticks, [tokens[i] for i in ticks], fontsize=LABEL_POINTS)
    return ticks


def restack(axes: Sequence[plt.Axes], width: float = 7.5, panel_height: float = 5.6) -> None:
    """Put side-by-side subplots of a figure wider than the column one above the other.

    For callers that made a 1 x k row of axes for a wide screen: the figure becomes
    ``width`` x ``panel_height * k`` inches with the same axes in one column. A figure
    that fits the column (``COLUMN_INCHES``) is left as it is.
    """
    axes = list(axes)
    figure = axes[0].figure
    if figure.get_size_inches()[0] <= COLUMN_INCHES + 0.6 or len(axes) < 2:
        return
    if not all(hasattr(ax, "get_subplotspec") and ax.get_subplotspec() is not None for ax in axes):
        return
    grid = figure.add_gridspec(len(axes), 1)
    for k, ax in enumerate(axes):
        ax.set_subplotspec(grid[k])
        ax.tick_params(labelleft=True, labelbottom=True)  # a shared axis hid them beside its neighbour
    figure.set_size_inches(width, panel_height * len(axes))


def fit_column(ax: plt.Axes, width: float = 7.5, panel_height: float = 5.6) -> None:
    """If ``ax`` is one of a single row of subplots in a figure wider than the column, restack the row.

    A caller's ``plt.subplots(1, 2, figsize=(13, 6))`` then shows at the book's width with
    legible labels: the row's axes are put one above the other (:func:`restack`).
    """
    if ax.figure.get_size_inches()[0] <= COLUMN_INCHES + 0.6:
        return
    spec = ax.get_subplotspec() if hasattr(ax, "get_subplotspec") else None
    if spec is None or spec.get_gridspec().nrows != 1:
        return
    grid = spec.get_gridspec()
    row = [
        other
        for other in ax.figure.axes
        if hasattr(other, "get_subplotspec")
        and other.get_subplotspec() is not None
        and other.get_subplotspec().get_gridspec() is grid
    ]
    row.sort(key=lambda other: other.get_subplotspec().colspan.start)
    restack(row, width, panel_height)


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
    xlabel: str | None = None,
    ylabel: str | None = None,
    cbar_label: str | None = None,
) -> plt.Axes:
    """Draw ``matrix: (n, m)`` with token labels on both axes.

    Rows are queries / hidden tokens, columns keys / input tokens: the axis labels
    ``ylabel`` / ``xlabel`` say so. By default (None) a token-by-token map (square, the
    same tokens on both axes) is labelled "query token" / "key token", any other matrix
    not at all; pass "hidden token i" / "input token j" for attributions, "" for none. With
    ``center`` set (signed data such as effective or null attention) a diverging map
    is used. Tokens are drawn as :func:`readable_token` writes them, every k-th one,
    k chosen so 10-pt labels do not overlap at the axes' size (and at most
    ``max_labels`` per axis). Given ``ax`` in a single row of subplots of a figure wider
    than the book's column, the row is put one above the other (:func:`fit_column`).
    """
    values = as_numpy(matrix)
    if row_tokens is not None and len(row_tokens) != values.shape[0]:
        raise ValueError(f"{len(row_tokens)} row labels for {values.shape[0]} rows.")
    if col_tokens is None:
        col_tokens = row_tokens if values.shape[0] == values.shape[1] else None
    if col_tokens is not None and len(col_tokens) != values.shape[1]:
        raise ValueError(f"{len(col_tokens)} column labels for {values.shape[1]} columns.")
    if ax is None:
        size = min(7.0, 2.8 + 0.16 * max(values.shape))
        _, ax = plt.subplots(figsize=(size + 1.3, size + 0.4), layout="constrained")
    else:
        fit_column(ax, panel_height=6.4)
    if cmap is None:
        cmap = "RdBu_r" if center is not None else "Blues"
    square = values.shape[0] == values.shape[1]
    token_by_token = square and (col_tokens is None or row_tokens is None or list(col_tokens) == list(row_tokens))
    xlabel = ("key token" if token_by_token else "") if xlabel is None else xlabel
    ylabel = ("query token" if token_by_token else "") if ylabel is None else ylabel
    width, height = axes_inches(ax)
    if square:
        width = height = min(width, height)

    def labels(tokens, count, length):
        if tokens is None:
            return False
        step = label_step(count, 0.75 * length, max_labels)
        return [readable_token(t) if i % step == 0 else "" for i, t in enumerate(tokens)]

    sns.heatmap(
        values,
        ax=ax,
        cmap=cmap,
        center=center,
        vmin=vmin,
        vmax=vmax,
        cbar=cbar,
        square=square,
        xticklabels=labels(col_tokens, values.shape[1], width),
        yticklabels=labels(row_tokens, values.shape[0], height),
        linewidths=0,
        cbar_kws={"label": cbar_label} if cbar and cbar_label else None,
    )
    ax.tick_params(axis="both", labelsize=LABEL_POINTS, length=0)
    ax.set_xticklabels(ax.get_xticklabels(), rotation=90)
    ax.set_yticklabels(ax.get_yticklabels(), rotation=0)
    if cbar and ax.collections and ax.collections[0].colorbar is not None:
        ax.collections[0].colorbar.ax.tick_params(labelsize=LABEL_POINTS)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def as_numpy(matrix, ndim: int | None = 2) -> np.ndarray:
    """A tensor or array as a float numpy array; with ``ndim``, check its number of dimensions."""
    if isinstance(matrix, torch.Tensor):
        matrix = matrix.detach().cpu().numpy()
    matrix = np.asarray(matrix, dtype=float)
    if ndim is not None and matrix.ndim != ndim:
        what = "matrix (n, m)" if ndim == 2 else "array"
        raise ValueError(f"Expected a {ndim}-D {what}, got shape {matrix.shape}.")
    return matrix
