"""A figure's side-by-side panels, named in its PNG for a phone to stack (helpers.book.plots.panels)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from helpers.book.plots.panels import PANELS_KEY, figure_png, panel_layout, read_panels, show_panels_in_png  # noqa: E402
from helpers.book.plots.style import set_style  # noqa: E402

BOOK = Path(__file__).resolve().parents[1] / "book"


@pytest.fixture(autouse=True)
def style():
    set_style()
    yield
    plt.close("all")


def test_two_panels_in_a_row_are_two_columns_and_a_legend_below_lies_outside_the_band():
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax in axes:
        ax.plot([1, 2, 3])
        ax.set_xlabel("layer")
    fig.legend(["a", "b"], loc="lower center", ncol=2, bbox_to_anchor=(0.5, -0.12))
    layout = panel_layout(fig)
    assert len(layout["cuts"]) == 3 and layout["cuts"][0] == 0.0 and layout["cuts"][-1] == 1.0
    assert 0.4 < layout["cuts"][1] < 0.6
    assert 0.0 <= layout["band"][0] < 0.1 and layout["band"][1] < 0.95  # the legend is below the panels


def test_a_grid_gives_its_columns_and_a_colour_bar_joins_its_panel():
    fig, _ = plt.subplots(2, 3, figsize=(10, 6), constrained_layout=True)
    assert len(panel_layout(fig)["cuts"]) == 4
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), constrained_layout=True)
    image = axes[1].imshow(np.arange(25.0).reshape(5, 5))
    fig.colorbar(image, ax=axes[1])
    assert len(panel_layout(fig)["cuts"]) == 3  # two panels, the colour bar with the second
    fig, ax = plt.subplots()
    fig.colorbar(ax.imshow(np.arange(4.0).reshape(2, 2)))
    assert panel_layout(fig) is None  # one panel and its colour bar: nothing to stack
    fig, _ = plt.subplots(3, 1)
    assert panel_layout(fig) is None


def test_a_shared_y_axis_labelled_once_names_its_strip_and_the_columns_that_need_it():
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.5), sharey=True, layout="constrained")
    for ax in axes:
        ax.plot([1, 2, 3])
    axes[0].set_ylabel("share of attention")
    layout = panel_layout(fig)
    assert layout["ylabels"]["columns"] == [1, 2]
    x0, x1 = layout["ylabels"]["strip"]
    assert x0 == 0.0 and 0.03 < x1 < layout["cuts"][1]  # the labels, up to the first panel's spine
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))  # each panel its own y axis: nothing to borrow
    for ax in axes:
        ax.plot([1, 2, 3])
    assert "ylabels" not in panel_layout(fig)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))  # a second panel with no y axis at all: not the first's
    axes[0].plot([1, 2, 3])
    axes[1].axis("off")
    axes[1].text(0.5, 0.5, "a note")
    assert "ylabels" not in (panel_layout(fig) or {})


def test_the_png_carries_its_layout_and_is_the_inline_backends_image():
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    png = figure_png(fig)
    assert read_panels(png) == panel_layout(fig)
    fig, ax = plt.subplots()
    assert read_panels(figure_png(fig)) is None  # one column: the chunk says so
    from io import BytesIO

    from PIL import Image

    plain = BytesIO()
    fig.savefig(plain, format="png", bbox_inches="tight", dpi=fig.dpi)
    ours, theirs = Image.open(BytesIO(figure_png(fig))), Image.open(plain)
    assert ours.size == theirs.size and np.array_equal(np.asarray(ours), np.asarray(theirs))
    with pytest.raises(KeyError, match="not written by figure_png"):
        read_panels(plain.getvalue())


def test_the_formatter_is_registered_in_a_shell_and_not_outside_one():
    class Formatter:
        def __init__(self):
            self.types = {}

        def for_type(self, kind, function):
            self.types[kind] = function

    class Shell:
        class display_formatter:  # noqa: N801 (IPython's attribute name)
            formatters = {"image/png": Formatter()}

    shell = Shell()
    assert show_panels_in_png(shell)
    assert figure_png in shell.display_formatter.formatters["image/png"].types.values()
    assert show_panels_in_png() is False  # no IPython shell in pytest


@pytest.mark.parametrize("notebook", sorted(BOOK.glob("0*.ipynb")), ids=lambda p: p.stem)
def test_every_committed_figure_names_its_panels(notebook):
    """Every figure of a chapter went through figure_png (the chapter ran with helpers.setup_notebook)."""
    import base64

    figures = [
        base64.b64decode(output["data"]["image/png"])
        for cell in json.loads(notebook.read_text())["cells"]
        for output in cell.get("outputs", [])
        if "image/png" in output.get("data", {})
    ]
    assert figures, f"{notebook.name} shows no figure"
    unnamed = [i for i, png in enumerate(figures) if PANELS_KEY.encode() not in png]
    assert not unnamed, f"{notebook.name}: figures {unnamed} carry no {PANELS_KEY!r} chunk: re-execute the chapter"
