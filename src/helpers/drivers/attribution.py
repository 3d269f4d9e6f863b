"""Hidden Token Attribution over a corpus and the tables chapter 6 draws (per example, per layer)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch
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
from ..methods.intervals import Estimate, bootstrap
from ..methods.word_classes import WORD_CLASSES
from ..model.corpus import check_records
from ..model.numbering import check_seed
from ..model.progress import progress_bar
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
    iterator = progress_bar(examples, f"attribution ({estimator})", progress, unit="example")
    results = []
    for index, example in enumerate(iterator):
        encoding = encode(tokenizer, *text_pair_of(example, index), model=model)
        results.append(
            hidden_token_attribution(
                model, encoding, estimator=estimator, samples=samples, seed=seed + index, progress=False
            )
        )
    return results


def self_contribution_table(
    results: Sequence[Attribution], classes: Sequence[Sequence[str]] | None = None, neighbours: bool = False
):
    """One row per (example, layer, hidden token): ``example`` (index into ``results``), ``layer,
    relative_depth, position, self_contribution, own_is_largest``. A pandas DataFrame.

    ``classes``: optionally, per result, the n labels of ``helpers.methods.word_classes.word_classes_of``;
    they add a ``word_class`` column (the table ``word_classes.class_summary`` reads).
    ``neighbours=True`` adds ``neighbour_contribution``: the mean c_ij of the inputs right next to
    the hidden token, j = i - 1 and j = i + 1 (one of them at either end of the sequence).
    """
    import pandas as pd

    if not results:
        raise ValueError("No results to tabulate.")
    if classes is not None and len(classes) != len(results):
        raise ValueError(f"Got {len(results)} results but {len(classes)} class lists.")
    frames = []
    for index, attribution in enumerate(results):
        own = self_contribution(attribution).double().cpu().numpy()
        largest = own_input_is_largest(attribution).cpu().numpy()
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
        if neighbours:
            frame["neighbour_contribution"] = neighbour_contribution(attribution).double().cpu().numpy().ravel()
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
    mean = (totals / tokens).cpu().numpy()
    per_token = (totals / pairs.clamp_min(1)).cpu().numpy()
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
    if not results:
        raise ValueError("No results to tabulate.")
    by_example = cls_table_by_example(results, window)
    segments = by_example.segments.drop(columns="example").groupby(["layer", "segment"], sort=False).mean()
    around = by_example.around.drop(columns="example").groupby(["layer", "offset"]).mean()
    return ClsTables(segments.reset_index(), around.reset_index())


def cls_table_by_example(results: Sequence[Attribution], window: int = 3) -> ClsTables:
    """:func:`cls_table` per example: the same two tables with an ``example`` column first
    (index into ``results``), not averaged, so that an interval can resample the pairs."""
    import pandas as pd

    if not results:
        raise ValueError("No results to tabulate.")
    segment_rows, around_rows = [], []
    for example, attribution in enumerate(results):
        labels, shares = cls_segments(attribution)
        sep, last, second = pair_positions(attribution)
        sizes = [1, sep - 1, second - sep, last - second, 1]
        offsets, around = cls_around_separator(attribution, window)
        for k, layer in enumerate(attribution.layer_numbers):
            for g, label in enumerate(labels):
                share = float(shares[k, g])
                segment_rows.append(
                    {
                        "example": example,
                        "layer": layer,
                        "segment": label,
                        "contribution": share,
                        "per_token": share / sizes[g],
                    }
                )
            for column, offset in enumerate(offsets):
                around_rows.append(
                    {"example": example, "layer": layer, "offset": offset, "contribution": float(around[k, column])}
                )
    return ClsTables(pd.DataFrame(segment_rows), pd.DataFrame(around_rows))


# ---------------------------------------------------------------- per example, for intervals over pairs


def distance_by_example(results: Sequence[Attribution], bins: Sequence[tuple[int, int | None]] = DEFAULT_BINS):
    """Context by relative distance per example: one row per (example, layer, group).

    Columns ``example, layer, group, total, pairs``: ``total`` is the group's share
    summed over the example's hidden tokens, ``pairs`` the number of (hidden, input)
    pairs in the group. Pool groups and examples by summing both; their ratio is the
    mean c_ij per pair (:func:`per_pair_share`).
    """
    import pandas as pd

    if not results:
        raise ValueError("No results to tabulate.")
    rows = []
    for example, attribution in enumerate(results):
        labels, groups = distance_groups(attribution, bins)
        totals = groups.sum(dim=1).double().cpu().numpy()  # (L', G)
        pairs = distance_masks(attribution.n, bins)[1].sum(dim=(0, 1)).cpu().numpy()  # (G,)
        for k, layer in enumerate(attribution.layer_numbers):
            for g, label in enumerate(labels):
                rows.append(
                    {
                        "example": example,
                        "layer": layer,
                        "group": label,
                        "total": float(totals[k, g]),
                        "pairs": int(pairs[g]),
                    }
                )
    return pd.DataFrame(rows)


def per_pair_share(frame: pd.DataFrame, groups: Sequence[str]) -> pd.DataFrame:
    """The mean c_ij over the (hidden, input) pairs of the union of ``groups``, per example and layer.

    frame: :func:`distance_by_example`. Returns an (examples x layers) DataFrame, NaN
    where an example has no pair in those groups.
    """
    unknown = set(groups) - set(frame["group"])
    if not groups or unknown:
        raise ValueError(f"groups must be among {sorted(set(frame['group']))}; got {list(groups)}.")
    chosen = frame[frame["group"].isin(list(groups))].groupby(["example", "layer"])[["total", "pairs"]].sum()
    share = chosen["total"] / chosen["pairs"].where(chosen["pairs"] > 0)
    return share.unstack("layer")


def depth_spearman(frame: pd.DataFrame) -> pd.Series:
    """Per row of an (examples x layers) frame, the Spearman correlation of its values with the layer.

    -1: falls with every layer; +1: rises with every layer; 0 where the row is constant.
    Columns are the layer numbers; NaN entries are left out of their row.
    """
    from scipy.stats import spearmanr

    if frame.shape[1] < 2:
        raise ValueError(f"a trend with depth needs at least two layers; got {frame.shape[1]}.")
    layers = np.asarray(frame.columns, dtype=float)
    out = {}
    for example, row in frame.iterrows():
        values = row.to_numpy(dtype=float)
        keep = np.isfinite(values)
        if keep.sum() < 2 or np.ptp(values[keep]) == 0:
            out[example] = 0.0
            continue
        out[example] = float(spearmanr(layers[keep], values[keep]).statistic)
    return pd.Series(out, name="spearman").rename_axis(frame.index.name)


def neighbour_contribution(attribution: Attribution) -> torch.Tensor:
    """(L', n): per layer and hidden token i, the mean c_ij of its neighbours j = i - 1 and j = i + 1
    (the one neighbour at either end); needs n >= 2."""
    c = attribution.contributions  # (L', n, n)
    n = c.shape[-1]
    if n < 2:
        raise ValueError("a hidden token has a neighbour only in a sequence of at least 2 tokens.")
    rows = torch.arange(n)
    left = torch.where(rows > 0, rows - 1, rows + 1)
    right = torch.where(rows < n - 1, rows + 1, rows - 1)
    return (c[:, rows, left] + c[:, rows, right]) / 2


class ClassGap(NamedTuple):
    """:func:`class_gap_paired`: the gap, the same with the labels shuffled, and their paired difference."""

    gap: Estimate
    shuffled: Estimate
    difference: Estimate


def _class_gap_data(table: pd.DataFrame, other: str, from_layer: int, seed: int):
    """(codes, shuffled codes, values (m, k), groups): 1 content, 0 ``other``, -1 neither, per (example,
    position) row; values the self-contributions of layers >= ``from_layer``."""
    missing = {"example", "layer", "position", "word_class", "self_contribution"} - set(table.columns)
    if missing:
        raise ValueError(
            f"table lacks the columns {sorted(missing)}; use self_contribution_table(results, classes=...)."
        )
    if other not in WORD_CLASSES or other == "content":
        raise ValueError(f"other must be one of {[c for c in WORD_CLASSES if c != 'content']}; got {other!r}.")
    seed = check_seed(seed)
    wide = table[table["layer"] >= from_layer].pivot(
        index=["example", "position"], columns="layer", values="self_contribution"
    )
    if wide.shape[1] == 0:
        raise ValueError(f"no layer from {from_layer} on in the table.")
    labels = table.drop_duplicates(["example", "position"]).set_index(["example", "position"])["word_class"]
    labels = labels.reindex(wide.index)
    rng = np.random.default_rng(seed)
    shuffled = labels.groupby(level="example", group_keys=False).transform(lambda s: rng.permutation(s.to_numpy()))

    def code(classes) -> np.ndarray:
        return np.where(classes == "content", 1.0, np.where(classes == other, 0.0, -1.0))

    groups = wide.index.get_level_values("example").to_numpy()
    return code(labels), code(shuffled), wide.to_numpy(dtype=float), groups


def _smallest_gap(rows: np.ndarray) -> float:
    """rows (m, 1 + k): a class code, then k layers' values: the smallest over the layers of the median of
    content rows less the median of ``other`` rows."""
    content, rest = rows[rows[:, 0] == 1.0, 1:], rows[rows[:, 0] == 0.0, 1:]
    if len(content) == 0 or len(rest) == 0:
        return float("nan")
    return float(np.min(np.median(content, axis=0) - np.median(rest, axis=0)))


def class_gap(
    table: pd.DataFrame, other: str = "function", from_layer: int = 1, shuffle: bool = False, seed: int = 0
) -> Estimate:
    """How much more of their own input content words keep than ``other`` tokens, from ``from_layer`` on.

    The figure: over the layers >= ``from_layer``, the smallest gap between the median c_ii
    of content tokens and that of ``other`` tokens, pooled over the examples; its 95%
    interval resamples the examples (``helpers.bootstrap``). ``shuffle=True`` is its
    permutation control: each example's word-class labels are shuffled among its own
    tokens (seeded), so the class carries no information and the gap is chance.
    table: ``self_contribution_table(results, classes=...)``.
    """
    real, shuffled, values, groups = _class_gap_data(table, other, from_layer, seed)
    code = shuffled if shuffle else real
    return bootstrap(np.column_stack([code, values]), _smallest_gap, groups=groups)


def class_gap_paired(table: pd.DataFrame, other: str = "function", from_layer: int = 1, seed: int = 0) -> ClassGap:
    """:func:`class_gap` with the real labels and with the shuffled ones, on the same tokens, and the
    interval of their difference (real less shuffled) from resampling the examples together: the same
    draws as the two marginal intervals (one seed), so each example's tokens enter both sides at once."""
    real, shuffled, values, groups = _class_gap_data(table, other, from_layer, seed)
    data = np.column_stack([real, shuffled, values])

    def difference(rows: np.ndarray) -> float:
        return _smallest_gap(np.delete(rows, 1, axis=1)) - _smallest_gap(rows[:, 1:])

    return ClassGap(
        bootstrap(np.column_stack([real, values]), _smallest_gap, groups=groups),
        bootstrap(np.column_stack([shuffled, values]), _smallest_gap, groups=groups),
        bootstrap(data, difference, groups=groups),
    )


def cls_sources_by_example(results: Sequence[Attribution]) -> pd.DataFrame:
    """What [CLS] takes per input token from each part of a sentence pair, per example and layer.

    Columns ``example, layer`` and the mean c_{[CLS], j} over the input tokens j of:
    ``neighbours`` (the two tokens right before and after the first [SEP]),
    ``separators`` (every separator: two in BERT, three in MPNet), ``sentence_1``, ``sentence_2`` and
    ``sentences`` (every token of the two sentences, neighbours included).
    """
    if not results:
        raise ValueError("No results to tabulate.")
    rows = []
    for example, attribution in enumerate(results):
        sep, last, second = pair_positions(attribution)
        if last - second < 1:
            raise ValueError(f"Result {example}: the second segment is empty.")
        row = attribution.contributions[:, 0, :].double()  # (L', n)
        parts = {
            "neighbours": row[:, [sep - 1, second]],
            "separators": row[:, [*range(sep, second), last]],
            "sentence_1": row[:, 1:sep],
            "sentence_2": row[:, second:last],
            "sentences": torch.cat([row[:, 1:sep], row[:, second:last]], dim=-1),
        }
        means = {name: part.mean(-1).cpu().numpy() for name, part in parts.items()}
        for k, layer in enumerate(attribution.layer_numbers):
            rows.append({"example": example, "layer": layer, **{name: float(v[k]) for name, v in means.items()}})
    return pd.DataFrame(rows)
