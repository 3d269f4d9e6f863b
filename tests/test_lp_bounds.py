import pytest
import torch

import helpers
from helpers.methods import lp_bounds

from .conftest import LONG_TEXT

pytestmark = pytest.mark.usefixtures("one_thread")


def random_head(n: int, d_v: int, d: int = 24, seed: int = 0, bias: bool = True):
    """A softmax attention matrix and a rank-d_v T = V H (value bias included) of a random head."""
    g = torch.Generator().manual_seed(seed)
    E = torch.randn(n, d, generator=g, dtype=torch.float64)
    V = E @ torch.randn(d, d_v, generator=g, dtype=torch.float64)
    if bias:
        V = V + torch.randn(d_v, generator=g, dtype=torch.float64)
    T = V @ torch.randn(d_v, d, generator=g, dtype=torch.float64)
    A = torch.softmax(2 * torch.randn(n, n, generator=g, dtype=torch.float64), dim=-1)
    return A, T


def check_bounds(A, T, bounds, rows, tol=1e-7):
    A64, T64 = A.double(), T.double()
    scale = float((A64 @ T64).abs().max())
    for i in rows:
        a = A64[i]
        assert (bounds.lower[i] <= a + tol).all() and (a <= bounds.upper[i] + tol).all()
        for points, values in ((bounds.lower_points[i], bounds.lower[i]), (bounds.upper_points[i], bounds.upper[i])):
            assert float(points.min()) >= 0.0  # feasible: non-negative ...
            assert (points.sum(-1) - 1).abs().max() < tol  # ... sums to one ...
            assert ((points - a) @ T64).abs().max() < tol * max(scale, 1.0)  # ... same head output
            assert torch.allclose(torch.diagonal(points), values, atol=1e-12)  # attains the bound


@pytest.mark.parametrize("seed, bias", [(0, True), (1, False), (2, True)])
def test_warm_path_equals_two_highs_lps_per_entry(seed, bias):
    A, T = random_head(n=16, d_v=5, seed=seed, bias=bias)
    fast = helpers.attention_bounds(A, T, progress=False)
    rows = [0, 7, 15]
    brute = helpers.attention_bounds(A, T, rows=rows, solver="highs", progress=False)
    assert torch.allclose(fast.lower[rows], brute.lower[rows], atol=1e-8)
    assert torch.allclose(fast.upper[rows], brute.upper[rows], atol=1e-8)
    check_bounds(A, T, fast, range(16))
    check_bounds(A, T, brute, rows)
    assert torch.isnan(brute.lower[1]).all()  # rows not asked for stay empty
    # the fast path really is warm: one cold HiGHS solve per row, the rest by the warm simplex
    assert fast.stats["highs_lps"] == 16 and fast.stats["warm_lps"] > 16 * 8
    assert fast.stats["zero_certificates"] > 0


def test_bounds_are_non_trivial():
    A, T = random_head(n=20, d_v=4, seed=3)
    bounds = helpers.attention_bounds(A, T, progress=False)
    assert float(bounds.width.max()) > 0.1  # weights really can move
    assert bool(bounds.could_be_zero().any()) and not bool(bounds.could_be_zero().all())
    assert (bounds.could_exceed(0.5) == (bounds.upper > 0.5)).all()


def test_fallback_to_highs_gives_the_same_bounds(monkeypatch):
    A, T = random_head(n=12, d_v=4, seed=4)
    warm = helpers.attention_bounds(A, T, progress=False)
    monkeypatch.setattr(lp_bounds, "_warm_simplex", lambda *args, **kwargs: None)
    cold = helpers.attention_bounds(A, T, progress=False)
    assert cold.stats["fallbacks"] > 0 and cold.stats["warm_lps"] == 0
    assert torch.allclose(warm.lower, cold.lower, atol=1e-8) and torch.allclose(warm.upper, cold.upper, atol=1e-8)
    check_bounds(A, T, cold, range(12))


def test_short_input_is_identifiable_and_bounds_collapse_to_A():
    A, T = random_head(n=5, d_v=6, seed=5)
    bounds = helpers.attention_bounds(A, T, progress=False)
    assert torch.allclose(bounds.lower, A) and torch.allclose(bounds.upper, A)
    assert bounds.stats["highs_lps"] == 0


def test_bounds_on_tiny_model(tiny_model, tokenizer):
    internals = helpers.capture(tiny_model, helpers.encode(tokenizer, LONG_TEXT, model=tiny_model))
    A, T = internals.A[1, 2], internals.T[1, 2]
    rows = [0, 10, internals.n - 1]
    bounds = helpers.attention_bounds(A, T, rows=rows, progress=False)
    check_bounds(A, T, bounds, rows, tol=1e-6)
    assert float(bounds.width[rows].max()) > 0.05


