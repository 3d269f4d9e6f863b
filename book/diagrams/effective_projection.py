"""The projection behind effective attention: a row of A split into its column-space and null-space parts."""

from __future__ import annotations

import drawing
import numpy as np

NAME = "effective_projection"
CAPTION = (
    "Effective attention is a projection, drawn for $n = 2$ tokens and a $T$ of rank 1, so that each "
    "space is a line. A row $a$ of $A$ splits into $a_\\mathrm{eff}$, its projection onto the column space of "
    "$T$, and $a_\\mathrm{null}$, at a right angle to it in the left null space $\\operatorname{LN}(T)$. Look "
    "at the red arrow: since $a_\\mathrm{null} T = 0$, removing it leaves the head's output "
    "$a T = a_\\mathrm{eff} T$ unchanged; in a real head the column space has $d_v$ dimensions out of $n$."
)

ROW = np.array([0.45, 0.55])  # a row of A: two weights that sum to one
ANGLE = np.deg2rad(12)  # the direction spanning the column space of T


def draw():
    u = np.array([np.cos(ANGLE), np.sin(ANGLE)])
    w = np.array([-u[1], u[0]])  # LN(T): orthogonal to the column space
    eff = (ROW @ u) * u
    null = ROW - eff
    assert abs(null @ u) < 1e-12
    fig = drawing.figure(5.0, 4.2)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(-0.5, 1.15)
    ax.set_ylim(-0.3, 1.08)
    ax.set_aspect("equal")
    ax.axis("off")
    for direction in [(1, 0), (0, 1)]:
        ax.annotate(
            "",
            xy=direction,
            xytext=(0, 0),
            arrowprops={"arrowstyle": "->", "color": drawing.GREY},
        )
    ax.text(
        1.0,
        -0.05,
        "token 1",
        ha="center",
        va="top",
        fontsize=10,
        color=drawing.GREY,
    )
    ax.text(
        -0.03,
        0.95,
        "token 2",
        ha="right",
        va="center",
        fontsize=10,
        color=drawing.GREY,
    )
    span = np.array([-0.12 * u, 1.18 * u])
    ax.plot(
        span[:, 0],
        span[:, 1],
        color=drawing.EFFECTIVE,
        linewidth=1.2,
        linestyle="--",
    )
    ax.text(
        *(0.98 * u + np.array([0.0, 0.06])),
        "column space\nof $T$",
        ha="center",
        va="bottom",
        fontsize=10,
        color=drawing.EFFECTIVE,
    )
    line = np.array([-0.42 * w, 0.55 * w])
    ax.plot(
        line[:, 0],
        line[:, 1],
        color=drawing.NULL,
        linewidth=1.2,
        linestyle="--",
    )
    ax.text(
        *(0.55 * w + np.array([-0.03, 0.0])),
        "LN($T$)",
        ha="right",
        va="center",
        fontsize=10,
        color=drawing.NULL,
    )
    arrow = {
        "arrowstyle": "-|>",
        "linewidth": 2.2,
        "mutation_scale": 16,
        "shrinkA": 0,
        "shrinkB": 0,
    }
    ax.annotate(
        "",
        xy=ROW,
        xytext=(0, 0),
        arrowprops={**arrow, "color": drawing.RAW},
    )
    ax.annotate(
        "",
        xy=eff,
        xytext=(0, 0),
        arrowprops={**arrow, "color": drawing.EFFECTIVE},
    )
    ax.annotate(
        "",
        xy=ROW,
        xytext=eff,
        arrowprops={**arrow, "color": drawing.NULL},
    )
    corner = eff - 0.05 * u
    square = np.array([corner, corner + 0.05 * w, eff + 0.05 * w])
    ax.plot(square[:, 0], square[:, 1], color="black", linewidth=0.8)
    ax.text(
        *(ROW + np.array([0.03, 0.0])),
        "$a$ (raw)",
        fontsize=12,
        color=drawing.RAW,
        va="bottom",
    )
    ax.text(
        *(0.55 * eff + np.array([0.02, -0.06])),
        "$a_\\mathrm{eff}$",
        fontsize=12,
        color=drawing.EFFECTIVE,
        va="top",
    )
    ax.text(
        *((ROW + eff) / 2 + np.array([0.04, 0.0])),
        "$a_\\mathrm{null}$",
        fontsize=12,
        color=drawing.NULL,
        va="center",
    )
    ax.text(
        -0.48,
        -0.25,
        "$a = a_\\mathrm{eff} + a_\\mathrm{null}$,   $a_\\mathrm{null}\\, T = 0$",
        fontsize=11,
    )
    return fig
