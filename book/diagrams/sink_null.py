"""The attention sink and its null part: the sink's large raw weight is mostly null attention."""

from __future__ import annotations

import drawing
import numpy as np

NAME = "sink_null"
CAPTION = (
    "An attention sink in one row of $A$ (numbers made up, the projection computed): the first token takes "
    "most of the raw attention, but its row of $T$ is tiny, so the column space of $T$ barely reaches it. "
    "Look at its two bars: in effective attention almost nothing is left; the difference is null attention, "
    "weight that does not change the head's output (what the model does with the sink's own value is another question, which this chapter answers with an intervention). The other tokens' weights change much less."
)

TOKENS = ["sink", "the", "cat", "sat", "down", "."]
T = np.array(
    [
        [0.03, 0.01, -0.02],  # the sink sends (almost) nothing
        [1.0, 0.2, -0.3],
        [0.1, 0.9, 0.4],
        [-0.5, 0.3, 1.0],
        [0.7, -0.6, 0.2],
        [0.2, 0.5, -0.8],
    ]
)
ROW = np.array([0.62, 0.04, 0.1, 0.08, 0.11, 0.05])


def split(row, T):
    """(effective, null): the row projected onto the column space of T, and the rest."""
    U, s, _ = np.linalg.svd(T, full_matrices=False)
    U = U[:, s > 1e-10 * s[0]]
    effective = row @ U @ U.T
    return effective, row - effective


def draw():
    effective, null = split(ROW, T)
    assert np.allclose(null @ T, 0)
    fig = drawing.figure(5.2, 3.1)
    ax = fig.add_axes((0.13, 0.17, 0.84, 0.78))
    x = np.arange(len(TOKENS))
    ax.bar(x - 0.2, ROW, width=0.38, color=drawing.RAW, label="raw $a$")
    ax.bar(
        x + 0.2,
        effective,
        width=0.38,
        color=drawing.EFFECTIVE,
        label="effective $a_\\mathrm{eff}$",
    )
    ax.axhline(0, color="black", linewidth=0.8)
    ax.annotate(
        f"null part {null[0]:.2f}",
        xy=(0.39, 0.4),
        xytext=(1.0, 0.45),
        fontsize=10,
        color=drawing.NULL,
        arrowprops={"arrowstyle": "->", "color": drawing.NULL},
    )
    ax.bar(
        0.2,
        ROW[0] - effective[0],
        bottom=effective[0],
        width=0.38,
        facecolor="none",
        edgecolor=drawing.NULL,
        hatch="///",
        linewidth=1.2,
    )
    ax.set_xticks(x, TOKENS, fontsize=10)
    ax.set_ylabel("attention weight", fontsize=10)
    ax.tick_params(axis="y", labelsize=10)
    ax.legend(fontsize=10, frameon=False, loc="upper right")
    return fig
