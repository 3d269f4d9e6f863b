import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import helpers  # noqa: E402

from .conftest import LONG_TEXT  # noqa: E402

D_V = 8  # head size of the tiny model


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def tiny_internals(tiny_model, tokenizer):
    with torch.no_grad():  # BERT initialises biases to zero; give the values a bias as trained models have
        for layer in tiny_model.encoder.layer:
            layer.attention.self.value.bias.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(1))
    return helpers.capture(tiny_model, helpers.encode(tokenizer, LONG_TEXT, model=tiny_model))


@pytest.fixture(scope="module")
def real_internals(real_model):
    model, tokenizer = real_model
    return helpers.capture(model, helpers.encode(tokenizer, LONG_TEXT, model=model))


# ----------------------------------------------------------------- prefixes and rank sweeps


# ----------------------------------------------------------------- principal angles


def test_principal_angles_of_one_subspace_in_two_bases_are_zero():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(12, 4, generator=g, dtype=torch.float64)
    Y = X @ torch.randn(4, 4, generator=g, dtype=torch.float64)  # same span, another basis
    assert helpers.methods.nullspace.principal_angles(X, Y).max() < 1e-7


def test_principal_angles_of_orthogonal_subspaces_are_right_angles():
    eye = torch.eye(6, dtype=torch.float64)
    angles = helpers.methods.nullspace.principal_angles(eye[:, :2], eye[:, 2:5])
    assert angles.shape == (2,)
    assert torch.allclose(angles, torch.full((2,), math.pi / 2, dtype=torch.float64))
    assert helpers.methods.nullspace.principal_angles(eye[:, :0], eye[:, :3]).shape == (0,)


def test_principal_angles_match_scipy():
    import scipy.linalg

    g = torch.Generator().manual_seed(5)
    X, Y = torch.randn(20, 6, generator=g, dtype=torch.float64), torch.randn(20, 4, generator=g, dtype=torch.float64)
    expected = scipy.linalg.subspace_angles(X.numpy(), Y.numpy())
    assert np.allclose(helpers.methods.nullspace.principal_angles(X, Y).numpy(), expected, atol=1e-10)
    assert np.allclose(helpers.methods.nullspace.principal_angles(Y, X).numpy(), expected, atol=1e-10)


def test_principal_angles_bad_input():
    with pytest.raises(ValueError, match="same space"):
        helpers.methods.nullspace.principal_angles(torch.ones(4, 2), torch.ones(5, 2))
    with pytest.raises(ValueError, match="NaN"):
        helpers.methods.nullspace.principal_angles(torch.full((4, 2), float("nan")), torch.ones(4, 2))
    with pytest.raises(TypeError):
        helpers.methods.nullspace.principal_angles(np.ones((4, 2)), torch.ones(4, 2))


def check_null_space_comparison(frame, n, d_v):
    assert (frame["rank_H"] == d_v).all()
    for key in ("paper", "book", "bias"):
        assert (frame[f"dim_a_{key}"] == n - d_v).all() and (frame[f"dim_b_{key}"] == n - d_v).all()
    # H has full row rank: multiplying by H keeps the null space
    assert frame["angle_paper"].max() < 1e-2
    assert frame["angle_book"].max() < 1e-2
    # the value bias tilts exactly one direction of the null space
    assert frame["angle_bias"].min() > 1.0
    assert frame["angle_bias_second"].max() < 1e-2


def test_null_spaces_of_values_and_T_coincide_on_tiny_model(tiny_internals):
    frame = helpers.methods.nullspace.compare_null_spaces(tiny_internals, simplex=True, progress=False)
    assert len(frame) == 2 * 4
    check_null_space_comparison(frame, tiny_internals.n, D_V)
    # with the row-sum constraint the value bias no longer matters
    for key in ("EW", "V", "T"):
        assert (frame[f"dim_simplex_{key}"] == tiny_internals.n - D_V - 1).all()
    assert frame["angle_simplex_bias"].max() < 1e-2 and frame["angle_simplex_book"].max() < 1e-2


def test_null_spaces_of_values_and_T_coincide_on_real_model(real_internals):
    sub = helpers.Internals(
        **{
            k: (
                getattr(real_internals, k)[:1]
                if isinstance(getattr(real_internals, k), torch.Tensor) and k not in ("input_ids", "x")
                else getattr(real_internals, k)
            )
            for k in real_internals.__dataclass_fields__
        }
    )
    frame = helpers.methods.nullspace.compare_null_spaces(sub, progress=False)
    check_null_space_comparison(frame, real_internals.n, 32)


# ----------------------------------------------------------------- simplex-constrained null space


