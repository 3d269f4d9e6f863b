"""Floor 4, the book: what only the chapters need. May import every floor below.

:mod:`~helpers.book.claims` (the scoreboard), :mod:`~helpers.book.paper` (the published
numbers), :mod:`~helpers.book.notebook` (the first cell's setup and glue),
:mod:`~helpers.book.chapters` (which model a chapter runs on), :mod:`~helpers.book.budgets` (how much a
chapter computes, scaled to the model's cost), and, imported on first use
because they load matplotlib, seaborn and ipywidgets, :mod:`~helpers.book.plots` and
:mod:`~helpers.book.widgets`.
"""

import importlib

from . import budgets, chapters, claims, notebook, paper, registry, verdicts

_LAZY = ("plots", "widgets")


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
