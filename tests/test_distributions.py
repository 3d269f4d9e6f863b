"""Distributions with the same output (chapter 4's answer to the critics): helpers.methods.distributions."""

import pytest
import torch

from helpers.methods import distributions, lp_bounds


@pytest.fixture(scope="module")
def head():
    """One random head with n = 12 > d_v = 4: a large polytope of distributions with the same output."""
    torch.manual_seed(0)
    n, d_v, d = 12, 4, 16
    A = torch.softmax(2 * torch.randn(n, n, dtype=torch.float64), -1)
    T = torch.randn(n, d_v, dtype=torch.float64) @ torch.randn(d_v, d, dtype=torch.float64)
    return A, T


def test_effective_attention_with_the_bias_column(head):
    A, T = head
    E = distributions.simplex_effective_attention(A, T)
    assert torch.allclose(E.sum(-1), torch.ones(len(A), dtype=E.dtype))
    assert torch.allclose(E @ T, A @ T, atol=1e-10)
    assert (E < 0).any()  # not a distribution: the critics' premise


def test_closest_distribution_lies_in_the_polytope_and_beats_raw_attention(head):
    A, T = head
    target = distributions.simplex_effective_attention(A, T)
    near = distributions.closest_distribution(A, T, target)
    assert (near.points >= 0).all()
    assert torch.allclose(near.points.sum(-1), torch.ones(len(A), dtype=near.points.dtype), atol=1e-8)
    assert torch.allclose(near.points @ T, A @ T, atol=1e-7)
    raw_distance = (A - target).abs().sum(-1)
    assert (near.distance <= raw_distance + 1e-8).all()  # A itself is feasible
    assert (near.distance < raw_distance - 1e-3).any()  # and not the nearest


def test_closest_distribution_to_raw_attention_is_raw_attention(head):
    A, T = head
    near = distributions.closest_distribution(A, T, A)
    assert near.distance.max() < 1e-7
    assert torch.allclose(near.points, A, atol=1e-7)


def test_every_alternative_the_bounds_find_is_no_closer(head):
    """The LP optimum is at most the distance of every extreme alternative chapter 3 constructs."""
    A, T = head
    target = distributions.simplex_effective_attention(A, T)
    near = distributions.closest_distribution(A, T, target)
    bounds = lp_bounds.attention_bounds(A, T, rows=[0, 1], progress=False)
    for i in (0, 1):
        for point in (bounds.lower_points[i], bounds.upper_points[i]):
            distance = (point.double() - target[i]).abs().sum(-1)
            assert (near.distance[i] <= distance + 1e-7).all()


def test_a_subset_of_rows(head):
    A, T = head
    target = distributions.simplex_effective_attention(A, T)
    every = distributions.closest_distribution(A, T, target)
    some = distributions.closest_distribution(A, T, target, rows=[3, 7])
    assert some.points.shape == (2, len(A))
    assert torch.allclose(some.distance, every.distance[[3, 7]], atol=1e-8)


def test_bad_input_gets_clear_errors(head):
    A, T = head
    with pytest.raises(ValueError, match="target"):
        distributions.closest_distribution(A, T, A[:3])
    with pytest.raises(ValueError):
        distributions.closest_distribution(2 * A, T, A)
    with pytest.raises(ValueError, match="rows"):
        distributions.simplex_effective_attention(A, T[:5])
    with pytest.raises(ValueError, match="row"):
        distributions.closest_distribution(A, T, A, rows=[len(A)])


def test_nearest_distributions_per_head_of_a_layer(head):
    from helpers.drivers.effective import nearest_distributions

    A, T = head
    layer_A, layer_T = torch.stack([A, A.flip(0)]), torch.stack([T, T])
    result = nearest_distributions(layer_A, layer_T, rows=[0, 5])
    assert list(result.distances.index) == [1, 2] and result.matrices.shape == (2, len(A), len(A))
    single = distributions.closest_distribution(A, T, distributions.simplex_effective_attention(A, T), rows=[0, 5])
    assert result.distances.loc[1, "nearest distribution to effective"] == pytest.approx(
        float(single.distance.median())
    )
    assert torch.allclose(result.matrices[0][[0, 5]], single.points)
    assert torch.equal(result.matrices[0][1], A[1])  # rows not solved stay raw attention
    assert result.max_entropy.shape == (2, len(A), len(A))
    assert torch.allclose(result.max_entropy[0], distributions.max_entropy_distribution(A, T))
    assert result.distances.loc[1, "maximum entropy to raw A"] == pytest.approx(
        float((result.max_entropy[0][[0, 5]] - A[[0, 5]]).abs().sum(-1).median())
    )
    with pytest.raises(ValueError, match="one layer"):
        nearest_distributions(A, T)


def test_max_entropy_distribution_lies_in_the_polytope_with_logs_in_span_t_and_1(head):
    from helpers.methods.keys import logit_rank_distance

    A, T = head
    P = distributions.max_entropy_distribution(A, T)
    assert (P > 0).all() and torch.allclose(P.sum(-1), torch.ones(len(A), dtype=P.dtype), atol=1e-12)
    assert torch.allclose(P @ T, A @ T, atol=1e-9)  # the head's output
    Q = torch.from_numpy(lp_bounds.constraint_basis(T))
    assert torch.allclose(P.log() @ Q @ Q.T, P.log(), atol=1e-8)  # log p in span(T, 1)
    assert float(logit_rank_distance(P, 4)) < 1e-6  # so d_v = 4 queries and keys produce it
    assert float(logit_rank_distance(A, 4)) > 0.1  # which the random head's own A is not

    def entropy(p):
        return -(p * p.log()).sum(-1)

    assert (entropy(P) >= entropy(A) - 1e-12).all()  # A is in the polytope
    # any move inside the polytope lowers the entropy: a null-space direction, both ways
    null = torch.linalg.svd(torch.cat([T, torch.ones(len(A), 1, dtype=T.dtype)], 1).T).Vh[5:]  # (n - 5, n)
    step = 0.5 * P.min(dim=-1).values[:, None]  # small enough to stay positive
    for direction in null[:3]:
        for sign in (1, -1):
            moved = P + sign * step * direction
            assert torch.allclose(moved @ T, A @ T, atol=1e-9) and (entropy(moved) < entropy(P)).all()
    some = distributions.max_entropy_distribution(A, T, rows=[2, 9])
    assert torch.allclose(some, P[[2, 9]], atol=1e-10)
    with pytest.raises(ValueError, match="zero weight"):
        sparse = A.index_fill(1, torch.tensor([0]), 0.0)
        distributions.max_entropy_distribution(sparse / sparse.sum(-1, keepdim=True), T)
