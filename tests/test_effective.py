import warnings

import pytest
import torch

import helpers
from helpers.drivers.effective import effective_attention_sweep
from helpers.methods.captured import effective_attention_of
from helpers.methods.effective import effective_attention
from helpers.methods.linalg import pearson, range_basis
from helpers.methods.reference import effective_attention_loop
from helpers.methods.tokens import summarise_token_classes

from .conftest import LONG_TEXT, SENTENCE

ATOL = 1e-10  # float64 identities


def random_head(batch=(2, 3), n=12, d_v=4, d=10, seed=0, dtype=torch.float64):
    """Row-stochastic A (batch, n, n), V (batch, n, d_v), H (batch, d_v, d), T = V H."""
    g = torch.Generator().manual_seed(seed)
    A = torch.softmax(torch.randn(*batch, n, n, generator=g, dtype=dtype) * 2, dim=-1)
    V = torch.randn(*batch, n, d_v, generator=g, dtype=dtype)
    H = torch.randn(*batch, d_v, d, generator=g, dtype=dtype)
    return A, V, H, V @ H


def scale(T):
    return T.abs().amax(dim=(-2, -1), keepdim=True)


def test_range_basis_projects_onto_the_column_space():
    A, V, H, T = random_head()
    U, rank = range_basis(T)
    assert U.shape == (2, 3, 12, 10) and rank.tolist() == [[4] * 3] * 2
    assert torch.count_nonzero(U[..., 4:]) == 0  # columns past the rank are zero
    P = U @ U.mT
    assert torch.allclose(P @ T, T, atol=ATOL)
    assert torch.allclose(P @ P, P, atol=ATOL)


def test_effective_part_gives_the_same_head_output():
    A, V, H, T = random_head()
    A_eff, A_null = effective_attention(A, T)
    assert A_eff.shape == A_null.shape == A.shape
    assert torch.allclose(A_eff @ T, A @ T, atol=ATOL)
    assert torch.allclose(A_null @ T, torch.zeros_like(T), atol=ATOL)
    assert torch.allclose(A_eff + A_null, A, atol=ATOL)
    # the null part really is there (n > d_v), and the parts are orthogonal row by row
    assert float(A_null.abs().max()) > 1e-3
    assert torch.allclose((A_eff * A_null).sum(-1), torch.zeros(A.shape[:-1], dtype=A.dtype), atol=ATOL)


def test_inputs_are_left_untouched():
    A, V, H, T = random_head(seed=7)
    copies = [x.clone() for x in (A, V, H, T)]
    effective_attention(A, T)
    effective_attention(A, V=V, H=H)
    pearson(A, 2 * A)
    for x, copy in zip((A, V, H, T), copies, strict=True):
        assert torch.equal(x, copy)


def test_the_three_paths_agree():
    A, V, H, T = random_head(seed=1)
    direct = effective_attention(A, T)
    fast = effective_attention(A, V=V, H=H)
    loop = effective_attention_loop(A, T)
    for other in (fast, loop):
        assert torch.allclose(other.effective, direct.effective, atol=ATOL)
        assert torch.allclose(other.null, direct.null, atol=ATOL)


def test_empty_null_space_returns_A_exactly():
    A, V, H, T = random_head(n=4, d_v=4, dtype=torch.float32)
    for split in (effective_attention(A, T), effective_attention(A, V=V, H=H)):
        assert torch.equal(split.effective, A)
        assert torch.count_nonzero(split.null) == 0
    assert torch.allclose(pearson(A, effective_attention(A, T).effective), torch.ones(2, 3, dtype=torch.float64))


def test_rank_is_relative_to_the_largest_singular_value():
    A, V, H, T = random_head(seed=2)
    reference = effective_attention(A, T).effective
    for factor in (1e-6, 1e6):
        assert torch.allclose(effective_attention(A, T * factor).effective, reference, atol=1e-9)


