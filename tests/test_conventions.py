"""Every table-producing public function follows the book's numbering convention.

``layer`` counts 1..L, ``head`` 1..h, ``hidden_state`` 0..L (0 = embedding
output), and every value in range is used: run on a tiny model whose L and h
differ, so a 0-based table or swapped columns fail.
"""

from __future__ import annotations

import pandas as pd
import pytest

import helpers

from .conftest import LONG_TEXT, make_tiny_bert

LAYERS, HEADS = 3, 2

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def model():
    return make_tiny_bert(num_layers=LAYERS, heads=HEADS, hidden=16)


@pytest.fixture(scope="module")
def pairs():
    return helpers.load_corpus("pairs")[:8]


def check_numbering(table: pd.DataFrame, what: str, per_head: bool = True) -> None:
    """The convention, on one table: the columns present hold exactly the numbers a reader expects."""
    assert "d_s" not in table.columns, f"{what}: the sequence length is called n"
    present = [c for c in ("layer", "head", "hidden_state") if c in table.columns]
    assert present, f"{what} has no layer, head or hidden_state column"
    if "layer" in table.columns:
        assert sorted(table["layer"].unique()) == list(range(1, LAYERS + 1)), f"{what}: layers are 1..L"
    if "head" in table.columns:
        assert per_head and sorted(table["head"].unique()) == list(range(1, HEADS + 1)), f"{what}: heads are 1..h"
    if "hidden_state" in table.columns:
        assert sorted(table["hidden_state"].unique()) == list(range(0, LAYERS + 1)), f"{what}: hidden states are 0..L"


def test_check_numbering_rejects_a_zero_based_table():
    with pytest.raises(AssertionError, match="layers are 1..L"):
        check_numbering(pd.DataFrame({"layer": range(LAYERS)}), "zero-based")
    with pytest.raises(AssertionError, match="heads are 1..h"):
        check_numbering(pd.DataFrame({"layer": range(1, LAYERS + 1), "head": [0, 1, 1]}), "zero-based heads")
    with pytest.raises(AssertionError, match="called n"):
        check_numbering(pd.DataFrame({"layer": range(1, LAYERS + 1), "d_s": 5}), "old name")


def test_null_space_tables(model, tokenizer):
    encoding = helpers.encode(tokenizer, LONG_TEXT, model=model)
    check_numbering(helpers.rank_sweep(model, [encoding], [4, 12], matrices=("V", "T1"), progress=False), "rank_sweep")
    internals = helpers.capture(model, helpers.model.text.prefix_encoding(encoding, 20))
    check_numbering(
        helpers.methods.nullspace.compare_null_spaces(internals, simplex=True, progress=False), "compare_null_spaces"
    )
    contributions = helpers.drivers.ranks.head_contributions(model, [encoding], progress=False)
    check_numbering(contributions, "head_contributions")


def test_effective_attention_tables(model, tokenizer, pairs):
    table = helpers.effective_attention_sweep(model, tokenizer, pairs[:3], progress=False)
    check_numbering(table, "effective_attention_sweep")
    check_numbering(helpers.methods.tokens.summarise_token_classes(table), "summarise_token_classes", per_head=False)


def test_attribution_tables(model, tokenizer, pairs):
    results = helpers.attribute_examples(model, tokenizer, pairs[:2], samples=4, progress=False)
    table = helpers.drivers.attribution.self_contribution_table(results)
    check_numbering(table, "self_contribution_table")
    check_numbering(
        helpers.drivers.attribution.share_own_input_not_largest(table).reset_index(), "share_own_input_not_largest"
    )
    check_numbering(helpers.drivers.attribution.distance_table(results), "distance_table")
    segments, around = helpers.drivers.attribution.cls_table(results)
    check_numbering(segments, "cls_table segments")
    check_numbering(around, "cls_table around")


def test_probe_tables(model, tokenizer, pairs):
    tokens = helpers.collect_hidden_tokens(model, tokenizer, pairs, progress=False)
    train, test = helpers.methods.probes.split_by_sequence(tokens, 0.5, seed=0)
    layer_probes = helpers.probe_layers(train, test, combinations=[("naive", "cosine")], progress=False)
    check_numbering(layer_probes.table, "probe_layers")
    check_numbering(
        helpers.drivers.identifiability.neighbour_rates(train, test, offsets=(-1, 0, 1), progress=False),
        "neighbour_rates",
    )


def test_finetuning_tables(model, tokenizer, pairs):
    finetuning, sinks = helpers.drivers.finetuning, helpers.drivers.sinks
    table = sinks.sink_attention_by_example(model, tokenizer, pairs[:3])
    check_numbering(table, "sink_attention_by_example", per_head=False)
    check_numbering(sinks.sink_removed_by_layer(table), "sink_removed_by_layer", per_head=False)
    check_numbering(
        finetuning.naive_identifiability_by_example(model, tokenizer, pairs[:3]), "naive_identifiability_by_example"
    )
