"""Causal heads over a corpus: how much of the attention on one position (the sink) is effective (chapter 9)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch
from transformers import PreTrainedModel

from ..methods.causal import attention_on_position, causal_effective_attention
from ..model.capture import capture
from ..model.numbering import head_number, layer_number
from ..model.text import encode


def sink_sweep(
    model: PreTrainedModel,
    tokenizer,
    texts: Sequence[str],
    position: int = 0,
    from_row: int | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Raw and effective attention on ``position`` for every text, layer and head of a causal model.

    Rows from ``from_row`` on (default d_v, the first row whose prefix can have a null space)
    are summed. One table row per text, layer (1..L) and head (1..h): ``example`` (index into
    ``texts``), ``layer``, ``head``, ``kv_head`` (1..h_kv), ``n``, ``rows``, ``raw`` and
    ``effective`` (sums over those rows), and ``value_norm_ratio`` = ||T[position]|| over the
    mean ||T[j]|| of the other positions.
    """
    if isinstance(texts, str) or len(texts) == 0:
        raise ValueError("texts must be a non-empty sequence of strings.")
    frames = []
    iterator = texts
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(texts, desc="texts")
    for index, text in enumerate(iterator):
        internals = capture(model, encode(tokenizer, text, model=model))
        if not internals.causal:
            raise ValueError(f"sink_sweep takes causal models (decoders); {internals.family} is bidirectional.")
        d_v = internals.V.shape[-1]
        first = d_v if from_row is None else from_row
        if internals.n <= max(first, position + 1):
            raise ValueError(f"Text {index} has {internals.n} tokens; it needs more than {max(first, position + 1)}.")
        split = causal_effective_attention(internals.A, V=internals.V, H=internals.H, groups=internals.groups)
        raw, effective = attention_on_position(internals.A, split.effective, position, first)
        norms = internals.T.norm(dim=-1)  # (L, h, n)
        others = torch.cat([norms[..., :position], norms[..., position + 1 :]], dim=-1).mean(dim=-1)
        ratio = norms[..., position] / others
        L, h = raw.shape
        frames.append(
            pd.DataFrame(
                {
                    "example": index,
                    "layer": [layer_number(k) for k in range(L) for _ in range(h)],
                    "head": [head_number(j) for _ in range(L) for j in range(h)],
                    "kv_head": [j // internals.groups + 1 for _ in range(L) for j in range(h)],
                    "n": internals.n,
                    "rows": internals.n - first,
                    "raw": raw.flatten().double().numpy(),
                    "effective": effective.flatten().double().numpy(),
                    "value_norm_ratio": ratio.flatten().double().numpy(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def summarise_sink(table: pd.DataFrame, by: Sequence[str] = ("layer", "head")) -> pd.DataFrame:
    """Pool a ``sink_sweep`` table over texts: mean raw and effective attention per row, and the effective share.

    Returns one row per group of ``by`` with ``raw`` and ``effective`` (attention on the position per
    row, averaged over all rows of all texts) and ``effective_share`` = effective / raw.
    """
    missing = {"raw", "effective", "rows", *by} - set(table.columns)
    if missing:
        raise ValueError(f"table lacks the columns {sorted(missing)}; pass the output of sink_sweep.")
    grouped = table.groupby(list(by))
    out = pd.DataFrame(
        {
            "raw": grouped["raw"].sum() / grouped["rows"].sum(),
            "effective": grouped["effective"].sum() / grouped["rows"].sum(),
        }
    )
    out["effective_share"] = out["effective"] / out["raw"]
    return out.reset_index()
