"""Padded batches (helpers.model.batches): capture, HTA and context mixing take a padded batch and give one
result per sequence, each equal to that sequence run alone; context_mixing takes several measures at once."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers.model.batches import is_batch, sequences_of

TEXTS = ["The cat sat on the mat.", "It was warm by the door, and the dog slept there all night long.", "Rain."]


@pytest.fixture(scope="module")
def bundled():
    return helpers.load_model()


@pytest.fixture(scope="module")
def batch(bundled):
    return bundled.tokenizer(TEXTS, padding=True, return_tensors="pt")


@pytest.fixture(scope="module")
def alone(bundled):
    return [helpers.encode(bundled.tokenizer, text, model=bundled.model) for text in TEXTS]


def test_a_batch_is_cut_into_its_unpadded_sequences(batch, alone):
    assert is_batch(batch) and not is_batch(alone[0])
    for one, reference in zip(sequences_of(batch), alone, strict=True):
        assert set(one) == set(reference)
        for key in reference:
            assert torch.equal(one[key], reference[key]), key
    left = dict(batch)
    left["attention_mask"] = batch["attention_mask"].flip(-1)
    left["input_ids"] = batch["input_ids"].flip(-1)  # padding on the left: the same sequences, reversed
    assert [s["input_ids"].shape for s in sequences_of(left)] == [s["input_ids"].shape for s in alone]
    holes = dict(batch)
    holes["attention_mask"] = batch["attention_mask"].clone()
    holes["attention_mask"][0, 2] = 0
    with pytest.raises(ValueError, match="not one run"):
        sequences_of(holes)


def test_capture_hta_and_mixing_of_a_batch_equal_each_sequence_alone(bundled, batch, alone):
    model = bundled.model
    captured = helpers.capture(model, batch)
    assert isinstance(captured, list) and len(captured) == len(TEXTS)
    for internals, one in zip(captured, alone, strict=True):
        torch.testing.assert_close(internals.A, helpers.capture(model, one).A)
    hta = helpers.hidden_token_attribution(model, batch, layer_numbers=[1], progress=False)
    for attribution, one in zip(hta, alone, strict=True):
        reference = helpers.hidden_token_attribution(model, one, layer_numbers=[1], progress=False)
        torch.testing.assert_close(attribution.contributions, reference.contributions)
    mixed = helpers.context_mixing(model, batch, "globenc", rollout=True)
    for result, one in zip(mixed, alone, strict=True):
        torch.testing.assert_close(result.scores, helpers.context_mixing(model, one, "globenc", rollout=True).scores)


def test_several_measures_from_one_capture_equal_each_alone(bundled, alone):
    model, one = bundled.model, alone[0]
    asked = ["attention", ("globenc", {"effective": True}), "alti", "grad_input", ("hta", {"progress": False})]
    results = helpers.context_mixing(model, one, asked)
    assert [r.name for r in results][:3] == ["attention", "globenc+eff", "alti"]
    singles = [
        helpers.context_mixing(model, one, "attention"),
        helpers.context_mixing(model, one, "globenc", effective=True),
        helpers.context_mixing(model, one, "alti"),
        helpers.context_mixing(model, one, "grad_input"),
        helpers.context_mixing(model, one, "hta", progress=False),
    ]
    for several, single in zip(results, singles, strict=True):
        torch.testing.assert_close(several.scores, single.scores)
    rolled = helpers.context_mixing(model, one, ["globenc", "hta"], rollout=True)
    torch.testing.assert_close(rolled[0].scores, helpers.context_mixing(model, one, "globenc", rollout=True).scores)
    with pytest.raises(ValueError, match="Unknown measure"):
        helpers.context_mixing(model, one, ["globenc", "nope"])
    with pytest.raises(ValueError, match="no aggregation"):
        helpers.context_mixing(model, one, ["globenc"], effective=True)


def test_an_empty_text_in_a_batch_is_refused_as_it_is_alone(bundled):
    batch = bundled.tokenizer(["", "Hello there."], padding=True, return_tensors="pt")
    with pytest.raises(ValueError, match="Sequence 0 of the batch holds only special tokens"):
        sequences_of(batch)
    with pytest.raises(ValueError, match="only special tokens"):
        helpers.capture(bundled.model, batch)
    alone = bundled.tokenizer("", return_tensors="pt")
    with pytest.raises(ValueError, match="only special tokens"):
        helpers.capture(bundled.model, alone)
