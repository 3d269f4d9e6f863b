"""Attention to the sink before and after fine-tuning (chapter 8): raw, effective, and a random column space's.

The sink is chapter 4's: of the start token, the separator and punctuation (each class all its
tokens together), the class with the most raw attention (``heaviest_class``); or, per example, the
one token with the most raw attention. Per example and layer, ``sink_attention_by_example`` gives
the raw and effective attention a query pays it and what a random column space of each head's rank
would keep; ``sink_removed_share`` and ``sink_removed_by_layer`` turn that into the share of the
sink's raw attention that lies in the null space, against the random space's 1 - r/n.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch
from transformers import PreTrainedModel

from ..methods.effective import effective_attention_and_rank
from ..methods.intervals import bootstrap
from ..methods.linalg import DEFAULT_RTOL
from ..methods.tokens import SINK_CLASSES, attention_to, token_classes
from ..model.capture import capture
from ..model.corpus import check_records
from ..model.numbering import layer_number
from ..model.progress import progress_bar
from ..model.text import encode, text_pair_of

__all__ = [
    "heaviest_class",
    "sink_attention_by_example",
    "sink_attention_table",
    "sink_removed_share",
    "sink_removed_by_layer",
]


def sink_attention_table(model: PreTrainedModel, tokenizer, examples: Sequence) -> pd.DataFrame:
    """Raw and effective attention to each sequence's sink token, per layer, averaged over examples.

    The sink of a sequence is the token that receives the most raw attention
    (summed over layers, heads and queries), chosen by data. For each layer:
    ``raw`` = mean over heads and queries of A[i, sink] (a share of 1) and
    ``effective`` = the same of A_eff. Returns ``layer, raw, effective, sink,
    sink_share``: the most common sink token and the share of examples whose sink it is.
    The layer means of ``sink_attention_by_example``.
    """
    table = sink_attention_by_example(model, tokenizer, examples, progress=False)
    sinks = table.groupby("example").sink.first().tolist()
    common = max(sorted(set(sinks)), key=sinks.count)
    means = table.groupby("layer")[["raw", "effective"]].mean()
    return means.reset_index().assign(sink=common, sink_share=sinks.count(common) / len(sinks))


def _class_masks(tokenizer, internals) -> dict[str, torch.Tensor]:
    """``token_classes`` of one captured sequence, with the model's own start and separator tokens."""
    tokens = tokenizer.convert_ids_to_tokens(internals.input_ids.tolist())
    return token_classes(tokens, tokenizer.cls_token or "[CLS]", tokenizer.sep_token or "[SEP]")


def heaviest_class(
    model: PreTrainedModel, tokenizer, examples: Sequence, classes: Sequence[str] = SINK_CLASSES, progress: bool = True
) -> str:
    """The sink as chapter 4 defines it: of ``classes`` (each class all its tokens together), the one
    with the most raw attention, averaged over examples, heads and queries per layer, then over layers.

    Class names are ``token_classes``' ("[CLS]" for the start token, "[SEP]" for the separator,
    "punctuation"), whatever the model calls its own special tokens.
    """
    examples = check_records(examples)
    unknown = [c for c in classes if c not in SINK_CLASSES]
    if unknown or not classes:
        raise ValueError(f"classes must be a non-empty subset of {SINK_CLASSES}; got {list(classes)}.")
    per_layer = []
    for index, example in enumerate(progress_bar(examples, "token classes", progress)):
        internals = capture(model, encode(tokenizer, *text_pair_of(example, index), model=model))
        masks = _class_masks(tokenizer, internals)
        per_layer.append(torch.stack([attention_to(internals.A, masks[c]).mean(-1) for c in classes], -1))  # (L, c)
    return classes[int(torch.stack(per_layer).mean(dim=(0, 1)).argmax())]


