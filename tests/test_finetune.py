"""Fine-tuning on sentence pairs: seeded, the loss falls, held-out split, clear errors."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers.drivers import finetuning, sinks
from helpers.model.corpus import Example

from .conftest import make_tiny_bert

WORDS = ["river", "stone", "cloud", "bread", "train", "violin", "garden", "lamp"]


def _pairs(count: int = 24) -> list[Example]:
    """Label 1 when the first sentence says "yes", 0 when it says "no": learnable from [CLS]."""
    out = []
    for k in range(count):
        a, b = WORDS[k % len(WORDS)], WORDS[(k + 3) % len(WORDS)]
        label = k % 2
        out.append(Example(f"p{k}", f"{'yes' if label else 'no'} the {a} is here", f"a {b} is there", label, "test"))
    return out


def test_split_is_by_pair_seeded_and_disjoint():
    pairs = _pairs(20)
    train, test = finetuning.split_pairs(pairs, test_fraction=0.25, seed=3)
    assert len(test) == 5 and len(train) == 15
    assert not {e.id for e in train} & {e.id for e in test}
    assert {e.id for e in train} | {e.id for e in test} == {e.id for e in pairs}
    assert finetuning.split_pairs(pairs, 0.25, seed=3) == (train, test)
    assert finetuning.split_pairs(pairs, 0.25, seed=4) != (train, test)


def test_training_lowers_the_loss_and_is_bit_identical(tokenizer, one_thread):
    model = make_tiny_bert(num_layers=1, heads=2, hidden=16)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    pairs = _pairs(24)
    runs = [
        finetuning.fine_tune(model, tokenizer, pairs, epochs=8, batch_size=8, learning_rate=3e-2, seed=0)
        for _ in range(2)
    ]
    history = runs[0].history
    assert list(history.columns) == ["epoch", "step", "loss"] and len(history) == 8 * 3
    first, last = history.loss.iloc[:3].mean(), history.loss.iloc[-3:].mean()
    assert last < 0.6 * first
    for (name, a), b in zip(
        runs[0].classifier.state_dict().items(), runs[1].classifier.state_dict().values(), strict=False
    ):
        assert torch.equal(a, b), name
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the caller's model is untouched
    tuned = runs[0].model
    assert not tuned.training and tuned.config._attn_implementation == "eager"
    helpers.capture(tuned, helpers.encode(tokenizer, "the river is here", "a river is there"))  # other helpers take it
    other = finetuning.fine_tune(model, tokenizer, pairs, epochs=1, batch_size=8, seed=1)
    assert not torch.equal(other.classifier.head.weight, runs[0].classifier.head.weight)


def test_accuracy_and_majority_baseline(tokenizer, one_thread):
    pairs = _pairs(24)
    train, test = finetuning.split_pairs(pairs, 0.25, seed=0)
    majority = int(sum(e.label for e in train) * 2 > len(train))
    assert finetuning.majority_baseline(train, test) == pytest.approx(
        sum(e.label == majority for e in test) / len(test)
    )
    tuned = finetuning.fine_tune(
        make_tiny_bert(num_layers=1, heads=2, hidden=16), tokenizer, train, epochs=1, batch_size=8
    )
    predicted = finetuning.predict(tuned.classifier, tokenizer, test, batch_size=4)
    assert predicted.shape == (len(test),) and set(predicted.tolist()) <= {0, 1}
    expected = float((predicted == torch.tensor([e.label for e in test])).double().mean())
    assert finetuning.accuracy(tuned.classifier, tokenizer, test) == pytest.approx(expected)


def test_bad_inputs(tokenizer):
    model = make_tiny_bert(num_layers=1, heads=2, hidden=16, max_positions=16)
    pairs = _pairs(6)
    with pytest.raises(ValueError, match="empty"):
        finetuning.fine_tune(model, tokenizer, [])
    with pytest.raises(TypeError, match="Example"):
        finetuning.fine_tune(model, tokenizer, ["a sentence"])
    with pytest.raises(ValueError, match="sentence pair"):
        finetuning.fine_tune(model, tokenizer, [Example("x", "one", None, 1, "test")])
    with pytest.raises(TypeError, match="label of example x must be an integer"):
        finetuning.fine_tune(model, tokenizer, [Example("x", "one", "two", None, "test")])
    with pytest.raises(ValueError, match="two"):
        finetuning.fine_tune(model, tokenizer, [e for e in pairs if e.label == 1])
    with pytest.raises(ValueError, match="epochs"):
        finetuning.fine_tune(model, tokenizer, pairs, epochs=0)
    with pytest.raises(ValueError, match="learning_rate"):
        finetuning.fine_tune(model, tokenizer, pairs, learning_rate=0.0)
    long = Example("long", " ".join(["river"] * 20), "stone", 0, "test")
    with pytest.raises(ValueError, match="at most 16"):
        finetuning.fine_tune(model, tokenizer, pairs + [long])
    with pytest.raises(ValueError, match="test_fraction"):
        finetuning.split_pairs(pairs, test_fraction=1.0)
    tuned = finetuning.fine_tune(model, tokenizer, pairs, epochs=1, batch_size=8)
    tuned.classifier.train()
    with pytest.raises(ValueError, match="training mode"):
        finetuning.predict(tuned.classifier, tokenizer, pairs)


def test_length_bucketed_batches_cover_every_pair_once_and_pad_less():
    lengths = torch.randint(10, 120, (250,), generator=torch.Generator().manual_seed(3)).tolist()
    batches = finetuning._length_bucketed_batches(lengths, 16, torch.Generator().manual_seed(0))
    assert sorted(i for batch in batches for i in batch) == list(range(250))
    assert all(1 <= len(batch) <= 16 for batch in batches)
    again = finetuning._length_bucketed_batches(lengths, 16, torch.Generator().manual_seed(0))
    other = finetuning._length_bucketed_batches(lengths, 16, torch.Generator().manual_seed(1))
    assert batches == again and batches != other

    def padded(batches):  # tokens a padded batch holds
        return sum(len(batch) * max(lengths[i] for i in batch) for batch in batches)

    order = torch.randperm(250, generator=torch.Generator().manual_seed(0)).tolist()
    unsorted = [order[s : s + 16] for s in range(0, 250, 16)]
    assert padded(batches) < 0.8 * padded(unsorted)


def test_sink_attention_by_example_matches_the_table_and_its_random_control(tokenizer, one_thread):
    model = make_tiny_bert(num_layers=2, heads=2, hidden=16)  # d_v = 8
    pairs = _pairs(4) + [Example("short", "yes", "no", 1, "test")]  # the last has n = 5 <= d_v
    table = sinks.sink_attention_by_example(model, tokenizer, pairs)
    assert list(table.columns) == ["example", "n", "layer", "raw", "effective", "random_effective", "rank", "sink"]
    assert len(table) == len(pairs) * 2 and set(table.layer) == {1, 2}
    pooled = sinks.sink_attention_table(model, tokenizer, pairs)
    means = table.groupby("layer")[["raw", "effective"]].mean()
    assert means.raw.to_numpy() == pytest.approx(pooled.raw.to_numpy(), rel=1e-6)
    assert means.effective.to_numpy() == pytest.approx(pooled.effective.to_numpy(), rel=1e-5)
    assert (table["rank"] <= 8).all()
    short = table[table.n <= table["rank"]]  # no null space: effective = raw, and so is the random expectation
    assert len(short) == 2
    assert short.effective.to_numpy() == pytest.approx(short.raw.to_numpy(), rel=1e-5)
    assert short.random_effective.to_numpy() == pytest.approx(short.raw.to_numpy(), rel=1e-9)
    long = table[table.n > table["rank"]]  # every head of rank 8: the random expectation keeps 8 / n
    assert long.random_effective.to_numpy() == pytest.approx((long.raw * 8 / long.n).to_numpy(), rel=1e-9)

    shares = sinks.sink_removed_share(table)
    assert list(shares.columns) == ["example", "n", "removed", "random"]
    assert 4 not in set(shares.example)  # the text without a null space never enters
    first = table[table.example == 0]
    assert shares.removed.iloc[0] == pytest.approx(1 - first.effective.sum() / first.raw.sum())
    assert shares.random.iloc[0] == pytest.approx(1 - 8 / first.n.iloc[0])
    per_layer = sinks.sink_removed_share(table, by_layer=True)
    assert len(per_layer) == 4 * 2
    layers = sinks.sink_removed_by_layer(table)
    assert list(layers.layer) == [1, 2]
    assert (layers.removed_low <= layers.removed).all() and (layers.removed <= layers.removed_high).all()
    assert layers.random.to_numpy() == pytest.approx(per_layer.groupby("layer").random.mean().to_numpy())
    with pytest.raises(ValueError, match="sink_attention_by_example"):
        sinks.sink_removed_share(table.drop(columns="rank"))


def test_a_sink_class_takes_every_token_of_the_class_and_the_heaviest_follows_chapter_4(tokenizer, one_thread):
    model = make_tiny_bert(num_layers=2, heads=2, hidden=16)
    pairs = _pairs(4) + [Example("plain", "yes", "no", 1, "test")]  # the last has no punctuation
    by_class = sinks.sink_attention_by_example(model, tokenizer, pairs, sink_class="punctuation")
    assert set(by_class.sink) == {"punctuation"}
    for index, example in enumerate(pairs):
        internals = helpers.capture(model, helpers.encode(tokenizer, example.text_a, example.text_b, model=model))
        masks = helpers.methods.tokens.token_classes(tokenizer.convert_ids_to_tokens(internals.input_ids.tolist()))
        expected = helpers.methods.tokens.attention_to(internals.A, masks["punctuation"]).mean(-1)
        got = by_class[by_class.example == index].raw.to_numpy()
        assert got == pytest.approx(expected.numpy(), abs=1e-7)
    assert (by_class[by_class.example == 4].raw == 0).all()
    assert 4 not in set(sinks.sink_removed_share(by_class).example)  # no punctuation: left out
    # chapter 4's rule: the class with the most raw attention, over examples, heads and queries, then layers
    means = {
        c: sinks.sink_attention_by_example(model, tokenizer, pairs, sink_class=c, progress=False).raw.mean()
        for c in helpers.methods.tokens.SINK_CLASSES
    }
    assert sinks.heaviest_class(model, tokenizer, pairs, progress=False) == max(means, key=means.get)
    with pytest.raises(ValueError, match="sink_class must be one of"):
        sinks.sink_attention_by_example(model, tokenizer, pairs, sink_class="[MASK]")
    with pytest.raises(ValueError, match="classes must be a non-empty subset"):
        sinks.heaviest_class(model, tokenizer, pairs, classes=("other",))


def test_naive_identifiability_by_example_pools_to_the_table(tokenizer, one_thread):
    model = make_tiny_bert(num_layers=2, heads=2, hidden=16)
    pairs = _pairs(5)
    by_example = finetuning.naive_identifiability_by_example(model, tokenizer, pairs)
    assert list(by_example.columns) == ["example", "hidden_state", "rate"]
    assert len(by_example) == 5 * 3 and by_example.rate.between(0, 1).all()
    tokens = [len(tokenizer(e.text_a, e.text_b)["input_ids"]) for e in pairs]
    pooled = helpers.drivers.identifiability.naive_identifiability_table(model, tokenizer, pairs)
    for state, part in by_example.groupby("hidden_state"):
        weighted = float((part.rate.to_numpy() * tokens).sum() / sum(tokens))
        assert weighted == pytest.approx(pooled.rate[state])


def test_validation_keeps_the_best_epoch_and_warmup_starts_low(tokenizer, one_thread):
    model = make_tiny_bert(num_layers=1, heads=2, hidden=16)
    pairs = _pairs(32)
    fit, validation = finetuning.split_pairs(pairs, 0.25, seed=0)
    result = finetuning.fine_tune(
        model, tokenizer, fit, epochs=6, batch_size=8, learning_rate=3e-2, seed=0, validation=validation, warmup=0.2
    )
    table = result.validation
    assert list(table.columns) == ["epoch", "accuracy", "loss"] and list(table.epoch) == list(range(1, 7))
    best = table.sort_values(["accuracy", "loss"], ascending=[False, True]).epoch.iloc[0]
    assert result.best_epoch == best
    kept = table.set_index("epoch").loc[best]
    assert finetuning.accuracy(result.classifier, tokenizer, validation) == pytest.approx(kept.accuracy)
    # the same run without validation ends on the last epoch's weights: they differ unless the last is kept
    plain = finetuning.fine_tune(model, tokenizer, fit, epochs=6, batch_size=8, learning_rate=3e-2, seed=0, warmup=0.2)
    assert plain.best_epoch == 6 and plain.validation is None
    assert torch.equal(plain.classifier.head.weight, result.classifier.head.weight) == (best == 6)
    with pytest.raises(ValueError, match="warmup"):
        finetuning.fine_tune(model, tokenizer, fit, warmup=1.0)


def test_shuffled_labels_keep_the_pairs_and_the_label_counts():
    pairs = _pairs(20)
    shuffled = finetuning.shuffled_labels(pairs, seed=0)
    assert [(e.id, e.text_a, e.text_b) for e in shuffled] == [(e.id, e.text_a, e.text_b) for e in pairs]
    assert sorted(e.label for e in shuffled) == sorted(e.label for e in pairs)
    assert [e.label for e in shuffled] != [e.label for e in pairs]
    assert finetuning.shuffled_labels(pairs, seed=0) == shuffled
