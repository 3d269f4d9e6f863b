"""Figures of token identifiability (chapter 5). They draw the tables of ``helpers.methods.probes``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch

from .style import EFFECTIVE, NULL, PAPER, RAW, every_nth

MAP_COLOURS = {"naive": NULL, "linear": RAW, "mlp": EFFECTIVE}
LOSS_STYLES = {"cosine": "-", "l2": "--"}
MAP_LABELS = {"naive": "naive (identity)", "linear": "linear", "mlp": "MLP"}


def _check_table(table: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"{what} takes a pandas DataFrame, got {type(table).__name__}.")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{what} needs the columns {list(columns)}; missing {missing}.")
    if table.empty:
        raise ValueError(f"{what}: the table is empty.")


def _new_axes(ax: plt.Axes | None, size=(7.5, 4.6)) -> plt.Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def plot_layer_rates(
    table: pd.DataFrame,
    column: str = "test",
    chance: float | None = None,
    ax: plt.Axes | None = None,
    title: str = "Token identifiability by layer",
    legend_loc: str = "lower left",
) -> plt.Axes:
    """One line per (map, loss): identifiability rate against layer.

    ``table`` has columns map, loss, hidden_state and ``column`` (``probe_layers(...).table``).
    Colour says the map, a solid line cosine and a dashed line L2; ``legend_loc`` places the legend.
    """
    _check_table(table, ["map", "loss", "hidden_state", column], "plot_layer_rates")
    ax = _new_axes(ax)
    for (kind, loss), rows in table.groupby(["map", "loss"], sort=False):
        rows = rows.sort_values("hidden_state")
        ax.plot(
            rows["hidden_state"],
            rows[column],
            LOSS_STYLES.get(loss, "-"),
            marker="o",
            markersize=4,
            color=MAP_COLOURS.get(kind),
            label=f"{MAP_LABELS.get(kind, kind)}, {'cosine' if loss == 'cosine' else 'L2'}",
        )
    if chance is not None:
        ax.axhline(chance, color="black", linestyle=":", linewidth=1, label="chance (random token of the sequence)")
    ax.set_xticks(every_nth(sorted(table["hidden_state"].unique())))
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("hidden state (0 = embedding output, l = output of layer l)")
    ax.set_ylabel(f"identifiability rate ({column} set)")
    ax.set_title(title)
    ax.legend(loc=legend_loc)
    return ax


def plot_generalisation(
    matrix,
    train_layers: Sequence[int] | None = None,
    test_layers: Sequence[int] | None = None,
    ax: plt.Axes | None = None,
    title: str = "Map trained on one layer, tested on another",
) -> plt.Axes:
    """Heatmap of ``generalisation_matrix``: rows the training layer, columns the test layer."""
    values = matrix.detach().cpu().numpy() if isinstance(matrix, torch.Tensor) else np.asarray(matrix, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"Expected a (train layers, test layers) matrix, got shape {values.shape}.")
    train_layers = list(range(values.shape[0])) if train_layers is None else list(train_layers)
    test_layers = list(range(values.shape[1])) if test_layers is None else list(test_layers)
    if len(train_layers) != values.shape[0] or len(test_layers) != values.shape[1]:
        raise ValueError(f"{len(train_layers)} x {len(test_layers)} layer labels for a {values.shape} matrix.")
    ax = _new_axes(ax, (min(10.0, 4.4 + 0.5 * values.shape[1]), min(9.0, 3.4 + 0.42 * values.shape[0])))
    sns.heatmap(
        values,
        ax=ax,
        vmin=0,
        vmax=1,
        cmap="Blues",
        annot=True,
        fmt=".2f",
        annot_kws={"fontsize": 10},
        xticklabels=test_layers,
        yticklabels=train_layers,
        cbar_kws={"label": "identifiability rate (test set)"},
    )
    ax.set_xlabel("test layer")
    ax.set_ylabel("training layer")
    ax.set_yticklabels(ax.get_yticklabels(), rotation=0)
    ax.set_title(title)
    return ax


def plot_fraction_curve(
    table: pd.DataFrame,
    paper: Mapping[float, float] | None = None,
    ax: plt.Axes | None = None,
    title: str = "Identifiability against training data",
) -> plt.Axes:
    """Test rate against the fraction of training sequences, one line per map.

    ``table``: ``fraction_curve(...)`` (columns map, fraction, rate).
    ``paper``: the paper's {fraction: rate} for its MLP, drawn as a reference.
    """
    _check_table(table, ["map", "fraction", "rate"], "plot_fraction_curve")
    ax = _new_axes(ax)
    for kind, rows in table.groupby("map", sort=False):
        rows = rows.sort_values("fraction")
        ax.plot(
            100 * rows["fraction"],
            rows["rate"],
            marker="o",
            color=MAP_COLOURS.get(kind),
            label=f"{MAP_LABELS.get(kind, kind)} (this book)",
        )
    if paper:
        fractions = sorted(paper)
        ax.plot(
            [100 * f for f in fractions],
            [paper[f] for f in fractions],
            "--",
            marker="s",
            color=PAPER,
            label="MLP, the paper (BERT-Base, MRPC)",
        )
    ax.set_xlabel("training sequences used (%)")
    ax.set_ylabel("identifiability rate (test set)")
    ax.set_title(title)
    ax.legend()
    return ax


def plot_neighbour_rates(
    table: pd.DataFrame,
    chance: float | None = None,
    ax: plt.Axes | None = None,
    title: str = "Recovering the neighbour $x_{i+k}$ from $e_i^l$",
) -> plt.Axes:
    """Rate against offset k, one line per layer (``neighbour_rates(...)``: hidden_state, offset, rate)."""
    _check_table(table, ["hidden_state", "offset", "rate"], "plot_neighbour_rates")
    ax = _new_axes(ax)
    layers = sorted(table["hidden_state"].unique())
    colours = sns.color_palette("viridis", len(layers))
    for colour, layer in zip(colours, layers, strict=True):
        rows = table[table["hidden_state"] == layer].sort_values("offset")
        ax.plot(rows["offset"], rows["rate"], marker="o", markersize=4, color=colour, label=f"hidden state {layer}")
    if chance is not None:
        ax.axhline(chance, color="black", linestyle=":", linewidth=1, label="chance")
    ax.set_xticks(sorted(table["offset"].unique()))
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("offset k (recover the input token k places to the right)")
    ax.set_ylabel("rate (test set)")
    ax.set_title(title)
    ax.legend(ncol=1 if len(layers) <= 13 else 2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


CONTROL_STYLES = {  # (target, tokens) -> label, colour, line, marker
    ("x", "all"): ("x, all tokens (the paper's measure)", "black", "-", "o"),
    ("x", "unique"): ("x, tokens with a unique piece", "grey", "-", "s"),
    ("word", "all"): ("word-piece part only", RAW, "--", "^"),
    ("position", "all"): ("position + segment part only", PAPER, ":", "v"),
}


def plot_identifiability_controls(rates: pd.DataFrame, titles: Mapping[str, str] | None = None) -> plt.Figure:
    """Naive identifiability beside its controls, one panel per model: the mean rate over sequences per hidden state.

    rates: ``identifiability_controls.naive_control_rates`` output with a ``model`` column (e.g. "before",
    "after"); ``titles``: model -> panel title (default the model names). One line per target and
    token subset of ``CONTROL_STYLES``; the legend below the panels.
    """
    _check_table(rates, ["model", "hidden_state", "target", "tokens", "rate"], "plot_identifiability_controls")
    means = rates.groupby(["model", "target", "tokens", "hidden_state"])["rate"].mean()  # sorted: fast lookups
    models = list(dict.fromkeys(rates["model"]))
    titles = dict(titles or {})
    fig, axes = plt.subplots(1, len(models), figsize=(4.8 * len(models), 4.4), sharey=True, layout="constrained")
    for ax, model in zip(np.atleast_1d(axes), models, strict=True):
        for (target, tokens), (label, colour, line, marker) in CONTROL_STYLES.items():
            if (model, target, tokens) not in means.index.droplevel("hidden_state"):
                continue
            curve = means.loc[(model, target, tokens)]
            ax.plot(curve.index, curve.values, linestyle=line, marker=marker, color=colour, label=label)
        ax.set_xticks(sorted(rates["hidden_state"].unique()))
        ax.set_xlabel("hidden state (0 = embedding output)")
        ax.set_title(titles.get(model, str(model)))
    first = np.atleast_1d(axes)[0]
    first.set_ylabel("share identified (cosine)")
    first.set_ylim(0, 1.05)
    fig.legend(*first.get_legend_handles_labels(), loc="outside lower center", ncols=2)
    return fig
