"""Data for the book's live explorers: what a page draws in the browser, without a kernel.

``book/explorers/build.py`` writes these records as JSON into ``_static/explorers/``, and
``_static/explorer.js`` draws them. Two records:

* :func:`attention_split_record`: raw and effective attention of every layer and head on one
  text, as integers in thousandths (the page computes null = raw - effective);
* :func:`null_space_rows_record`: a few query rows of one head, the null-space directions of a
  :class:`~helpers.book.widgets.NullSpaceExplorer` restricted to those rows, the sliders'
  ranges and the head's T, at full precision, so that the page recomputes the head output of a
  moved row and shows that it does not change.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from ..methods.captured import effective_attention_of
from ..methods.linalg import numerical_rank
from ..model.capture import capture
from ..model.text import tokens_of

SCALE = 1000  # the attention maps are stored as integers in thousandths


def thousandths(values: torch.Tensor) -> list:
    """``values`` (any shape) as nested lists of integers, round(values * SCALE)."""
    return torch.round(values.detach().double() * SCALE).long().tolist()


def float32_list(values: torch.Tensor) -> list:
    """``values`` as nested lists of the shortest decimals that read back as the same float32."""
    flat = [float(f"{v:.9g}") for v in values.detach().float().flatten().tolist()]
    return _nest(flat, values.shape)


def _nest(flat: list, shape: Sequence[int]) -> list:
    if len(shape) == 1:
        return list(flat)
    step = len(flat) // shape[0]
    return [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def attention_split_record(model, tokenizer, encoding, label: str) -> dict:
    """Raw and effective attention of every head of ``model`` on one encoded text.

    encoding: input_ids ``(1, n)``. Returns a JSON-ready dict: ``label``; ``tokens`` (n strings);
    ``null_dims`` (L, h), dim LN(T) of each head; ``raw`` and ``effective`` (L, h, n, n),
    integers in thousandths (:data:`SCALE`). Null attention is raw - effective.
    """
    internals = capture(model, encoding)
    split = effective_attention_of(internals)
    null_dims = internals.n - numerical_rank(internals.T)
    return {
        "label": label,
        "tokens": tokens_of(tokenizer, encoding),
        "null_dims": null_dims.tolist(),
        "raw": thousandths(internals.A),
        "effective": thousandths(split.effective),
    }


def null_space_rows_record(explorer, rows: Sequence[int], tokens: Sequence[str], label: str) -> dict:
    """The live explorer of chapter 3: query ``rows`` of a NullSpaceExplorer's head.

    explorer: a :class:`~helpers.book.widgets.NullSpaceExplorer` on A (n, n) and T (n, d), with
    k directions (k, n, n). Returns a JSON-ready dict: ``label``; ``tokens`` (n); ``rows``, one
    entry per query with its index ``query``, the model's row ``a`` (n,) and the rows of the k
    directions ``directions`` (k, n); ``ranges`` (k, 2), each slider's [min, max] (any
    combination keeps every row valid); ``T`` (n, d). A, T at float32 precision and the
    directions at float64, so (a + t d) T - a T is as small in the browser as here.
    """
    if not rows or any(not 0 <= int(i) < explorer.A.shape[0] for i in rows):
        raise ValueError(f"rows must be query indices from 0 to {explorer.A.shape[0] - 1}; got {list(rows)}.")
    if len(tokens) != explorer.A.shape[0]:
        raise ValueError(f"{len(tokens)} tokens for an attention matrix of {explorer.A.shape[0]} rows.")
    return {
        "label": label,
        "tokens": list(tokens),
        "rows": [
            {
                "query": int(i),
                "a": float32_list(explorer.A[int(i)]),
                "directions": explorer.directions[:, int(i)].tolist(),
            }
            for i in rows
        ],
        "ranges": [[float(s.min), float(s.max)] for s in explorer.sliders],
        "T": float32_list(explorer.T),
    }


def moved_rows(record: dict, steps: Sequence[float]) -> torch.Tensor:
    """The record's rows moved by ``steps`` (k,) along its directions: (rows, n) float64, a + sum_k t_k d_k."""
    a = torch.tensor([row["a"] for row in record["rows"]], dtype=torch.float64)
    D = torch.tensor([row["directions"] for row in record["rows"]], dtype=torch.float64)  # (rows, k, n)
    return a + torch.einsum("k,rkn->rn", torch.tensor(steps, dtype=torch.float64), D)


def row_output_change(record: dict, steps: Sequence[float]) -> torch.Tensor:
    """max |(a' - a) T| / max |a T| for each of the record's rows: (rows,), as the page computes it."""
    a = torch.tensor([row["a"] for row in record["rows"]], dtype=torch.float64)
    T = torch.tensor(record["T"], dtype=torch.float64)
    change = ((moved_rows(record, steps) - a) @ T).abs().amax(dim=-1)
    return change / (a @ T).abs().amax(dim=-1)


def write_json(data: dict, path: Path) -> Path:
    """Write ``data`` compactly (no spaces) to ``path``, creating its folder; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, separators=(",", ":"), ensure_ascii=False) + "\n", encoding="utf-8")
    return path