def test_simplex_null_space_is_orthonormal_and_annihilates_T_and_ones(tiny_internals):
    T = tiny_internals.T[1, 2]
    n = T.shape[0]
    N = helpers.methods.nullspace.simplex_null_space(T)
    assert N.shape == (n, n - D_V - 1)
    assert torch.allclose(N.T @ N, torch.eye(N.shape[1], dtype=torch.float64), atol=1e-10)
    assert (N.T @ T.double()).abs().max() < 1e-5 * T.abs().max()
    assert (N.T @ torch.ones(n, dtype=torch.float64)).abs().max() < 1e-10


def test_simplex_null_space_ignores_the_value_bias(tiny_internals):
    # LN([E W^V, 1]) = LN([E W^V + 1 b^V, 1]) = LN([V, 1]): the bias only adds a multiple of 1
    layer, head = 0, 3
    EW = tiny_internals.E[layer].double() @ tiny_internals.W_V[layer, head].double()
    angles = helpers.methods.nullspace.principal_angles(
        helpers.methods.nullspace.simplex_null_space(EW),
        helpers.methods.nullspace.simplex_null_space(tiny_internals.V[layer, head]),
    )
    assert angles.shape == (tiny_internals.n - D_V - 1,)
    assert angles.max() < 1e-6


def test_null_space_dimensions_batched(tiny_internals):
    plain, simplex = helpers.methods.nullspace.null_space_dimensions(tiny_internals.T)
    n = tiny_internals.n
    assert plain.shape == (2, 4)
    assert (plain == n - D_V).all() and (simplex == n - D_V - 1).all()
    one_plain, one_simplex = helpers.methods.nullspace.null_space_dimensions(tiny_internals.T[1, 1])
    assert int(one_plain) == int(plain[1, 1]) and int(one_simplex) == int(simplex[1, 1])
    with pytest.raises(ValueError):
        helpers.methods.nullspace.null_space_dimensions(torch.ones(3))


def test_null_projection_bad_input():
    with pytest.raises(ValueError, match="length"):
        helpers.methods.nullspace.null_projection(torch.ones(3, 4), torch.ones(5, 2))
    with pytest.raises(ValueError, match="NaN"):
        helpers.methods.nullspace.null_projection(torch.full((3, 4), float("inf")), torch.ones(4, 2))


@pytest.mark.parametrize("simplex", [False, True])
def test_same_output_towards_keeps_the_head_output(tiny_internals, simplex):
    A, T = tiny_internals.A[0, 1], tiny_internals.T[0, 1]
    n = A.shape[0]
    target = torch.eye(n)
    alt = helpers.methods.nullspace.same_output_towards(A, T, target, simplex=simplex)
    assert (alt - A).abs().max() > 0.05  # visibly different
    assert ((alt - A).double() @ T.double()).abs().max() < 1e-4 * (A @ T).abs().max()
    if simplex:
        assert (alt.sum(-1) - 1).abs().max() < 1e-5
    # it moved towards the target
    assert torch.linalg.matrix_norm(alt - target) < torch.linalg.matrix_norm(A - target)
    with pytest.raises(ValueError, match="shape"):
        helpers.methods.nullspace.same_output_towards(A, T, torch.eye(n + 1))


def test_null_direction_rows_lie_in_the_constrained_null_space(tiny_internals):
    T = tiny_internals.T[1, 0]
    D = helpers.methods.nullspace.null_direction(T, seed=3)
    assert D.shape == (T.shape[0], T.shape[0])
    assert abs(float(torch.linalg.matrix_norm(D)) - 1) < 1e-12
    assert (D @ T.double()).abs().max() < 1e-5 * T.abs().max()
    assert D.sum(-1).abs().max() < 1e-12
    # two seeds, two directions
    other = helpers.methods.nullspace.null_direction(T, seed=4)
    assert (other - D).abs().max() > 1e-3


def test_null_direction_bad_input(tiny_model, tokenizer, tiny_internals):
    short = helpers.capture(tiny_model, helpers.encode(tokenizer, "A short one.", model=tiny_model))
    assert short.n <= D_V + 1
    with pytest.raises(ValueError, match="identifiable"):
        helpers.methods.nullspace.null_direction(short.T[0, 0])
    T = tiny_internals.T[0, 0]
    with pytest.raises(ValueError, match="coefficients"):
        helpers.methods.nullspace.null_direction(T, coefficients=torch.ones(3, 3))
    k = T.shape[0] - D_V - 1
    with pytest.raises(ValueError, match="zero"):
        helpers.methods.nullspace.null_direction(T, coefficients=torch.zeros(T.shape[0], k))


