"""Where a figure's side-by-side panels lie in its PNG, so that a phone can stack them.

A figure of several panels in a row is wider than a phone's column; shown whole it is too small to
read, scrolled it is read through a slit. :func:`panel_layout` finds the figure's columns of panels
(each axes with its labels, a colour bar joined to the panel beside it) in the coordinates of the PNG
the notebook saves (``bbox_inches="tight"``, as IPython's inline backend saves it). :func:`figure_png`
writes that PNG with the layout in a ``tEXt`` chunk named ``PANELS_KEY``, and
:func:`show_panels_in_png` makes it the notebook's PNG formatter for every figure. The book's
``_static/book.js`` reads the chunk and, on a narrow screen, draws the columns one below the other.

The layout, in fractions of the PNG's width and height (y from the top)::

    {"cuts": [0.0, 0.52, 1.0],   # column k spans cuts[k]..cuts[k + 1]
     "band": [0.08, 0.86],       # the rows the panels fill; above is a title, below a legend
     "ylabels": {"strip": [0.0, 0.07], "columns": [1]}}  # only with a shared y axis: see below

``ylabels`` is there when the panels share a y axis whose tick labels only the first column shows:
``strip`` is that column's labels (from its left edge to its axes' left spine), ``columns`` the
columns without labels of their own, which the phone draws with the strip on their left.

A figure of one column carries ``null``: every figure the book shows went through here.
"""

from __future__ import annotations

import io
import json

import matplotlib as mpl
from matplotlib.figure import Figure

__all__ = ["PANELS_KEY", "panel_layout", "figure_png", "show_panels_in_png", "read_panels"]

PANELS_KEY = "book-panels"
# a group of axes narrower than this share of the figure (a colour bar, a marginal strip) is no column of
# its own: it joins the column to its left
NARROW = 0.12
# two columns whose labels overlap by less than this share of the width are still two columns
OVERLAP = 0.02


def _tight_box(fig: Figure, renderer):
    """The region ``savefig(bbox_inches="tight")`` writes, in inches (its padding included)."""
    return fig.get_tightbbox(renderer).padded(mpl.rcParams["savefig.pad_inches"])


def panel_layout(fig: Figure) -> dict | None:
    """The columns of ``fig``'s panels in its tight-cropped PNG: ``{"cuts": [...], "band": [top, bottom]}``
    (fractions, y from the top) and, for a shared y axis labelled once, ``"ylabels"``; None for a figure of
    one column."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = _tight_box(fig, renderer)
    spans = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        inches = ax.get_tightbbox(renderer).transformed(fig.dpi_scale_trans.inverted())
        spine = ax.get_window_extent(renderer).transformed(fig.dpi_scale_trans.inverted()).x0
        labelled = any(label.get_visible() and label.get_text() for label in ax.get_yticklabels())
        limits = tuple(ax.get_ylim()) if ax.axison and len(ax.get_yticks()) else None
        spans.append(
            (
                float((inches.x0 - box.x0) / box.width),
                float((inches.x1 - box.x0) / box.width),
                float((box.y1 - inches.y1) / box.height),
                float((box.y1 - inches.y0) / box.height),
                float((spine - box.x0) / box.width),
                labelled,
                limits,
            )
        )
    if len(spans) < 2:
        return None
    columns: list[list] = []  # [x0, x1, spans]
    for span in sorted(spans):
        x0, x1 = span[0], span[1]
        if columns and x0 < columns[-1][1] - OVERLAP:  # within the column so far
            columns[-1][1] = max(columns[-1][1], x1)
            columns[-1][2].append(span)
        else:
            columns.append([x0, x1, [span]])
    merged: list[list] = []
    for column in columns:
        if merged and column[1] - column[0] < NARROW:
            merged[-1][1] = column[1]
            merged[-1][2] += column[2]
        else:
            merged.append(column)
    if len(merged) < 2:
        return None
    cuts = [0.0] + [round((left[1] + right[0]) / 2, 4) for left, right in zip(merged, merged[1:], strict=False)]
    band = [max(0.0, min(s[2] for s in spans)), min(1.0, max(s[3] for s in spans))]
    layout = {"cuts": cuts + [1.0], "band": [round(band[0], 4), round(band[1], 4)]}
    # a shared y axis labelled on the first column only: a phone stacks the others with that column's labels
    first = [s for s in merged[0][2] if s[5]]
    shared = {s[6] for s in first}  # the y limits the first column's labels read

    def reads_first(column: list) -> bool:  # no labels of its own, and the first column's y axis
        return not any(s[5] for s in column[2]) and all(s[6] is not None and s[6] in shared for s in column[2])

    bare = [k for k, column in enumerate(merged) if k and reads_first(column)]
    if first and bare:
        layout["ylabels"] = {"strip": [0.0, round(min(s[4] for s in first), 4)], "columns": bare}
    return layout


def figure_png(fig: Figure) -> bytes:
    """``fig`` as the notebook shows it (PNG, tight box, the figure's dpi), its layout in a tEXt chunk."""
    layout = panel_layout(fig)
    buffer = io.BytesIO()
    fig.savefig(
        buffer,
        format="png",
        bbox_inches="tight",
        dpi=fig.dpi,
        facecolor=fig.get_facecolor(),
        edgecolor=fig.get_edgecolor(),
        metadata={PANELS_KEY: json.dumps(layout)},
    )
    return buffer.getvalue()


def read_panels(png: bytes) -> dict | None:
    """The layout a PNG written by :func:`figure_png` carries: None for one column; KeyError for a PNG
    that was not written by it. Reads the PNG's chunks (length, type, data, CRC) as book.js does."""
    at = 8  # past the signature
    while at + 12 <= len(png):
        length = int.from_bytes(png[at : at + 4], "big")
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        if kind == b"tEXt" and data.split(b"\0", 1)[0] == PANELS_KEY.encode():
            return json.loads(data.split(b"\0", 1)[1].decode("latin-1"))
        at += 12 + length
    raise KeyError(f"the PNG has no {PANELS_KEY!r} chunk: it was not written by figure_png")


def show_panels_in_png(shell=None) -> bool:
    """Make :func:`figure_png` the IPython shell's PNG formatter for figures; False outside IPython."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False
    # the inline backend registers its own PNG formatter when pyplot first makes a figure: make one first
    import matplotlib.pyplot as plt

    plt.close(plt.figure())
    shell.display_formatter.formatters["image/png"].for_type(Figure, figure_png)
    return True
