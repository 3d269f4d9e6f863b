"""Drivers over a corpus (helpers.drivers): rank_sweep, effective_attention_sweep, attribute_examples."""

import numpy as np
import pytest

import helpers
from helpers.drivers.effective import effective_attention_sweep
from helpers.methods.tokens import summarise_token_classes

from .conftest import LONG_TEXT, SENTENCE

D_V = 8  # head size of the tiny model

pytestmark = pytest.mark.usefixtures("one_thread")


def test_sweep_on_the_real_model(real_model):
    model, tokenizer = real_model
    examples = [
        helpers.model.corpus.Example("short", SENTENCE, None, None, "test"),
        helpers.model.corpus.Example("long", LONG_TEXT, SENTENCE, None, "test"),
    ]
    table = effective_attention_sweep(model, tokenizer, examples, progress=False)
    L, h = model.config.num_hidden_layers, model.config.num_attention_heads
    assert len(table) == 2 * L * h
    assert set(table.layer) == set(range(1, L + 1))
    short, long = table[table.example == "short"], table[table.example == "long"]
    assert (short.null_dim == 0).all() and np.allclose(short.correlation, 1.0, rtol=0, atol=1e-12)
    assert (long.null_dim == long.n - 32).all() and (long.correlation < 1).all()
    classes = ["[CLS]", "[SEP]", "punctuation", "other"]
    assert np.allclose(table[[f"raw_{c}" for c in classes]].sum(axis=1), 1.0)
    summary = summarise_token_classes(table)
    assert len(summary) == 3 * L
    assert np.allclose(summary.removed, 1 - summary.effective / summary.raw)
    with pytest.raises(ValueError, match="No columns"):
        summarise_token_classes(table, classes=("[MASK]",))
    with pytest.raises(ValueError, match="No examples"):
        effective_attention_sweep(model, tokenizer, [], progress=False)


def test_rank_sweep_on_tiny_model_follows_min_of_length_and_d_v(tiny_model, tokenizer):
    encodings = [
        helpers.encode(tokenizer, LONG_TEXT, model=tiny_model),
        helpers.encode(tokenizer, SENTENCE, model=tiny_model),
    ]
    lengths = [4, 8, 9, 12, 16, 40]
    frame = helpers.rank_sweep(tiny_model, encodings, lengths, matrices=("V", "T", "V1"), progress=False)
    short = encodings[1]["input_ids"].shape[1]
    jobs = len(lengths) + len([x for x in lengths if x <= short])
    assert len(frame) == 2 * 4 * jobs  # layers * heads * (text, length) pairs
    assert (frame["rank_V"] == np.minimum(frame["n"], D_V)).all()
    assert (frame["rank_T"] == frame["rank_V"]).all()
    assert (frame["rank_V1"] == np.minimum(frame["n"], D_V + 1)).all()
    assert (frame["null_dim_T"] == frame["n"] - frame["rank_T"]).all()
    assert (frame["null_dim_T"] >= frame["n"] - D_V).all()


def test_rank_sweep_per_text_covers_every_length_at_a_fraction_of_the_cost(tiny_model, tokenizer):
    encodings = [helpers.model.text.prefix_encoding(helpers.encode(tokenizer, LONG_TEXT), 40 + k) for k in range(6)]
    lengths = [4, 6, 8, 10, 12, 16, 20, 24, 32]
    frame = helpers.rank_sweep(tiny_model, encodings, lengths, per_text=3, progress=False)
    jobs = frame[["example", "n"]].drop_duplicates()
    assert (jobs.groupby("example").size() == 3).all()
    assert set(jobs["n"]) == set(lengths)
    with pytest.raises(ValueError, match="per_text"):
        helpers.rank_sweep(tiny_model, encodings, lengths, per_text=0, progress=False)


def test_rank_sweep_bad_input(tiny_model, tokenizer):
    encoding = helpers.encode(tokenizer, SENTENCE)
    with pytest.raises(ValueError, match="empty"):
        helpers.rank_sweep(tiny_model, [], [8], progress=False)
    with pytest.raises(ValueError, match="matrices"):
        helpers.rank_sweep(tiny_model, [encoding], [8], matrices=("W",), progress=False)
    with pytest.raises(ValueError, match="matrices"):
        helpers.rank_sweep(tiny_model, [encoding], [8], matrices="V", progress=False)
    with pytest.raises(ValueError, match="long"):
        helpers.rank_sweep(tiny_model, [encoding], [500], progress=False)
    with pytest.raises(ValueError, match="must be between 2"):
        helpers.rank_sweep(tiny_model, [encoding], [1, 8], progress=False)


# ---- chapter 3: valid alternatives, their ranges and the keys, on several texts
def _chapter3_encodings(model, tokenizer):
    text = helpers.encode(tokenizer, LONG_TEXT, model=model)
    return [helpers.model.text.prefix_encoding(text, 24), helpers.model.text.prefix_encoding(text, 30)]