def sink_attention_by_example(
    model: PreTrainedModel, tokenizer, examples: Sequence, progress: bool = True, sink_class: str | None = None
) -> pd.DataFrame:
    """Per example and layer: raw and effective attention to the example's sink, and what a
    random column space of the same rank would keep (the null-space control of PAPER.md §9).

    ``sink_class``: a class of ``token_classes`` ("[CLS]", "[SEP]", "punctuation"; e.g.
    ``heaviest_class``'s, chapter 4's rule), whose tokens together are the sink; None: the one
    token with the most raw attention in the example (as ``sink_attention_table``). An example
    without a token of the class gets raw attention 0 (``sink_removed_share`` leaves it out).
    For a random r-dimensional column space of an n-token head the expected kept part of a
    weight a_j is a_j r / n, so ``random_effective`` = mean over heads and queries of
    A[i, sink] r_h / n, with r_h the numerical rank of the head's T. Returns ``example``
    (index into ``examples``), ``n``, ``layer``, ``raw``, ``effective``, ``random_effective``
    ``rank`` (the largest r_h of the layer: every head has a null space when n > rank) and
    ``sink`` (the sink's token, or ``sink_class``). ``progress``: a bar over the examples.
    """
    examples = check_records(examples)
    if sink_class is not None and sink_class not in SINK_CLASSES:
        raise ValueError(f"sink_class must be one of {SINK_CLASSES} or None; got {sink_class!r}.")
    frames = []
    for index, example in enumerate(progress_bar(examples, "sink attention", progress)):
        encoding = encode(tokenizer, *text_pair_of(example, index), model=model)
        internals = capture(model, encoding)
        if internals.causal:
            raise ValueError("sink_attention_by_example needs a bidirectional encoder; got a causal model.")
        n = internals.n
        if sink_class is None:
            sink = int(internals.A.sum(dim=(0, 1, 2)).argmax())
            mask = torch.zeros(n, dtype=torch.bool, device=internals.A.device)
            mask[sink] = True
            name = tokenizer.convert_ids_to_tokens(int(internals.input_ids[sink]))
        else:
            mask, name = _class_masks(tokenizer, internals)[sink_class], sink_class
        split, rank = effective_attention_and_rank(internals.A, None, internals.V, internals.H, DEFAULT_RTOL)
        raw = attention_to(internals.A, mask)  # (L, h)
        frames.append(
            pd.DataFrame(
                {
                    "example": index,
                    "n": n,
                    "layer": [layer_number(i) for i in range(raw.shape[0])],
                    "raw": raw.mean(-1).cpu().numpy(),
                    "effective": attention_to(split.effective, mask).mean(-1).cpu().numpy(),
                    "random_effective": (raw * rank.double() / n).mean(-1).cpu().numpy(),
                    "rank": rank.max(-1).values.cpu().numpy(),
                    "sink": name,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def sink_removed_share(table: pd.DataFrame, by_layer: bool = False) -> pd.DataFrame:
    """The share of the sink's raw attention that effective attention removes, and a random column space's.

    table: ``sink_attention_by_example``'s. Per example (over all its layers), or per example
    and layer: ``removed`` = 1 - effective / raw and ``random`` = 1 - random_effective / raw
    (the expected removed share for a random column space of each head's rank, 1 - r/n).
    Only examples with n > rank enter (every head has a null space): a shorter text has
    none, so its removed share is 0 by construction and says nothing about the sink; nor do
    examples where the sink draws no raw attention at all (a sink class the text lacks).
    Returns ``example``, (``layer``,) ``n``, ``removed``, ``random``.
    """
    missing = {"example", "layer", "n", "rank", "raw", "effective", "random_effective"} - set(table.columns)
    if missing:
        raise ValueError(f"table lacks the columns {sorted(missing)}: pass sink_attention_by_example's table.")
    long = table[table.n > table["rank"]]
    keys = ["example", "layer"] if by_layer else ["example"]
    sums = long.groupby(keys)[["raw", "effective", "random_effective"]].sum()
    sums = sums[sums.raw > 0]
    return pd.DataFrame(
        {
            "n": long.groupby(keys).n.first().loc[sums.index],
            "removed": 1 - sums.effective / sums.raw,
            "random": 1 - sums.random_effective / sums.raw,
        }
    ).reset_index()


def sink_removed_by_layer(table: pd.DataFrame) -> pd.DataFrame:
    """Per layer, the mean removed share of the sink's attention and its random expectation, with
    95% intervals over examples (``sink_removed_share(by_layer=True)``, bootstrapped per layer).

    Returns ``layer, removed, removed_low, removed_high, random, random_low, random_high``.
    """
    shares = sink_removed_share(table, by_layer=True)
    rows = []
    for layer, part in shares.groupby("layer"):
        row = {"layer": layer}
        for column in ("removed", "random"):
            estimate = bootstrap(part[column].to_numpy())
            row |= {column: estimate.value, f"{column}_low": estimate.low, f"{column}_high": estimate.high}
        rows.append(row)
    return pd.DataFrame(rows)
