"""Effective attention over a corpus: raw against effective attention per head and token class (chapter 4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import pandas as pd
import torch

from ..methods import distributions
from ..methods.effective import effective_attention_and_rank, leverage, random_column_space_attention
from ..methods.linalg import DEFAULT_RTOL, numerical_rank, pearson
from ..methods.tokens import attention_to, token_classes
from ..model.capture import capture
from ..model.checks import UnsupportedModelError
from ..model.corpus import check_records
from ..model.families import family_of
from ..model.numbering import head_number, layer_number
from ..model.progress import progress_bar
from ..model.text import encode, text_pair_of, tokens_of


def effective_attention_sweep(
    model,
    tokenizer,
    examples: Sequence,
    rtol: float = DEFAULT_RTOL,
    progress: bool = True,
    random_control: bool = True,
    seed: int = 0,
):
    """Effective attention over a corpus: one row per (example, layer, head).

    Args:
        model, tokenizer: from ``helpers.load_model``.
        examples: ``helpers.model.corpus.Example`` records (text_a, optional text_b), strings or
            ``(text, text_pair)`` tuples.
        rtol: rank tolerance, relative to the largest singular value.
        progress: show a progress bar (``helpers.model.progress``).
        random_control: also project A onto a random column space of each head's rank
            (``helpers.methods.effective.random_column_space_attention``; one draw per text,
            head and layer, the generator seeded with ``seed`` + the text's index).

    Raises:
        UnsupportedModelError: a causal model (a decoder), whose rows each have their own null space.

    Returns:
        A pandas DataFrame with columns ``example`` (``Example.id``; the index for a plain
        string), ``source, n, layer, head, rank, null_dim, correlation`` (Pearson, raw vs effective),
        ``kept`` (``||A_eff||^2 / ||A||^2``, Frobenius), with ``random_control`` also
        ``correlation_random`` and ``kept_random`` (the same for A projected onto a random column
        space of the head's rank: what dimension counting alone gives) and, for each token
        class ``c`` of ``helpers.methods.tokens.token_classes``, ``raw_c`` and ``effective_c``
        (``helpers.methods.tokens.attention_to``), ``own_c`` (the part of the raw weight on c that
        stays on c, ``a_ij P_jj``: ``effective_c - own_c`` is what the projection moves onto c
        from other positions), ``leverage_c`` and ``leverage_rest_c`` (the mean leverage
        ``P_jj`` of the tokens in c and of the others; NaN for an empty class). Layers and
        heads count from 1.
    """
    if family_of(model).causal:
        raise UnsupportedModelError(
            f"effective_attention_sweep splits each head with one null space for the whole sequence; "
            f"{type(model).__name__} is causal, and each of its rows has its own (the prefix it sees). "
            "For a decoder use helpers.effective_attention_of(helpers.capture(model, encoding)), which "
            "splits row by row, or helpers.sink_sweep (chapter 9)."
        )
    records = check_records(examples)
    rows = []
    full_row_rank = None  # the weights, hence the ranks of H, are the same for every example
    for index, example in enumerate(progress_bar(records, "effective attention", progress)):
        text_a, text_b = text_pair_of(example, index)
        encoding = encode(tokenizer, text_a, text_b, model=model)
        internals = capture(model, encoding)
        A = internals.A
        if full_row_rank is None:
            full_row_rank = numerical_rank(internals.H.mT, rtol) == internals.H.shape[-2]
        split, rank = effective_attention_and_rank(A, None, internals.V, internals.H, rtol, full_row_rank)
        squared = A.double().pow(2).sum(dim=(-2, -1))
        columns = {
            "rank": rank,
            "null_dim": internals.n - rank,
            "correlation": pearson(A, split.effective),
            "kept": split.effective.double().pow(2).sum(dim=(-2, -1)) / squared,
        }
        if random_control:
            generator = torch.Generator().manual_seed(int(seed) + index)
            chance = random_column_space_attention(A, rank, generator)
            columns["correlation_random"] = pearson(A, chance)
            columns["kept_random"] = chance.pow(2).sum(dim=(-2, -1)) / squared
        masks = token_classes(tokens_of(tokenizer, encoding), tokenizer.cls_token, tokenizer.sep_token)
        values = internals.V if bool(full_row_rank.all()) else internals.V @ internals.H
        diagonal = leverage(values, rtol)  # (L, h, n): P_jj, LN(T) = LN(V) where H has full row rank
        for name, mask in masks.items():
            columns[f"raw_{name}"] = attention_to(A, mask)
            columns[f"effective_{name}"] = attention_to(split.effective, mask)
            weights = mask.to(diagonal.device, torch.float64)
            columns[f"own_{name}"] = (A.double() @ (diagonal * weights)[..., None]).squeeze(-1).mean(dim=-1)
            columns[f"leverage_{name}"] = (diagonal * weights).sum(-1) / weights.sum()
            columns[f"leverage_rest_{name}"] = (diagonal * (1 - weights)).sum(-1) / (1 - weights).sum()
        L, h = A.shape[:2]
        frame = {
            "layer": [layer_number(i) for i in range(L) for _ in range(h)],
            "head": [head_number(k) for _ in range(L) for k in range(h)],
        }
        frame.update({key: value.reshape(-1).double().cpu().numpy() for key, value in columns.items()})
        part = pd.DataFrame(frame)
        part.insert(0, "n", internals.n)
        part.insert(0, "source", getattr(example, "source", "given text"))
        part.insert(0, "example", getattr(example, "id", str(index)))
        rows.append(part)
    table = pd.concat(rows, ignore_index=True)
    table["rank"] = table["rank"].astype(int)
    table["null_dim"] = table["null_dim"].astype(int)
    return table


class NearestDistributions(NamedTuple):
    """``nearest_distributions``: per head, how far the distributions with its output lie.

    ``distances``: one row per head (index: head number 1..h) with the median L1
    distances over the solved rows "raw A to effective", "nearest distribution to
    effective", "nearest distribution to raw A", "maximum entropy to effective" and
    "maximum entropy to raw A", and the shares "effective rows with a negative weight"
    and "nearest rows with a zero weight". ``matrices: (h, n, n)`` float64: raw attention
    with the solved rows replaced by the L1-nearest distributions; ``max_entropy: (h, n,
    n)`` float64: every row replaced by the maximum-entropy distribution of its polytope
    (the inputs of chapter 3's keys test).
    """

    distances: pd.DataFrame
    matrices: torch.Tensor
    max_entropy: torch.Tensor


def nearest_distributions(A: torch.Tensor, T: torch.Tensor, rows: Sequence[int] | None = None) -> NearestDistributions:
    """For every head of one layer, the distribution with the head's output nearest to effective attention.

    A: (h, n, n) one layer's attention, T: (h, n, d) its heads' T. Effective attention
    is taken with the bias column (``distributions.simplex_effective_attention``), the
    nearest distribution row by row in L1 (``distributions.closest_distribution``) on
    ``rows`` (default all; one LP per row and head), and beside it the distribution of
    largest entropy with the same output (``distributions.max_entropy_distribution``, every row).
    """
    if A.dim() != 3 or T.dim() != 3 or A.shape[0] != T.shape[0]:
        raise ValueError(f"A must be (h, n, n) and T (h, n, d) for one layer; got {tuple(A.shape)}, {tuple(T.shape)}.")
    rows = list(range(A.shape[-1])) if rows is None else list(rows)
    index = torch.tensor(rows, dtype=torch.long, device=A.device)
    table, matrices, maximum = {}, [], []
    for h in range(A.shape[0]):
        A_h = A[h].double()
        target = distributions.simplex_effective_attention(A_h, T[h])
        nearest = distributions.closest_distribution(A_h, T[h], target, rows=rows)
        matrices.append(A_h.index_copy(0, index, nearest.points))
        maximum.append(distributions.max_entropy_distribution(A_h, T[h]))

        def median_l1(points, reference):
            return float((points - reference[index]).abs().sum(-1).median())

        table[head_number(h)] = {
            "raw A to effective": median_l1(A_h[index], target),
            "nearest distribution to effective": float(nearest.distance.median()),
            "nearest distribution to raw A": median_l1(nearest.points, A_h),
            "maximum entropy to effective": median_l1(maximum[-1][index], target),
            "maximum entropy to raw A": median_l1(maximum[-1][index], A_h),
            "effective rows with a negative weight": float((target < -1e-9).any(-1).double().mean()),
            "nearest rows with a zero weight": float((nearest.points <= 1e-12).any(-1).double().mean()),
        }
    distances = pd.DataFrame(table).T.rename_axis("head")
    return NearestDistributions(distances, torch.stack(matrices), torch.stack(maximum))


def removal_by_text(table: pd.DataFrame, token_class: str, per_layer: bool = False) -> pd.DataFrame:
    """Per text (and layer), how much of the raw attention to ``token_class`` the null space removes.

    table: ``effective_attention_sweep`` output. Heads (and layers, unless ``per_layer``)
    are pooled weighted by the raw attention each gives the class. Returns one row per
    ``example`` (and ``layer``) with ``n``, ``raw`` and ``effective`` (attention to the
    class per query, summed over heads), ``removed`` (``1 - effective / raw``),
    ``expected`` (``1 - r / n``: what a random column space of each head's rank would
    remove), ``moved`` (``(effective - own) / raw``: the share the projection moves
    onto the class from other positions), ``leverage`` and ``leverage_rest`` (the
    class's and the other tokens' mean leverage, weighted the same way). Texts where
    the class receives no attention (it is absent) are left out.
    """
    needed = {f"{kind}_{token_class}" for kind in ("raw", "effective", "own", "leverage", "leverage_rest")}
    missing = sorted(needed - set(table.columns))
    if missing:
        raise ValueError(f"The table needs columns {missing} (effective_attention_sweep).")
    frame = pd.DataFrame(
        {
            "example": table["example"],
            "layer": table["layer"],
            "n": table["n"],
            "raw": table[f"raw_{token_class}"],
            "effective": table[f"effective_{token_class}"],
            "own": table[f"own_{token_class}"],
        }
    )
    weight = frame["raw"]
    frame["kept_by_chance"] = weight * table["rank"] / table["n"]
    frame["leverage"] = weight * table[f"leverage_{token_class}"]
    frame["leverage_rest"] = weight * table[f"leverage_rest_{token_class}"]
    keys = ["example", "layer"] if per_layer else ["example"]
    sums = frame.groupby(keys, sort=False).agg(
        n=("n", "first"),
        raw=("raw", "sum"),
        effective=("effective", "sum"),
        own=("own", "sum"),
        kept_by_chance=("kept_by_chance", "sum"),
        leverage=("leverage", "sum"),
        leverage_rest=("leverage_rest", "sum"),
    )
    sums = sums[sums["raw"] > 0]
    out = pd.DataFrame({"n": sums["n"], "raw": sums["raw"], "effective": sums["effective"]})
    out["removed"] = 1 - sums["effective"] / sums["raw"]
    out["expected"] = 1 - sums["kept_by_chance"] / sums["raw"]
    out["moved"] = (sums["effective"] - sums["own"]) / sums["raw"]
    out["leverage"] = sums["leverage"] / sums["raw"]
    out["leverage_rest"] = sums["leverage_rest"] / sums["raw"]
    return out.reset_index()


def rank_shortfall(
    model, tokenizer, examples: Sequence, cells: pd.DataFrame, rtol: float = DEFAULT_RTOL
) -> pd.DataFrame:
    """Why a head's rank falls short of min(n, d_v): its value matrix's singular values around the cut.

    ``cells``: rows with ``example`` (an ``Example.id`` of ``examples``), ``layer`` and ``head``
    (from 1), e.g. the rows of ``effective_attention_sweep``'s table whose ``null_dim`` is not
    max(0, n - d_v). For each: ``n``, ``rank`` (singular values of V above ``rtol`` times the
    largest, as the sweep counts where H has full row rank, so that rank(T) = rank(V)), ``kept`` (the smallest of those, relative to the largest) and
    ``dropped`` (the largest one under the cut, relative; NaN when none is). A ``dropped`` just
    under ``rtol`` is a near-tie with the tolerance; one orders of magnitude under it is a
    direction the rows of V truly lack (e.g. two tokens whose hidden states coincide).
    """
    missing = {"example", "layer", "head"} - set(cells.columns)
    if missing:
        raise ValueError(f"cells needs the columns {sorted(missing)} (example, layer and head, from 1).")
    by_id = {getattr(e, "id", None): (i, e) for i, e in enumerate(check_records(examples))}
    unknown = sorted(set(cells["example"]) - set(by_id))
    if unknown:
        raise ValueError(f"cells names examples not in examples: {unknown[:5]}.")
    rows = []
    for example, group in cells.groupby("example", sort=False):
        index, record = by_id[example]
        internals = capture(model, encode(tokenizer, *text_pair_of(record, index), model=model))
        for layer, head in zip(group["layer"], group["head"], strict=True):
            S = torch.linalg.svdvals(internals.V[int(layer) - 1, int(head) - 1].double())
            relative = S / S[0]
            above = relative > rtol
            rows.append(
                {
                    "example": example,
                    "n": internals.n,
                    "layer": int(layer),
                    "head": int(head),
                    "rank": int(above.sum()),
                    "kept": float(relative[above].min()),
                    "dropped": float(relative[~above].max()) if bool((~above).any()) else float("nan"),
                }
            )
    return pd.DataFrame(rows, columns=["example", "n", "layer", "head", "rank", "kept", "dropped"])