def test_numerically_rank_deficient_T_counts_its_tiny_directions_as_null():
    A, V, H, T = random_head(batch=(1,), n=6, d_v=6, d=8, seed=3)
    w = torch.randn(6, generator=torch.Generator().manual_seed(8), dtype=V.dtype)
    V[..., -1, :] = V[..., 0, :] + 1e-9 * w  # rank 5 up to the tolerance although n = d_v
    T = V @ H
    A_eff, A_null = effective_attention(A, T)
    assert float(A_null.abs().max()) > 1e-3
    assert torch.allclose(A_null @ T, torch.zeros_like(T), atol=1e-7 * float(scale(T).max()))
    # a tighter tolerance sees the tiny direction as part of the range again
    assert torch.equal(effective_attention(A, T, rtol=1e-12).effective, A)


def test_rank_deficient_H_falls_back_to_T():
    A, V, H, T = random_head(seed=4)
    H[0, 1, -1] = H[0, 1, 0]  # one head whose H lacks full row rank
    T = V @ H
    with pytest.warns(UserWarning, match="full row rank"):
        fast = effective_attention(A, V=V, H=H)
    direct = effective_attention(A, T)
    assert torch.allclose(fast.effective, direct.effective, atol=ATOL)
    assert torch.allclose(fast.effective @ T, A @ T, atol=ATOL)
    # LN(V) alone would have been too small for that head
    naive = effective_attention(A, V)
    assert not torch.allclose(naive.null[0, 1], direct.null[0, 1], atol=1e-6)


def test_full_rank_H_gives_no_warning():
    A, V, H, T = random_head(seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        effective_attention(A, V=V, H=H)


def test_whole_layer_output_is_unchanged_on_a_tiny_model(tiny_model, tokenizer):
    internals = helpers.capture(tiny_model, helpers.encode(tokenizer, LONG_TEXT, model=tiny_model))
    A_eff, A_null = effective_attention_of(internals)
    assert internals.n > 8  # d_v = 8: a null space exists
    assert float(A_null.abs().max()) > 1e-3
    output = (A_eff @ internals.T).sum(dim=1) + internals.b_O[:, None, :]
    assert torch.allclose(output, internals.attention_output, atol=1e-5)
    direct = effective_attention(internals.A, internals.T)
    assert torch.allclose(A_eff, direct.effective, atol=1e-5)


def test_real_model_fast_path_matches_the_T_svd(real_model):
    model, tokenizer = real_model
    internals = helpers.capture(model, helpers.encode(tokenizer, LONG_TEXT, model=model))
    n, d_v = internals.n, internals.V.shape[-1]
    assert n > d_v
    fast = effective_attention_of(internals)
    some = (slice(0, None, 5), slice(0, None, 4))  # 6 of the 72 heads: the T route is the slow one
    direct = effective_attention(internals.A[some], internals.T[some])
    assert torch.allclose(fast.effective[some], direct.effective, atol=1e-5)
    # T = V H has rank d_v, so LN(T) has dimension n - d_v and A_null T = 0
    assert helpers.numerical_rank(internals.T[some]).eq(d_v).all()
    T_scale = float(internals.T.abs().max())
    assert torch.allclose(fast.null @ internals.T, torch.zeros_like(internals.T), atol=1e-5 * T_scale)
    assert torch.allclose(fast.effective @ internals.T, internals.A @ internals.T, atol=1e-5 * T_scale)


def test_real_model_short_input_is_identifiable(real_model):
    model, tokenizer = real_model
    internals = helpers.capture(model, helpers.encode(tokenizer, SENTENCE, model=model))
    assert internals.n < internals.V.shape[-1]
    A_eff, A_null = effective_attention_of(internals)
    assert torch.equal(A_eff, internals.A) and torch.count_nonzero(A_null) == 0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda A, V, H, T: effective_attention(A[..., :-1], T), "square"),
        (lambda A, V, H, T: effective_attention(A, T[..., :-1, :]), "leading dimensions and n"),
        (lambda A, V, H, T: effective_attention(A, T[:1]), "leading dimensions and n"),
        (lambda A, V, H, T: effective_attention(A, V=V, H=H[..., :-1, :]), "d_v"),
        (lambda A, V, H, T: effective_attention(A, V=V[:, :1], H=H), "leading dimensions"),
        (lambda A, V, H, T: effective_attention(A, T, V=V, H=H), "not both"),
        (lambda A, V, H, T: effective_attention(A, V=V), "needs H"),
        (lambda A, V, H, T: effective_attention(A), "Pass T"),
        (lambda A, V, H, T: effective_attention(A, T, rtol=0.0), "rtol"),
        (lambda A, V, H, T: effective_attention(A[0, 0, 0], T), r"\(\.\.\., n, m\)"),
        (lambda A, V, H, T: effective_attention_loop(A, T[..., :-1, :]), "leading dimensions and n"),
    ],
)
def test_bad_shapes_and_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call(*random_head())


