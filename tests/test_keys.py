"""Do the keys allow the alternatives? Rank of the centred log-attention, producible alternatives."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers.methods import keys


def _random_qk(n: int, d_v: int, d: int, seed: int, scale: float = 1.5):
    g = torch.Generator().manual_seed(seed)
    Q = scale * torch.randn(n, d_v, generator=g, dtype=torch.float64)
    K = scale * torch.randn(n, d_v, generator=g, dtype=torch.float64)
    T = torch.randn(n, d_v, generator=g, dtype=torch.float64) @ torch.randn(d_v, d, generator=g, dtype=torch.float64)
    return Q, K, T


def test_softmax_of_a_low_rank_product_is_at_distance_zero():
    Q, K, _ = _random_qk(12, 3, 8, seed=0)
    A = helpers.model.internals.attention_from_qk(Q, K)
    assert float(keys.logit_rank_distance(A, 3)) < 1e-12
    assert float(keys.logit_rank_distance(A, 2)) > 1e-3  # one rank short: the distance sees it
    # a constant per row changes nothing
    B = torch.softmax(Q @ K.T / 3**0.5 + torch.randn(12, 1, dtype=torch.float64), dim=-1)
    assert float(keys.logit_rank_distance(B, 3)) < 1e-12


def test_every_positive_matrix_is_producible_when_d_k_reaches_n_minus_1():
    g = torch.Generator().manual_seed(1)
    A = torch.rand(7, 7, generator=g, dtype=torch.float64) + 0.01
    A = A / A.sum(-1, keepdim=True)
    assert float(keys.logit_rank_distance(A, 6)) < 1e-12  # the centred log has rank <= n - 1
    assert float(keys.logit_rank_distance(A, 3)) > 0.01
    assert 0 <= float(keys.logit_rank_distance(A, 1)) <= 1


def test_a_zero_weight_is_out_of_reach():
    A = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [1 / 3, 1 / 3, 1 / 3]], dtype=torch.float64)
    assert keys.logit_rank_distance(A, 3).isinf()
    batch = torch.stack([A, torch.full((3, 3), 1 / 3, dtype=torch.float64)])
    distances = keys.logit_rank_distance(batch, 1)
    assert distances[0].isinf() and float(distances[1]) == 0.0
    with pytest.raises(ValueError, match="zero or negative"):
        keys.centred_log(A)


def test_output_basis_spans_t_and_ones_without_ones():
    _, _, T = _random_qk(10, 3, 6, seed=2)
    U = keys.output_basis(T)
    assert U.shape == (10, 3)
    assert torch.allclose(U.T @ U, torch.eye(3, dtype=torch.float64), atol=1e-12)
    assert float((U.sum(0)).abs().max()) < 1e-12  # orthogonal to 1
    # (A' - A) U = 0 and equal row sums  <=>  (A' - A) T = 0
    D = helpers.methods.nullspace.null_direction(T, seed=0)
    assert float((D @ U).abs().max()) < 1e-12


def test_dimension_count_matches_the_jacobian_ranks():
    for n, d_v, seed in ((9, 2, 0), (11, 3, 1), (6, 8, 2)):
        Q, K, T = _random_qk(n, d_v, 12, seed=seed)
        r = keys.output_basis(T).shape[1]
        assert keys.producible_dimension(Q, K, T) == keys.dimension_count(n, d_v, r)
    # d_v >= n - 1: the whole simplex-constrained null space of chapter 3, n dim LN([T, 1])
    Q, K, T = _random_qk(6, 8, 12, seed=2)
    assert (
        keys.dimension_count(6, 8, keys.output_basis(T).shape[1])
        == 6 * helpers.methods.nullspace.simplex_null_space(T).shape[1]
    )
    assert keys.dimension_count(5, 4, 4) == 0  # n <= d_v + 1 = r + 1: nothing moves


def test_same_keys_leave_no_freedom_when_the_output_pins_the_query():
    Q, K, T = _random_qk(10, 3, 6, seed=3)
    assert (keys.same_keys_freedom(Q, K, T) == 0).all()
    # an output space of dimension 1 < d_v leaves d_v - 1 free query directions per row
    T1 = torch.randn(10, 1, dtype=torch.float64) @ torch.randn(1, 6, dtype=torch.float64)
    assert (keys.same_keys_freedom(Q, K, T1) == 2).all()


def test_search_finds_a_producible_alternative_with_the_same_output(one_thread):
    Q, K, T = _random_qk(16, 3, 8, seed=4, scale=1.0)
    A = helpers.model.internals.attention_from_qk(Q, K)
    family = helpers.alternative_family(A, T, fractions=[0.5], seed=0)
    assert float(keys.logit_rank_distance(family.attentions[0], 3)) > 1e-3  # the null-space move leaves the set
    found = keys.producible_alternative(Q, K, T, family.attentions[0], steps=30)
    assert found.output_error < 1e-8
    assert found.rank_distance < 1e-10
    assert found.movement > 1e-3 and found.toward_target > 0.05
    validity = helpers.methods.nullspace.validity(found.attention[None], A, T)
    assert validity.min_entry > 0 and validity.row_sum_error < 1e-12
    again = keys.producible_alternative(Q, K, T, family.attentions[0], steps=30)
    assert torch.equal(again.attention, found.attention)  # deterministic


def test_real_head_is_at_distance_zero(tiny_model, tokenizer):
    encoding = helpers.encode(tokenizer, "Rivers carry sand from the mountains and drop it where the current weakens.")
    internals = helpers.capture(tiny_model, encoding)
    d_v = internals.Q.shape[-1]
    A = helpers.model.internals.attention_from_qk(internals.Q.double(), internals.K.double())
    assert float(keys.logit_rank_distance(A, d_v).max()) < 1e-10
    assert float(keys.logit_rank_distance(internals.A, d_v).max()) < 1e-5  # float32 softmax


def test_bad_inputs():
    Q, K, T = _random_qk(6, 2, 4, seed=5)
    with pytest.raises(ValueError, match="d_v"):
        keys.logit_rank_distance(torch.full((3, 3), 1 / 3), 0)
    with pytest.raises(ValueError, match="n, n"):
        keys.logit_rank_distance(torch.ones(3, 4), 2)
    with pytest.raises(ValueError, match="NaN"):
        keys.logit_rank_distance(torch.full((2, 2), float("nan")), 1)
    with pytest.raises(ValueError, match="Q and K"):
        keys.same_keys_freedom(Q, K[:, :1], T)
    with pytest.raises(ValueError, match="rows"):
        keys.same_keys_freedom(Q, K, T[:3])
    with pytest.raises(ValueError, match="target"):
        keys.producible_alternative(Q, K, T, torch.ones(5, 5))
    with pytest.raises(ValueError, match="steps"):
        keys.producible_alternative(Q, K, T, torch.full((6, 6), 1 / 6), steps=-1)
    with pytest.raises(ValueError, match="max_entries"):
        keys.producible_dimension(Q, K, T, max_entries=10)
    with pytest.raises(ValueError, match="n must be between 0"):
        keys.dimension_count(-1, 2, 2)


# ---- chapter 3: the known answer when d_v >= n (every positive attention matrix is producible)
def test_d_k_at_least_n_allows_every_alternative(one_thread):
    n = 6
    for d_v in (n, n + 3):
        Q, K, T = _random_qk(n, d_v, 4, seed=6, scale=0.5)
        A = helpers.model.internals.attention_from_qk(Q, K)
        family = helpers.alternative_family(A, T, fractions=[0.5], seed=0)
        target = family.attentions[0]
        assert float(keys.logit_rank_distance(target, d_v)) < 1e-12  # nothing beyond d_v >= n singular values
        found = keys.producible_alternative(Q, K, T, target, steps=200)
        assert found.output_error < 1e-8 and found.rank_distance < 1e-12
        assert found.toward_target > 0.99  # it reaches the null-space alternative itself
        assert float((found.attention - target).abs().max()) < 1e-4


# ---- a fixed logit bias (MPNet's relative-position bias): the test subtracts it
def test_a_fixed_bias_is_subtracted_before_the_rank_test(one_thread):
    Q, K, T = _random_qk(10, 2, 5, seed=7)
    g = torch.Generator().manual_seed(8)
    bias = torch.randn(10, 10, generator=g, dtype=torch.float64)
    A = helpers.model.internals.attention_from_qk(Q, K, bias)
    assert float(keys.logit_rank_distance(A, 2, bias)) < 1e-12
    assert float(keys.logit_rank_distance(A, 2)) > 1e-2  # without the bias the same A looks unproducible
    # the search keeps the biased head's output and stays producible with the bias
    P = helpers.methods.lp_bounds.extreme_alternative(A, T, -A)
    found = keys.producible_alternative(Q, K, T, (A + P) / 2, steps=100, bias=bias)
    assert found.output_error < 1e-6 and found.rank_distance < 1e-8
    assert found.toward_target > 0.05
    rebuilt = torch.softmax(found.queries @ found.keys.T / 2**0.5 + bias, dim=-1)
    assert torch.allclose(rebuilt, found.attention, atol=1e-12)
    # the Jacobian count and the same-keys freedom read the biased softmax too
    r = keys.output_basis(T).shape[1]
    assert keys.producible_dimension(Q, K, T, bias=bias) == keys.dimension_count(10, 2, r)
    assert keys.same_keys_freedom(Q, K, T, bias=bias).shape == (10,)
    with pytest.raises(ValueError, match="bias must be a tensor ending in"):
        keys.logit_rank_distance(A, 2, torch.zeros(3, 3))


def test_a_real_mpnet_head_is_producible_with_its_position_bias():
    from .test_capture_mpnet import make_mpnet_tokenizer, make_tiny_mpnet

    tokenizer = make_mpnet_tokenizer()
    model = make_tiny_mpnet(len(tokenizer))
    internals = helpers.capture(model, helpers.encode(tokenizer, "the cat sat on the mat and looked at the dog"))
    d_v = internals.Q.shape[-1]
    for layer in range(internals.A.shape[0]):
        bias = internals.position_bias[layer]
        assert float(keys.logit_rank_distance(internals.A[layer], d_v, bias).max()) < 1e-5  # float32 softmax
