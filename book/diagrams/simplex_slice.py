"""The probability simplex for n = 3, the affine slice of valid alternatives through a row, and its vertices."""

from __future__ import annotations

import drawing
import numpy as np
from matplotlib.patches import Polygon

NAME = "simplex_slice"
CAPTION = (
    "Where the valid alternatives live, for $n = 3$: the triangle is the probability simplex (every row of "
    "$A$ is a point in it; a corner puts all weight on one token). The dashed line is the row $a$ plus the "
    "constrained null space $\\operatorname{LN}([T, \\mathbf{1}])$, here of dimension one. Look at the solid "
    "segment: the part of the line inside the triangle holds every valid alternative, and its two ends, "
    "where one weight reaches zero, are the vertices a linear program finds."
)

CORNERS = np.array(
    [[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3) / 2]]
)  # token 1, 2, 3
ROW = np.array([0.5, 0.2, 0.3])
NULL_DIRECTION = np.array(
    [1.0, -2.0, 1.0]
)  # sums to 0: stays in the plane of the simplex


def to_plane(p):
    """Barycentric weights (..., 3) -> points of the triangle (..., 2)."""
    return np.asarray(p) @ CORNERS


def draw():
    fig = drawing.figure(5.0, 4.2)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(-0.3, 1.3)
    ax.set_ylim(-0.2, 0.96)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.add_patch(
        Polygon(
            CORNERS,
            closed=True,
            facecolor=drawing.LIGHT,
            edgecolor="black",
            linewidth=1.2,
        )
    )
    labels = [
        ("token 1", -0.03, 0.0, "right"),
        ("token 2", 0.03, 0.0, "left"),
        ("token 3", 0.0, 0.05, "center"),
    ]
    for corner, (label, dx, dy, ha) in zip(CORNERS, labels, strict=True):
        ax.text(
            corner[0] + dx,
            corner[1] + dy,
            label,
            ha=ha,
            va="center",
            fontsize=10,
        )
    # where the line a + t x leaves the simplex: the first entry that reaches 0 on each side
    steps = -ROW / NULL_DIRECTION
    t_high = steps[steps > 0].min()
    t_low = steps[steps < 0].max()
    ends = np.array(
        [ROW + t_low * NULL_DIRECTION, ROW + t_high * NULL_DIRECTION]
    )
    far = np.array(
        [
            ROW + (t_low - 0.08) * NULL_DIRECTION,
            ROW + (t_high + 0.08) * NULL_DIRECTION,
        ]
    )
    line = to_plane(far)
    ax.plot(
        line[:, 0],
        line[:, 1],
        linestyle="--",
        color=drawing.GREY,
        linewidth=1.2,
    )
    segment = to_plane(ends)
    ax.plot(
        segment[:, 0],
        segment[:, 1],
        color=drawing.NULL,
        linewidth=3.2,
        solid_capstyle="round",
    )
    a = to_plane(ROW)
    ax.plot(*a, "o", color=drawing.RAW, markersize=8, zorder=5)
    ax.annotate(
        "$a$, the model's row",
        a,
        xytext=(a[0] + 0.16, a[1] + 0.05),
        fontsize=11,
        color=drawing.RAW,
        arrowprops={
            "arrowstyle": "-",
            "color": drawing.RAW,
            "linewidth": 0.8,
        },
    )
    for end, weights in zip(segment, ends, strict=True):
        ax.plot(*end, "s", color=drawing.NULL, markersize=7, zorder=5)
        zero = int(np.argmin(np.abs(weights)))
        text = "vertex: weight of\ntoken " + str(zero + 1) + " is 0"
        if end[1] > 1e-9:  # on a slanted edge: the words to its left
            ax.text(
                end[0] - 0.05,
                end[1],
                text,
                ha="right",
                va="center",
                fontsize=10,
                color=drawing.NULL,
            )
        else:  # on the bottom edge: the words under it
            ax.text(
                end[0],
                end[1] - 0.05,
                text,
                ha="center",
                va="top",
                fontsize=10,
                color=drawing.NULL,
            )
    ax.text(
        1.18,
        0.62,
        "$a + t\\,x$, $x$ in\nLN($[T, \\mathbf{1}]$)",
        ha="right",
        fontsize=10,
        color=drawing.GREY,
    )
    return fig
