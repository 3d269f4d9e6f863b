"""Figures of chapter 7 (context mixing). They draw what ``helpers.methods.mixing`` and ``helpers.drivers`` return."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def plot_agreement(agreement: pd.DataFrame, kind: str = "global", measures=None, ax=None):
    """Median Spearman with the reference per layer (lines), with the interquartile band, one line per measure.

    agreement: ``MixingSweep.agreement`` (columns measure, kind, layer, rho).
    """
    rows = agreement[agreement["kind"] == kind]
    if rows.empty:
        raise ValueError(f"No rows of kind {kind!r}.")
    stats = rows.groupby(["measure", "layer"])["rho"].quantile([0.25, 0.5, 0.75]).unstack()
    measures = list(measures) if measures is not None else list(stats.index.get_level_values(0).unique())
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.5))
    for measure in measures:
        part = stats.loc[measure]
        dashed = "+eff" in measure
        (line,) = ax.plot(part.index, part[0.5], marker="o", ls="--" if dashed else "-", label=measure)
        ax.fill_between(part.index, part[0.25], part[0.75], color=line.get_color(), alpha=0.08)
    ax.set_xlabel("layer")
    ax.set_xticks(sorted(rows["layer"].unique()))
    reference = "HTA (input -> layer l)" if kind == "global" else "layer-local HTA (layer l's input -> output)"
    ax.set_ylabel(f"Spearman with {reference}\n(median over hidden tokens, band: IQR)")
    ax.axhline(0, color="grey", lw=0.5)
    ax.legend(fontsize=7, ncol=2, loc="lower left")
    return ax


def plot_leave_one_out(loo: pd.DataFrame, paper: dict | None = None, ax=None):
    """Median (bar) and interquartile range (whisker) of the Spearman with leave-one-out, per measure.

    paper: optional {measure: published value} drawn as crosses (other model, target and task).
    """
    stats = loo.groupby("measure")["rho"].quantile([0.25, 0.5, 0.75]).unstack().sort_values(0.5)
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 0.3 * len(stats) + 1.2))
    y = np.arange(len(stats))
    ax.barh(y, stats[0.5], color="#8fb3d9")
    ax.errorbar(stats[0.5], y, xerr=[stats[0.5] - stats[0.25], stats[0.75] - stats[0.5]], fmt="none", color="k", lw=1)
    if paper:
        points = [(i, paper[m]) for i, m in enumerate(stats.index) if m in paper]
        if points:
            ax.scatter(
                [v for _, v in points],
                [i for i, _ in points],
                marker="x",
                color="#c44e52",
                zorder=3,
                label="published (BERT-Base, SST-2, vs gradient saliency)",
            )
            ax.legend(fontsize=7, loc="lower right")
    ax.set_yticks(y)
    ax.set_yticklabels(stats.index, fontsize=8)
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlabel("Spearman with leave-one-out change of the sentence embedding (median, IQR)")
    return ax


def plot_cost(cost: pd.DataFrame, ax=None):
    """Seconds per sentence per measure, log scale. cost: ``sweeps.cost_table`` output."""
    table = cost.sort_values("seconds per sentence")
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 0.28 * len(table) + 1.2))
    ax.barh(np.arange(len(table)), table["seconds per sentence"], color="#999999")
    ax.set_yticks(np.arange(len(table)))
    ax.set_yticklabels(table.index, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("seconds per sentence (this run)")
    return ax
