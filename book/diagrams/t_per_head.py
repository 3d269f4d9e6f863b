"""T = V H per head, with its shapes: the head's output is A T, and T has rank at most d_v."""

from __future__ import annotations

import drawing
from matplotlib.patches import Rectangle

NAME = "t_per_head"
CAPTION = (
    "One head, drawn to its shapes ($n = 5$ tokens, head size $d_v = 2$, width $d = 5$). "
    "Look at the thin middle of the top row: $T = V H$ passes through $d_v$ columns, so its rank is at most "
    "$d_v$ however long the input. The bottom row is everything the rest of the network sees of the head: "
    "the product $A T$, not $A$."
)


def matrix(ax, x, y, rows, cols, color, name, shape, rank_note=None):
    """A rows x cols grid of unit cells with its top-left corner at (x, y), its name and shape under it."""
    ax.add_patch(
        Rectangle(
            (x, y - rows),
            cols,
            rows,
            facecolor=color,
            edgecolor="black",
            linewidth=1.2,
        )
    )
    for r in range(1, rows):
        ax.plot(
            [x, x + cols], [y - r, y - r], color="white", linewidth=0.8
        )
    for c in range(1, cols):
        ax.plot(
            [x + c, x + c], [y, y - rows], color="white", linewidth=0.8
        )
    ax.text(
        x + cols / 2,
        y - rows - 0.45,
        name,
        ha="center",
        va="top",
        fontsize=13,
    )
    ax.text(
        x + cols / 2,
        y - rows - 1.35,
        shape,
        ha="center",
        va="top",
        fontsize=10,
        color=drawing.GREY,
    )
    if rank_note:
        ax.text(
            x + cols / 2,
            y + 0.35,
            rank_note,
            ha="center",
            va="bottom",
            fontsize=10,
            color=drawing.NULL,
        )


def draw():
    n, d_v, d = 5, 2, 5
    fig = drawing.figure(5.4, 4.55)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(-0.3, 19.2)
    ax.set_ylim(-15.2, 1.2)
    ax.set_aspect("equal")
    ax.axis("off")
    top = 0
    x = 0.6
    matrix(ax, x, top, n, d_v, drawing.LIGHT, "$V$", "$n \\times d_v$")
    ax.text(
        x + d_v + 0.75,
        top - n / 2,
        "$\\times$",
        ha="center",
        va="center",
        fontsize=16,
    )
    x += d_v + 1.5
    matrix(
        ax,
        x,
        top - (n - d_v) / 2,
        d_v,
        d,
        drawing.LIGHT,
        "$H$ (rows of $W^O$)",
        "$d_v \\times d$",
    )
    ax.text(
        x + d + 0.75,
        top - n / 2,
        "$=$",
        ha="center",
        va="center",
        fontsize=16,
    )
    x += d + 1.5
    matrix(
        ax,
        x,
        top,
        n,
        d,
        "#c9d6ea",
        "$T = V H$",
        "$n \\times d$",
        rank_note="rank $\\leq d_v$",
    )
    second = -8.0
    x = 0.6
    matrix(ax, x, second, n, n, "#dcd3ea", "$A$", "$n \\times n$")
    ax.text(
        x + n + 0.75,
        second - n / 2,
        "$\\times$",
        ha="center",
        va="center",
        fontsize=16,
    )
    x += n + 1.5
    matrix(ax, x, second, n, d, "#c9d6ea", "$T$", "$n \\times d$")
    ax.text(
        x + d + 0.75,
        second - n / 2,
        "$=$",
        ha="center",
        va="center",
        fontsize=16,
    )
    x += d + 1.5
    matrix(
        ax,
        x,
        second,
        n,
        d,
        "#d5e8d4",
        "$A T$, the output",
        "$n \\times d$",
    )
    return fig
