"""Premise checks: a paper claim that presumes a model property is registered with it, refused without it,
and counted apart when the property is absent; the property of the [CLS] claims is read from the checkpoint."""

import json
from types import SimpleNamespace

import pytest

from helpers.book.claims import Claims, Control
from helpers.book.registry import UnregisteredClaim, parse_registry
from helpers.methods.intervals import Estimate
from helpers.model.loading import sentence_pooling


def registry(**claims):
    base = {
        "kind": "paper", "source": "Someone 2020", "statistic": "the share of x", "quantity": "share of x",
        "control": "chance",
        "comparison": "fixed", "side": "above", "status": "confirmatory", "registered": "2026-12-05",
    }  # fmt: skip
    return parse_registry({"chapters": {"99_test": {k: {**base, **v} for k, v in claims.items()}}})


def test_a_registered_premise_must_be_checked_and_an_unregistered_one_is_refused():
    book = registry(presumes={"premise": "the separator is the sink"}, plain={})
    claims = Claims("99_test", registry=book)
    figure, chance = Estimate(0.8, 0.7, 0.9, 20), Control("chance", 0.5)
    with pytest.raises(UnregisteredClaim, match="a premise: registered True, given False"):
        claims.paper("presumes", "x", figure, chance)
    with pytest.raises(UnregisteredClaim, match="a premise: registered False, given True"):
        claims.paper("plain", "x", figure, chance, premise=(True, "the separator is the sink"))
    assert claims.paper("presumes", "x", figure, chance, premise=(True, "the separator is the sink")) == "reproduced"
    # absent: counted apart whatever the figure says, and the record keeps the figure and why
    below = Estimate(0.2, 0.1, 0.3, 20)
    claims = Claims("99_test", registry=book)
    assert claims.paper("presumes", "x", below, chance, premise=(False, "this model's sink is [CLS]")) == (
        "premise absent"
    )
    assert "premise absent: this model's sink is [CLS]" in claims.claims[-1].note


def pooled_folder(tmp_path, **modes):
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(modes))
    return SimpleNamespace(config=SimpleNamespace(_name_or_path=str(tmp_path)))


def test_sentence_pooling_reads_the_checkpoints_pooling(tmp_path):
    bundled = SimpleNamespace(config=SimpleNamespace(_name_or_path="all-MiniLM-L6-v2"))
    assert sentence_pooling(bundled) == "mean"  # the bundled sentence encoder: its [CLS] is not its summary
    assert sentence_pooling(SimpleNamespace(config=SimpleNamespace(_name_or_path="bert-base-uncased"))) is None
    assert sentence_pooling(SimpleNamespace(config=SimpleNamespace(_name_or_path=str(tmp_path)))) is None
    assert sentence_pooling(pooled_folder(tmp_path, pooling_mode_cls_token=True)) == "cls"


def test_a_pooling_configuration_with_no_or_two_modes_is_refused(tmp_path):
    model = pooled_folder(tmp_path, pooling_mode_cls_token=True, pooling_mode_mean_tokens=True)
    with pytest.raises(ValueError, match="one pooling mode"):
        sentence_pooling(model)