def test_step_range_is_the_exact_non_negative_interval(tiny_internals):
    A, T = tiny_internals.A[1, 1], tiny_internals.T[1, 1]
    D = helpers.methods.nullspace.null_direction(T, seed=0)
    low, high = helpers.methods.nullspace.step_range(A, D)
    assert low < 0 < high
    A64 = A.double()
    assert float((A64 + high * D).min()) > -1e-12 and float((A64 + low * D).min()) > -1e-12
    assert abs(float((A64 + high * D).min())) < 1e-12  # the range ends where an entry hits zero
    assert float((A64 + 1.001 * high * D).min()) < 0 and float((A64 + 1.001 * low * D).min()) < 0


def test_step_range_bad_input():
    A = torch.full((3, 3), 1 / 3)
    with pytest.raises(ValueError, match="same shape"):
        helpers.methods.nullspace.step_range(A, torch.zeros(2, 2))
    with pytest.raises(ValueError, match="negative"):
        helpers.methods.nullspace.step_range(A - 0.5, torch.zeros(3, 3))
    with pytest.raises(ValueError, match="NaN"):
        helpers.methods.nullspace.step_range(A, torch.full((3, 3), float("nan")))
    low, high = helpers.methods.nullspace.step_range(A, torch.zeros(3, 3))
    assert low == -math.inf and high == math.inf


def check_family(A, T, family):
    report = helpers.methods.nullspace.validity(family.attentions, A, T)
    assert report.min_entry >= -1e-12  # unclamped: an entry driven to zero may end a rounding error below it
    assert report.row_sum_error < 1e-6
    assert report.output_error < 1e-5
    # the extremes touch zero: the step range is tight
    assert abs(float(family.attentions[0].min())) < 1e-12 and abs(float(family.attentions[-1].min())) < 1e-12


def test_alternative_family_is_valid_on_tiny_model(tiny_internals):
    A, T = tiny_internals.A[0, 2], tiny_internals.T[0, 2]
    family = helpers.alternative_family(A, T, [-1.0, -0.3, 0.0, 0.6, 1.0], seed=1)
    assert family.attentions.shape == (5, *A.shape)
    assert torch.allclose(family.attentions[2], A.double())
    check_family(A, T, family)
    # how far the ends lie apart depends on the random null direction, which differs between LAPACK
    # builds (the null basis is only defined up to rotation): test what holds for any direction instead.
    # The ends are distinct members (far above float64 noise) and each sits on the simplex's boundary.
    assert (family.attentions[0] - family.attentions[-1]).abs().max() > 1e-6
    for end in (family.attentions[0], family.attentions[-1]):
        assert end.min() < 1e-12 * A.max() and end.min() > -1e-12


def test_alternative_family_is_valid_on_real_model(real_internals):
    A, T = real_internals.A[3, 5], real_internals.T[3, 5]
    assert real_internals.n > 33
    check_family(A, T, helpers.alternative_family(A, T, seed=0))


def test_alternative_family_bad_input(tiny_internals):
    A, T = tiny_internals.A[0, 0], tiny_internals.T[0, 0]
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        helpers.alternative_family(A, T, [0.5, 2.0])
    with pytest.raises(ValueError, match="sum to 1"):
        helpers.alternative_family(A * 2, T)
    with pytest.raises(ValueError, match="negative"):
        helpers.alternative_family(A - 0.5, T)
    with pytest.raises(ValueError, match="outside"):
        helpers.alternative_family(A, T, direction=torch.randn(A.shape, generator=torch.Generator().manual_seed(0)))
    with pytest.raises(ValueError, match="rows"):
        helpers.alternative_family(A, T[:-1])
    with pytest.raises(ValueError, match="square"):
        helpers.alternative_family(A[:, :-1], T)
    with pytest.raises(ValueError, match="NaN"):
        helpers.alternative_family(A, T * float("nan"))


def test_validity_flags_a_wrong_alternative(tiny_internals):
    A, T = tiny_internals.A[0, 0], tiny_internals.T[0, 0]
    wrong = torch.roll(A, 1, dims=1)  # valid distribution, different output
    report = helpers.methods.nullspace.validity(wrong, A, T)
    assert report.min_entry >= 0 and report.row_sum_error < 1e-5 and report.output_error > 1e-2
    with pytest.raises(ValueError, match="shape"):
        helpers.methods.nullspace.validity(torch.ones(2, 2), A, T)


# ----------------------------------------------------------------- plots


