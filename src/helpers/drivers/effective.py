"""Effective attention over a corpus: raw against effective attention per head and token class (chapter 4)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from tqdm.auto import tqdm

from ..methods.effective import effective_attention_and_rank
from ..methods.linalg import DEFAULT_RTOL, numerical_rank, pearson
from ..methods.tokens import attention_to, token_classes
from ..model.capture import capture
from ..model.corpus import check_records
from ..model.numbering import head_number, layer_number
from ..model.text import encode, text_pair_of, tokens_of


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
        examples: ``helpers.model.corpus.Example`` records (text_a, optional text_b), strings or
            ``(text, text_pair)`` tuples.
        rtol: rank tolerance, relative to the largest singular value.
        progress: show a tqdm bar.

    Returns:
        A pandas DataFrame with columns ``example`` (``Example.id``; the index for a plain
        string), ``source, n, layer, head, rank, null_dim, correlation`` (Pearson, raw vs effective) and, for each token
        class ``c`` of ``helpers.methods.tokens.token_classes``, ``raw_c`` and ``effective_c``
        (``helpers.methods.tokens.attention_to``). Layers and heads count from 1.
    """
    records = check_records(examples)
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
