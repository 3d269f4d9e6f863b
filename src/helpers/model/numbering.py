"""The book's one numbering convention, and the only place that converts.

* Hidden states are numbered 0..L: 0 is the embedding output, l is the
  output of layer l.
* Layers are numbered 1..L and heads 1..h wherever a reader sees them
  (tables, plot labels, prose), as in the paper ("layer 3, head 1").
* Tensors keep Python's 0-based index: ``A[l - 1, h - 1]`` is layer l, head h.

Every table a helper returns uses the columns ``layer`` (1..L), ``head``
(1..h) or ``hidden_state`` (0..L, where the embedding output is included).
"""

from __future__ import annotations

import numbers

__all__ = [
    "layer_index",
    "head_index",
    "hidden_state_index",
    "layer_number",
    "head_number",
    "check_integer",
    "check_count",
    "check_seed",
]


def _as_int(value, what: str) -> int:
    if hasattr(value, "ndim") and getattr(value, "ndim", 1) == 0 and hasattr(value, "item"):
        value = value.item()  # a 0-d numpy or torch integer
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an integer, got {type(value).__name__} {value!r}")
    return int(value)


def _in_range(value, low: int, high: int, what: str) -> int:
    value = _as_int(value, what)
    if not low <= value <= high:
        raise ValueError(f"{what} must be between {low} and {high}, got {value}")
    return value


def layer_index(layer, num_layers: int) -> int:
    """Tensor index (0..L-1) of the reader's layer number ``layer`` (1..L)."""
    return _in_range(layer, 1, num_layers, "layer (counted from 1)") - 1


def head_index(head, heads: int) -> int:
    """Tensor index (0..h-1) of the reader's head number ``head`` (1..h)."""
    return _in_range(head, 1, heads, "head (counted from 1)") - 1


def hidden_state_index(hidden_state, num_layers: int) -> int:
    """Hidden states keep their number as index: 0 (embedding output) .. L."""
    return _in_range(hidden_state, 0, num_layers, "hidden_state (0 = the embedding output, L = the last layer's)")


def layer_number(index) -> int:
    """The reader's layer number (1..L) of tensor index ``index`` (0..L-1)."""
    index = _as_int(index, "layer index")
    if index < 0:
        raise ValueError(f"layer index must be >= 0, got {index}")
    return index + 1


def head_number(index) -> int:
    """The reader's head number (1..h) of tensor index ``index`` (0..h-1)."""
    index = _as_int(index, "head index")
    if index < 0:
        raise ValueError(f"head index must be >= 0, got {index}")
    return index + 1


def check_integer(value, what: str, low: int, high: int | None = None) -> int:
    """``value`` as an int in ``low..high`` (inclusive; no upper bound for None).

    The one integer check of the helpers: a TypeError for anything that is not an
    integer (``True``, ``2.0``, ``"3"``), a ValueError naming ``what`` and the range
    when it is out of it. numpy and torch integer scalars are accepted.
    """
    return _in_range(value, low, 2**62 if high is None else high, what)


def check_count(value, what: str, minimum: int = 1) -> int:
    """A positive count (samples, epochs, tokens): an integer >= ``minimum``."""
    return check_integer(value, what, minimum)


def check_seed(seed) -> int:
    """A seed for the helpers' random draws: an integer 0 .. 2**63 - 1 (``seed: int``, never None)."""
    if seed is None:
        raise TypeError("seed must be an integer (e.g. seed=0); None is not a seed: results must be reproducible.")
    return _in_range(seed, 0, 2**63 - 1, "seed")
