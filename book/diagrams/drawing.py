"""What every drawing shares: the size, the fonts, the colours and a deterministic SVG.

Drawn for the book's column: at most ``MAX_WIDTH`` inches, shown at its natural size on a
desktop (an SVG inch is 96 px) and shrunk to the 340 px a figure gets in a phone's column, where its
smallest text (``MIN_FONT`` pt) still renders at 8 px or more (tests/test_diagrams.py).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MAX_WIDTH = 5.4  # inches: 518 px at 96 px an inch
# px: a figure in the content column at 390 px (measured: 342)
PHONE_COLUMN = 340
MIN_FONT = 10  # pt
RAW = "#4c72b0"  # raw attention, as in the chapters' figures
EFFECTIVE = "#2a9d5c"
NULL = "#c44e52"
GREY = "#6b6b6b"
LIGHT = "#e8eef7"

RC = {
    "font.family": "DejaVu Sans",
    "font.size": 11,
    "mathtext.fontset": "dejavusans",
    "svg.fonttype": "path",  # glyphs as paths: the same drawing in every browser, no font needed
    "svg.hashsalt": "identifiability-book-diagrams",  # fixed ids: the same bytes on every run
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def figure(width: float, height: float):
    """A new figure with the book's style (``width`` at most ``MAX_WIDTH`` inches)."""
    if width > MAX_WIDTH:
        raise ValueError(
            f"a drawing is at most {MAX_WIDTH} inches wide (the column); got {width}"
        )
    plt.rcParams.update(RC)
    return plt.figure(figsize=(width, height))


def save(fig, path: Path) -> Path:
    """Write ``fig`` as an SVG without a date or a creator line (the same bytes on every run)."""
    path = Path(path)
    fig.savefig(
        path,
        format="svg",
        metadata={"Date": None, "Creator": None},
        bbox_inches=None,
    )
    plt.close(fig)
    return path


def content_hash(svg_text: str) -> str:
    """A hash of the drawing itself: the metadata block and XML comments left out."""
    text = re.sub(r"<metadata>.*?</metadata>", "", svg_text, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return hashlib.sha256(text.encode()).hexdigest()
