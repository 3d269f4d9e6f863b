"""The rank argument on a small example: a left null vector of T changes a row of A, not its output."""

from __future__ import annotations

import drawing
import numpy as np
from matplotlib.patches import Rectangle

NAME = "rank_example"
CAPTION = (
    "The rank argument with numbers: $n = 4$ tokens and a $T$ of rank 2. The middle row $x$ satisfies "
    "$x T = 0$ and sums to zero, so it lies in the left null space $\\operatorname{LN}([T, \\mathbf{1}])$ "
    "(of dimension $4 - 2 - 1 = 1$ here). Look at the right-hand column: the attention rows $a$ and "
    "$a + x$ differ in three of four weights, yet give the head the same output."
)

T = np.array([[1, 0], [0, 1], [1, 1], [1, -1]], dtype=float)
A_ROW = np.array([0.4, 0.3, 0.2, 0.1])
X = np.array([-0.2, 0.0, 0.1, 0.1])


def cells(ax, x, y, values, color, fmt="{:.1f}"):
    """A row (1-D) or matrix (2-D) of unit cells with top-left corner (x, y), each with its value."""
    values = np.atleast_2d(values)
    for r, row in enumerate(values):
        for c, value in enumerate(row):
            ax.add_patch(
                Rectangle(
                    (x + c, y - r - 1),
                    1,
                    1,
                    facecolor=color,
                    edgecolor="white",
                    linewidth=1.5,
                )
            )
            text = (
                fmt.format(value)
                .replace("-", "\u2212")
                .replace("0.", ".")
                if value != 0
                else "0"
            )
            ax.text(
                x + c + 0.5,
                y - r - 0.5,
                text,
                ha="center",
                va="center",
                fontsize=11,
            )


def draw():
    assert (
        np.allclose(X @ T, 0)
        and abs(X.sum()) < 1e-12
        and (A_ROW + X >= 0).all()
    )
    fig = drawing.figure(5.4, 3.3)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 15.6)
    ax.set_ylim(-9.6, 0.2)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.text(1.4, -0.2, "$T$", ha="center", va="top", fontsize=13)
    cells(ax, 0.4, -1.2, T, "#c9d6ea", fmt="{:.0f}")
    ax.text(
        1.4,
        -5.6,
        "$n \\times d_v$\n$4 \\times 2$",
        ha="center",
        va="top",
        fontsize=10,
        color=drawing.GREY,
    )
    rows = [
        ("$a$", A_ROW, "#dcd3ea", "a row of $A$"),
        ("$x$", X, "#f3d1d2", "in LN($[T, \\mathbf{1}]$)"),
        ("$a + x$", A_ROW + X, "#dcd3ea", "another valid row"),
    ]
    for k, (name, row, color, note) in enumerate(rows):
        y = -0.6 - 3.0 * k
        ax.text(4.9, y - 0.5, name, ha="right", va="center", fontsize=12)
        cells(ax, 5.1, y, row, color)
        ax.text(
            9.35,
            y - 0.5,
            "$\\cdot\\, T \\;=$",
            ha="left",
            va="center",
            fontsize=12,
        )
        cells(ax, 11.4, y, row @ T, "#d5e8d4" if k != 1 else "#eeeeee")
        ax.text(
            7.1,
            y - 1.15,
            note,
            ha="center",
            va="top",
            fontsize=10,
            color=drawing.GREY,
        )
    return fig