@pytest.mark.parametrize("where", ["A", "T", "V", "H"])
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_input(where, value):
    A, V, H, T = random_head()
    {"A": A, "T": T, "V": V, "H": H}[where][0, 0, 0, 0] = value
    with pytest.raises(ValueError, match="NaN or infinite"):
        if where == "T" or where == "A":
            effective_attention(A, T)
        else:
            effective_attention(A, V=V, H=H)


def test_non_tensor_input():
    A, V, H, T = random_head()
    with pytest.raises(TypeError):
        effective_attention(A.tolist(), T)
    with pytest.raises(TypeError, match="Internals"):
        effective_attention_of({"A": A})


def test_plots_draw_and_reject_bad_input(real_model):
    import matplotlib.pyplot as plt
    import pandas as pd

    model, tokenizer = real_model
    examples = [
        helpers.model.corpus.Example("short", SENTENCE, None, None, "test"),
        helpers.model.corpus.Example("long", LONG_TEXT, None, None, "test"),
    ]
    table = effective_attention_sweep(model, tokenizer, examples, progress=False)
    A, V, H, T = random_head(batch=(), n=12)
    split = effective_attention(A, T)
    fig = helpers.plots.plot_attention_split(A, split.effective, split.null, [f"t{i}" for i in range(12)], title="x")
    assert len(fig.axes) == 6  # three heatmaps and their colour bars
    fig = helpers.plots.plot_correlation_vs_length(table, d_v=32, source="test")
    assert len(fig.axes) == 2 and "test" in fig._suptitle.get_text()
    fig = helpers.plots.plot_token_class_attention(summarise_token_classes(table))
    assert [ax.get_title() for ax in fig.axes] == [
        "attention to [CLS]",
        "attention to [SEP]",
        "attention to punctuation",
    ]
    plt.close("all")
    with pytest.raises(ValueError, match="one shape"):
        helpers.plots.plot_attention_split(A, split.effective[:-1], split.null)
    with pytest.raises(ValueError, match="columns"):
        helpers.plots.plot_correlation_vs_length(pd.DataFrame({"n": [1]}), d_v=32)
    with pytest.raises(ValueError, match="columns"):
        helpers.plots.plot_token_class_attention(table)


def test_leverage_sums_to_the_rank_and_averages_r_over_n_for_a_random_space():
    from helpers.methods.effective import leverage

    A, V, H, T = random_head(batch=(400,), n=12, d_v=4)
    P_jj = leverage(T)
    assert P_jj.shape == (400, 12)
    assert ((P_jj >= -ATOL) & (P_jj <= 1 + ATOL)).all()
    # the leverages of each head sum to its rank, so their mean is r / n exactly
    assert torch.allclose(P_jj.sum(-1), torch.full((400,), 4.0, dtype=torch.float64), atol=1e-9)
    # over random column spaces, every single token keeps r / n of its weight on average
    assert torch.allclose(P_jj.mean(0), torch.full((12,), 4 / 12, dtype=torch.float64), atol=0.05)
    # V gives the same leverages as T = V H (H has full row rank)
    assert torch.allclose(leverage(V), P_jj, atol=1e-9)


def test_kept_parts_add_up_to_the_projection():
    from helpers.methods.effective import kept_parts

    A, V, H, T = random_head(n=10, d_v=3)
    parts = kept_parts(A, T)
    U, _ = range_basis(T)
    P = U @ U.mT
    # a_j P_jj + sum_{k != j} a_k P_kj = (a P)_j, the effective weight
    assert torch.allclose(parts.own + parts.moved, A @ P, atol=ATOL)
    assert torch.allclose(parts.own + parts.moved, effective_attention(A, T).effective, atol=1e-9)
    assert torch.allclose(parts.own, A * torch.diagonal(P, dim1=-2, dim2=-1)[..., None, :], atol=ATOL)
    assert torch.allclose(parts.leverage, torch.diagonal(P, dim1=-2, dim2=-1), atol=ATOL)
    with pytest.raises(ValueError):
        kept_parts(A, T[..., :-1, :])


