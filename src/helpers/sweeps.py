"""Drivers that run a model over a corpus and return tables (one row per layer or hidden state).

# ---- issue 12: before/after tables for chapter 8 (fine-tuning)
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch
from transformers import PreTrainedModel

from .effective import attention_to, effective_attention_of
from .hidden_tokens import collect_hidden_tokens
from .internals import capture
from .numbering import layer_number
from .probes import identifiability_rate
from .text import encode

__all__ = ["sink_attention_table", "naive_identifiability_table"]


def _pairs(examples: Sequence) -> list:
    examples = list(examples)
    if not examples:
        raise ValueError("examples is empty.")
    return examples


def sink_attention_table(model: PreTrainedModel, tokenizer, examples: Sequence) -> pd.DataFrame:
    """Raw and effective attention to each sequence's sink token, per layer, averaged over examples.

    The sink of a sequence is the token that receives the most raw attention
    (summed over layers, heads and queries), chosen by data. For each layer:
    ``raw`` = mean over heads and queries of A[i, sink] (a share of 1) and
    ``effective`` = the same of A_eff. Returns ``layer, raw, effective, sink``
    where ``sink`` is the share of examples whose sink is the most common sink token.
    """
    examples = _pairs(examples)
    raw, effective, sinks = [], [], []
    for example in examples:
        encoding = encode(tokenizer, example.text_a, getattr(example, "text_b", None), model=model)
        internals = capture(model, encoding)
        sink = int(internals.A.sum(dim=(0, 1, 2)).argmax())
        mask = torch.zeros(internals.n, dtype=torch.bool)
        mask[sink] = True
        split = effective_attention_of(internals)
        raw.append(attention_to(internals.A, mask).mean(dim=-1))  # (L,)
        effective.append(attention_to(split.effective, mask).mean(dim=-1))
        sinks.append(tokenizer.convert_ids_to_tokens(int(internals.input_ids[sink])))
    common = max(set(sinks), key=sinks.count)
    raw_mean, effective_mean = torch.stack(raw).mean(0), torch.stack(effective).mean(0)
    return pd.DataFrame({
        "layer": [layer_number(i) for i in range(len(raw_mean))],
        "raw": raw_mean.double().numpy(),
        "effective": effective_mean.double().numpy(),
        "sink": common,
        "sink_share": sinks.count(common) / len(sinks),
    })


def naive_identifiability_table(model: PreTrainedModel, tokenizer, examples: Sequence,
                                distance: str = "cosine") -> pd.DataFrame:
    """Naive (identity map) token identifiability per hidden state 0..L over ``examples``.

    Token i of a sequence is identified at hidden state l when its hidden vector is
    nearest (``distance``) to its own input embedding x_i among the inputs of its sequence.
    Returns ``hidden_state, rate``.
    """
    examples = _pairs(examples)
    tokens = collect_hidden_tokens(model, tokenizer, examples, progress=False)
    rates = [identifiability_rate(tokens.hidden[l], tokens.inputs, tokens.sentence, distance)
             for l in range(tokens.layers + 1)]
    return pd.DataFrame({"hidden_state": range(tokens.layers + 1), "rate": rates})
