"""Rank sweeps: rank(V) and rank(T) of every head over prefixes of the corpus (chapter 2);
each head's share of its layer's output over a corpus (chapter 1); the valid alternatives of every
head of a layer on several texts, their attainable ranges beside random constraints, and how far a
head's keys follow them (chapter 3).

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
from ..methods.lp_bounds import attention_bounds, extreme_alternative
from ..methods.nullspace import (
    check_matrices,
    null_direction,
    random_values,
    rank_ties,
    ranks_of,
    row_total_variation,
    step_range,
)
from ..model.capture import capture
from ..model.numbering import (
    check_count,
    check_integer,
    check_seed,
    head_index,
    head_number,
    layer_index,
    layer_number,
)
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
    ``null_dim_<name> = n - rank_<name>``; with both "V" and "T", also ``tie``: a singular value of V
    lies so close to the tolerance that rank(T) may differ from rank(V) by the threshold alone
    (:func:`~helpers.methods.nullspace.rank_ties`). ``n`` is the prefix length, layers count 1..L and
    heads 1..h.
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
        ties = rank_ties(internals, rtol) if {"V", "T"} <= set(matrices) else None
        L, h = internals.num_layers, internals.heads
        for layer in range(L):
            for head in range(h):
                row = {"example": example, "n": length, "layer": layer_number(layer), "head": head_number(head)}
                for name, value in ranks.items():
                    row[f"rank_{name}"] = int(value[layer, head])
                    row[f"null_dim_{name}"] = length - int(value[layer, head])
                if ties is not None:
                    row["tie"] = bool(ties[layer, head])
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


def layer_alternatives(
    model: PreTrainedModel,
    encodings: Sequence[BatchEncoding],
    length: int,
    layer: int,
    rows: Sequence[int],
    seed: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    """Every head of one layer on several texts: the weights' ranges, beside random constraints (chapter 3).

    For every encoding at least ``length`` tokens long, the model runs on its first ``length``
    tokens; in every head of layer ``layer`` (from 1), for the queries ``rows`` (0-based):

    * the attainable range [lower, upper] of each weight (``attention_bounds``);
    * the same range with T replaced by random values of the same rank
      (``nullspace.random_values``: LN([X, 1]) has the dimension of LN([T, 1]), a column
      space drawn at random; seeded per text and head): the control of dimension counting;
    * P = ``extreme_alternative(A, T, -A)``, the valid row that overlaps least with A.

    Returns one row per (encoding, head, query, key) with columns ``example``, ``n``, ``head``
    (1..h), ``query``, ``key``, ``weight`` (a_ij), ``lower``, ``upper``, ``random_lower``,
    ``random_upper``, ``vertex`` (p_ij), and per (encoding, head, query): ``rank``
    (rank([T, 1])), ``vertex_tv`` (0.5 ||p_i - a_i||_1), ``vertex_step`` (t_high of the
    direction P - A on the queries ``rows``: 1 by construction), ``random_change`` (the
    largest change of a weight of the row along a random direction of LN([T, 1]), stepped as
    far as the rows stay non-negative) and ``other_heads_tv`` (the mean over the layer's other
    heads g of 0.5 ||a^g_i - a_i||_1; nan with one head).
    """
    seed = check_seed(seed)
    table = []
    for example, internals, li, _ in progress_bar(
        list(_head_of(model, encodings, length, layer, None)), "layer alternatives", progress
    ):
        n, heads = internals.n, internals.heads
        chosen = sorted({int(i) for i in rows})
        if not chosen or chosen[0] < 0 or chosen[-1] >= n:
            raise ValueError(f"rows must be queries in 0..{n - 1}; got {list(rows)}.")
        for hi in range(heads):
            A, T = internals.A[li, hi], internals.T[li, hi]
            A64 = A.double()
            bounds = attention_bounds(A, T, rows=chosen, progress=False)
            X = random_values(T, seed=seed + example * heads + hi)
            random = attention_bounds(A, X, rows=chosen, progress=False)
            P = extreme_alternative(A, T, -A, progress=False, rows=chosen)
            vertex_step = step_range(A64[chosen], (P - A64)[chosen]).t_high
            D = null_direction(T, seed=seed + hi)[chosen]
            low, high = step_range(A64[chosen], D)
            random_change = max(-low, high) * D.abs().amax(dim=1)
            others = [g for g in range(heads) if g != hi]
            if others:
                other_tv = row_total_variation(internals.A[li, others][:, chosen].double(), A64[chosen][None]).mean(0)
            else:
                other_tv = torch.full((len(chosen),), float("nan"), dtype=torch.float64)
            vertex_tv = row_total_variation(P[chosen], A64[chosen])
            for k, i in enumerate(chosen):
                for j in range(n):
                    table.append(
                        {
                            "example": example,
                            "n": n,
                            "head": head_number(hi),
                            "query": i,
                            "key": j,
                            "weight": float(A64[i, j]),
                            "lower": float(bounds.lower[i, j]),
                            "upper": float(bounds.upper[i, j]),
                            "random_lower": float(random.lower[i, j]),
                            "random_upper": float(random.upper[i, j]),
                            "vertex": float(P[i, j]),
                            "rank": bounds.stats["m"],
                            "vertex_tv": float(vertex_tv[k]),
                            "vertex_step": float(vertex_step),
                            "random_change": float(random_change[k]),
                            "other_heads_tv": float(other_tv[k]),
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
    it (with the model's position bias added to their logits, where it has one). Returns one row per (encoding, head): ``example``, ``n``, ``head``,
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
                internals.Q[li, hi],
                internals.K[li, hi],
                T,
                target,
                steps=steps,
                polish_steps=polish_steps,
                bias=internals.head_bias(li, hi),
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
