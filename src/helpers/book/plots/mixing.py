"""Figures of chapter 7 (context mixing). They draw what ``helpers.methods.mixing`` and ``helpers.drivers`` return."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ..paper import CONTEXT_MIXING_SOURCES


def base_measure(measure: str) -> str:
    """The measure without its effective-attention variant: "globenc+eff rollout" -> "globenc rollout"."""
    return measure.replace("+eff", "")


def _measure_colours(measures) -> dict[str, tuple]:
    """One colour per base measure (a measure and its +eff variant share it), none repeated.

    Up to 10 base measures take matplotlib's "tab10" palette, more take "tab20".
    """
    bases = list(dict.fromkeys(base_measure(m) for m in measures))
    palette = sns.color_palette("tab10" if len(bases) <= 10 else "tab20", max(len(bases), 1))
    if len(bases) > len(set(palette)):
        palette = sns.color_palette("husl", len(bases))
    return {base: tuple(colour) for base, colour in zip(bases, palette, strict=False)}


def plot_agreement(agreement: pd.DataFrame, kind: str = "global", measures=None, ax=None):
    """Median Spearman with the reference per layer (lines), with the interquartile band, one line per measure.

    agreement: ``MixingSweep.agreement`` (columns measure, kind, layer, rho). Each base
    measure has its own colour (tab10, tab20 past 10); its +eff variant shares it, dashed.
    The legend stands right of the plot.
    """
    rows = agreement[agreement["kind"] == kind]
    if rows.empty:
        raise ValueError(f"No rows of kind {kind!r}.")
    stats = rows.groupby(["measure", "layer"])["rho"].quantile([0.25, 0.5, 0.75]).unstack()
    measures = list(measures) if measures is not None else list(stats.index.get_level_values(0).unique())
    if ax is None:
        _, ax = plt.subplots(figsize=(9.6, 5.4), layout="constrained")
    colours = _measure_colours(measures)
    for measure in measures:
        part = stats.loc[measure]
        dashed = "+eff" in measure
        colour = colours[base_measure(measure)]
        ax.plot(
            part.index,
            part[0.5],
            marker="s" if dashed else "o",
            ms=5,
            ls="--" if dashed else "-",
            color=colour,
            label=measure,
        )
        ax.fill_between(part.index, part[0.25], part[0.75], color=colour, alpha=0.08)
    ax.set_xlabel("layer")
    ax.set_xticks(sorted(rows["layer"].unique()))
    reference = "HTA (input -> layer l)" if kind == "global" else "layer-local HTA (layer l's input -> output)"
    ax.set_ylabel(f"Spearman with {reference}\n(median over hidden tokens, band: IQR)")
    ax.axhline(0, color="grey", lw=0.5)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), handlelength=2.6, borderaxespad=0.0)
    return ax


def plot_leave_one_out(loo: pd.DataFrame, paper: dict | None = None, ax=None):
    """Median (bar) and interquartile range (whisker) of the Spearman with leave-one-out, per measure.

    paper: optional {measure: {table: published value}} (``paper.published_mixing`` per
    measure), one marker per table (another model, target and task), named in the legend
    by ``paper.CONTEXT_MIXING_SOURCES``.
    """
    stats = loo.groupby("measure")["rho"].quantile([0.25, 0.5, 0.75]).unstack().sort_values(0.5)
    if ax is None:
        _, ax = plt.subplots(figsize=(8.0, 0.36 * len(stats) + 1.8), layout="constrained")
    y = np.arange(len(stats))
    ax.barh(y, stats[0.5], color="#8fb3d9")
    ax.errorbar(stats[0.5], y, xerr=[stats[0.5] - stats[0.25], stats[0.75] - stats[0.5]], fmt="none", color="k", lw=1)
    tables = sorted({table for values in (paper or {}).values() for table in values})
    for table, (marker, colour) in zip(tables, [("x", "#c44e52"), ("D", "#55a868"), ("^", "#8172b2")], strict=False):
        points = [(i, paper[m][table]) for i, m in enumerate(stats.index) if table in paper.get(m, {})]
        if points:
            ax.scatter(
                [v for _, v in points],
                [i for i, _ in points],
                marker=marker,
                s=36,
                color=colour,
                zorder=3,
                label=f"published: {CONTEXT_MIXING_SOURCES.get(table, table)}",
            )
    if tables:
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=1)
    ax.set_yticks(y)
    ax.set_yticklabels(stats.index, fontsize=10)
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlabel("Spearman with leave-one-out change of the sentence embedding\n(median, IQR)")
    return ax


def plot_cost(cost: pd.DataFrame, ax=None):
    """Seconds per sentence per measure, log scale. cost: ``sweeps.cost_table`` output."""
    table = cost.sort_values("seconds per sentence")
    if ax is None:
        _, ax = plt.subplots(figsize=(8.0, 0.34 * len(table) + 1.2), layout="constrained")
    ax.barh(np.arange(len(table)), table["seconds per sentence"], color="#999999")
    ax.set_yticks(np.arange(len(table)))
    ax.set_yticklabels(table.index, fontsize=10)
    ax.set_xscale("log")
    ax.set_xlabel("seconds per sentence (this run)")
    return ax
