import pytest
import torch

from helpers.linalg import left_null_space, numerical_rank


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
