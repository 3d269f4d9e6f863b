"""Figures of chapter 9: causal null spaces and the attention sink of a decoder."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .heatmaps import as_numpy, fit_column
from .style import EFFECTIVE, NULL, RAW


def plot_causal_null_dimensions(dims, d_v: int, ax: plt.Axes | None = None) -> plt.Axes:
    """dim LN(T[:i+1]) against the row i (0-based position) for one head, with the bound i + 1 - d_v.

    dims: (n,) integers (``helpers.methods.causal.causal_null_dimensions``). Given ``ax`` in a
    single row of subplots wider than the book's column, the row is put one above the other.
    """
    dims = as_numpy(dims, ndim=None)
    if dims.ndim != 1:
        raise ValueError(f"dims must be one head's (n,) null dimensions; got shape {dims.shape}.")
    if ax is None:
        ax = plt.subplots(figsize=(7.0, 4.2), layout="constrained")[1]
    else:
        fit_column(ax, width=7.5, panel_height=4.2)
    rows = np.arange(len(dims))
    ax.plot(rows, np.maximum(0, rows + 1 - d_v), color=NULL, lw=4, alpha=0.35, label=r"lower bound $i + 1 - d_v$")
    ax.step(rows, dims, where="mid", color=EFFECTIVE, label=r"$\dim \mathrm{LN}(T_{0..i})$")
    ax.axvline(d_v - 1, color="grey", ls=":", lw=1)
    ax.set(
        xlabel="row i (position of the query, from 0)",
        ylabel="null space dimension",
        title="causal rows: the null space grows along the sequence",
    )
    ax.legend(loc="upper left")
    return ax


def _every(values, most: int) -> list:
    """Every k-th of ``values`` (the first included), at most ``most`` of them: ticks that fit at 10 pt."""
    values = list(values)
    step = max(1, -(-len(values) // most))
    return values[::step]


def plot_sink(by_head: pd.DataFrame, by_layer: pd.DataFrame) -> plt.Figure:
    """The attention sink per layer and head: raw attention on the position and the share of it that is
    effective (two maps, top), and both per layer (below).

    by_head: ``summarise_sink(table)`` (columns layer, head, raw, effective, effective_share);
    by_layer: ``summarise_sink(table, by=["layer"])``.
    """
    needed = {"layer", "head", "raw", "effective_share"}
    if needed - set(by_head.columns) or {"layer", "raw", "effective"} - set(by_layer.columns):
        raise ValueError("Pass the tables of summarise_sink (per layer and head, and per layer).")
    raw = by_head.pivot(index="layer", columns="head", values="raw")
    share = by_head.pivot(index="layer", columns="head", values="effective_share")
    fig = plt.figure(figsize=(9.0, 9.6), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=[1.25, 1])
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])]
    for ax, table, title, cmap, limits in (
        (axes[0], raw, "raw attention on the\nposition, per row", "Blues", (0, 1)),
        (axes[1], share, "share of it that\nis effective", "RdBu_r", (0, 2)),
    ):
        image = ax.imshow(
            table.to_numpy(),
            aspect="auto",
            cmap=cmap,
            vmin=limits[0],
            vmax=limits[1],
            extent=(0.5, table.shape[1] + 0.5, table.index.max() + 0.5, table.index.min() - 0.5),
        )
        ax.set(xlabel="head", ylabel="layer", title=title)
        ax.set_xticks(_every(table.columns, 8))
        ax.set_yticks(_every(table.index, 16))
        ax.grid(False)
        fig.colorbar(image, ax=ax, shrink=0.8)
    axes[2].plot(by_layer["layer"], by_layer["raw"], "o-", color=RAW, label="raw")
    axes[2].plot(by_layer["layer"], by_layer["effective"], "o-", color=EFFECTIVE, label="effective")
    axes[2].axhline(0, color="grey", lw=0.8)
    axes[2].set(
        xlabel="layer",
        ylabel="attention on the position,\nper row (mean over heads)",
        title="per layer (mean over heads)",
    )
    axes[2].legend()
    return fig
