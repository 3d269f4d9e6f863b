"""Rank sweeps: rank(V) and rank(T) of every head over prefixes of the corpus (chapter 2).

Tables follow the book's numbering: ``layer`` 1..L, ``head`` 1..h; ``n`` is the sequence length.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence

import pandas as pd
from tqdm.auto import tqdm
from transformers import BatchEncoding, PreTrainedModel

from ..methods.linalg import DEFAULT_RTOL
from ..methods.nullspace import check_matrices, ranks_of
from ..model.capture import capture
from ..model.numbering import head_number, layer_number
from ..model.text import check_single_sequence, prefix_encoding


def rank_sweep(
    model: PreTrainedModel,
    encodings: Sequence[BatchEncoding],
    lengths: Iterable[int],
    matrices: Sequence[str] = ("V",),
    rtol: float = DEFAULT_RTOL,
    per_text: int | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Numerical ranks of every head's V / T (and [., 1]) on prefixes of each encoding.

    For every encoding and every length it is long enough for, the model runs
    on ``prefix_encoding(encoding, length)``. With ``per_text=k`` each text
    contributes only k of the lengths it is long enough for, spread evenly
    and rotated from text to text, so a large corpus covers every length at
    a fraction of the cost. rank(V) is cheap (n x d_v);
    rank(T) (n x d) is the paper's quantity and equals rank(V) whenever H
    has full row rank.

    Returns one row per (text, n, layer, head) with columns ``text, n,
    layer, head, rank_<name>`` for each requested matrix, and
    ``null_dim_<name> = n - rank_<name>``. ``n`` is the prefix length, layers
    count 1..L and heads 1..h.
    """
    lengths = list(lengths)
    if any(isinstance(length, bool) or not isinstance(length, numbers.Integral) for length in lengths):
        raise TypeError(f"lengths must be integers (token counts); got {lengths!r}.")
    lengths = sorted({int(length) for length in lengths})
    if not lengths or lengths[0] < 2:
        raise ValueError(f"lengths must be integers >= 2; got {lengths}.")
    if not encodings:
        raise ValueError("encodings is empty: give at least one encoded text.")
    check_matrices(matrices)
    if per_text is not None and (
        isinstance(per_text, bool) or not isinstance(per_text, numbers.Integral) or per_text < 1
    ):
        raise ValueError(f"per_text must be a positive int or None; got {per_text!r}.")
    jobs = []
    for t, enc in enumerate(encodings):
        usable = [length for length in lengths if length <= check_single_sequence(enc)]
        if per_text is not None and len(usable) > per_text:
            stride = len(usable) / per_text
            usable = [usable[(int(k * stride) + t) % len(usable)] for k in range(per_text)]
        jobs += [(t, length) for length in sorted(set(usable))]
    if not jobs:
        raise ValueError(f"No encoding is as long as the shortest requested length ({lengths[0]}).")
    rows = []
    for text, length in tqdm(jobs, disable=not progress, desc="rank sweep"):
        internals = capture(model, prefix_encoding(encodings[text], length))
        ranks = ranks_of(internals, matrices, rtol)
        L, h = internals.layers, internals.heads
        for layer in range(L):
            for head in range(h):
                row = {"text": text, "n": length, "layer": layer_number(layer), "head": head_number(head)}
                for name, value in ranks.items():
                    row[f"rank_{name}"] = int(value[layer, head])
                    row[f"null_dim_{name}"] = length - int(value[layer, head])
                rows.append(row)
    return pd.DataFrame(rows)
