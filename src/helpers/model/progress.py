"""Progress bars for the helpers' long loops: tqdm.auto, a widget in Jupyter and Colab, a text line in a terminal.

A loop shows its bar when its ``progress`` argument is true (every helper's default) and the environment
variable ``BOOK_PROGRESS`` is not ``0``. The book's own runs set it to 0 (``make notebooks``, ``make test``,
``make check``), so that the committed outputs, and the notebook check that compares them, hold no bars; a
reader's Jupyter or Colab leaves it unset and sees a bar on every loop that runs for more than a moment.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

ENVIRONMENT_VARIABLE = "BOOK_PROGRESS"


def bars_on(progress: bool = True) -> bool:
    """Whether a loop asked for a bar (``progress``) gets one: not when ``BOOK_PROGRESS=0``."""
    return bool(progress) and os.environ.get(ENVIRONMENT_VARIABLE, "1").strip() != "0"


def progress_bar(iterable: Iterable, desc: str, progress: bool = True, **options) -> Iterable:
    """``iterable`` in a tqdm.auto bar named ``desc`` when ``bars_on(progress)``, else ``iterable`` itself.

    ``options`` go to tqdm (``total``, ``unit``, ``mininterval``).
    """
    if not bars_on(progress):
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, **options)


def step_bar(total: int, desc: str, progress: bool = True, **options):
    """A bar of ``total`` steps that the caller advances with ``.update()`` and ends with ``.close()``, or ``None``
    when ``bars_on(progress)`` is false."""
    if not bars_on(progress):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, **options)
