"""Hidden Token Attribution: the Jacobian's d x d blocks, their norms and the row-normalised contributions."""

from __future__ import annotations

import drawing
import numpy as np
from matplotlib.patches import Rectangle

NAME = "hta_jacobian"
CAPTION = (
    "Hidden Token Attribution for $n = 4$ tokens. Left: the Jacobian of layer $l$'s hidden tokens by the input "
    "embeddings, cut into $d \\times d$ blocks $J^l_{ij} = \\partial e^l_i / \\partial x_j$ (shade: the block's "
    "Frobenius norm). Right: each norm divided by its row's sum, the contribution $c^l_{ij}$; each row sums "
    "to 1. Look at the diagonal: where it holds the largest share of a row, the hidden token is still mostly "
    "its own input token."
)

NORMS = np.array(
    [
        [5.0, 1.0, 0.5, 0.5],
        [1.5, 4.0, 1.0, 0.5],
        [0.5, 2.5, 3.0, 1.5],
        [1.0, 0.5, 1.5, 3.5],
    ]
)


def draw():
    n = len(NORMS)
    shares = NORMS / NORMS.sum(1, keepdims=True)
    fig = drawing.figure(5.4, 3.25)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(-1.3, 12.1)
    ax.set_ylim(-6.3, 1.8)
    ax.set_aspect("equal")
    ax.axis("off")
    cmap = drawing.plt.get_cmap("Blues")
    size, sub = (
        1.1,
        3,
    )  # a block's side; the d x d grid drawn inside it (3 lines: "d x d")
    for i in range(n):
        for j in range(n):
            x, y = j * size, -(i + 1) * size
            ax.add_patch(
                Rectangle(
                    (x, y),
                    size,
                    size,
                    facecolor=cmap(
                        0.12 + 0.8 * NORMS[i, j] / NORMS.max()
                    ),
                    edgecolor="black",
                    linewidth=1.0,
                )
            )
            for k in range(1, sub):
                ax.plot(
                    [x + k * size / sub] * 2,
                    [y, y + size],
                    color="white",
                    linewidth=0.4,
                )
                ax.plot(
                    [x, x + size],
                    [y + k * size / sub] * 2,
                    color="white",
                    linewidth=0.4,
                )
    ax.text(
        n * size / 2,
        0.35,
        "$\\partial e^l / \\partial x$: $n \\times n$ blocks",
        ha="center",
        va="bottom",
        fontsize=11,
    )
    ax.add_patch(
        Rectangle(
            (2 * size, -2 * size),
            size,
            size,
            facecolor="none",
            edgecolor=drawing.NULL,
            linewidth=2.2,
        )
    )
    ax.text(
        n * size / 2,
        -n * size - 0.75,
        "red: $J^l_{23}$, one $d \\times d$ block",
        ha="center",
        va="top",
        fontsize=10,
        color=drawing.NULL,
    )
    ax.text(
        -0.25,
        -n * size / 2,
        "hidden token $i$",
        rotation=90,
        ha="right",
        va="center",
        fontsize=10,
    )
    ax.text(
        n * size / 2,
        -n * size - 0.15,
        "input token $j$",
        ha="center",
        va="top",
        fontsize=10,
    )
    ax.annotate(
        "",
        xy=(7.0, -2.2),
        xytext=(5.0, -2.2),
        arrowprops={
            "arrowstyle": "-|>",
            "linewidth": 1.5,
            "color": "black",
        },
    )
    ax.text(
        6.0,
        -2.0,
        "$\\|J^l_{ij}\\|_F$",
        ha="center",
        va="bottom",
        fontsize=11,
    )
    ax.text(
        6.0, -2.45, "$\\div$ row sum", ha="center", va="top", fontsize=11
    )
    left = 7.4
    for i in range(n):
        for j in range(n):
            x, y = left + j * size, -(i + 1) * size
            ax.add_patch(
                Rectangle(
                    (x, y),
                    size,
                    size,
                    facecolor=cmap(
                        0.12 + 0.8 * shares[i, j] / shares.max()
                    ),
                    edgecolor="white",
                    linewidth=1.2,
                )
            )
            color = "white" if shares[i, j] > 0.45 else "black"
            ax.text(
                x + size / 2,
                y + size / 2,
                f"{shares[i, j]:.2f}".lstrip("0"),
                ha="center",
                va="center",
                fontsize=10,
                color=color,
            )
    ax.text(
        left + n * size / 2,
        0.35,
        "contributions $c^l_{ij}$",
        ha="center",
        va="bottom",
        fontsize=11,
    )
    ax.text(
        left + n * size / 2,
        -n * size - 0.15,
        "rows sum to 1",
        ha="center",
        va="top",
        fontsize=10,
    )
    return fig
