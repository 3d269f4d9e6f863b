"""Figures of Hidden Token Attribution (chapter 6). They draw what ``helpers.methods.attribution`` returns."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.ticker import NullFormatter, PercentFormatter

from ...drivers.attribution import share_own_input_not_largest
from ...model.token_names import own_token_names
from .heatmaps import token_heatmap
from .style import EFFECTIVE, NULL, PAPER, RAW, every_nth

PAPER_LABEL = "paper, BERT-Base (at the same relative depth)"


def _paper_x(paper_layer: float, num_layers: int, paper_layers: int) -> float:
    return paper_layer / paper_layers * num_layers


def plot_contribution_maps(
    attribution, tokens: Sequence[str], layer_numbers: Sequence[int] = (1, 3, 6), axes=None
) -> np.ndarray:
    """Heatmaps of c^l (hidden token i in rows, input token j in columns) for a few layer_numbers,
    on one colour scale, one above the other (each about 5 inches square at the column's width)."""
    layer_numbers = list(layer_numbers)
    if axes is None:
        size = min(5.2, 2.2 + 0.12 * len(tokens))
        _, axes = plt.subplots(
            len(layer_numbers), 1, figsize=(size + 2.4, (size + 0.9) * len(layer_numbers) + 0.6), layout="constrained"
        )
    axes = np.atleast_1d(axes)
    vmax = float(max(attribution.at(layer).max() for layer in layer_numbers))
    for ax, layer in zip(axes, layer_numbers, strict=True):
        token_heatmap(
            attribution.at(layer),
            tokens,
            ax=ax,
            vmin=0.0,
            vmax=vmax,
            cbar=False,
            title=f"layer {layer}",
            xlabel="input token j",
            ylabel="hidden token i",
        )
    figure = axes[0].figure
    figure.colorbar(axes[0].collections[0], ax=list(axes), shrink=0.6, pad=0.02, label="$c^l_{ij}$")
    method = "exact" if attribution.samples is None else f"estimate, {attribution.samples} samples per token"
    figure.suptitle(f"Contribution of input token j to hidden token i ({method})")
    return axes


def plot_estimate_vs_exact(estimate, exact, ax=None) -> plt.Axes:
    """Every c^l_ij of an estimate against the exact value, log-log, with the diagonal."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5.6, 5.2), layout="constrained")
    x = exact.contributions.flatten().cpu().numpy()
    y = estimate.contributions.flatten().cpu().numpy()
    ax.scatter(x, y, s=4, alpha=0.35, color=RAW, linewidths=0)
    low = max(1e-4, float(min(x.min(), y.min())))
    ax.plot([low, 1], [low, 1], color=NULL, lw=1, ls="--", label="estimate = exact")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, 1)
    ax.set_ylim(low, 1)
    ax.set_xlabel("exact $c^l_{ij}$")
    ax.set_ylabel(f"estimate, {estimate.samples} samples per token")
    ax.set_title("Estimated against exact contributions")
    ax.legend(loc="upper left")
    return ax


def plot_self_contribution(table, num_layers: int, paper: dict | None = None, ax=None) -> plt.Axes:
    """Box plots of c^l_ii per layer (from ``self_contribution_table``), paper medians as markers."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.6), layout="constrained")
    layers = sorted(table["layer"].unique())
    data = [table.loc[table["layer"] == layer, "self_contribution"].to_numpy() for layer in layers]
    ax.boxplot(
        data,
        positions=layers,
        widths=0.5,
        showfliers=False,
        patch_artist=True,
        boxprops={"facecolor": RAW, "alpha": 0.55},
        medianprops={"color": "black"},
    )
    ax.plot([], [], color=RAW, lw=6, alpha=0.55, label="this book's model (median, quartiles, 1.5 IQR)")
    if paper is not None:
        points = paper["median_self_contribution"]
        xs = [_paper_x(layer, num_layers, paper["layers"]) for layer in points]
        ax.scatter(xs, list(points.values()), color=PAPER, marker="D", zorder=3, label=PAPER_LABEL)
        for x, (layer, value) in zip(xs, points.items(), strict=True):
            # the label above the boxes, a thin line down to its diamond: no label over a box
            ax.annotate(
                f"layer {layer}: {value:.1%}",
                (x, value),
                xytext=(x, 0.7),
                textcoords="data",
                ha="left" if x < 0.25 * num_layers else "right" if x > 0.75 * num_layers else "center",
                fontsize=10,
                color=PAPER,
                arrowprops={"arrowstyle": "-", "color": PAPER, "lw": 0.8, "shrinkB": 4},
            )
    ax.set_xticks(layers)
    ax.set_xlim(0.3, num_layers + 0.6)
    ax.set_ylim(0, 1)
    ax.set_xlabel("layer")
    ax.set_ylabel("$c^l_{ii}$, share from the token's own input")
    ax.set_title("How much of each hidden token comes from its own input")
    ax.legend(loc="upper right")
    return ax


def plot_not_largest_share(table, num_layers: int, paper: dict | None = None, ax=None) -> plt.Axes:
    """Share of hidden tokens whose own input is not the largest contributor, per layer."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.0), layout="constrained")
    share = share_own_input_not_largest(table)
    ax.bar(share.index, share.to_numpy(), width=0.6, color=RAW, alpha=0.8, label="this book's model")
    if paper is not None:
        points = paper["share_own_input_not_largest"]
        xs = [_paper_x(layer, num_layers, paper["layers"]) for layer in points]
        ax.scatter(xs, list(points.values()), color=PAPER, marker="D", zorder=3, label=PAPER_LABEL)
    ax.set_xticks(list(share.index))
    ax.set_xlim(0.3, num_layers + 0.6)
    ax.set_ylim(0, max(0.6, float(share.max()) + 0.1))
    ax.set_xlabel("layer")
    ax.set_ylabel("share of hidden tokens")
    ax.set_title("Own input is not the largest contributor")
    ax.legend(loc="upper left")
    return ax


def plot_distance_groups(distance, axes=None) -> np.ndarray:
    """Context by relative distance (from ``distance_table``): the mean contribution of one
    input token in each distance group, left (solid) and right (dashed; left out when it is all
    zero, as in a causal model) (top), and the summed share of each group, both sides together,
    stacked per layer (below)."""
    if axes is None:
        _, axes = plt.subplots(2, 1, figsize=(8.0, 8.4), layout="constrained")
    bins = [g.split(" ", 1)[1] for g in dict.fromkeys(distance["group"]) if g.startswith("left")]
    palette = dict(zip(bins, [RAW, EFFECTIVE, PAPER], strict=False))
    layers = sorted(distance["layer"].unique())
    sides = [
        side
        for side in ("left", "right")
        if distance.loc[distance["group"].str.startswith(side), "per_token"].sum() > 0
    ]
    for side, style in (("left", "-"), ("right", "--")):
        if side not in sides:  # a causal model: nothing on the right
            continue
        for name in bins:
            rows = distance[distance["group"] == f"{side} {name}"]
            axes[0].plot(
                rows["layer"], rows["per_token"], ls=style, marker="o", color=palette[name], label=f"{side} {name}"
            )
    axes[0].set_yscale("log")
    axes[0].set_xticks(every_nth(layers))
    axes[0].set_xlabel("layer")
    axes[0].set_ylabel("mean $c^l_{ij}$ of one input token")
    axes[0].set_title("Per input token, by distance |i - j|")
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    bottom = np.zeros(len(layers))
    own = distance[distance["group"] == "self"].set_index("layer")["contribution"].reindex(layers).to_numpy()
    axes[1].bar(layers, own, width=0.6, color=NULL, label="own input")
    bottom += own
    for name in bins:
        rows = distance[distance["group"].isin([f"left {name}", f"right {name}"])]
        share = rows.groupby("layer")["contribution"].sum().reindex(layers).to_numpy()
        axes[1].bar(layers, share, width=0.6, bottom=bottom, color=palette[name], label=f"distance {name}")
        bottom += share
    axes[1].set_xticks(every_nth(layers))
    axes[1].set_ylim(0, 1)
    axes[1].set_xlabel("layer")
    axes[1].set_ylabel("summed share of the hidden token")
    axes[1].set_title("Whole groups, " + ("both sides" if len(sides) == 2 else f"{sides[0]} only"))
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return axes


def plot_cls(segments, around, axes=None, special_tokens: dict[str, str] | None = None) -> np.ndarray:
    """[CLS] on sentence pairs (from ``cls_table``): contribution of the tokens around the
    first [SEP] per layer (heatmap, top), and the mean contribution per token of each part (below).

    special_tokens: the model's own names for [CLS] and [SEP] (``special_token_names(tokenizer)``), used in
    the labels; None: BERT's."""
    own = partial(own_token_names, names=special_tokens)
    segments = own(segments)
    if axes is None:
        _, axes = plt.subplots(2, 1, figsize=(8.0, 8.8), layout="constrained")
    grid = around.pivot(index="layer", columns="offset", values="contribution")
    labels = [(own("[SEP]") if o == 0 else f"{o:+d}") for o in grid.columns]
    token_heatmap(
        torch.tensor(grid.to_numpy()),
        [str(layer) for layer in grid.index],
        labels,
        ax=axes[0],
        vmin=0.0,
        title=own("[CLS]: contribution of tokens around the first [SEP]"),
        xlabel=own("offset from the first [SEP]"),
        ylabel="layer",
        cbar_label=own("mean $c^l_{[CLS],j}$"),
    )
    axes[0].set_xticklabels(labels, rotation=0)
    parts = list(dict.fromkeys(segments["segment"]))
    palette = dict(zip(parts, [NULL, RAW, PAPER, EFFECTIVE, "#55A868"], strict=False))
    for part in parts:
        rows = segments[segments["segment"] == part]
        axes[1].plot(rows["layer"], rows["per_token"], marker="o", color=palette[part], label=part)
    axes[1].set_yscale("log")
    axes[1].set_yticks([0.01, 0.02, 0.05, 0.1, 0.2, 0.5])
    axes[1].yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    axes[1].yaxis.set_minor_formatter(NullFormatter())
    axes[1].set_xticks(sorted(segments["layer"].unique()))
    axes[1].set_xlabel("layer")
    axes[1].set_ylabel("mean contribution per input token")
    axes[1].set_title(own("[CLS]: what each part of the pair gives, per token"))
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return axes