def test_layer_alternatives_bound_every_head_beside_random_values(tiny_model, tokenizer):
    from helpers.drivers.ranks import layer_alternatives

    encodings = _chapter3_encodings(tiny_model, tokenizer)
    h = tiny_model.config.num_attention_heads
    table = layer_alternatives(tiny_model, encodings, 20, layer=1, rows=[3, 12], progress=False)
    assert len(table) == 2 * h * 2 * 20 and set(table["example"]) == {0, 1}
    assert set(table["head"]) == set(range(1, h + 1)) and sorted(set(table["query"])) == [3, 12]
    for low, high in (("lower", "upper"), ("random_lower", "random_upper")):
        assert (table[low] <= table["weight"] + 1e-9).all() and (table["weight"] <= table[high] + 1e-9).all()
        assert (table[low] >= -1e-9).all() and (table[high] <= 1 + 1e-9).all()
    # the vertex lies inside every range, zeroes at least n - rank([T, 1]) weights, and the step toward it is 1
    assert ((table["vertex"] >= table["lower"] - 1e-9) & (table["vertex"] <= table["upper"] + 1e-9)).all()
    rows = table.groupby(["example", "head", "query"])
    zeros = rows["vertex"].apply(lambda p: (p <= 1e-9).mean())
    first = rows.first()
    assert (zeros >= (first["n"] - first["rank"]) / first["n"] - 1e-12).all()
    assert np.allclose(first["vertex_step"], 1.0, atol=1e-9)
    assert (first["random_change"] < first["vertex_tv"]).all()
    assert ((first["other_heads_tv"] >= 0) & (first["other_heads_tv"] <= 1 + 1e-9)).all()
    # the random values change the ranges, not their dimension
    assert not np.allclose(table["upper"], table["random_upper"])
    with pytest.raises(ValueError, match="No encoding"):
        layer_alternatives(tiny_model, encodings, 500, layer=1, rows=[0], progress=False)
    with pytest.raises(ValueError, match="rows"):
        layer_alternatives(tiny_model, encodings, 20, layer=1, rows=[20], progress=False)


def test_producible_reach_keeps_the_output(tiny_model, tokenizer):
    from helpers.drivers.ranks import producible_reach

    encodings = _chapter3_encodings(tiny_model, tokenizer)
    table = producible_reach(tiny_model, encodings, 12, layer=1, heads=[1, 2], steps=50, polish_steps=5, progress=False)
    assert len(table) == 4 and set(table["head"]) == {1, 2}
    assert (table["output_error"] < 1e-4).all()
    assert (table["rank_distance"] < 1e-6).all()
    assert (table["entropy"] > 0).all()
    with pytest.raises(ValueError, match="heads"):
        producible_reach(tiny_model, encodings, 12, layer=1, heads=[], progress=False)


# ---- chapter 8: sink attention and naive identifiability tables
from helpers.model.corpus import Example  # noqa: E402


def _pair_examples():
    return [
        Example("a", "The river carried sand to the plain.", "Sand came down the river.", 1, "test"),
        Example("b", "A storm closed the harbour for two days.", "The port shut in the storm.", 1, "test"),
    ]


def test_sink_attention_table(tiny_model, tokenizer, one_thread):
    table = helpers.drivers.sinks.sink_attention_table(tiny_model, tokenizer, _pair_examples())
    L = tiny_model.config.num_hidden_layers
    assert list(table.layer) == list(range(1, L + 1))
    assert ((table.raw > 0) & (table.raw <= 1)).all()
    assert 0 < table.sink_share.iloc[0] <= 1
    # by hand for one example: the sink receives the most raw attention
    example = _pair_examples()[0]
    internals = helpers.capture(tiny_model, helpers.encode(tokenizer, example.text_a, example.text_b))
    sink = int(internals.A.sum(dim=(0, 1, 2)).argmax())
    one = helpers.drivers.sinks.sink_attention_table(tiny_model, tokenizer, [example])
    assert one.raw.iloc[0] == pytest.approx(float(internals.A[0, :, :, sink].mean()), rel=1e-5)
    as_tuple = helpers.drivers.sinks.sink_attention_table(tiny_model, tokenizer, [(example.text_a, example.text_b)])
    assert as_tuple.raw.tolist() == one.raw.tolist()  # records may be Examples or (text, text_pair) tuples
    with pytest.raises(ValueError, match="No examples"):
        helpers.drivers.sinks.sink_attention_table(tiny_model, tokenizer, [])


def test_naive_identifiability_table(tiny_model, tokenizer, one_thread):
    table = helpers.drivers.identifiability.naive_identifiability_table(tiny_model, tokenizer, _pair_examples())
    assert list(table.hidden_state) == list(range(tiny_model.config.num_hidden_layers + 1))
    assert ((table.rate >= 0) & (table.rate <= 1)).all()


def test_rank_shortfall_counts_as_the_sweep_and_shows_the_cut(tiny_model, tokenizer, one_thread):
    examples = _pair_examples()
    table = helpers.effective_attention_sweep(tiny_model, tokenizer, examples, progress=False, random_control=False)
    cells = table.head(4)
    shortfall = helpers.drivers.effective.rank_shortfall(tiny_model, tokenizer, examples, cells)
    assert list(shortfall.columns) == ["example", "n", "layer", "head", "rank", "kept", "dropped"]
    assert shortfall["rank"].tolist() == cells["rank"].tolist()
    # a coarse tolerance cuts singular values the default keeps: the cut lies between kept and dropped
    coarse = helpers.drivers.effective.rank_shortfall(tiny_model, tokenizer, examples, cells, rtol=0.3)
    assert (coarse["rank"] < shortfall["rank"]).all()
    assert ((coarse.dropped <= 0.3) & (coarse.kept > 0.3)).all()
    with pytest.raises(ValueError, match="not in examples"):
        helpers.drivers.effective.rank_shortfall(tiny_model, tokenizer, examples, cells.assign(example="zz"))
    with pytest.raises(ValueError, match="cells needs the columns"):
        helpers.drivers.effective.rank_shortfall(tiny_model, tokenizer, examples, cells.drop(columns="head"))
