"""Figures of chapter 7 (context mixing). They draw what ``helpers.methods.mixing`` and ``helpers.drivers`` return."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ...methods.rollout import MEASURE_NAMES, measure_name, measure_parts
from ..paper import CONTEXT_MIXING_SOURCES

# The families drawn together in one panel of ``plot_agreement``: two measures, each with its effective-attention
# variant, and the positional prior: at most five lines in a panel.
AGREEMENT_PANELS = (
    ("attention and its norm", ("attention", "attention_norm")),
    ("norms with the residual", ("norm_residual", "norm_residual_ln")),
    ("GlobEnc and ALTI", ("globenc", "alti")),
    ("value zeroing and gradient × input", ("value_zeroing", "grad_input")),
)
PANEL_LINES = 5


def _agreement_panels(measures: list[str]) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """``measures`` grouped by ``AGREEMENT_PANELS`` (the rest four to a panel), and the prior, drawn in each."""
    prior = [m for m in measures if measure_parts(m)[0] == "positional prior"]
    panels, placed = [], set(prior)
    for title, family in AGREEMENT_PANELS:
        members = [m for m in measures if measure_parts(m)[0] in family]
        if members:
            present = [base for base in family if any(measure_parts(m)[0] == base for m in members)]
            named = title if len(present) == len(family) else " and ".join(MEASURE_NAMES[b] for b in present)
            panels.append((named, members))
            placed.update(members)
    rest = [m for m in measures if m not in placed]
    room = PANEL_LINES - len(prior)
    panels += [("other measures", rest[k : k + room]) for k in range(0, len(rest), room)]
    return panels, prior


def plot_agreement(agreement: pd.DataFrame, kind: str = "global", measures=None):
    """Median Spearman with the reference per layer, with the interquartile band: one panel per family of
    measures (``AGREEMENT_PANELS``), at most five lines in a panel.

    agreement: ``MixingSweep.agreement`` (columns measure, kind, layer, rho). In a panel each measure has its
    own colour, solid with circles; its effective-attention variant shares the colour, dashed with squares; the
    positional prior, where the sweep has it, is the grey dotted line of every panel. Lines are named as a
    reader names the measures (``rollout.measure_name``), each panel's legend below it. Returns the axes (the
    panels, row by row).
    """
    rows = agreement[agreement["kind"] == kind]
    if rows.empty:
        raise ValueError(f"No rows of kind {kind!r}.")
    stats = rows.groupby(["measure", "layer"])["rho"].quantile([0.25, 0.5, 0.75]).unstack()
    measures = list(measures) if measures is not None else list(stats.index.get_level_values(0).unique())
    missing = [m for m in measures if m not in stats.index.get_level_values(0)]
    if missing:
        raise ValueError(f"No {kind} agreement rows for {missing}.")
    panels, prior = _agreement_panels(measures)
    columns = 2 if len(panels) > 1 else 1
    grid = -(-len(panels) // columns)
    fig, axes = plt.subplots(
        grid, columns, figsize=(9.6, 4.3 * grid + 0.4), sharex=True, sharey=True, layout="constrained", squeeze=False
    )
    palette = sns.color_palette("tab10", 10)
    for ax, (title, members) in zip(axes.flat, panels, strict=False):
        bases = list(dict.fromkeys(measure_parts(m)[0] for m in members))
        for measure in members + prior:
            part = stats.loc[measure]
            base, effective = measure_parts(measure)[:2]
            is_prior = measure in prior
            colour = "0.45" if is_prior else palette[bases.index(base)]
            ax.plot(
                part.index,
                part[0.5],
                marker=None if is_prior else ("s" if effective else "o"),
                ms=5,
                ls=":" if is_prior else ("--" if effective else "-"),
                color=colour,
                label=measure_name(measure),
            )
            if not is_prior:
                ax.fill_between(part.index, part[0.25], part[0.75], color=colour, alpha=0.1)
        ax.set_title(title)
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xticks(sorted(rows["layer"].unique()))
        ax.tick_params(labelbottom=True)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=10, handlelength=2.6, frameon=False)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    reference = "HTA (input -> layer l)" if kind == "global" else "layer-local HTA (layer l's input -> output)"
    fig.supylabel(f"Spearman with {reference}\n(median over hidden tokens, band: IQR)")
    fig.supxlabel("layer")
    return axes


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
    ax.set_yticklabels([measure_name(m) for m in stats.index], fontsize=10)
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
    ax.set_yticklabels([measure_name(m) for m in table.index], fontsize=10)
    ax.set_xscale("log")
    ax.set_xlabel("seconds per sentence (this run)")
    return ax
