"""How much each chapter computes, scaled to the model's cost: every chapter's budget rule, stated once.

The bundled encoder runs a chapter's whole design in minutes on two CPU cores. A model that costs more per
token (BERT-Base: 8 times the bundled encoder's L d^2) runs a thinned corpus, fewer epochs or fewer pairs, so
that the chapter stays within minutes; fewer samples widen the intervals without biasing them. The chapters'
code reads these rules' results; the rules, and the costs behind them, live here.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import NamedTuple

import torch
from transformers import PreTrainedModel

from ..drivers.pair_plan import PairPlan, plan_pairs
from ..model.numbering import check_count
from ..model.text import leading_words
from .chapters import layers_and_width, work_scale
from .paper import BERT_BASE
from .verdicts import MIN_SEQUENCES

__all__ = [
    "ALL_ROWS_UP_TO",
    "LONG_INPUT_ROWS",
    "NEAREST_ROWS",
    "POLISH_JACOBIAN_ENTRIES",
    "ATTRIBUTION_MAX_TOKENS",
    "SweepCorpus",
    "ProbePlan",
    "passage_stride",
    "corpus_step",
    "sweep_corpus",
    "probe_plan",
    "bound_rows",
    "compared_rows",
    "polish_steps",
    "LAYER_PASSAGES",
    "LAYER_ROWS",
    "LayerPlan",
    "layer_plan",
    "nearest_rows",
    "attribution_sample",
    "ATTRIBUTION_PAIRS",
    "mixing_plan",
    "LONG_INPUTS",
    "long_inputs",
    "fine_tuning_epochs",
    "INTERVENTION_PASSAGES",
    "EMBEDDING_EDIT_TEXTS",
    "embedding_edit_texts",
    "prompt_length",
    "InterventionPlan",
    "intervention_plan",
]

# chapter 3: the LP ranges of every row up to this many tokens, else this many evenly spaced rows
ALL_ROWS_UP_TO, LONG_INPUT_ROWS = 100, 6
# chapter 3: every head of the chosen layer on this many passages (the sample a verdict needs), each cut to
# 2 d_v tokens, with the LP ranges of this many queries per head on the bundled encoder (d_v = 32)
LAYER_PASSAGES, LAYER_ROWS = 10, 2
# chapter 3: the keys search polishes with Gauss-Newton while its dense Jacobian has at most this many entries
POLISH_JACOBIAN_ENTRIES = 4_000_000
# chapter 4: one pair of linear programs per row for the nearest distribution, at most this many rows per head
NEAREST_ROWS = 48
# chapter 9: the interventions run on at most this many passages, each cut to 1.5 d_v tokens (``prompt_length``);
# the edits of one layer at a time (L times as many forward passes) on every second of them: 10, the sample a
# verdict needs
INTERVENTION_PASSAGES = 20
# chapter 4: the encoder's interventions (a forward pass per edit and text) on this many texts longer than d_v
EMBEDDING_EDIT_TEXTS = 24
# chapter 7: effective attention against HTA also on this many passages cut to 2 d_v tokens (bundled encoder);
# at least 10, the sample a verdict needs
LONG_INPUTS = 12
# chapter 6: HTA's cost grows with n^2, so the corpus sample keeps pairs of at most this many tokens
ATTRIBUTION_MAX_TOKENS = 48
# chapter 6: the corpus sample on the bundled encoder (the issue asks HTA tables on at least 20 sequences)
ATTRIBUTION_PAIRS = 24


class SweepCorpus(NamedTuple):
    """Chapter 4's sweep: ``pairs`` and ``passages`` kept, and ``texts`` (pairs, then passages)."""

    pairs: list
    passages: list

    @property
    def texts(self) -> list:
        return self.pairs + self.passages


class ProbePlan(NamedTuple):
    """Chapter 5's probes: every ``pair_step``-th pair of the corpus, ``epochs`` Adam epochs per trained map."""

    pair_step: int
    epochs: int


def passage_stride(model: PreTrainedModel) -> int:
    """Chapter 2's rank sweep: every stride-th passage. A forward pass per prefix costs about L d per token
    here (ranks, not Jacobians): 1 up to a quarter of BERT-Base's L d, 4 on BERT-Base."""
    layers, d = layers_and_width(model)
    return max(1, round(4 * layers * d / (BERT_BASE.num_layers * BERT_BASE.d)))


def corpus_step(model: PreTrainedModel) -> int:
    """Chapters 4 and 5: the corpus is thinned by this step, 4 L d^2 / (L d^2 of BERT-Base), at least 1
    (1 for the bundled encoder and smaller models, 4 for BERT-Base)."""
    layers, d = layers_and_width(model)
    return max(1, round(4 * layers * d**2 / (BERT_BASE.num_layers * BERT_BASE.d**2)))


