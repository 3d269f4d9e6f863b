"""One look for every figure in the book."""

from __future__ import annotations

import matplotlib as mpl
import seaborn as sns

RAW = "#4C72B0"  # raw attention / default series
EFFECTIVE = "#DD8452"  # effective attention / second series
NULL = "#8C8C8C"  # null-space part / reference lines
PAPER = "#C44E52"  # the paper's reported numbers


def set_style() -> None:
    """Seaborn's white grid, readable sizes, PNG figures at a crisp resolution."""
    sns.set_theme(style="whitegrid", context="notebook")
    mpl.rcParams.update(
        {
            "figure.dpi": 110,
            "savefig.dpi": 110,
            "figure.figsize": (7.0, 4.0),
            "axes.titlesize": 11,
            "axes.labelsize": 10,
            "legend.fontsize": 9,
        }
    )
