import pytest
import torch

import helpers
from helpers.drivers.identifiability import collect_hidden_tokens
from helpers.methods.hidden_tokens import HiddenTokens
from helpers.methods.intervals import per_sequence_slopes

from .conftest import LONG_TEXT, SENTENCE, make_tiny_bert

TEXTS = [
    "A short one.",
    ("The cat sat on the mat.", "A cat was sitting on a mat, quietly."),
    SENTENCE,
    ("Prices rose.", "The cost of living went up sharply over the year."),
    "Rivers carry sand from the mountains to the plains.",
]


def reference(model, tokenizer, item):
    """States of one unpadded forward pass (helpers.capture)."""
    a, b = (item, None) if isinstance(item, str) else item
    return helpers.capture(model, helpers.encode(tokenizer, a, b, model=model))


@pytest.mark.parametrize("batch_size", [1, 2, 32])
def test_padded_batches_equal_unpadded_passes(tiny_model, tokenizer, batch_size):
    tokens = collect_hidden_tokens(tiny_model, tokenizer, TEXTS, batch_size=batch_size, progress=False)
    assert tokens.num_layers == tiny_model.config.num_hidden_layers
    assert torch.equal(tokens.sequence_ids, torch.arange(len(TEXTS)))
    for s, item in enumerate(TEXTS):
        internals = reference(tiny_model, tokenizer, item)
        rows = tokens.sequence == s
        assert int(rows.sum()) == internals.n  # padding dropped, nothing else
        assert torch.equal(tokens.position[rows], torch.arange(internals.n))
        assert torch.equal(tokens.input_ids[rows], internals.input_ids)
        assert torch.allclose(tokens.x[rows], internals.x, atol=1e-5)
        assert torch.allclose(tokens.hidden[:, rows], internals.hidden_states, atol=1e-5)


def test_real_model_padding_changes_nothing(real_model):
    model, tokenizer = real_model
    pairs = [(e.text_a, e.text_b) for e in helpers.load_corpus("pairs")[:3]] + ["Short.", LONG_TEXT]
    tokens = collect_hidden_tokens(model, tokenizer, pairs, batch_size=8, progress=False)
    for s, item in enumerate(pairs):
        internals = reference(model, tokenizer, item)
        rows = tokens.sequence == s
        assert torch.allclose(tokens.hidden[:, rows], internals.hidden_states, atol=1e-4)
        assert torch.allclose(tokens.x[rows], internals.x, atol=1e-6)


def test_examples_are_taken_as_pairs(tiny_model, tokenizer):
    example = helpers.model.corpus.Example("x", TEXTS[1][0], TEXTS[1][1], 1, "test")
    from_example = collect_hidden_tokens(tiny_model, tokenizer, [example], progress=False)
    from_tuple = collect_hidden_tokens(tiny_model, tokenizer, [TEXTS[1]], progress=False)
    assert torch.equal(from_example.input_ids, from_tuple.input_ids)
    assert torch.allclose(from_example.hidden, from_tuple.hidden)


def test_select_keeps_whole_sentences(tiny_model, tokenizer):
    tokens = collect_hidden_tokens(tiny_model, tokenizer, TEXTS, progress=False)
    part = tokens.select([3, 1])
    assert torch.equal(part.sequence_ids, torch.tensor([1, 3]))
    assert torch.equal(part.lengths, tokens.lengths[[1, 3]])
    assert torch.equal(part.hidden, tokens.hidden[:, (tokens.sequence == 1) | (tokens.sequence == 3)])
    with pytest.raises(ValueError, match="Unknown sequence ids"):
        tokens.select([99])
    with pytest.raises(ValueError, match="No sequence ids"):
        tokens.select([])


@pytest.mark.parametrize(
    "texts, error, match",
    [
        ([], ValueError, "No texts"),
        (["fine", "   "], ValueError, "empty text"),
        ([("fine", "")], ValueError, "empty text"),
        ([3], TypeError, "Item 0"),
        ("a single string", TypeError, "list of texts"),
        ([LONG_TEXT * 3], ValueError, "at most 128"),
    ],
)
def test_bad_texts(tiny_model, tokenizer, texts, error, match):
    with pytest.raises(error, match=match):
        collect_hidden_tokens(tiny_model, tokenizer, texts, progress=False)


def test_bad_batch_size_and_training_mode(tokenizer):
    model = make_tiny_bert()
    with pytest.raises(ValueError, match="batch_size"):
        collect_hidden_tokens(model, tokenizer, TEXTS, batch_size=0, progress=False)
    with pytest.raises(ValueError, match="training mode"):
        collect_hidden_tokens(model.train(), tokenizer, TEXTS, progress=False)


def test_left_padding_is_rejected(tiny_model, tokenizer):
    tokenizer.padding_side = "left"
    try:
        with pytest.raises(ValueError, match="pads on the left"):
            collect_hidden_tokens(tiny_model, tokenizer, TEXTS, progress=False)
    finally:
        tokenizer.padding_side = "right"


def test_mismatched_fields_are_rejected():
    with pytest.raises(ValueError, match="sequence must have shape"):
        HiddenTokens(
            torch.zeros(2, 5, 4),
            torch.zeros(5, 4),
            torch.zeros(4, dtype=torch.long),
            torch.zeros(5, dtype=torch.long),
            torch.zeros(5, dtype=torch.long),
        )
    with pytest.raises(ValueError, match="hidden has 6 tokens"):
        HiddenTokens(
            torch.zeros(2, 6, 4),
            torch.zeros(5, 4),
            torch.zeros(5, dtype=torch.long),
            torch.zeros(5, dtype=torch.long),
            torch.zeros(5, dtype=torch.long),
        )


def test_input_parts_read_by_field_and_by_name():
    word, position = torch.randn(5, 3), torch.randn(5, 3)
    parts = helpers.methods.hidden_tokens.InputParts(word=word, position=position)
    assert parts["word"] is parts.word is word and parts["position"] is position
    with pytest.raises(KeyError, match="the parts are"):
        parts["segment"]


def test_per_sequence_slopes_are_least_squares_slopes():
    # sequence 0: rates 1, 0.5, 0 over states 2, 3, 4 (slope -0.5); sequence 1: 0, 0, 1 (slope 0.5)
    identified = [[1, 1, 0], [1, 0, 0], [0, 0, 1], [0, 0, 1]]
    groups = [0, 0, 1, 1]
    slopes = per_sequence_slopes(identified, groups, [2, 3, 4])
    assert slopes == pytest.approx([-0.5, 0.5])
    with pytest.raises(ValueError, match="one column per state"):
        per_sequence_slopes(identified, groups, [2, 3])
    with pytest.raises(ValueError, match="groups"):
        per_sequence_slopes(identified, [0, 1], [2, 3, 4])
