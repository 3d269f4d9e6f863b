"""Own-input share by word class (chapter 6, paper appendix C). Draws what ``helpers.methods.word_classes`` returns."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import PercentFormatter

from .style import EFFECTIVE, NULL, PAPER, RAW

CLASS_COLOURS = {"content": RAW, "function": EFFECTIVE, "punctuation": NULL, "special": "#55A868"}


def plot_self_contribution_by_class(
    summary: pd.DataFrame, paper_from_layer: float | None = None, statistic: str = "median", ax=None
) -> plt.Axes:
    """c^l_ii per layer for each word class (``class_summary``), with the layer from which
    the paper sees content words ahead (already moved to this model's relative depth)."""
    if statistic not in ("median", "mean"):
        raise ValueError(f"statistic must be 'median' or 'mean'; got {statistic!r}.")
    if ax is None:
        _, ax = plt.subplots(figsize=(8.0, 4.6), layout="constrained")
    for word_class, rows in summary.groupby("word_class", sort=False):
        ax.plot(
            rows["layer"],
            rows[statistic],
            marker="o",
            color=CLASS_COLOURS.get(word_class, "black"),
            label=f"{word_class} ({int(rows['tokens'].iloc[0])} tokens per layer)",
        )
    if paper_from_layer is not None:
        ax.axvline(
            paper_from_layer,
            color=PAPER,
            ls="--",
            lw=1,
            label="paper: content ahead from here\n(same relative depth)",
        )
    ax.set_xticks(sorted(summary["layer"].unique()))
    ax.set_xlabel("layer l")
    ax.set_ylabel(f"{statistic} own-input share $c^l_{{ii}}$")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_title("How much of its own input a hidden token keeps, by word class")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax
