import numpy as np
import pytest
import torch

import helpers
from helpers.methods.linalg import left_null_space, numerical_rank, pearson


def test_rank_and_left_null_space_of_a_low_rank_product():
    torch.manual_seed(0)
    M = torch.randn(20, 4, dtype=torch.float64) @ torch.randn(4, 30, dtype=torch.float64)
    assert int(numerical_rank(M)) == 4
    N = left_null_space(M)
    assert N.shape == (20, 16)
    assert torch.allclose(N.T @ M, torch.zeros(16, 30, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(N.T @ N, torch.eye(16, dtype=torch.float64), atol=1e-10)


def test_rank_is_scale_invariant():
    torch.manual_seed(1)
    M = torch.randn(10, 3) @ torch.randn(3, 12)
    assert int(numerical_rank(M * 1e-6)) == int(numerical_rank(M * 1e6)) == 3


def test_batched_rank():
    torch.manual_seed(2)
    M = torch.randn(2, 3, 10, 2) @ torch.randn(2, 3, 2, 10)
    assert numerical_rank(M).tolist() == [[2, 2, 2], [2, 2, 2]]


def test_full_rank_has_empty_left_null_space():
    assert left_null_space(torch.eye(5)).shape == (5, 0)


@pytest.mark.parametrize("bad", [torch.ones(3), torch.tensor([[1.0, float("nan")], [0.0, 1.0]])])
def test_bad_input(bad):
    with pytest.raises(ValueError):
        numerical_rank(bad)


def test_non_tensor():
    with pytest.raises(TypeError):
        left_null_space([[1.0, 0.0]])


def test_relative_output_change_is_zero_in_the_null_space_and_scale_free():
    g = torch.Generator().manual_seed(0)
    T = torch.randn(6, 3, generator=g, dtype=torch.float64)
    A = torch.softmax(torch.randn(6, 6, generator=g, dtype=torch.float64), dim=-1)
    N = helpers.methods.linalg.left_null_space(T)  # (6, 3)
    inside = A + torch.randn(6, 3, generator=g, dtype=torch.float64) @ N.T
    outside = A + 0.1 * torch.eye(6, dtype=torch.float64)
    change = helpers.methods.linalg.relative_output_change(torch.stack([A, inside, outside]), A, T)
    assert change.shape == (3,)
    assert change[0] == 0 and change[1] < 1e-12 and change[2] > 1e-2
    expected = float(((outside - A) @ T).abs().max() / (A @ T).abs().max())
    assert abs(float(change[2]) - expected) < 1e-15
    assert torch.allclose(
        helpers.methods.linalg.relative_output_change(outside, A, 5 * T), change[2]
    )  # scale of T cancels
    with pytest.raises(ValueError, match="end in A's shape"):
        helpers.methods.linalg.relative_output_change(outside[:-1], A, T)


def test_shared_checks_fail_early_with_clear_messages():
    A = torch.full((3, 3), 1 / 3)
    helpers.model.checks.check_attention_and_values(A, torch.ones(3, 2))
    helpers.model.checks.check_attention_distribution(A)
    with pytest.raises(TypeError, match="torch.Tensor"):
        helpers.model.checks.check_tensor([1.0], "M")
    with pytest.raises(ValueError, match="rows"):
        helpers.model.checks.check_attention_and_values(A, torch.ones(4, 2))
    with pytest.raises(ValueError, match="square"):
        helpers.model.checks.check_attention_and_values(torch.ones(3, 4), torch.ones(3, 2))
    with pytest.raises(ValueError, match="negative"):
        helpers.model.checks.check_attention_distribution(A - 0.5)
    with pytest.raises(ValueError, match="sum to 1"):
        helpers.model.checks.check_attention_distribution(2 * A)
    with pytest.raises(ValueError, match="NaN"):
        helpers.model.checks.check_matrix(torch.full((2, 2), float("nan")))


def test_pearson_matches_numpy():
    g = torch.Generator().manual_seed(6)
    X, Y = torch.randn(3, 5, 7, generator=g), torch.randn(3, 5, 7, generator=g)
    r = pearson(X, Y + X)
    expected = [np.corrcoef(x.ravel(), (y + x).ravel())[0, 1] for x, y in zip(X.numpy(), Y.numpy(), strict=True)]
    assert np.allclose(r.numpy(), expected, atol=1e-6)
    assert torch.allclose(pearson(X, 3 * X + 1), torch.ones(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="same shape"):
        pearson(X, Y[:, :-1])