def test_bounds_on_real_model(real_model):
    model, tokenizer = real_model
    encoding = helpers.model.text.prefix_encoding(helpers.encode(tokenizer, LONG_TEXT, model=model), 40)
    internals = helpers.capture(model, encoding)
    A, T = internals.A[2, 3], internals.T[2, 3]
    rows = [0, 20]
    fast = helpers.attention_bounds(A, T, rows=rows, progress=False)
    brute = helpers.attention_bounds(A, T, rows=[20], solver="highs", progress=False)
    check_bounds(A, T, fast, rows, tol=1e-6)
    assert torch.allclose(fast.upper[20], brute.upper[20], atol=1e-7)
    assert torch.allclose(fast.lower[20], brute.lower[20], atol=1e-7)


def test_extreme_alternative_is_valid_and_far_from_A():
    A, T = random_head(n=18, d_v=5, seed=6)
    P = lp_bounds.extreme_alternative(A, T, -A, progress=False)
    report = helpers.methods.nullspace.validity(P, A, T)
    assert report.min_entry >= 0 and report.row_sum_error < 1e-8 and report.output_error < 1e-8
    assert ((P * A).sum(-1) <= (A * A).sum(-1) + 1e-9).all()  # no closer to A than A itself
    family = helpers.alternative_family(A, T, [0.0, 0.5], direction=P - A)
    assert family.t_high >= 1.0 - 1e-9  # the whole segment from A to P is valid
    with pytest.raises(ValueError, match="objective"):
        lp_bounds.extreme_alternative(A, T, torch.ones(3, 3), progress=False)


def test_extreme_alternative_solves_only_the_rows_asked_for():
    A, T = random_head(n=18, d_v=5, seed=6)
    full = lp_bounds.extreme_alternative(A, T, -A, progress=False)
    some = lp_bounds.extreme_alternative(A, T, -A, progress=False, rows=[2, 11])
    assert torch.allclose(some[[2, 11]], full[[2, 11]], atol=1e-9)
    assert torch.isnan(some[0]).all() and torch.isnan(some[17]).all()
    with pytest.raises(ValueError, match="rows"):
        lp_bounds.extreme_alternative(A, T, -A, progress=False, rows=[18])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"solver": "simplex"}, "solver"),
        ({"rows": [99]}, "rows"),
        ({"rows": []}, "rows"),
    ],
)
def test_bad_arguments(kwargs, match):
    A, T = random_head(n=8, d_v=3)
    with pytest.raises(ValueError, match=match):
        helpers.attention_bounds(A, T, progress=False, **kwargs)


def test_bad_tensors():
    A, T = random_head(n=8, d_v=3)
    with pytest.raises(ValueError, match="sum to 1"):
        helpers.attention_bounds(A * 0.5, T, progress=False)
    with pytest.raises(ValueError, match="negative"):
        helpers.attention_bounds(A - 0.2, T, progress=False)
    with pytest.raises(ValueError, match="rows"):
        helpers.attention_bounds(A, T[:5], progress=False)
    with pytest.raises(ValueError, match="NaN"):
        helpers.attention_bounds(A, T * float("nan"), progress=False)
    with pytest.raises(TypeError):
        helpers.attention_bounds(A.numpy(), T, progress=False)


def test_a_causal_head_is_bounded_on_each_row_s_prefix():
    """A decoder's rows are refused as a whole sequence; each row's prefix gives its own polytope."""
    torch.manual_seed(0)
    n, d_v = 10, 3
    logits = torch.randn(n, n, dtype=torch.float64).masked_fill(torch.ones(n, n).triu(1).bool(), float("-inf"))
    A = torch.softmax(logits, -1)
    T = torch.randn(n, d_v, dtype=torch.float64) @ torch.randn(d_v, 8, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"causal.*A\[:6, :6\], T\[:6\], rows=\[5\]"):
        helpers.attention_bounds(A, T, rows=[5], progress=False)
    prefix = helpers.attention_bounds(A[:6, :6], T[:6], rows=[5], progress=False)
    assert (prefix.lower[5] <= A[5, :6] + 1e-9).all() and (A[5, :6] <= prefix.upper[5] + 1e-9).all()
    assert prefix.upper[5].max() - prefix.lower[5].min() > 1e-3  # 6 > d_v + 1: a real polytope
    helpers.attention_bounds(A, T, rows=[n - 1], progress=False)  # the last row sees everything


def test_check_reports_valid_bounds_and_catches_tampering():
    A, T = random_head(n=14, d_v=4, seed=7)
    bounds = helpers.attention_bounds(A, T, progress=False)
    report = bounds.check(A, T)
    assert report.min_entry >= 0 and report.row_sum_error < 1e-9 and report.output_error < 1e-9
    assert report.attained_error < 1e-12 and report.containment_error == 0.0
    bounds.upper[3, 5] = A[3, 5] - 0.01  # a bound that excludes the model's weight and is not attained
    tampered = bounds.check(A, T)
    assert tampered.containment_error > 0.009 and tampered.attained_error > 0.0
