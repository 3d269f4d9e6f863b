"""Figures of chapter 9: causal null spaces, attribution and the attention sink of a decoder."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .heatmaps import as_numpy, fit_column
from .style import EFFECTIVE, NULL, PAPER, RAW, every_nth


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
    fig = plt.figure(figsize=(7.4, 8.8), layout="constrained")
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
        ax.set_xticks(every_nth(table.columns, 8))
        ax.set_yticks(every_nth(table.index, 16))
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


def _needs(table: pd.DataFrame, columns: set, what: str) -> None:
    missing = columns - set(table.columns)
    if missing:
        raise ValueError(f"{what} lacks the columns {sorted(missing)}.")


def plot_decoder_attribution(by_layer: pd.DataFrame) -> plt.Figure:
    """Hidden Token Attribution of a decoder per layer: the token's own share (top) and what position 0
    gets against what it gives (below).

    by_layer: one row per layer with ``layer``, ``own_exact`` (median c_ii, the exact prompt),
    ``own_estimate`` (median c_ii, the estimate on passages), ``feeds`` (mean c_i0 over i >= 1) and
    ``receives`` (mean raw attention on position 0 over heads and rows i >= 1).
    """
    _needs(by_layer, {"layer", "own_exact", "own_estimate", "feeds", "receives"}, "by_layer")
    fig, axes = plt.subplots(2, 1, figsize=(7.5, 8.0), layout="constrained", sharex=True)
    layers = by_layer["layer"]
    axes[0].plot(layers, by_layer["own_exact"], "o-", color=EFFECTIVE, label="exact, one short prompt")
    axes[0].plot(layers, by_layer["own_estimate"], "s--", color=PAPER, label="estimate, passages")
    axes[0].set(ylabel="median own share $c^l_{ii}$", title="How much of a hidden token is its own input")
    axes[0].set_ylim(0, 1)
    axes[0].legend()
    axes[1].plot(layers, by_layer["receives"], "o-", color=RAW, label="attention it receives (raw, per row)")
    axes[1].plot(layers, by_layer["feeds"], "o-", color=NULL, label="share of later tokens it feeds ($c^l_{i0}$)")
    axes[1].set(xlabel="layer", ylabel="mean over later tokens", title="Position 0: attended to, and fed from")
    axes[1].set_ylim(0, 1)
    axes[1].legend()
    return fig


def plot_sink_literature(rate_by_layer: pd.DataFrame, activations: pd.DataFrame, epsilon: float) -> plt.Figure:
    """The sink as the literature measures it: the share of sink heads per layer (Gu et al.) and the
    largest residual entries at position 0 and elsewhere against the median (Sun et al.).

    rate_by_layer: ``layer``, ``sink_rate`` (share of heads with alpha > epsilon); activations: one row
    per hidden state with ``layer``, ``at_position``, ``elsewhere`` and ``median`` (means over prompts).
    """
    _needs(rate_by_layer, {"layer", "sink_rate"}, "rate_by_layer")
    _needs(activations, {"layer", "at_position", "elsewhere", "median"}, "activations")
    fig, axes = plt.subplots(2, 1, figsize=(7.5, 8.0), layout="constrained")
    axes[0].bar(rate_by_layer["layer"], rate_by_layer["sink_rate"], width=0.7, color=RAW)
    axes[0].set(
        xlabel="layer",
        ylabel=f"share of heads with alpha > {epsilon}",
        title="Sink heads per layer (Gu et al.'s measure)",
    )
    axes[0].set_ylim(0, 1)
    axes[1].plot(
        activations["layer"],
        activations["at_position"] / activations["median"],
        "o-",
        color=RAW,
        label="largest entry at position 0",
    )
    axes[1].plot(
        activations["layer"],
        activations["elsewhere"] / activations["median"],
        "s-",
        color=EFFECTIVE,
        label="largest entry anywhere else",
    )
    axes[1].set_yscale("log")
    axes[1].set(
        xlabel="hidden state (0 = token embeddings)",
        ylabel="times the median |entry|",
        title="Massive activations in the residual stream (Sun et al.)",
    )
    axes[1].legend()
    return fig


def plot_value_drain(per_head: pd.DataFrame, epsilon: float) -> plt.Figure:
    """Value-state drains and the null space, one point per head.

    per_head: ``value_norm_ratio``, ``leverage``, ``sink_score``, ``gap`` (raw minus effective
    attention on position 0, per row) and ``predicted`` (the part position 0's leverage accounts
    for, per row). Top: the small value row goes with a small leverage; below: the gap against
    its prediction, heads with alpha > ``epsilon`` filled.
    """
    _needs(per_head, {"value_norm_ratio", "leverage", "sink_score", "gap", "predicted"}, "per_head")
    fig, axes = plt.subplots(2, 1, figsize=(7.5, 9.0), layout="constrained")
    image = axes[0].scatter(
        per_head["value_norm_ratio"],
        per_head["leverage"],
        c=per_head["sink_score"],
        cmap="viridis",
        vmin=0,
        vmax=1,
        s=18,
    )
    axes[0].set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].set(
        xlabel="$||T_h[0]||$ / median $||T_h[j]||$",
        ylabel="leverage of position 0, $(P_i)_{00}$",
        title="A small value row puts $e_0$ close to the null space",
    )
    fig.colorbar(image, ax=axes[0], label="sink score alpha")
    sink = per_head["sink_score"] > epsilon
    for chosen, face, label in ((sink, RAW, f"alpha > {epsilon}"), (~sink, "none", f"alpha <= {epsilon}")):
        axes[1].scatter(
            per_head.loc[chosen, "predicted"],
            per_head.loc[chosen, "gap"],
            s=18,
            facecolors=face,
            edgecolors=RAW,
            label=label,
        )
    top = float(max(per_head["gap"].max(), per_head["predicted"].max()))
    axes[1].plot([0, top], [0, top], color="grey", lw=1, ls=":", label="equal")
    axes[1].set(
        xlabel="predicted: $a_{i0} (1 - (P_i)_{00})$, per row",
        ylabel="raw minus effective on position 0, per row",
        title="The leverage term accounts for the gap",
    )
    axes[1].legend()
    return fig


def plot_interventions(summary: pd.DataFrame) -> plt.Figure:
    """The change in next-token loss per intervention (groups) and edited position (bars), with intervals.

    summary: ``summarise_interventions(table)`` (columns kind, role, delta, low, high). The loss
    change is drawn on a symmetric log scale: some edits change it by hundredths, others by nats.
    """
    _needs(summary, {"kind", "role", "delta", "low", "high"}, "summary")
    kinds = list(dict.fromkeys(summary["kind"]))
    roles = list(dict.fromkeys(summary["role"]))
    colours = dict(zip(roles, (RAW, EFFECTIVE, NULL, PAPER), strict=False))
    width = 0.8 / len(roles)
    fig, ax = plt.subplots(figsize=(7.2, 5.0), layout="constrained")
    for k, role in enumerate(roles):
        rows = summary[summary["role"] == role].set_index("kind").reindex(kinds)
        x = np.arange(len(kinds)) + (k - (len(roles) - 1) / 2) * width
        errors = np.stack([rows["delta"] - rows["low"], rows["high"] - rows["delta"]])
        label = {"sink": "at position 0 (the sink)", "random": "at a random early position"}.get(role, f"at {role}")
        ax.bar(x, rows["delta"], width, yerr=errors, capsize=3, color=colours[role], label=label)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_yscale("symlog", linthresh=0.01)
    ax.set_xticks(np.arange(len(kinds)), [textwrap.fill(kind, 11).replace("d_v", "$d_v$") for kind in kinds])
    ax.set(ylabel="change in next-token loss, nats per token\n(symmetric log scale: linear within ±0.01)")
    ax.set_ylim(top=max(1.0, float(summary["high"].max())) * 3)  # room above the tallest interval
    fig.legend(loc="outside lower center", ncols=min(2, len(roles)))
    return fig


def plot_layer_interventions(per_layer: pd.DataFrame, readings: pd.DataFrame) -> plt.Figure:
    """Top: the change in loss when one layer's heads are edited at a position (a line per kind, with
    its interval); below: the readings of that position per layer.

    per_layer: ``summarise_interventions(table, by=["kind", "layer"])``; readings: one row per layer
    with ``layer`` and one column per reading (e.g. raw, effective, value_norm_ratio, leverage).
    """
    _needs(per_layer, {"kind", "layer", "delta", "low", "high"}, "per_layer")
    _needs(readings, {"layer"}, "readings")
    fig, axes = plt.subplots(2, 1, figsize=(7.2, 7.4), sharex=True, layout="constrained")
    for kind, colour in zip(dict.fromkeys(per_layer["kind"]), (RAW, EFFECTIVE, NULL), strict=False):
        rows = per_layer[per_layer["kind"] == kind].sort_values("layer")
        axes[0].plot(rows["layer"], rows["delta"], "o-", color=colour, label=kind.replace("d_v", "$d_v$"))
        axes[0].fill_between(rows["layer"], rows["low"], rows["high"], color=colour, alpha=0.2)
    axes[0].axhline(0, color="grey", lw=0.8)
    axes[0].set_yscale("symlog", linthresh=0.01)
    axes[0].set(ylabel="change in loss, one layer edited\n(symmetric log: linear within ±0.01)")
    axes[0].set_ylim(top=max(1.0, float(per_layer["high"].max())) * 3)  # room above the highest band
    axes[0].legend(loc="upper left", ncols=2)
    for column, style in zip([c for c in readings.columns if c != "layer"], ("o-", "s-", "^--", "d:"), strict=False):
        axes[1].plot(readings["layer"], readings[column], style, label=column)
    axes[1].set(xlabel="layer", ylabel="reading of the position\n(mean over heads)")
    axes[1].legend()
    return fig
