"""Rank sweeps: rank(V) and rank(T) of every head over prefixes of the corpus (chapter 2);
each head's share of its layer's output over a corpus (chapter 1); one head's valid alternatives
on several texts, their attainable ranges and how far its keys follow them (chapter 3).

Tables follow the book's numbering: ``layer`` 1..L, ``head`` 1..h; ``n`` is the sequence length.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd
import torch
from transformers import BatchEncoding, PreTrainedModel

from ..methods.heads import concentration, head_shares
from ..methods.keys import producible_alternative
from ..methods.linalg import DEFAULT_RTOL
from ..methods.lp_bounds import FEASIBILITY_TOL, attention_bounds, extreme_alternative
from ..methods.nullspace import check_matrices, null_direction, ranks_of, row_total_variation, step_range
from ..model.capture import capture
from ..model.numbering import check_count, check_integer, head_index, head_number, layer_index, layer_number
from ..model.progress import progress_bar
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
    for example, length in progress_bar(jobs, "rank sweep", progress):
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
    for example, encoding in enumerate(progress_bar(encodings, "head contributions", progress)):
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


def _head_of(model: PreTrainedModel, encodings, length: int, layer: int, head: int | None):
    """Yield (example, internals, layer index, head index) for every encoding at least ``length`` tokens long."""
    length = check_count(length, "length (a token count)", 2)
    if not encodings:
        raise ValueError("encodings is empty: give at least one encoded text.")
    usable = [k for k, enc in enumerate(encodings) if check_single_sequence(enc) >= length]
    if not usable:
        raise ValueError(f"No encoding has {length} tokens: give a shorter length or longer texts.")
    for example in usable:
        internals = capture(model, prefix_encoding(encodings[example], length))
        li = layer_index(layer, internals.num_layers)
        hi = None if head is None else head_index(head, internals.heads)
        yield example, internals, li, hi


def vertex_moves(
    model: PreTrainedModel,
    encodings: Sequence[BatchEncoding],
    length: int,
    layer: int,
    head: int,
    seed: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    """How far one head's least-overlapping valid alternative moves each row, beside two controls (chapter 3).

    For every encoding at least ``length`` tokens long, the model runs on its first
    ``length`` tokens; in head ``head`` of layer ``layer`` (both from 1),
    P = ``extreme_alternative(A, T, -A)`` (each row a vertex of the polytope of valid
    rows with the same output, the one that overlaps least with A). Returns one row
    per (encoding, query) with columns ``example``, ``n``, ``query`` and

    * ``vertex_change``: max_j |p_ij - a_ij|, the largest change of a weight of the row;
    * ``random_change``: the same along a random direction of LN([T, 1]) (seeded),
      stepped as far as A stays non-negative (one step for the whole matrix);
    * ``vertex_tv``: 0.5 ||p_i - a_i||_1, the share of the row's mass that P moves;
    * ``vertex_zero``: the share of the row's weights that P sets to zero (at least
      (n - rank([T, 1])) / n: a vertex has at most rank([T, 1]) non-zero weights);
    * ``other_heads_tv``: the mean over the layer's other heads g of 0.5 ||a^g_i - a_i||_1,
      how far the rows of two heads of the model lie apart (nan with one head).
    """
    rows = []
    for example, internals, li, hi in progress_bar(
        list(_head_of(model, encodings, length, layer, head)), "vertex moves", progress
    ):
        A, T = internals.A[li, hi].double(), internals.T[li, hi]
        P = extreme_alternative(A, T, -A, progress=False)
        D = null_direction(T, seed=seed)
        low, high = step_range(A, D)
        step = max(-low, high)
        random_change = step * D.abs().amax(dim=1)
        others = [g for g in range(internals.heads) if g != hi]
        if others:
            other_tv = row_total_variation(internals.A[li, others].double(), A[None]).mean(dim=0)
        else:
            other_tv = torch.full((A.shape[0],), float("nan"), dtype=torch.float64)
        vertex_tv = row_total_variation(P, A)
        vertex_change = (P - A).abs().amax(dim=1)
        vertex_zero = (P <= FEASIBILITY_TOL).double().mean(dim=1)
        for i in range(A.shape[0]):
            rows.append(
                {
                    "example": example,
                    "n": internals.n,
                    "query": i,
                    "vertex_change": float(vertex_change[i]),
                    "random_change": float(random_change[i]),
                    "vertex_tv": float(vertex_tv[i]),
                    "vertex_zero": float(vertex_zero[i]),
                    "other_heads_tv": float(other_tv[i]),
                }
            )
    return pd.DataFrame(rows)


def range_table(
    model: PreTrainedModel,
    encodings: Sequence[BatchEncoding],
    length: int,
    layer: int,
    head: int,
    rows: int,
    progress: bool = True,
) -> pd.DataFrame:
    """Attainable ranges of one head's weights on several texts (chapter 3), ``rows`` evenly spaced queries each.

    For every encoding at least ``length`` tokens long, the model runs on its first
    ``length`` tokens and ``attention_bounds`` solves the rows
    round(k (n - 1) / (rows - 1)), k = 0..rows-1 (all rows when rows >= n). Returns one
    row per (encoding, query, key): ``example``, ``n``, ``query``, ``key``, ``weight``
    (a_ij), ``lower`` and ``upper`` (the range of a_ij over the valid rows with the same output).
    """
    rows = check_count(rows, "rows (queries per text)")
    table = []
    for example, internals, li, hi in progress_bar(
        list(_head_of(model, encodings, length, layer, head)), "ranges", progress
    ):
        n = internals.n
        chosen = list(range(n)) if rows >= n else sorted({round(k * (n - 1) / max(rows - 1, 1)) for k in range(rows)})
        A, T = internals.A[li, hi], internals.T[li, hi]
        bounds = attention_bounds(A, T, rows=chosen, progress=False)
        for i in chosen:
            for j in range(n):
                table.append(
                    {
                        "example": example,
                        "n": n,
                        "query": i,
                        "key": j,
                        "weight": float(A[i, j]),
                        "lower": float(bounds.lower[i, j]),
                        "upper": float(bounds.upper[i, j]),
                    }
                )
    return pd.DataFrame(table)


def producible_reach(
    model: PreTrainedModel,
    encodings: Sequence[BatchEncoding],
    length: int,
    layer: int,
    heads: Sequence[int],
    steps: int = 300,
    polish_steps: int = 10,
    progress: bool = True,
) -> pd.DataFrame:
    """How far a head's own queries and keys follow a null-space alternative (chapter 3, Bhardwaj et al. 2021).

    For every encoding at least ``length`` tokens long and every head in ``heads``
    (numbered from 1) of layer ``layer``: the target is the midpoint of A and its
    least-overlapping vertex P (valid, same output), and
    ``keys.producible_alternative`` searches queries and keys of the head size toward
    it. Returns one row per (encoding, head): ``example``, ``n``, ``head``,
    ``entropy`` (mean row entropy of A, nats), ``toward`` (the share of the way to the
    midpoint, 1: reached), ``output_error``, ``rank_distance`` and ``max_change``.
    """
    heads = [check_count(k, "each of heads (numbered from 1)") for k in heads]
    if not heads:
        raise ValueError("heads is empty: give at least one head number.")
    table = []
    jobs = list(_head_of(model, encodings, length, layer, None))
    for example, internals, li, _ in progress_bar(jobs, "producible reach", progress):
        for head in heads:
            hi = head_index(head, internals.heads)
            A, T = internals.A[li, hi], internals.T[li, hi]
            P = extreme_alternative(A, T, -A, progress=False)
            target = (A.double() + P) / 2
            found = producible_alternative(
                internals.Q[li, hi], internals.K[li, hi], T, target, steps=steps, polish_steps=polish_steps
            )
            A64 = A.double()
            table.append(
                {
                    "example": example,
                    "n": internals.n,
                    "head": head,
                    "entropy": float(-(A64 * A64.clamp_min(1e-300).log()).sum(-1).mean()),
                    "toward": found.toward_target,
                    "output_error": found.output_error,
                    "rank_distance": found.rank_distance,
                    "max_change": found.max_change,
                }
            )
    return pd.DataFrame(table)
