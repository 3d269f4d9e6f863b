"""Content / function / punctuation / special tokens, and c_ii by class."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest
import torch

import helpers
from helpers.drivers.attribution import self_contribution_table
from helpers.methods.attribution import Attribution
from helpers.methods.word_classes import (
    WORD_CLASSES,
    class_summary,
    content_keeps_more_from,
    function_words,
    word_classes,
    word_classes_of,
)

matplotlib.use("Agg")


def test_list_is_closed_class_and_lower_case():
    words = function_words()
    assert {"the", "of", "and", "is", "they", "not", "would"} <= words
    assert not {"committee", "budget", "approved", "heated", "quickly", "very"} & words
    assert all(w == w.lower() and " " not in w for w in words)


def test_classes_of_a_sentence(tokenizer):
    encoding = helpers.encode(tokenizer, "The committee approved the budget throughout Tuesday, didn't it?")
    tokens = helpers.tokens_of(tokenizer, encoding)
    classes = dict(zip(tokens, word_classes(tokens), strict=True))
    assert classes["[CLS]"] == classes["[SEP]"] == "special"
    assert classes["the"] == classes["it"] == "function"
    assert classes["committee"] == classes["budget"] == "content"
    assert classes[","] == classes["?"] == classes["'"] == "punctuation"
    assert classes["t"] == "function"  # the clitic of didn't


def test_continuation_pieces_take_their_words_class():
    assert word_classes(["through", "##out", "un", "##believ", "##able", "."]) == [
        "function",
        "function",
        "content",
        "content",
        "content",
        "punctuation",
    ]
    # pieces are looked up as a whole word, not one by one
    assert word_classes(["in", "##ward"]) == ["content", "content"]


def test_bad_tokens():
    with pytest.raises(TypeError):
        word_classes("the cat")
    with pytest.raises(ValueError, match="empty"):
        word_classes([])
    with pytest.raises(ValueError, match="continues"):
        word_classes(["##ing", "the"])
    with pytest.raises(ValueError, match="1-D"):
        word_classes_of(None, torch.zeros(1, 3, dtype=torch.long))


def test_word_classes_of_ids(tokenizer):
    encoding = helpers.encode(tokenizer, "She reads.")
    assert word_classes_of(tokenizer, encoding["input_ids"][0]) == [
        "special",
        "function",
        "content",
        "punctuation",
        "special",
    ]


def _contributions(n: int, num_layers: int, seed: int) -> torch.Tensor:
    torch.manual_seed(seed)
    raw = torch.rand(num_layers, n, n)
    return raw / raw.sum(-1, keepdim=True)


def _attribution(c: torch.Tensor) -> Attribution:
    """An Attribution holding the contributions c: (L, n, n) of every layer."""
    L, n, _ = c.shape
    zeros = torch.zeros(n, dtype=torch.long)
    return Attribution(c, c, tuple(range(1, L + 1)), L, "exact", None, zeros, zeros)


def self_contribution_by_class(contributions, classes):
    return self_contribution_table([_attribution(c) for c in contributions], classes=classes)


def test_table_takes_the_diagonal_and_its_class():
    c = _contributions(4, 2, 0)
    classes = ["special", "content", "function", "special"]
    table = self_contribution_by_class([c], [classes])
    assert len(table) == 8
    row = table[(table.layer == 2) & (table.position == 1)].iloc[0]
    assert row.word_class == "content"
    assert row.self_contribution == pytest.approx(float(c[1, 1, 1]))


def test_summary_and_first_layer_where_content_leads():
    # content keeps 0.5, 0.2, 0.6, 0.7 of itself; function 0.3 in every layer
    L, n = 4, 3
    c = torch.full((L, n, n), 0.0)
    content = [0.5, 0.2, 0.6, 0.7]
    for k in range(L):
        for i, own in enumerate([content[k], 0.3, 0.3]):
            c[k, i] = (1 - own) / (n - 1)
            c[k, i, i] = own
    table = self_contribution_by_class([c, c], [["content", "function", "punctuation"]] * 2)
    summary = class_summary(table)
    assert list(summary.columns) == ["layer", "word_class", "median", "mean", "tokens"]
    assert (summary.tokens == 2).all()
    assert summary[(summary.layer == 3) & (summary.word_class == "content")]["median"].item() == pytest.approx(0.6)
    assert content_keeps_more_from(summary) == 3  # layer 2 breaks the run
    assert content_keeps_more_from(summary, other="punctuation") == 3
    flipped = summary.assign(median=lambda s: s["median"].where(s.word_class != "content", 0.0))
    assert content_keeps_more_from(flipped) is None


def test_table_errors():
    c = _contributions(3, 2, 1)
    with pytest.raises(ValueError, match="class labels"):
        self_contribution_by_class([c], [["content"]])
    with pytest.raises(ValueError, match="Unknown word classes"):
        self_contribution_by_class([c], [["noun"] * 3])
    with pytest.raises(ValueError, match="2 class lists"):
        self_contribution_by_class([c], [["content"] * 3] * 2)
    with pytest.raises(ValueError, match="columns"):
        class_summary(pd.DataFrame({"layer": [1]}))
    summary = class_summary(self_contribution_by_class([c], [["content"] * 3]))
    with pytest.raises(ValueError, match="no 'function'"):
        content_keeps_more_from(summary)
    with pytest.raises(ValueError, match="other"):
        content_keeps_more_from(summary, other="content")


def test_on_a_tiny_model(tiny_model, tokenizer, one_thread):
    encoding = helpers.encode(tokenizer, "The cat sat on the mat, and it purred.")
    attribution = helpers.hidden_token_attribution(tiny_model, encoding, progress=False)
    classes = word_classes_of(tokenizer, attribution.input_ids)
    table = self_contribution_table([attribution], classes=[classes])
    summary = class_summary(table)
    assert set(summary.word_class) <= set(WORD_CLASSES)
    assert summary.groupby("layer")["tokens"].sum().eq(attribution.n).all()
    ax = helpers.plots.plot_self_contribution_by_class(summary, paper_from_layer=1.5)
    assert len(ax.lines) == summary.word_class.nunique() + 1
    matplotlib.pyplot.close("all")
