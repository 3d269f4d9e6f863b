"""Rank sweeps: rank(V) and rank(T) of every head over prefixes of the corpus (chapter 2);
each head's share of its layer's output over a corpus (chapter 1).

Tables follow the book's numbering: ``layer`` 1..L, ``head`` 1..h; ``n`` is the sequence length.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd
from tqdm.auto import tqdm
from transformers import BatchEncoding, PreTrainedModel

from ..methods.heads import concentration, head_shares
from ..methods.linalg import DEFAULT_RTOL
from ..methods.nullspace import check_matrices, ranks_of
from ..model.capture import capture
from ..model.numbering import check_count, check_integer, head_number, layer_number
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

    Returns one row per (encoding, n, layer, head) with columns ``example`` (the
    encoding's index in ``encodings``), ``n, layer, head, rank_<name>`` for each requested matrix, and
    ``null_dim_<name> = n - rank_<name>``. ``n`` is the prefix length, layers
    count 1..L and heads 1..h.
    """
    lengths = list(lengths)
    lengths = sorted({check_integer(length, "each of lengths (a token count)", 2) for length in lengths})
    if not lengths:
        raise ValueError("lengths is empty: give at least one prefix length >= 2.")
    if not encodings:
        raise ValueError("encodings is empty: give at least one encoded text.")
    check_matrices(matrices)
    if per_text is not None:
        per_text = check_count(per_text, "per_text (None: every length)")
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
    for example, length in tqdm(jobs, disable=not progress, desc="rank sweep"):
        internals = capture(model, prefix_encoding(encodings[example], length))
        ranks = ranks_of(internals, matrices, rtol)
        L, h = internals.num_layers, internals.heads
        for layer in range(L):
            for head in range(h):
                row = {"example": example, "n": length, "layer": layer_number(layer), "head": head_number(head)}
                for name, value in ranks.items():
                    row[f"rank_{name}"] = int(value[layer, head])
                    row[f"null_dim_{name}"] = length - int(value[layer, head])
                rows.append(row)
    return pd.DataFrame(rows)


def head_contributions(
    model: PreTrainedModel, encodings: Sequence[BatchEncoding], progress: bool = True
) -> pd.DataFrame:
    """Each head's share of its layer's output and its concentration, on every encoding.

    One forward pass per encoding. Returns one row per (encoding, layer, head), sorted
    in that order, with columns ``example`` (the encoding's index), ``n``, ``layer``
    (1..L), ``head`` (1..h), ``share`` (:func:`~helpers.methods.heads.head_shares`) and
    ``concentration`` (:func:`~helpers.methods.heads.concentration`).
    """
    if not encodings:
        raise ValueError("encodings is empty: give at least one encoded text.")
    rows = []
    for example, encoding in enumerate(tqdm(encodings, disable=not progress, desc="head contributions")):
        internals = capture(model, encoding)
        shares, focus = head_shares(internals), concentration(internals)
        for layer in range(internals.num_layers):
            for head in range(internals.heads):
                rows.append(
                    {
                        "example": example,
                        "n": internals.n,
                        "layer": layer_number(layer),
                        "head": head_number(head),
                        "share": float(shares[layer, head]),
                        "concentration": float(focus[layer, head]),
                    }
                )
    return pd.DataFrame(rows)
