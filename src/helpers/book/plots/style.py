"""One look for every figure in the book."""

from __future__ import annotations

import matplotlib as mpl
import seaborn as sns

RAW = "#4C72B0"  # raw attention / default series
EFFECTIVE = "#DD8452"  # effective attention / second series
NULL = "#8C8C8C"  # null-space part / reference lines
PAPER = "#C44E52"  # the paper's reported numbers


def set_style() -> None:
    """Seaborn's white grid, PNG figures at a crisp resolution, and no text under 10 pt.

    The book's column shows a figure at most about 690 px wide and never scales one up: a
    figure at most 10 inches wide (1100 px at 110 dpi) keeps 10-pt text at 9 px or more.
    """
    sns.set_theme(style="whitegrid", context="notebook")
    mpl.rcParams.update(
        {
            "figure.dpi": 110,
            "savefig.dpi": 110,
            "figure.figsize": (7.0, 4.0),
            "font.size": 10,
            "axes.titlesize": 12,
            "axes.labelsize": 11,
            "xtick.labelsize": 10,
            "ytick.labelsize": 10,
            "legend.fontsize": 10,
            "legend.title_fontsize": 10,
            "figure.titlesize": 12,
        }
    )


def every_nth(values, most: int = 16) -> list:
    """Every k-th of ``values`` (the first included), at most ``most`` of them: tick labels that fit at 10 pt."""
    values = list(values)
    step = max(1, -(-len(values) // most))
    return values[::step]
