"""Each head's share of its layer's output, the null of equal heads, and the within-layer Spearman (methods.heads)."""

import numpy as np
import pytest
import torch

import helpers
from helpers.drivers.ranks import head_contributions
from helpers.methods.heads import (
    concentration,
    exchangeable_heads,
    head_shares,
    share_ratio,
    within_layer_spearman,
)

from .conftest import SENTENCE

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def internals(tiny_model, tokenizer):
    return helpers.capture(tiny_model, helpers.encode(tokenizer, SENTENCE, model=tiny_model))


def test_shares_sum_to_one_and_match_the_norms_by_hand(internals):
    shares = head_shares(internals)
    assert shares.shape == (internals.num_layers, internals.heads)
    assert torch.allclose(shares.sum(dim=-1), torch.ones(internals.num_layers, dtype=shares.dtype))
    layer, head = 1, 2
    by_hand = [float(torch.linalg.matrix_norm(internals.A[layer, k] @ internals.T[layer, k])) for k in range(4)]
    assert np.isclose(float(shares[layer, head]), by_hand[head] / sum(by_hand), rtol=1e-5)


def test_concentration_is_the_largest_mean_column(internals):
    focus = concentration(internals)
    n = internals.n
    assert ((focus >= 1 / n - 1e-9) & (focus <= 1 + 1e-9)).all()
    assert np.isclose(float(focus[0, 1]), float(internals.A[0, 1].mean(dim=0).max()), rtol=1e-6)


def test_share_ratio_of_equal_and_unequal_heads():
    equal = np.full((5, 2, 4), 0.25)
    assert np.allclose(share_ratio(equal), 1.0)
    unequal = np.tile(np.array([0.4, 0.3, 0.2, 0.1]), (5, 2, 1))
    assert np.allclose(share_ratio(unequal), 4.0)


def test_exchangeable_heads_keeps_each_sequence_and_evens_out_the_heads():
    rng = np.random.default_rng(0)
    base = np.array([0.55, 0.25, 0.15, 0.05])
    shares = np.tile(base, (400, 3, 1)) * rng.uniform(0.9, 1.1, size=(400, 3, 4))
    null = exchangeable_heads(shares, seed=1)
    # each (sequence, layer) keeps its own values, only their order changes
    assert np.allclose(np.sort(null, axis=-1), np.sort(shares, axis=-1))
    assert (share_ratio(shares) > 8).all()
    assert (share_ratio(null) < 1.5).all()
    assert np.array_equal(null, exchangeable_heads(shares, seed=1)), "seeded"


def test_within_layer_spearman_by_hand():
    x = np.array([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]])
    y = np.array([[10.0, 20.0, 30.0, 40.0], [4.0, 3.0, 2.0, 1.0]])
    assert np.allclose(within_layer_spearman(x, y), [1.0, -1.0])
    # a monotone transform leaves it unchanged
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(6, 5)), rng.normal(size=(6, 5))
    assert np.allclose(within_layer_spearman(a, b), within_layer_spearman(np.exp(a), b**3 + 2 * b))


@pytest.mark.parametrize(
    "bad", [np.ones(4), np.array([[0.5, 0.0, 0.5]]), np.array([[[0.5, np.nan]]]), np.ones((2, 3, 1))]
)
def test_bad_shares(bad):
    with pytest.raises(ValueError):
        share_ratio(bad if bad.ndim == 3 else bad)


def test_bad_spearman_input():
    with pytest.raises(ValueError, match="share a shape"):
        within_layer_spearman(np.ones((2, 4)), np.ones((2, 5)))


def test_head_contributions_table(tiny_model, tokenizer):
    encodings = [helpers.encode(tokenizer, SENTENCE, model=tiny_model), helpers.encode(tokenizer, "A short one.")]
    table = head_contributions(tiny_model, encodings, progress=False)
    L, h = tiny_model.config.num_hidden_layers, tiny_model.config.num_attention_heads
    assert len(table) == 2 * L * h
    assert list(table.columns) == ["example", "n", "layer", "head", "share", "concentration"]
    assert np.allclose(table.groupby(["example", "layer"]).share.sum(), 1.0)
    first = helpers.capture(tiny_model, encodings[0])
    assert np.allclose(table[table.example == 0].share.to_numpy(), head_shares(first).flatten().numpy())
    with pytest.raises(ValueError, match="empty"):
        head_contributions(tiny_model, [], progress=False)
