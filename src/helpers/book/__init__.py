"""Floor 4, the book: what only the chapters need. May import every floor below.

:mod:`~helpers.book.claims` (the scoreboard), :mod:`~helpers.book.paper` (the published
numbers), :mod:`~helpers.book.notebook` (the first cell's setup and glue),
:mod:`~helpers.book.chapters` (which model a chapter runs on), :mod:`~helpers.book.budgets` (how much a
chapter computes, scaled to the model's cost), :mod:`~helpers.book.plots` and
:mod:`~helpers.book.widgets` (matplotlib, seaborn and ipywidgets: the ``notebooks`` extra), and
:mod:`~helpers.book.explorers` (the data the pages' live explorers draw in the browser).
"""

# Each submodule is imported when first read (helpers.model.lazy): ``import helpers`` stays light.
from ..model.lazy import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__, __path__)
del lazy_attributes