def test_plots_draw(tiny_model, tokenizer, tiny_internals):
    frame = helpers.rank_sweep(tiny_model, [helpers.encode(tokenizer, LONG_TEXT)], [4, 8, 16], progress=False)
    axes = helpers.plots.plot_rank_sweep(frame, D_V, source="test")
    assert len(axes) == 2 and axes[0].get_xlabel()
    helpers.plots.plot_null_space_angles(helpers.methods.nullspace.compare_null_spaces(tiny_internals, progress=False))
    A, T = tiny_internals.A[0, 0], tiny_internals.T[0, 0]
    family = helpers.alternative_family(A, T, seed=0)
    helpers.plots.plot_family_rows(family.attentions, row=3)
    helpers.plots.plot_attention_comparison({"A": A, "diff": family.attentions[0] - A}, signed=["diff"])
    helpers.plots.plot_hidden_change({"null": torch.ones(3) * 1e-7, "control": torch.ones(3)}, patched_layer=0)
    helpers.plots.plot_lp_ranges(A * 0, A * 2, A, row=1)
    fig = helpers.plots.plot_null_step(A, family.attentions[0], 1e-9, steps=[0.1])
    assert len(fig.axes) >= 3
    plt.close("all")


def test_plots_bad_input(tiny_internals):
    A = tiny_internals.A[0, 0]
    with pytest.raises(ValueError, match="columns"):
        helpers.plots.plot_rank_sweep(__import__("pandas").DataFrame({"n": [1]}), 8)
    with pytest.raises(TypeError):
        helpers.plots.plot_rank_sweep({"n": [1]}, 8)
    with pytest.raises(ValueError, match="row"):
        helpers.plots.plot_family_rows(A[None], row=10_000)
    with pytest.raises(ValueError, match="one shape"):
        helpers.plots.plot_lp_ranges(A, A[:-1], A, row=0)
    with pytest.raises(ValueError, match="empty"):
        helpers.plots.plot_attention_comparison({})
    plt.close("all")


def test_row_total_variation():
    A = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    B = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    tv = helpers.methods.nullspace.row_total_variation(A, B)
    assert tv.dtype == torch.float64 and torch.allclose(tv, torch.tensor([0.0, 1.0], dtype=torch.float64))
    # broadcast: several heads against one
    stacked = helpers.methods.nullspace.row_total_variation(torch.stack([A, B]), A[None])
    assert stacked.shape == (2, 2) and float(stacked[1, 1]) == 1.0
    with pytest.raises(ValueError, match="one length"):
        helpers.methods.nullspace.row_total_variation(A, torch.ones(2, 2))
    with pytest.raises(TypeError):
        helpers.methods.nullspace.row_total_variation(A.numpy(), B)


def test_random_values_keep_the_dimension_of_the_constrained_null_space(tiny_internals):
    from helpers.methods.nullspace import null_space_dimensions, random_values

    T = tiny_internals.T[0, 0]
    X = random_values(T, seed=3)
    assert X.shape == (
        T.shape[0],
        int(helpers.numerical_rank(torch.cat([T.double(), torch.ones(T.shape[0], 1, dtype=torch.float64)], 1))) - 1,
    )
    assert int(null_space_dimensions(X).with_ones) == int(null_space_dimensions(T).with_ones)
    assert torch.equal(X, random_values(T, seed=3)) and not torch.equal(X, random_values(T, seed=4))


def test_rank_ties_mark_where_rank_T_may_differ_from_rank_V_by_the_threshold_alone():
    from types import SimpleNamespace

    from helpers.methods.linalg import numerical_rank
    from helpers.methods.nullspace import rank_ties

    torch.manual_seed(0)
    n, d_v, d = 6, 4, 10
    Q, _ = torch.linalg.qr(torch.randn(n, d_v, dtype=torch.float64))
    R, _ = torch.linalg.qr(torch.randn(d_v, d_v, dtype=torch.float64))
    H = torch.randn(d_v, d, dtype=torch.float64)
    kappa = float(torch.linalg.svdvals(H)[0] / torch.linalg.svdvals(H)[-1])
    rtol = 1e-5
    far = Q @ torch.diag(torch.tensor([1.0, 0.5, 0.1, 1e-3], dtype=torch.float64)) @ R
    near = Q @ torch.diag(torch.tensor([1.0, 0.5, 0.1, rtol * (1 + kappa) / 2], dtype=torch.float64)) @ R
    internals = SimpleNamespace(V=torch.stack([far, near])[None], H=H.expand(1, 2, d_v, d))
    ties = rank_ties(internals, rtol)
    assert ties.tolist() == [[False, True]]
    # where there is no tie the two ranks agree, as the identity says
    assert numerical_rank(far @ H, rtol) == numerical_rank(far, rtol) == 4
