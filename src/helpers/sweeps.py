"""Drivers that run the model over a corpus and tabulate a method's results.

Every table here follows the book's numbering (``helpers.numbering``):
``layer`` 1..L, ``head`` 1..h, ``hidden_state`` 0..L; ``n`` is the sequence
length. The maths lives in the method modules; this module only loops.
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm
from transformers import BatchEncoding, PreTrainedModel

from .attribution import Attribution, hidden_token_attribution
from .effective import effective_attention_and_rank
from .internals import capture
from .linalg import DEFAULT_RTOL, numerical_rank, pearson
from .nullspace import check_matrices, ranks_of
from .numbering import check_seed, head_number, layer_number
from .text import check_single_sequence, encode, prefix_encoding, text_pair_of, tokens_of
from .tokens import attention_to, token_classes

__all__ = ["rank_sweep", "effective_attention_sweep", "attribute_examples"]


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
    if per_text is not None and (isinstance(per_text, bool) or not isinstance(per_text, numbers.Integral) or per_text < 1):
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


def _records(examples) -> list:
    """The records of a corpus as a list: Examples, strings or (text, text_pair) tuples; never one bare text."""
    if isinstance(examples, (str, tuple)) or hasattr(examples, "text_a"):
        raise TypeError("examples must be a list of records (Examples, strings or pairs); wrap a single one in a list.")
    records = list(examples)
    if not records:
        raise ValueError("No examples given: pass at least one record.")
    for index, record in enumerate(records):
        text_pair_of(record, index)  # a clear error for a bad record before any model runs
    return records


def effective_attention_sweep(
    model,
    tokenizer,
    examples: Sequence,
    rtol: float = DEFAULT_RTOL,
    progress: bool = True,
):
    """Effective attention over a corpus: one row per (example, layer, head).

    Args:
        model, tokenizer: from ``helpers.load_model``.
        examples: ``helpers.Example`` records (text_a, optional text_b), strings or
            ``(text, text_pair)`` tuples.
        rtol: rank tolerance, relative to the largest singular value.
        progress: show a tqdm bar.

    Returns:
        A pandas DataFrame with columns ``id, source, n, layer, head, rank,
        null_dim, correlation`` (Pearson, raw vs effective) and, for each token
        class ``c`` of ``helpers.tokens.token_classes``, ``raw_c`` and ``effective_c``
        (``helpers.tokens.attention_to``). Layers and heads count from 1.
    """
    records = _records(examples)
    rows = []
    full_row_rank = None  # the weights, hence the ranks of H, are the same for every example
    for index, example in enumerate(tqdm(records, disable=not progress, desc="effective attention")):
        text_a, text_b = text_pair_of(example, index)
        encoding = encode(tokenizer, text_a, text_b, model=model)
        internals = capture(model, encoding)
        A = internals.A
        if full_row_rank is None:
            full_row_rank = numerical_rank(internals.H.mT, rtol) == internals.H.shape[-2]
        split, rank = effective_attention_and_rank(A, None, internals.V, internals.H, rtol, full_row_rank)
        columns = {
            "rank": rank,
            "null_dim": internals.n - rank,
            "correlation": pearson(A, split.effective),
        }
        masks = token_classes(tokens_of(tokenizer, encoding), tokenizer.cls_token, tokenizer.sep_token)
        for name, mask in masks.items():
            columns[f"raw_{name}"] = attention_to(A, mask)
            columns[f"effective_{name}"] = attention_to(split.effective, mask)
        L, h = A.shape[:2]
        frame = {"layer": [layer_number(i) for i in range(L) for _ in range(h)],
                 "head": [head_number(k) for _ in range(L) for k in range(h)]}
        frame.update({key: value.reshape(-1).double().cpu().numpy() for key, value in columns.items()})
        part = pd.DataFrame(frame)
        part.insert(0, "n", internals.n)
        part.insert(0, "source", getattr(example, "source", "given text"))
        part.insert(0, "id", getattr(example, "id", str(index)))
        rows.append(part)
    table = pd.concat(rows, ignore_index=True)
    table["rank"] = table["rank"].astype(int)
    table["null_dim"] = table["null_dim"].astype(int)
    return table


def attribute_examples(
    model: PreTrainedModel,
    tokenizer,
    examples: Iterable,
    method: str = "estimate",
    samples: int = 32,
    seed: int = 0,
    progress: bool = True,
) -> list[Attribution]:
    """``hidden_token_attribution`` for each example (``text_a``, optional ``text_b``).

    Example k uses seed ``seed + k``, so estimates are reproducible and independent.
    """
    examples = _records(examples)
    seed = check_seed(seed)
    iterator = examples
    if progress:
        iterator = tqdm(examples, desc=f"attribution ({method})", unit="example")
    results = []
    for index, example in enumerate(iterator):
        encoding = encode(tokenizer, *text_pair_of(example, index), model=model)
        results.append(
            hidden_token_attribution(model, encoding, method=method, samples=samples, seed=seed + index, progress=False)
        )
    return results