def sweep_corpus(model: PreTrainedModel, pairs: Sequence, passages: Sequence) -> SweepCorpus:
    """Chapter 4's effective-attention sweep: every third pair and every second passage, thinned by
    ``corpus_step``."""
    step = corpus_step(model)
    return SweepCorpus(list(pairs[:: 3 * step]), list(passages[:: 2 * step]))


def probe_plan(model: PreTrainedModel) -> ProbePlan:
    """Chapter 5: the saving of ``corpus_step`` split between sentences and epochs (4 epochs and every pair
    on the bundled encoder; every second pair and 2 epochs on BERT-Base)."""
    step = max(1, round(corpus_step(model) ** 0.5))
    return ProbePlan(pair_step=step, epochs=max(1, 4 // step))


def bound_rows(n: int, query: int) -> list[int]:
    """Chapter 3's LP ranges: every row of an input up to ``ALL_ROWS_UP_TO`` tokens, else
    ``LONG_INPUT_ROWS`` evenly spaced rows and the row ``query`` (the cost grows with n^3 and more)."""
    check_count(n, "n")
    if not 0 <= query < n:
        raise ValueError(f"query must be a row in 0..{n - 1}; got {query}.")
    if n <= ALL_ROWS_UP_TO:
        return list(range(n))
    return sorted({round(k * (n - 1) / (LONG_INPUT_ROWS - 1)) for k in range(LONG_INPUT_ROWS)} | {query})


def compared_rows(n: int, query: int) -> list[int]:
    """The rows chapter 3 also solves the slow way (two HiGHS programs per weight): the first, ``query`` and
    the last while all rows are bounded, else ``query`` alone."""
    return [0, query, n - 1] if n <= ALL_ROWS_UP_TO else [query]


class LayerPlan(NamedTuple):
    """Chapter 3's study of every head of a layer: the first ``passages`` passages long enough, cut to
    ``length`` tokens; ``rows``, the queries whose weights are bounded in every head (0-based)."""

    passages: int
    length: int
    rows: list[int]


def layer_plan(d_v: int) -> LayerPlan:
    """Chapter 3's layer study: ``LAYER_PASSAGES`` passages cut to 2 d_v tokens (a constrained null space of
    d_v - 1 dimensions per row). The LP ranges cost about n^3 per row and two per weight (the head's and the
    random control's): ``LAYER_ROWS`` queries per head at d_v = 32, fewer in proportion to (d_v / 32)^3, at
    least 1 (BERT-Base: 1), evenly spaced inside the input, away from its first and last token."""
    length = 2 * check_count(d_v, "d_v")
    count = max(1, round(LAYER_ROWS * (32 / d_v) ** 3))
    rows = sorted({round((k + 0.5) * length / count - 0.5) for k in range(count)})
    return LayerPlan(LAYER_PASSAGES, length, rows)


def polish_steps(n: int, rank: int, d_v: int, steps: int = 10) -> int:
    """Chapter 3's keys search: ``steps`` Gauss-Newton polish steps while the dense Jacobian,
    (n rank) x (2 n d_v) entries, stays within ``POLISH_JACOBIAN_ENTRIES``; none beyond it."""
    return steps if (n * rank) * (2 * n * d_v) <= POLISH_JACOBIAN_ENTRIES else 0


def nearest_rows(n: int) -> torch.Tensor:
    """Chapter 4's nearest distributions: at most ``NEAREST_ROWS`` evenly spaced rows of an n-token head."""
    check_count(n, "n")
    return torch.linspace(0, n - 1, min(n, NEAREST_ROWS)).round().long().unique()


def attribution_sample(model: PreTrainedModel, tokenizer, pairs: Sequence, seed: int = 0) -> list:
    """Chapter 6's corpus: a seeded sample of the pairs of at most ``ATTRIBUTION_MAX_TOKENS`` tokens. The HTA
    estimate costs about samples L n^2 d^2 per pair: ``ATTRIBUTION_PAIRS`` (24) pairs while L d^2 stays within
    10^6 (the bundled encoder), fewer in proportion beyond it, never fewer than 10, the sample a verdict needs
    (BERT-Base: 10)."""
    layers, d = layers_and_width(model)
    count = max(10, min(ATTRIBUTION_PAIRS, round(ATTRIBUTION_PAIRS * 1e6 / (layers * d**2))))
    short = [p for p in pairs if len(tokenizer(p.text_a, p.text_b)["input_ids"]) <= ATTRIBUTION_MAX_TOKENS]
    return random.Random(seed).sample(short, count)


def mixing_plan(model: PreTrainedModel, tokenizer, pairs: Sequence, d_v: int) -> PairPlan:
    """Chapter 7's pairs (``helpers.drivers.mixing.plan_pairs``), scaled by the model's cost per token
    (L d^2) and by exact HTA's (L d^3), both relative to the bundled encoder; at least the
    ``MIN_SEQUENCES`` pairs a verdict needs."""
    return plan_pairs(tokenizer, pairs, d_v, work_scale(model), work_scale(model, 3), minimum=MIN_SEQUENCES)


def _evenly_spaced(items: Sequence, count: int) -> list:
    """``count`` of ``items`` evenly spaced over them, the first and (for count > 1) the last among them."""
    return [items[round(k * (len(items) - 1) / max(1, count - 1))] for k in range(count)]


def long_inputs(model: PreTrainedModel, tokenizer, passages: Sequence, d_v: int) -> list:
    """Chapter 7's inputs far longer than d_v: passages evenly spaced over the corpus, each cut at a word
    boundary to at most 2 d_v tokens, so that each head's null space has about d_v dimensions (the pairs':
    1 to 4). ``LONG_INPUTS`` of them on the bundled encoder, fewer in proportion to the cost per token
    (L d^2) and to the square of 2 d_v against the bundled encoder's (the HTA estimate grows with n^2),
    at least 2."""
    tokens = 2 * check_count(d_v, "d_v")
    long_enough = [p for p in passages if len(tokenizer(p.text_a)["input_ids"]) >= tokens]
    bundled_tokens = 64  # 2 d_v on the bundled encoder
    count = max(2, min(LONG_INPUTS, round(LONG_INPUTS / (work_scale(model) * (tokens / bundled_tokens) ** 2))))
    if len(long_enough) < count:
        raise ValueError(f"Only {len(long_enough)} passages have {tokens} tokens; the interval needs {count}.")
    chosen = _evenly_spaced(long_enough, count)
    return [dataclasses.replace(p, text_a=leading_words(tokenizer, p.text_a, tokens)) for p in chosen]


def embedding_edit_texts(model: PreTrainedModel, examples: Sequence) -> list:
    """Chapter 4's interventions: ``EMBEDDING_EDIT_TEXTS`` of ``examples`` evenly spaced over them on the
    bundled encoder and smaller models, fewer in proportion to the cost per token (L d^2), at least 10, the
    sample a verdict needs (all if fewer)."""
    if len(examples) == 0:
        raise ValueError("No texts to edit: pass the texts longer than d_v.")
    count = max(MIN_SEQUENCES, min(EMBEDDING_EDIT_TEXTS, round(EMBEDDING_EDIT_TEXTS / work_scale(model))))
    return _evenly_spaced(list(examples), min(count, len(examples)))


def fine_tuning_epochs(model: PreTrainedModel) -> int:
    """Chapter 8: 5 epochs on the bundled encoder; on a model that costs more per token (L d^2), fewer in
    proportion, at least 2 (BERT-Base: 2)."""
    return max(2, min(5, round(10 / work_scale(model))))


def prompt_length(d_v: int) -> int:
    """Chapter 9's sink sweep and interventions cut every passage to 1.5 d_v tokens (96 for d_v = 64; the
    corpus's shortest passage has 100): d_v rows whose prefixes have no null space, then d_v / 2 rows whose
    prefixes can have one. One length for every passage keeps the null spaces' sizes alike across them."""
    return 3 * check_count(d_v, "d_v") // 2


class InterventionPlan(NamedTuple):
    """Chapter 9's interventions: ``texts`` (the passages, their ``indices`` in the corpus), the ``length`` they
    are cut to, and ``layer_texts``, those the edits of one layer at a time run on (every second of ``texts``,
    at the positions ``layer_examples`` of ``texts``)."""

    texts: list[str]
    length: int
    indices: list[int]
    layer_texts: list[str]
    layer_examples: list[int]


def intervention_plan(texts: Sequence[str], lengths: Sequence[int], used: Sequence[int], d_v: int) -> InterventionPlan:
    """Chapter 9: up to ``INTERVENTION_PASSAGES`` texts not in ``used``, evenly spaced over those long enough,
    each cut to ``prompt_length(d_v)`` tokens. Every edit runs one batched forward pass over them."""
    if len(texts) != len(lengths):
        raise ValueError(f"{len(texts)} texts but {len(lengths)} lengths.")
    length = prompt_length(d_v)
    held_out = [i for i in range(len(texts)) if i not in set(used) and lengths[i] >= length]
    if len(held_out) < 2:
        raise ValueError(f"Only {len(held_out)} held-out texts have {length} tokens; the interval needs two.")
    chosen = _evenly_spaced(held_out, min(INTERVENTION_PASSAGES, len(held_out)))
    kept = [texts[i] for i in chosen]
    # every second text, so that they too span the corpus; at least two
    layer_examples = list(range(0, len(kept), 2)) if len(kept) >= 4 else list(range(min(2, len(kept))))
    return InterventionPlan(kept, length, chosen, [kept[k] for k in layer_examples], layer_examples)
