"""Corpus drivers: tables with one row per layer or hidden state."""
from __future__ import annotations

import pytest
import torch

import helpers
from helpers.data import Example


def _examples():
    return [Example("a", "The river carried sand to the plain.", "Sand came down the river.", 1, "test"),
            Example("b", "A storm closed the harbour for two days.", "The port shut in the storm.", 1, "test")]


def test_sink_attention_table(tiny_model, tokenizer, one_thread):
    table = helpers.sink_attention_table(tiny_model, tokenizer, _examples())
    L = tiny_model.config.num_hidden_layers
    assert list(table.layer) == list(range(1, L + 1))
    assert ((table.raw > 0) & (table.raw <= 1)).all()
    assert 0 < table.sink_share.iloc[0] <= 1
    # by hand for one example: the sink receives the most raw attention
    example = _examples()[0]
    internals = helpers.capture(tiny_model, helpers.encode(tokenizer, example.text_a, example.text_b))
    sink = int(internals.A.sum(dim=(0, 1, 2)).argmax())
    one = helpers.sink_attention_table(tiny_model, tokenizer, [example])
    assert one.raw.iloc[0] == pytest.approx(float(internals.A[0, :, :, sink].mean()), rel=1e-5)
    with pytest.raises(ValueError, match="empty"):
        helpers.sink_attention_table(tiny_model, tokenizer, [])


def test_naive_identifiability_table(tiny_model, tokenizer, one_thread):
    table = helpers.naive_identifiability_table(tiny_model, tokenizer, _examples())
    assert list(table.hidden_state) == list(range(tiny_model.config.num_hidden_layers + 1))
    assert ((table.rate >= 0) & (table.rate <= 1)).all()
