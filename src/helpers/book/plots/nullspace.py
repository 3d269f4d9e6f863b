"""Figures for chapters 2 and 3: rank of T, null spaces, alternative attention, LP bounds.

Every function draws what ``helpers.methods.nullspace`` / ``helpers.methods.lp_bounds``
return; none computes a method.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.colors import PowerNorm

from .heatmaps import (
    LABEL_POINTS,
    as_numpy,
    axes_inches,
    label_step,
    readable_token,
    restack,
    token_heatmap,
    token_ticks,
)
from .style import EFFECTIVE, NULL, PAPER, RAW


def _check_columns(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"Expected a pandas DataFrame, got {type(frame).__name__}.")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"The frame lacks the columns {missing}; it has {list(frame.columns)}.")


RANK_LABELS = {"rank_V": "rank(V)", "rank_T": "rank(T)", "rank_V1": "rank([V, 1])", "rank_T1": "rank([T, 1])"}


def plot_rank_sweep(
    frame: pd.DataFrame,
    d_v: int,
    rank_column: str = "rank_V",
    axes: Sequence[plt.Axes] | None = None,
    source: str = "",
    overlay: pd.DataFrame | None = None,
    overlay_column: str = "rank_T",
    bound_label: str = "d_v",
) -> np.ndarray:
    """rank against n (top) and null-space dimension n - rank against n (below).

    frame: ``helpers.rank_sweep`` output (one row per text, length, layer,
    head). Each length shows the range over all heads and texts (a band,
    usually a single point) with the lines min(n, d_v) and n - d_v.
    ``overlay``: a second sweep (a subset, say with rank(T)) drawn as crosses.
    ``bound_label`` names the bound in the legend (e.g. ``"d_v + 1"`` for [V, 1]).
    """
    _check_columns(frame, ["n", rank_column])
    if overlay is not None:
        _check_columns(overlay, ["n", overlay_column])
    if axes is None:
        _, axes = plt.subplots(2, 1, figsize=(8.0, 8.0))
    stats = (
        frame.assign(null=frame["n"] - frame[rank_column])
        .groupby("n")
        .agg(
            rank_min=(rank_column, "min"),
            rank_max=(rank_column, "max"),
            null_min=("null", "min"),
            null_max=("null", "max"),
            count=(rank_column, "size"),
        )
    )
    lengths = stats.index.to_numpy()
    grid = np.unique(np.concatenate([lengths, [d_v]]))
    what = RANK_LABELS.get(rank_column, rank_column)
    bound = f"({bound_label})" if " " in bound_label.strip() else bound_label
    left, right = axes
    left.plot(grid, np.minimum(grid, d_v), color=PAPER, lw=1.5, ls="--", label=rf"$\min(n, {bound_label})$")
    left.fill_between(lengths, stats["rank_min"], stats["rank_max"], color=RAW, alpha=0.3, lw=0)
    left.plot(lengths, stats["rank_max"], "o", color=RAW, ms=5, label=f"{what}: every head, every text")
    right.plot(grid, np.maximum(grid - d_v, 0), color=PAPER, lw=1.5, ls="--", label=rf"$n - {bound}$")
    right.fill_between(lengths, stats["null_min"], stats["null_max"], color=NULL, alpha=0.3, lw=0)
    right.plot(lengths, stats["null_max"], "o", color=NULL, ms=5, label=f"$n$ - {what}")
    if overlay is not None:
        extra = overlay.groupby("n")[overlay_column].agg(["min", "max"])
        other = RANK_LABELS.get(overlay_column, overlay_column)
        for column in ("min", "max"):
            left.plot(
                extra.index,
                extra[column],
                "x",
                color=EFFECTIVE,
                ms=7,
                mew=1.5,
                label=f"{other}: every head, {overlay['example'].nunique()} texts" if column == "min" else None,
            )
            right.plot(
                extra.index,
                extra.index - extra[column],
                "x",
                color=EFFECTIVE,
                ms=7,
                mew=1.5,
                label=f"$n$ - {other}" if column == "min" else None,
            )
    left.set(
        xscale="log",
        xlabel=r"sequence length $n$ (tokens)",
        ylabel="numerical rank",
        title=f"{what} saturates at ${bound_label}$ = {d_v}",
    )
    right.set(
        xscale="log",
        yscale="symlog",
        xlabel=r"sequence length $n$ (tokens)",
        ylabel="dimension of the left null space",
        title="The null space grows with the input",
    )
    right.set_ylim(bottom=-0.3)
    left.legend(loc="lower right")
    right.legend(loc="upper left")
    for ax in axes:
        ax.axvline(d_v, color="0.6", lw=0.8, ls=":")
    if source:
        left.figure.suptitle(source, fontsize=11)
    left.figure.tight_layout()
    return np.asarray(axes)


def plot_null_space_angles(frame: pd.DataFrame, ax: plt.Axes | None = None, floor: float = 1e-15) -> plt.Axes:
    """Largest principal angle per head for each null-space comparison (log scale, degrees).

    frame: ``helpers.methods.nullspace.compare_null_spaces`` output. Angles below ``floor``
    (exact zeros included) are drawn at ``floor``.
    """
    pairs = {
        "angle_paper": r"LN($E W^V$) vs LN($E W^V H$)",
        "angle_book": r"LN($V$) vs LN($T = V H$)",
        "angle_bias": r"LN($E W^V$) vs LN($V$) (value bias)",
        "angle_bias_second": "same, second largest angle",
    }
    _check_columns(frame, list(pairs))
    if ax is None:
        _, ax = plt.subplots(figsize=(9.0, 3.8), layout="constrained")
    colours = [RAW, EFFECTIVE, PAPER, NULL]
    rng = np.random.default_rng(0)
    for k, column in enumerate(pairs):
        values = np.maximum(frame[column].to_numpy(dtype=float), floor)
        ax.scatter(values, k + rng.uniform(-0.15, 0.15, len(values)), s=12, alpha=0.7, color=colours[k])
    ax.set_yticks(range(len(pairs)), list(pairs.values()))
    ax.invert_yaxis()
    ax.set(
        xscale="log",
        xlabel="largest principal angle between the null spaces (degrees)",
        title=f"Null spaces of every head\n({len(frame)} heads, one input of {int(frame['n'].iloc[0])} tokens)",
    )
    return ax


def plot_attention_comparison(
    maps: Mapping[str, torch.Tensor],
    tokens: Sequence[str] | None = None,
    signed: Sequence[str] = (),
    axes: Sequence[plt.Axes] | None = None,
    max_labels: int = 30,
) -> np.ndarray:
    """Heatmaps one above the other: title -> (n, n) matrix. Titles in ``signed`` use a diverging map at 0.

    Unsigned maps share one colour scale so they can be compared by eye. Given ``axes`` in a
    row of a figure wider than the book's column (10 inches), they are restacked in a column.
    """
    if not maps:
        raise ValueError("maps is empty: give at least one title -> matrix.")
    arrays = {title: as_numpy(m) for title, m in maps.items()}
    if axes is None:
        _, axes = plt.subplots(len(arrays), 1, figsize=(7.6, 6.4 * len(arrays)), layout="constrained")
    axes = np.atleast_1d(axes)
    restack(axes.ravel(), width=7.6, panel_height=6.4)
    unsigned = [a for t, a in arrays.items() if t not in signed]
    low = min(0.0, min(float(a.min()) for a in unsigned)) if unsigned else 0.0
    high = max(float(a.max()) for a in unsigned) if unsigned else 1.0
    for ax, (title, values) in zip(axes, arrays.items(), strict=False):
        if title in signed:
            bound = float(np.abs(values).max()) or 1.0
            token_heatmap(
                values, tokens, ax=ax, title=title, center=0.0, vmin=-bound, vmax=bound, max_labels=max_labels
            )
        elif low < 0:
            token_heatmap(values, tokens, ax=ax, title=title, center=0.0, vmin=-high, vmax=high, max_labels=max_labels)
        else:
            token_heatmap(values, tokens, ax=ax, title=title, vmin=0.0, vmax=high, max_labels=max_labels)
        ax.set_xlabel("key token (attended to)")
        ax.set_ylabel("query token")
    return axes


def plot_hidden_change(
    changes: Mapping[str, torch.Tensor],
    ax: plt.Axes | None = None,
    patched_layer: int | None = None,
    floor: float = 1e-9,
) -> plt.Axes:
    """Largest change of the hidden states per layer: label -> (L + 1,) values, log scale."""
    if not changes:
        raise ValueError("changes is empty.")
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.4), layout="constrained")
    colours = [RAW, PAPER, EFFECTIVE, NULL]
    for k, (label, values) in enumerate(changes.items()):
        values = np.maximum(as_numpy(torch.as_tensor(values)[None]).ravel(), floor)
        ax.plot(np.arange(len(values)), values, "o-", color=colours[k % len(colours)], label=label)
    if patched_layer is not None:
        ax.axvline(patched_layer, color="0.6", ls=":", lw=1)
        # at the foot of the dotted line, below the curves, which rise from the patched layer on
        ax.annotate(
            "output of the patched layer",
            (patched_layer, 0.0),
            xycoords=("data", "axes fraction"),
            fontsize=10,
            color="0.4",
            ha="left",
            va="bottom",
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set(
        yscale="log",
        xlabel="hidden state (0 = embeddings, l = output of layer l)",
        ylabel=rf"max $|\Delta$ hidden state$|$ (0 drawn at {floor:.0e})",
        title="What the rest of the network sees",
    )
    ax.legend(loc="center right")
    return ax


def plot_family_rows(
    attentions: torch.Tensor,
    row: int,
    tokens: Sequence[str] | None = None,
    labels: Sequence[str] | None = None,
    ax: plt.Axes | None = None,
    max_labels: int = 40,
) -> plt.Axes:
    """One query row of every member of a family of attention matrices: (m, n, n) -> m lines."""
    values = torch.as_tensor(attentions).detach().cpu().double().numpy()
    if values.ndim != 3 or values.shape[1] != values.shape[2]:
        raise ValueError(f"attentions must be (m, n, n); got {values.shape}.")
    m, n, _ = values.shape
    if not 0 <= row < n:
        raise ValueError(f"row must be in [0, {n}); got {row}.")
    if ax is None:
        _, ax = plt.subplots(figsize=(9.0, 4.6), layout="constrained")
    colours = plt.get_cmap("plasma")(np.linspace(0.0, 0.85, m))
    for k in range(m):
        label = labels[k] if labels is not None else f"member {k}"
        ax.plot(
            np.arange(n),
            values[k, row],
            color=colours[k],
            lw=2.0 if k == 0 else 1.2,
            label=label,
            zorder=3 if k == 0 else 2,
        )
    if tokens is not None:
        token_ticks(ax, "x", tokens, max_labels, shrink=0.85)
    ax.set(
        xlabel="key token (attended to)",
        ylabel="attention weight",
        ylim=(0, None),
        title=f"Query token {row}"
        + (f" ({readable_token(tokens[row])!r})" if tokens is not None else "")
        + ": valid distributions\nwith one and the same head output",
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


def plot_lp_ranges(
    lower: torch.Tensor,
    upper: torch.Tensor,
    A: torch.Tensor,
    row: int,
    tokens: Sequence[str] | None = None,
    axes: Sequence[plt.Axes] | None = None,
    max_labels: int = 30,
) -> np.ndarray:
    """Top: heatmap of range widths upper - lower (n, n). Below: one query row's [min, max] per key with A."""
    lo, hi, a = as_numpy(lower), as_numpy(upper), as_numpy(A)
    if not lo.shape == hi.shape == a.shape:
        raise ValueError(f"lower, upper and A must have one shape; got {lo.shape}, {hi.shape}, {a.shape}.")
    n = a.shape[0]
    if not 0 <= row < n:
        raise ValueError(f"row must be in [0, {n}); got {row}.")
    if axes is None:
        _, axes = plt.subplots(
            2, 1, figsize=(8.0, 11.5), gridspec_kw={"height_ratios": [1.55, 1]}, layout="constrained"
        )
    left, right = axes
    _image(
        left,
        hi - lo,
        tokens,
        "range width $\\max a_{ij} - \\min a_{ij}$\n(square-root colour scale)",
        False,
        float((hi - lo).max()) or 1.0,
        max_labels,
        cmap="viridis",
        norm=PowerNorm(0.5, vmin=0.0, vmax=float((hi - lo).max()) or 1.0),
    )
    keys = np.arange(n)
    right.vlines(keys, lo[row], hi[row], color=NULL, lw=2.5, alpha=0.7, label="attainable range [min, max]")
    right.plot(keys, a[row], "o", color=RAW, ms=3.5, label="the model's attention")
    if tokens is not None:
        token_ticks(right, "x", tokens, max_labels, shrink=0.85)
    right.set(
        xlabel="key token (attended to)",
        ylabel="attention weight",
        ylim=(0, min(1.0, hi[row].max() * 1.1)),
        title=f"Query {row}"
        + (f" ({readable_token(tokens[row])!r})" if tokens is not None else "")
        + ": every weight's range",
    )
    right.legend(loc="upper right")
    return np.asarray(axes)


