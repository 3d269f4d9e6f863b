"""Content words, function words, punctuation, special tokens (paper appendix C).

The paper splits hidden tokens by part of speech: content words (nouns,
verbs, adjectives, adverbs) keep more of their own input than function words
and symbols, clearly from layer 4 of 12 on. No tagger can be downloaded here,
so the book approximates with a closed class: English function words
(determiners, pronouns, prepositions, conjunctions, auxiliaries, negation) are
a short, fixed list shipped with the helpers (``wordlists/function_words.txt``);
every other alphanumeric word is a content word (numbers included).

WordPiece splits long words: a continuation piece (``##...``) takes the class
of its word, and the word is looked up whole (``"through" + "##out"``). The
clitic after an apostrophe (``don ' t``, ``it ' s``) counts as a function word.

Tensors in, tables out: this module never loads a model and never draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from importlib import resources

import pandas as pd
import torch

from .tokens import is_punctuation

__all__ = [
    "WORD_CLASSES",
    "SPECIAL_TOKENS",
    "function_words",
    "word_classes",
    "word_classes_of",
    "class_summary",
    "content_keeps_more_from",
]

WORD_CLASSES = ("content", "function", "punctuation", "special")
SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"})
CLITICS = frozenset({"s", "t", "ll", "re", "ve", "d", "m"})  # the piece after an apostrophe: it's, don't, we'll
APOSTROPHES = frozenset({"'", "\u2019"})


@lru_cache(maxsize=1)
def function_words() -> frozenset[str]:
    """The book's closed-class list of English function words (lower case)."""
    text = resources.files("helpers").joinpath("wordlists", "function_words.txt").read_text(encoding="utf-8")
    words = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return frozenset(word for word in words if word)


def word_classes(tokens: Sequence[str], special_tokens: frozenset[str] | set[str] = SPECIAL_TOKENS) -> list[str]:
    """The class of each WordPiece token: one of :data:`WORD_CLASSES`.

    tokens: (n,) WordPiece strings of an uncased BERT vocabulary (``helpers.tokens_of``).
    A ``##`` piece takes its word's class; the word is the first piece plus its
    continuations, looked up lower-cased in :func:`function_words`.
    """
    if isinstance(tokens, str) or not all(isinstance(t, str) for t in tokens):
        raise TypeError("tokens must be a sequence of WordPiece strings (helpers.tokens_of).")
    if len(tokens) == 0:
        raise ValueError("tokens is empty.")
    if tokens[0].startswith("##"):
        raise ValueError(f"The first token {tokens[0]!r} continues a word that is not in the sequence.")
    listed = function_words()
    classes: list[str] = [""] * len(tokens)
    start = 0
    while start < len(tokens):
        end = start + 1
        while end < len(tokens) and tokens[end].startswith("##"):
            end += 1
        first = tokens[start]
        word = (first + "".join(t[2:] for t in tokens[start + 1 : end])).lower()
        if first in special_tokens:
            label = "special"
        elif is_punctuation(word):
            label = "punctuation"
        elif word in listed:
            label = "function"
        elif word in CLITICS and start > 0 and tokens[start - 1] in APOSTROPHES:
            label = "function"
        else:
            label = "content"
        classes[start:end] = [label] * (end - start)
        start = end
    return classes


def word_classes_of(tokenizer, input_ids: torch.Tensor) -> list[str]:
    """:func:`word_classes` of the token ids ``input_ids: (n,)`` (e.g. ``Attribution.input_ids``)."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 1:
        raise ValueError("input_ids must be a 1-D tensor of token ids, shape (n,).")
    special = set(SPECIAL_TOKENS) | set(getattr(tokenizer, "all_special_tokens", []))
    return word_classes(tokenizer.convert_ids_to_tokens(input_ids.tolist()), frozenset(special))


def class_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Median, mean and count of c^l_ii per layer and word class.

    table: ``helpers.drivers.attribution.self_contribution_table(results, classes=...)``. Returns columns
    ``layer, word_class, median, mean, tokens`` (classes in :data:`WORD_CLASSES` order).
    """
    missing = {"layer", "word_class", "self_contribution"} - set(table.columns)
    if missing:
        raise ValueError(
            f"table lacks the columns {sorted(missing)}; build it with self_contribution_table(results, classes=...)."
        )
    grouped = table.groupby(["layer", "word_class"])["self_contribution"]
    summary = grouped.agg(median="median", mean="mean", tokens="size").reset_index()
    order = {name: k for k, name in enumerate(WORD_CLASSES)}
    summary["_order"] = summary["word_class"].map(order)
    return summary.sort_values(["layer", "_order"]).drop(columns="_order").reset_index(drop=True)


def content_keeps_more_from(summary: pd.DataFrame, other: str = "function", statistic: str = "median") -> int | None:
    """The first layer from which content words keep more of their own input than ``other``
    in every later layer (by the median, or ``statistic``); None if never.

    summary: from :func:`class_summary`.
    """
    if other not in WORD_CLASSES or other == "content":
        raise ValueError(f"other must be one of {[c for c in WORD_CLASSES if c != 'content']}; got {other!r}.")
    if statistic not in ("median", "mean"):
        raise ValueError(f"statistic must be 'median' or 'mean'; got {statistic!r}.")
    wide = summary.pivot(index="layer", columns="word_class", values=statistic).sort_index()
    for name in ("content", other):
        if name not in wide.columns:
            raise ValueError(f"The summary has no {name!r} tokens.")
    ahead = (wide["content"] > wide[other]).to_numpy()
    layers = wide.index.to_numpy()
    for k in range(len(layers)):
        if ahead[k:].all():
            return int(layers[k])
    return None
