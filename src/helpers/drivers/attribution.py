"""Hidden Token Attribution over a corpus and the tables chapter 6 draws (per example, per layer)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from ..methods.attribution import (
    DEFAULT_BINS,
    Attribution,
    cls_around_separator,
    cls_segments,
    distance_groups,
    distance_masks,
    hidden_token_attribution,
    own_input_is_largest,
    pair_positions,
    self_contribution,
)
from ..methods.word_classes import WORD_CLASSES
from ..model.corpus import check_records
from ..model.numbering import check_seed
from ..model.text import encode, text_pair_of


def attribute_examples(
    model: PreTrainedModel,
    tokenizer,
    examples: Iterable,
    estimator: str = "estimate",
    samples: int = 32,
    seed: int = 0,
    progress: bool = True,
) -> list[Attribution]:
    """``hidden_token_attribution`` for each example (``text_a``, optional ``text_b``).

    Example k uses seed ``seed + k``, so estimates are reproducible and independent.
    """
    examples = check_records(examples)
    seed = check_seed(seed)
    iterator = examples
    if progress:
        iterator = tqdm(examples, desc=f"attribution ({estimator})", unit="example")
    results = []
    for index, example in enumerate(iterator):
        encoding = encode(tokenizer, *text_pair_of(example, index), model=model)
        results.append(
            hidden_token_attribution(
                model, encoding, estimator=estimator, samples=samples, seed=seed + index, progress=False
            )
        )
    return results


def self_contribution_table(results: Sequence[Attribution], classes: Sequence[Sequence[str]] | None = None):
    """One row per (example, layer, hidden token): ``example`` (index into ``results``), ``layer,
    relative_depth, position, self_contribution, own_is_largest``. A pandas DataFrame.

    ``classes``: optionally, per result, the n labels of ``helpers.methods.word_classes.word_classes_of``;
    they add a ``word_class`` column (the table ``word_classes.class_summary`` reads).
    """
    import pandas as pd

    if not results:
        raise ValueError("No results to tabulate.")
    if classes is not None and len(classes) != len(results):
        raise ValueError(f"Got {len(results)} results but {len(classes)} class lists.")
    frames = []
    for index, attribution in enumerate(results):
        own = self_contribution(attribution).double().numpy()
        largest = own_input_is_largest(attribution).numpy()
        L, n = own.shape
        frame = pd.DataFrame(
            {
                "example": index,
                "layer": np.repeat(attribution.layer_numbers, n),
                "relative_depth": np.repeat(attribution.relative_depth, n),
                "position": np.tile(np.arange(n), L),
                "self_contribution": own.ravel(),
                "own_is_largest": largest.ravel(),
            }
        )
        if classes is not None:
            labels = list(classes[index])
            if len(labels) != n:
                raise ValueError(f"Result {index} has {n} tokens but {len(labels)} class labels.")
            unknown = set(labels) - set(WORD_CLASSES)
            if unknown:
                raise ValueError(f"Unknown word classes {sorted(unknown)}; expected {WORD_CLASSES}.")
            frame["word_class"] = np.tile(np.asarray(labels, dtype=object), L)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def share_own_input_not_largest(table) -> pd.Series:
    """Per layer, the share of hidden tokens whose own input is not the largest contributor.

    table: from :func:`self_contribution_table`. Returns a Series indexed by
    ``layer`` (1..L): ``1 - mean(own_is_largest)``.
    """
    if "layer" not in table.columns or "own_is_largest" not in table.columns:
        raise ValueError(
            f"table needs columns layer and own_is_largest (self_contribution_table); got {list(table.columns)}."
        )
    return 1.0 - table.groupby("layer")["own_is_largest"].mean()


def distance_table(results: Sequence[Attribution], bins: Sequence[tuple[int, int | None]] = DEFAULT_BINS):
    """Context by relative distance, per layer, over all hidden tokens of all results.

    A DataFrame ``layer, group, side, contribution, per_token``: ``contribution`` is the
    mean over hidden tokens of the summed share of each group (the groups add up to
    1), ``per_token`` the mean c_ij over every (hidden, input) pair in the group, so
    groups of different sizes compare.
    """
    import pandas as pd

    if not results:
        raise ValueError("No results to tabulate.")
    labels, totals, tokens, pairs = None, None, 0, None
    for attribution in results:
        if attribution.layer_numbers != results[0].layer_numbers:
            raise ValueError("The results cover different layers.")
        labels, groups = distance_groups(attribution, bins)
        summed = groups.sum(dim=1)  # (L', G): summed over hidden tokens
        counted = distance_masks(attribution.n, bins)[1].sum(dim=(0, 1))  # (G,): (i, j) pairs in each group
        totals = summed if totals is None else totals + summed
        pairs = counted if pairs is None else pairs + counted
        tokens += attribution.n
    mean = (totals / tokens).numpy()
    per_token = (totals / pairs.clamp_min(1)).numpy()
    rows = []
    for k, layer in enumerate(results[0].layer_numbers):
        for g, label in enumerate(labels):
            rows.append(
                {
                    "layer": layer,
                    "group": label,
                    "side": label.split()[0],
                    "contribution": float(mean[k, g]),
                    "per_token": float(per_token[k, g]),
                }
            )
    return pd.DataFrame(rows)


class ClsTables(NamedTuple):
    """What [CLS] gathers per layer: by segment (``layer, segment, contribution``) and around the
    first [SEP] (``layer, offset, contribution``)."""

    segments: pd.DataFrame
    around: pd.DataFrame


def cls_table(results: Sequence[Attribution], window: int = 3) -> ClsTables:
    """[CLS] on sentence pairs, averaged over the results.

    Returns ``(segments, around)``: DataFrames ``layer, segment, contribution,
    per_token`` (summed share of each part and its mean per token) and ``layer,
    offset, contribution`` (mean c_{[CLS], j} at each offset from the first [SEP]).
    """
    import pandas as pd

    if not results:
        raise ValueError("No results to tabulate.")
    segment_rows, around_rows = [], []
    for attribution in results:
        labels, shares = cls_segments(attribution)
        sep, last = pair_positions(attribution)
        sizes = [1, sep - 1, 1, last - sep - 1, 1]
        offsets, around = cls_around_separator(attribution, window)
        for k, layer in enumerate(attribution.layer_numbers):
            for g, label in enumerate(labels):
                share = float(shares[k, g])
                segment_rows.append(
                    {"layer": layer, "segment": label, "contribution": share, "per_token": share / sizes[g]}
                )
            for column, offset in enumerate(offsets):
                around_rows.append({"layer": layer, "offset": offset, "contribution": float(around[k, column])})
    segments = pd.DataFrame(segment_rows).groupby(["layer", "segment"], sort=False).mean().reset_index()
    around = pd.DataFrame(around_rows).groupby(["layer", "offset"]).mean().reset_index()
    return ClsTables(segments, around)