def test_removal_by_text_against_the_random_expectation(tiny_model, tokenizer):
    from helpers.drivers.effective import removal_by_text

    examples = [SENTENCE, LONG_TEXT, LONG_TEXT[: len(LONG_TEXT) // 2]]
    table = effective_attention_sweep(tiny_model, tokenizer, examples, progress=False)
    assert {"own_[CLS]", "leverage_[CLS]", "leverage_rest_[CLS]"} <= set(table.columns)
    per_text = removal_by_text(table, "[CLS]")
    assert list(per_text.example) == ["0", "1", "2"]
    # removed = 1 - effective / raw; the own part and the moved part make up the effective one
    assert ((per_text.removed - (1 - per_text.effective / per_text.raw)).abs() < 1e-9).all()
    assert ((per_text.expected - (1 - (table.groupby("example").apply(
        lambda g: (g["raw_[CLS]"] * g["rank"]).sum() / g["raw_[CLS]"].sum()
    ).values / per_text.n.values))).abs() < 1e-9).all()  # fmt: skip
    assert ((per_text.leverage >= 0) & (per_text.leverage <= 1 + 1e-9)).all()
    per_layer = removal_by_text(table, "[CLS]", per_layer=True)
    assert len(per_layer) == 3 * table.layer.nunique()
    with pytest.raises(ValueError, match="columns"):
        removal_by_text(table, "[MASK]")


def test_random_column_space_keeps_r_over_n_and_nothing_beyond_the_rank():
    from helpers.methods.effective import random_column_space_attention

    A, _, _, _ = random_head(batch=(2000,), n=12)
    rank = torch.full((2000,), 4)
    rank[:5] = 12  # a full-rank head: the projection is the identity
    rank[5:10] = 0  # rank 0: nothing is kept
    g = torch.Generator().manual_seed(0)
    kept = random_column_space_attention(A, rank, g)
    assert kept.shape == A.shape and kept.dtype == torch.float64
    assert torch.allclose(kept[:5], A[:5], atol=1e-9) and (kept[5:10] == 0).all()
    share = kept[10:].pow(2).sum((-2, -1)) / A[10:].pow(2).sum((-2, -1))
    # a uniform random r-plane keeps r/n of ||A||^2 on average, and a projection no more than all of it
    assert abs(float(share.mean()) - 4 / 12) < 0.01 and bool((share <= 1 + 1e-9).all())
    # the kept matrix A Q Q^T has the rank of the random space
    assert int(torch.linalg.matrix_rank(kept[10])) == 4
    again = random_column_space_attention(A, rank, torch.Generator().manual_seed(0))
    assert torch.equal(again, kept)  # the same seed, the same draw
    with pytest.raises(ValueError, match="shape"):
        random_column_space_attention(A, rank[:-1])
    with pytest.raises(ValueError, match="rank"):
        random_column_space_attention(A, torch.full((2000,), 13))


def test_sweep_sets_effective_attention_beside_a_random_column_space(tiny_model, tokenizer):
    examples = [SENTENCE, LONG_TEXT]
    table = effective_attention_sweep(tiny_model, tokenizer, examples, progress=False)
    assert {"kept", "correlation_random", "kept_random"} <= set(table.columns)
    short = table[table.null_dim == 0]
    # no null space: both projections are the identity
    assert ((short.kept - 1).abs() < 1e-6).all() and ((short.kept_random - 1).abs() < 1e-6).all()
    assert ((short.correlation_random - 1).abs() < 1e-6).all()
    long = table[table.null_dim > 0]
    assert len(long) and ((long.kept_random > 0) & (long.kept_random < 1)).all()
    again = effective_attention_sweep(tiny_model, tokenizer, examples, progress=False)
    assert (again.correlation_random == table.correlation_random).all()  # seeded per text
    plain = effective_attention_sweep(tiny_model, tokenizer, examples, progress=False, random_control=False)
    assert "correlation_random" not in plain.columns and (plain.correlation == table.correlation).all()