def _image(
    ax: plt.Axes,
    values: np.ndarray,
    tokens: Sequence[str] | None,
    title: str,
    signed: bool,
    vmax: float,
    max_labels: int,
    cmap: str | None = None,
    norm=None,
) -> None:
    """A fast heatmap (imshow) with thinned token labels, for pictures redrawn by widgets."""
    default_cmap, vmin = ("RdBu_r", -vmax) if signed else ("Blues", 0.0)
    if norm is None:
        image = ax.imshow(values, cmap=cmap or default_cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
    else:
        image = ax.imshow(values, cmap=cmap or default_cmap, norm=norm, interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    n = values.shape[0]
    if tokens is not None:
        step = label_step(n, 0.7 * min(axes_inches(ax)), max_labels)
        ticks = np.arange(0, n, step)
        shown = [readable_token(tokens[i]) for i in ticks]
        ax.set_xticks(ticks, shown, rotation=90, fontsize=LABEL_POINTS)
        ax.set_yticks(ticks, shown, fontsize=LABEL_POINTS)
    ax.grid(False)
    ax.set(title=title, xlabel="key token", ylabel="query token")


def plot_null_step(
    A: torch.Tensor,
    alternative: torch.Tensor,
    output_change: float,
    tokens: Sequence[str] | None = None,
    steps: Sequence[float] = (),
    figsize=(9.0, 8.6),
    max_labels: int = 25,
) -> plt.Figure:
    """The explorer's picture: A, the alternative A + Ã and Ã in a 2 x 2 grid, the steps in the
    title and the relative output change written in the fourth cell."""
    a, alt = as_numpy(A), as_numpy(alternative)
    if a.shape != alt.shape or a.shape[0] != a.shape[1]:
        raise ValueError(f"A and alternative must both be (n, n); got {a.shape} and {alt.shape}.")
    fig, grid = plt.subplots(2, 2, figsize=figsize, layout="constrained")
    axes = grid.ravel()
    top = float(max(a.max(), alt.max()))
    _image(axes[0], a, tokens, "the model's attention $A$", False, top, max_labels)
    _image(axes[1], alt, tokens, r"alternative $A + \tilde A$", False, top, max_labels)
    _image(
        axes[2], alt - a, tokens, r"the difference $\tilde A$", True, float(np.abs(alt - a).max()) or 1.0, max_labels
    )
    change = "< 1e-6" if output_change < 1e-6 else f"= {output_change:.2g}"
    where = ", ".join(f"$t_{k + 1}$ = {t:.3g}" for k, t in enumerate(steps))
    lines = [
        rf"max $|\tilde A_{{ij}}|$ = {np.abs(alt - a).max():.2f}",
        f"min weight = {alt.min():.2f}",
        "relative change of",
        f"the head output A T {change}",
    ]
    axes[3].axis("off")
    axes[3].text(0.05, 0.9, "\n".join(lines), va="top", ha="left", fontsize=12, transform=axes[3].transAxes)
    fig.suptitle(f"steps {where}" if where else "the model's attention and a valid alternative")
    return fig


def plot_null_grid(
    A: torch.Tensor,
    alternatives: Sequence[Sequence[torch.Tensor]],
    labels: Sequence[Sequence[str]],
    panel_size: float = 2.6,
    width: float = 9.5,
) -> plt.Figure:
    """The explorer without a kernel: the difference Ã = A' - A at a grid of slider positions.

    alternatives: rows x columns of (n, n) valid alternatives A' (the explorer's
    ``alternative(steps)``); labels: the same grid of panel titles. One symmetric
    colour scale for every panel, so the panels compare. Panels are ``panel_size`` inches,
    smaller where the columns would not fit in ``width`` inches (the book's column).
    """
    a = as_numpy(A)
    grid = [[as_numpy(alt) - a for alt in row] for row in alternatives]
    rows, cols = len(grid), len(grid[0])
    if any(len(row) != cols for row in grid) or [len(r) for r in labels] != [cols] * rows:
        raise ValueError("alternatives and labels must be grids of the same shape.")
    # one symmetric scale for every panel, clipped at the 99th percentile of |Ã| so that the few
    # largest moves do not wash out the rest (they show saturated)
    top = float(np.quantile(np.abs(np.stack([d for row in grid for d in row])), 0.99)) or 1.0
    panel_size = min(panel_size, (width - 1.0) / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(panel_size * cols + 1.0, panel_size * rows + 0.6), squeeze=False, layout="constrained"
    )
    for r in range(rows):
        for c in range(cols):
            ax = axes[r][c]
            image = ax.imshow(grid[r][c], cmap="RdBu_r", vmin=-top, vmax=top)
            ax.set_title(labels[r][c], fontsize=10)
            ax.set_xticks([])
            ax.set_yticks([])
            if r == rows - 1:
                ax.set_xlabel("key")
            if c == 0:
                ax.set_ylabel("query")
    fig.colorbar(image, ax=axes, shrink=0.8, extend="both", label=r"$\tilde A_{ij}$ (clipped at the 99th percentile)")
    return fig
