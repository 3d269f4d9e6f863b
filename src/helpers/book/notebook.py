"""The few lines every chapter runs first, and the glue between computed numbers and prose."""

from __future__ import annotations

import logging
import random

import numpy as np
import torch

from ..model.token_names import names_if_not_bert, own_token_names, special_token_names

__all__ = ["setup_notebook", "glue", "residual_text", "count_of"]


def setup_notebook(seed: int = 0, threads: int | None = None) -> None:
    """Seed every generator, silence the transformers weight-loading bar, set the plot style.

    The loading bar would be saved into the notebook as a widget; the
    helpers' own progress bars are left on.
    """
    import transformers

    from .plots.panels import show_panels_in_png
    from .plots.style import set_style

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if threads is not None:
        torch.set_num_threads(threads)
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    # matplotlib reports font fallbacks that depend on the machine's font cache, not on the chapter
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    set_style()
    _SPECIAL_TOKENS["names"] = None  # BERT's names until name_special_tokens
    show_panels_in_png()  # a figure's side-by-side panels, named in its PNG for a phone to stack


# the model's own names for BERT's [CLS] and [SEP], set by name_special_tokens (None: BERT's)
_SPECIAL_TOKENS: dict[str, dict[str, str] | None] = {"names": None}


def name_special_tokens(tokenizer) -> dict[str, str]:
    """Write BERT's ``[CLS]`` and ``[SEP]`` as this tokenizer's own tokens in every text glued from now on
    (:func:`glue`), and return the mapping (:func:`~helpers.model.token_names.special_token_names`) for the
    chapter's tables, figures and scoreboard. On a BERT vocabulary nothing changes."""
    names = special_token_names(tokenizer)
    _SPECIAL_TOKENS["names"] = names_if_not_bert(names)
    return names


def glue(name: str, value, fmt: str | None = None) -> str:
    """Format ``value`` (with ``format(value, fmt)``) and glue the text under ``name`` for ``{glue:text}`name```.

    Gluing a formatted string, not the raw float, keeps the saved output
    stable across machines. Returns the text, so a cell can also print it.
    Outside Jupyter Book (no ``myst_nb``) it only returns the text.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"glue name must be an identifier-like string, got {name!r}")
    text = format(value, fmt) if fmt is not None else str(value)
    text = own_token_names(text, _SPECIAL_TOKENS.get("names"))
    try:
        from myst_nb import glue as myst_glue
    except ImportError:  # e.g. a bare Colab kernel: the text is still returned
        return text
    myst_glue(name, text, display=False)
    return text


def residual_text(value: float, bound: float) -> str:
    """How a residual that should be zero reads in the book: ``bound`` ("1e-4") when it stays below it.

    The residual itself (``8e-06`` here, ``6e-06`` on another CPU) is float noise and is never
    printed; the bound is what the identity claims. A residual at or above ``bound`` is printed
    as it is ("3.2e-03"), so a broken identity shows.
    """
    value, bound = float(value), float(bound)
    if not bound > 0:
        raise ValueError(f"bound must be a positive number, got {bound!r}")
    if value < bound:
        mantissa, exponent = f"{bound:.0e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{value:.1e}"


def count_of(count: int, total: int) -> str:
    """How many of ``total`` in words a sentence can carry on with a noun: "none of the 36", "3 of the 36",
    "all 36" ("both" for 2 of 2, "the one" for 1 of 1); never "0 of the 36" or "8 of the 8"."""
    count, total = int(count), int(total)
    if not 0 <= count <= total:
        raise ValueError(f"count_of: {count} of {total} is not a part of a whole")
    if count == 0:
        return f"none of the {total}"
    if count == total:
        return "the one" if total == 1 else "both" if total == 2 else f"all {total}"
    return f"{count} of the {total}"
