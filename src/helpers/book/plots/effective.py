"""Figures of chapter 4: raw, effective and null attention."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .heatmaps import as_numpy, token_heatmap
from .style import EFFECTIVE, NULL, PAPER, RAW

LENGTH_BINS = (0, 16, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 400, 512)


def plot_attention_split(
    A,
    A_eff,
    A_null,
    tokens: list[str] | None = None,
    title: str | None = None,
    max_labels: int = 30,
    panel_size: float = 5.6,
) -> plt.Figure:
    """Raw, effective and null attention of one head, one above the other.

    A, A_eff, A_null: (n, n) each. Raw attention uses a sequential map from 0;
    effective and null parts share one diverging map centred at 0 (its range
    is the 99.5th percentile of their absolute values, so a few extreme
    entries do not wash the rest out; larger entries show in the end colours).
    The maps are stacked so each is ``panel_size`` inches square at the book's
    column width; every k-th token is labelled (at most ``max_labels``).
    """
    raw, effective, null = (as_numpy(M) for M in (A, A_eff, A_null))
    if not raw.shape == effective.shape == null.shape:
        raise ValueError(f"A, A_eff and A_null must have one shape; got {raw.shape}, {effective.shape}, {null.shape}.")
    limit = float(np.quantile(np.abs(np.concatenate([effective.ravel(), null.ravel()])), 0.995))
    limit = limit if limit > 0 else 1.0
    raw_limit = float(np.quantile(raw, 0.995))
    raw_limit = raw_limit if raw_limit > 0 else 1.0
    fig, axes = plt.subplots(3, 1, figsize=(panel_size + 2.2, 3 * (panel_size + 0.9) + 0.5), layout="constrained")
    token_heatmap(raw, tokens, ax=axes[0], title="raw attention $A$", vmin=0.0, vmax=raw_limit, max_labels=max_labels)
    token_heatmap(
        effective,
        tokens,
        ax=axes[1],
        title=r"effective attention $A_{\mathrm{eff}}$",
        center=0.0,
        vmin=-limit,
        vmax=limit,
        max_labels=max_labels,
    )
    token_heatmap(
        null,
        tokens,
        ax=axes[2],
        title=r"null part $A_{\mathrm{null}} = A - A_{\mathrm{eff}}$",
        center=0.0,
        vmin=-limit,
        vmax=limit,
        max_labels=max_labels,
    )
    if title:
        fig.suptitle(title)
    return fig


def _per_example_layer_medians(table: pd.DataFrame) -> pd.DataFrame:
    needed = {"example", "n", "layer", "correlation"}
    if not needed <= set(table.columns):
        raise ValueError(f"The table needs columns {sorted(needed)} (effective_attention_sweep).")
    return table.groupby(["example", "n", "layer"], as_index=False)["correlation"].median()


def plot_correlation_vs_length(
    table: pd.DataFrame,
    d_v: int,
    bins=LENGTH_BINS,
    source: str | None = None,
) -> plt.Figure:
    """Pearson correlation of raw vs effective attention against sequence length n.

    table: ``effective_attention_sweep`` output. Left: every head of every
    example, median per length bin with the 10-90% band. Right: one median
    curve per layer. A dashed line marks n = d_v.
    """
    per_layer = _per_example_layer_medians(table)
    cut = pd.cut(table["n"], bins=list(bins))
    overall = table.groupby(cut, observed=True).agg(
        n=("n", "median"),
        median=("correlation", "median"),
        low=("correlation", lambda c: c.quantile(0.1)),
        high=("correlation", lambda c: c.quantile(0.9)),
    )
    fig, (left, right) = plt.subplots(2, 1, figsize=(8.0, 8.4), sharex=True, sharey=True, layout="constrained")
    left.scatter(
        per_layer["n"],
        per_layer["correlation"],
        s=4,
        color=NULL,
        alpha=0.25,
        linewidths=0,
        label="one example, one layer (median over heads)",
    )
    left.fill_between(overall["n"], overall["low"], overall["high"], color=RAW, alpha=0.2, label="10-90% of heads")
    left.plot(overall["n"], overall["median"], color=RAW, marker="o", ms=3, label="median over heads")
    left.set_title("all layers and heads")
    layers = sorted(table["layer"].unique())
    colours = plt.cm.viridis(np.linspace(0.0, 0.9, len(layers)))
    for colour, layer in zip(colours, layers, strict=True):
        rows = table[table["layer"] == layer]
        curve = rows.groupby(pd.cut(rows["n"], bins=list(bins)), observed=True).agg(
            n=("n", "median"), median=("correlation", "median")
        )
        right.plot(curve["n"], curve["median"], color=colour, marker="o", ms=3, label=f"layer {layer}")
    right.set_title("median over heads, per layer")
    for ax in (left, right):
        ax.axvline(d_v, color="black", ls="--", lw=1)
        ax.text(d_v, 0.03, f" $n = d_v = {d_v}$", transform=ax.get_xaxis_transform(), fontsize=10)
        ax.set_ylabel("Pearson correlation,\nraw vs effective")
    right.set_xlabel("sequence length $n$ (tokens)")
    left.legend(loc="upper right")
    right.legend(loc="upper right", ncol=2 if len(layers) <= 12 else 3)
    title = "Raw and effective attention coincide up to $d_v$ tokens, then diverge"
    fig.suptitle(title + (f" ({source})" if source else ""))
    return fig


def plot_token_class_attention(summary: pd.DataFrame, source: str | None = None) -> plt.Figure:
    """Attention to each token class per layer, raw vs effective.

    summary: ``summarise_token_classes`` output (columns layer, token, raw,
    effective). One panel per token class.
    """
    needed = {"layer", "token_class", "raw", "effective"}
    if not needed <= set(summary.columns):
        raise ValueError(f"summary needs columns {sorted(needed)} (summarise_token_classes).")
    classes = list(dict.fromkeys(summary["token_class"]))
    columns = min(3, len(classes))
    rows_of_panels = -(-len(classes) // columns)
    fig, axes = plt.subplots(
        rows_of_panels,
        columns,
        figsize=(3.0 * columns + 0.6, 3.2 * rows_of_panels + 1.0),
        sharey=True,
        layout="constrained",
        squeeze=False,
    )
    for ax in axes.ravel()[len(classes) :]:
        ax.set_visible(False)
    for ax, name in zip(axes.ravel(), classes, strict=False):
        rows = summary[summary["token_class"] == name].sort_values("layer")
        ax.plot(rows["layer"], rows["raw"], color=RAW, marker="o", label="raw attention")
        ax.plot(rows["layer"], rows["effective"], color=EFFECTIVE, marker="s", label="effective attention")
        ax.fill_between(
            rows["layer"], rows["effective"], rows["raw"], color=NULL, alpha=0.15, label="difference (null part)"
        )
        ax.axhline(0.0, color="black", lw=0.6)
        ax.set_title(f"attention to {name}")
        ax.set_xlabel("layer")
        ax.set_xticks(list(rows["layer"]))
    for row in axes:
        row[0].set_ylabel("attention per query\n(mean over heads,\nqueries, examples)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3)
    title = "Where raw and effective attention go"
    fig.suptitle(title + (f" ({source})" if source else ""))
    return fig


def plot_distribution_distances(distances: pd.DataFrame, title: str | None = None, ax=None):
    """How far the distributions with a head's output lie from raw and effective attention, per head.

    distances: one row per head (index: head number 1..h) with the columns
    "raw A to effective", "nearest distribution to effective" and "nearest
    distribution to raw A" (median L1 distance over a head's rows), and optionally
    "maximum entropy to effective" (a fourth bar), as chapter 4 computes them with
    ``helpers.drivers.effective.nearest_distributions``. Grouped bars, one group per head; ``title`` (the
    layer and the input, say) heads the legend above the bars.
    """
    columns = ["raw A to effective", "nearest distribution to effective", "nearest distribution to raw A"]
    missing = [c for c in columns if c not in distances.columns]
    if missing:
        raise ValueError(f"distances lacks the columns {missing}.")
    colours = [NULL, EFFECTIVE, RAW]
    if "maximum entropy to effective" in distances.columns:
        columns.append("maximum entropy to effective")
        colours.append(PAPER)
    if ax is None:
        _, ax = plt.subplots(figsize=(9.6, 4.8), layout="constrained")
    x = np.arange(len(distances))
    width = 0.8 / len(columns)
    for k, (column, colour) in enumerate(zip(columns, colours, strict=True)):
        ax.bar(x + (k - (len(columns) - 1) / 2) * width, distances[column], width, color=colour, label=column)
    ax.set_xticks(x)
    ax.set_xticklabels([str(h) for h in distances.index])
    ax.set_xlabel("head")
    ax.set_ylabel("median L1 distance over rows")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False, title=title)
    return ax
