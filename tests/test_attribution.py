"""Hidden Token Attribution: forward-mode Jacobian block norms against brute force, and the summaries."""

import pytest
import torch

import helpers
from helpers.methods import jacobians, linearised
from helpers.methods import reference as jacobians_reference

from .conftest import SENTENCE, make_tiny_bert

SHORT = "The cat sat on the mat."
PAIR = ("The cat sat on the mat.", "A cat was sitting on the mat.")


@pytest.fixture(scope="module")
def tiny64():
    return make_tiny_bert().double()


def _x_and_reference(model, tokenizer, text, text_pair=None):
    encoding = helpers.encode(tokenizer, text, text_pair, model=model)
    internals = helpers.capture(model, encoding)
    return encoding, internals.x, internals.hidden_states


# ---------------------------------------------------------------- exactness


@pytest.mark.parametrize("explicit_ffn", [True, False])
def test_exact_equals_brute_force_jacobian(tiny64, tokenizer, explicit_ffn):
    _, x, hidden = _x_and_reference(tiny64, tokenizer, SHORT)
    expected = jacobians_reference.brute_force_block_norms(tiny64, x)  # (L, n, n)
    lin = linearised.linearise(tiny64, x, reference=hidden)
    norms = jacobians.block_norms(lin, explicit_ffn=explicit_ffn, chunk_size=37, progress=False)
    assert norms.shape == expected.shape
    assert torch.allclose(norms, expected, rtol=1e-5, atol=1e-5 * float(expected.max()))
    assert torch.allclose(
        helpers.methods.attribution.contributions_from_norms(norms),
        helpers.methods.attribution.contributions_from_norms(expected),
        atol=1e-5,
    )


def test_memory_budget_and_chunking_do_not_change_the_result(tiny64, tokenizer):
    _, x, hidden = _x_and_reference(tiny64, tokenizer, SHORT)
    lin = linearised.linearise(tiny64, x, reference=hidden)
    full = jacobians.block_norms(lin, explicit_ffn=True, progress=False)
    per_layer_mb = lin.n * lin.d**2 * 8 / 2**20
    assert jacobians.prepare_ffn_jacobians(lin, 10**6, memory_mb=3 * per_layer_mb) == 1  # only layer 1 fits
    for chunk_size in (1, 5, 1000):
        squeezed = jacobians.block_norms(
            lin, explicit_ffn=True, memory_mb=3 * per_layer_mb, chunk_size=chunk_size, progress=False
        )
        assert torch.allclose(squeezed, full, rtol=1e-10)


def test_a_cpu_chunk_spans_at_most_the_cache_sized_row_count(tiny64, tokenizer):
    _, x, hidden = _x_and_reference(tiny64, tokenizer, SHORT)
    lin = linearised.linearise(tiny64, x, reference=hidden)
    size = jacobians.default_chunk_size(lin)
    assert size * lin.n <= jacobians.CPU_ROWS_PER_CHUNK
    assert (size + 1) * lin.n > jacobians.CPU_ROWS_PER_CHUNK  # the cap, not the memory budget, binds here
    assert jacobians.default_chunk_size(lin, memory_mb=1e-3) == 1  # a tiny budget still gives one tangent


def test_public_api_float32_equals_brute_force(tokenizer):
    model = make_tiny_bert(num_layers=3)
    encoding, x, _ = _x_and_reference(model, tokenizer, *PAIR)
    expected = helpers.methods.attribution.contributions_from_norms(
        jacobians_reference.brute_force_block_norms(model, x)
    )
    result = helpers.methods.attribution.hidden_token_attribution(model, encoding, progress=False)
    assert result.layer_numbers == (1, 2, 3)
    assert torch.allclose(result.contributions, expected, atol=1e-5)


def test_dense_tangents_equal_jacobian_vector_products(tiny64, tokenizer):
    _, x, hidden = _x_and_reference(tiny64, tokenizer, SENTENCE)
    lin = linearised.linearise(tiny64, x, reference=hidden)
    tangents = torch.randn(3, *x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(1))
    expected = torch.stack(
        [
            torch.func.jvp(lambda inputs: jacobians_reference.encoder_hidden_states(tiny64, inputs), (x,), (t,))[1]
            for t in tangents
        ],
        dim=1,
    )  # (L, 3, n, d)
    for explicit in (True, False):
        assert jacobians.prepare_ffn_jacobians(lin, tangents=1, explicit=explicit) == (2 if explicit else 0)
        assert torch.allclose(jacobians.hidden_state_tangents(lin, tangents), expected, atol=1e-10)


def test_reference_implementations_agree(tiny64, tokenizer):
    _, x, _ = _x_and_reference(tiny64, tokenizer, "A short one.")
    brute = jacobians_reference.brute_force_block_norms(tiny64, x)
    assert torch.allclose(
        jacobians_reference.reverse_mode_row_norms(tiny64, x, layer=2, token=1), brute[1, 1], atol=1e-10
    )
    with pytest.raises(ValueError, match="layer"):
        jacobians_reference.reverse_mode_row_norms(tiny64, x, layer=3, token=1)
    with pytest.raises(ValueError, match="token"):
        jacobians_reference.reverse_mode_row_norms(tiny64, x, layer=1, token=x.shape[0])
    with pytest.raises(ValueError, match="eval"):
        jacobians_reference.encoder_hidden_states(make_tiny_bert().train(), x.float())
    assert torch.allclose(jacobians_reference.naive_block_norms(tiny64, x, progress=False), brute, atol=1e-10)
    assert torch.allclose(
        jacobians_reference.functorch_block_norms(tiny64, x, chunk_size=50, progress=False), brute, atol=1e-10
    )


@pytest.fixture(scope="module")
def real_short(real_model):
    """The real model on a four-token input, with its exact attribution (computed once)."""
    model, tokenizer = real_model
    encoding, x, hidden = _x_and_reference(model, tokenizer, "Hi.")
    return (
        model,
        encoding,
        x,
        hidden,
        helpers.methods.attribution.hidden_token_attribution(model, encoding, progress=False),
    )


def test_exact_on_the_real_model_equals_autograd_rows(real_short):
    """d rows of the real model's Jacobian (one hidden token, last layer) from reverse mode."""
    model, _, x, hidden, result = real_short
    rows = jacobians_reference.reverse_mode_row_norms(model, x, layer=6, token=2)
    assert torch.allclose(result.norms[-1, 2], rows, rtol=1e-4)
    # and the linearisation reproduces torch.func.jvp through the model's own modules for dense tangents
    lin = linearised.linearise(model, x, reference=hidden)
    tangents = torch.randn(2, *x.shape, generator=torch.Generator().manual_seed(0))
    expected = torch.stack(
        [
            torch.func.jvp(lambda inputs: jacobians_reference.encoder_hidden_states(model, inputs), (x,), (t,))[1]
            for t in tangents
        ],
        dim=1,
    )
    got = jacobians.hidden_state_tangents(lin, tangents)
    assert (got - expected).abs().max() < 1e-4 * expected.abs().max()


def test_primal_pass_is_checked_against_the_model(tiny64, tokenizer):
    _, x, hidden = _x_and_reference(tiny64, tokenizer, SHORT)
    with pytest.raises(ValueError, match="does not reproduce"):
        linearised.linearise(tiny64, x, reference=hidden * 1.01)


def test_a_model_that_does_not_mix_tokens_gives_all_credit_to_the_own_input(tokenizer):
    """Attention forced to the identity: every layer is position-wise, so c_ii = 1."""
    model = make_tiny_bert(num_layers=2, heads=4, hidden=32)
    slots = 8  # dims 0..7 carry a one-hot of the position, which the queries and keys read
    with torch.no_grad():
        embeddings = model.embeddings
        embeddings.word_embeddings.weight[:, :slots] = 0
        embeddings.token_type_embeddings.weight[:, :slots] = 0
        positions = embeddings.position_embeddings.weight
        positions[:, :slots] = 30 * torch.eye(positions.shape[0], slots)
        for layer in model.encoder.layer:
            for projection in (layer.attention.self.query, layer.attention.self.key):
                projection.weight.zero_()
                projection.bias.zero_()
                for head in range(4):
                    projection.weight[head * 8 : head * 8 + slots, :slots] = 20 * torch.eye(slots)
            for dense in (layer.attention.output.dense, layer.output.dense):  # nothing writes into the slots
                dense.weight[:slots] = 0
                dense.bias[:slots] = 0
    encoding = helpers.encode(tokenizer, "One two three.", model=model)
    n = encoding["input_ids"].shape[1]
    assert n <= slots
    A = helpers.capture(model, encoding).A
    assert torch.equal(A, torch.eye(n).expand_as(A))  # the construction works: attention is exactly I
    result = helpers.methods.attribution.hidden_token_attribution(model, encoding, progress=False)
    assert torch.allclose(helpers.methods.attribution.self_contribution(result), torch.ones(2, n), atol=1e-6)
    assert helpers.methods.attribution.own_input_is_largest(result).all()


# ---------------------------------------------------------------- contributions and the estimate


def test_rows_sum_to_one_and_are_non_negative(tiny_model, tokenizer):
    encoding = helpers.encode(tokenizer, *PAIR, model=tiny_model)
    for estimator in helpers.methods.attribution.ESTIMATORS:
        result = helpers.methods.attribution.hidden_token_attribution(
            tiny_model, encoding, estimator=estimator, samples=4, progress=False
        )
        assert torch.allclose(result.contributions.sum(-1), torch.ones(2, result.n), atol=1e-6)
        assert (result.contributions >= 0).all()


def test_estimate_converges_to_exact_as_probes_grow(tiny64, tokenizer):
    encoding = helpers.encode(tokenizer, SENTENCE, model=tiny64)
    exact = helpers.methods.attribution.hidden_token_attribution(tiny64, encoding, progress=False)
    errors = []
    for probes in (2, 8, 24):
        # average over seeds so the trend is the estimator's, not one draw's
        errors.append(
            sum(
                helpers.methods.attribution.compare_attributions(
                    helpers.methods.attribution.hidden_token_attribution(
                        tiny64, encoding, "estimate", samples=probes, seed=s, progress=False
                    ),
                    exact,
                ).median_relative_error
                for s in range(3)
            )
        )
    assert errors[0] > errors[1] > errors[2] > 0
    full = helpers.methods.attribution.hidden_token_attribution(
        tiny64, encoding, "estimate", samples=32, progress=False
    )  # k = d: exact
    assert torch.allclose(full.contributions, exact.contributions, atol=1e-10)


def test_estimate_is_seeded(tiny_model, tokenizer):
    encoding = helpers.encode(tokenizer, SHORT, model=tiny_model)
    first, again, other = (
        helpers.methods.attribution.hidden_token_attribution(
            tiny_model, encoding, "estimate", samples=3, seed=s, progress=False
        )
        for s in (0, 0, 1)
    )
    assert torch.equal(first.norms, again.norms)
    assert not torch.allclose(first.norms, other.norms)


def test_orthonormal_samples():
    U = jacobians.orthonormal_samples(n=3, d=10, k=4, seed=0, dtype=torch.float64)
    assert U.shape == (3, 4, 10)
    assert torch.allclose(U @ U.transpose(1, 2), torch.eye(4).expand(3, 4, 4).double(), atol=1e-12)


def test_layers_subset_matches_the_full_result(tiny_model, tokenizer):
    model = make_tiny_bert(num_layers=3)
    encoding = helpers.encode(tokenizer, SHORT, model=model)
    full = helpers.methods.attribution.hidden_token_attribution(model, encoding, progress=False)
    some = helpers.methods.attribution.hidden_token_attribution(model, encoding, layer_numbers=[2, 1], progress=False)
    assert some.layer_numbers == (2, 1)
    assert torch.allclose(some.contributions, full.contributions[[1, 0]], atol=1e-6)
    assert torch.equal(some.at(1), some.contributions[1])
    with pytest.raises(ValueError, match="not computed"):
        some.at(3)


def test_estimate_on_the_real_model_is_close(real_short):
    model, encoding, _, _, exact = real_short
    estimate = helpers.methods.attribution.hidden_token_attribution(
        model, encoding, "estimate", samples=32, progress=False
    )
    comparison = helpers.methods.attribution.compare_attributions(estimate, exact)
    assert comparison.median_relative_error < 0.05
    assert comparison.top_agreement >= 0.9


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu(tokenizer):
    model = make_tiny_bert()
    encoding = helpers.encode(tokenizer, SHORT, model=model)
    cpu = helpers.methods.attribution.hidden_token_attribution(model, encoding, progress=False)
    model = model.cuda()
    gpu = helpers.methods.attribution.hidden_token_attribution(model, encoding.to("cuda"), progress=False)
    assert torch.allclose(gpu.contributions, cpu.contributions, atol=1e-5)


# ---------------------------------------------------------------- bad input


def test_bad_input_is_rejected(tokenizer):
    model = make_tiny_bert(max_positions=16)
    encoding = helpers.encode(tokenizer, SHORT, model=model)
    with pytest.raises(ValueError, match="Unknown estimator"):
        helpers.methods.attribution.hidden_token_attribution(model, encoding, estimator="gradient")
    with pytest.raises(ValueError, match="samples"):
        helpers.methods.attribution.hidden_token_attribution(model, encoding, estimator="estimate", samples=0)
    with pytest.raises(ValueError, match="samples"):
        helpers.methods.attribution.hidden_token_attribution(model, encoding, estimator="estimate", samples=33)
    with pytest.raises(TypeError, match="integer"):
        helpers.methods.attribution.hidden_token_attribution(model, encoding, estimator="estimate", samples=2.5)
    with pytest.raises(ValueError, match="numbered 1..2"):
        helpers.methods.attribution.hidden_token_attribution(model, encoding, layer_numbers=[0])
    with pytest.raises(ValueError, match="empty"):
        helpers.methods.attribution.hidden_token_attribution(model, encoding, layer_numbers=[])
    too_long = tokenizer(SENTENCE + " " + SENTENCE, return_tensors="pt")  # 30+ tokens, model takes 16
    with pytest.raises(ValueError, match="at most 16"):
        helpers.methods.attribution.hidden_token_attribution(model, too_long)
    padded = tokenizer([SHORT, SENTENCE], padding=True, return_tensors="pt")  # a batch: each sequence is checked
    with pytest.raises(ValueError, match="at most 16"):
        helpers.methods.attribution.hidden_token_attribution(model, padded)
    one = {"input_ids": padded["input_ids"][:1], "attention_mask": padded["attention_mask"][:1]}
    with pytest.raises(ValueError, match="padded"):
        helpers.methods.attribution.hidden_token_attribution(model, one)
    with pytest.raises(ValueError, match="eval"):
        helpers.methods.attribution.hidden_token_attribution(model.train(), encoding)


def test_unsupported_model_is_rejected(tokenizer):
    model = make_tiny_bert(attn_implementation="sdpa")
    with pytest.raises(helpers.model.checks.UnsupportedModelError):
        helpers.methods.attribution.hidden_token_attribution(model, helpers.encode(tokenizer, SHORT))


def test_decoder_layers_are_rejected(tokenizer):
    model = make_tiny_bert()
    for layer in model.encoder.layer:
        layer.is_decoder = True
    with pytest.raises(ValueError, match="encoder-only"):
        helpers.methods.attribution.hidden_token_attribution(model, helpers.encode(tokenizer, SHORT), progress=False)


def test_low_level_bad_input(tiny_model, tokenizer):
    _, x, _ = _x_and_reference(tiny_model, tokenizer, SHORT)
    with pytest.raises(ValueError, match="width"):
        linearised.linearise(tiny_model, x[:, :5])
    with pytest.raises(ValueError, match=r"\(n, d_x\)"):
        linearised.linearise(tiny_model, x[None])
    lin = linearised.linearise(tiny_model, x)
    with pytest.raises(ValueError, match="depth"):
        jacobians.block_norms(lin, depth=3)
    with pytest.raises(ValueError, match="tangents"):
        jacobians.hidden_state_tangents(lin, x)
    with pytest.raises(ValueError, match="directions"):
        next(jacobians.push_tangents(lin, torch.zeros(3, dtype=torch.long), x[:2]))
    with pytest.raises(ValueError, match="chunk_size"):
        jacobians.block_norms(lin, chunk_size=0)
    with pytest.raises(ValueError, match="memory_mb"):
        jacobians.block_norms(lin, memory_mb=0)
    with pytest.raises(ValueError, match="samples"):
        jacobians.orthonormal_samples(2, 4, 5)
    with pytest.raises(ValueError, match="non-negative"):
        helpers.methods.attribution.contributions_from_norms(-torch.ones(2, 2))
    with pytest.raises(ValueError, match="zero Jacobian"):
        helpers.methods.attribution.contributions_from_norms(torch.zeros(2, 2))
    with pytest.raises(ValueError, match=r"\(\.\.\., n, n\)"):
        helpers.methods.attribution.contributions_from_norms(torch.ones(2, 3))


# ---------------------------------------------------------------- summaries


@pytest.fixture(scope="module")
def pair_result(tokenizer):
    model = make_tiny_bert(num_layers=3)
    encoding = helpers.encode(tokenizer, SENTENCE, "Debate over the budget went on for hours.", model=model)
    return helpers.methods.attribution.hidden_token_attribution(model, encoding, progress=False)


def test_distance_groups_partition_the_contributions(pair_result):
    labels, groups = helpers.methods.attribution.distance_groups(pair_result)
    assert labels == ["self", "left 1-5", "left 6-10", "left 11+", "right 1-5", "right 6-10", "right 11+"]
    assert groups.shape == (3, pair_result.n, 7)
    assert torch.allclose(groups.sum(-1), torch.ones(3, pair_result.n), atol=1e-6)
    assert torch.allclose(groups[..., 0], helpers.methods.attribution.self_contribution(pair_result))
    assert torch.all(groups[:, 0, 1:4] == 0)  # the first token has nothing to its left
    assert torch.allclose(groups[:, 3, 1], pair_result.contributions[:, 3, :3].sum(-1))
    with pytest.raises(ValueError, match="low <= high"):
        helpers.methods.attribution.distance_groups(pair_result, bins=((0, 3),))
    with pytest.raises(ValueError, match="empty"):
        helpers.methods.attribution.distance_groups(pair_result, bins=())


def test_cls_summaries(pair_result, tokenizer):
    labels, shares = helpers.methods.attribution.cls_segments(pair_result)
    assert labels == list(helpers.methods.attribution.CLS_SEGMENTS)
    assert torch.allclose(shares.sum(-1), torch.ones(3), atol=1e-6)
    tokens = tokenizer.convert_ids_to_tokens(pair_result.input_ids.tolist())
    sep = tokens.index("[SEP]")
    assert torch.allclose(shares[:, 2], pair_result.contributions[:, 0, sep])
    offsets, around = helpers.methods.attribution.cls_around_separator(pair_result, window=2)
    assert offsets == [-2, -1, 0, 1, 2]
    assert torch.allclose(around[:, 2], pair_result.contributions[:, 0, sep])
    single = helpers.methods.attribution.hidden_token_attribution(
        make_tiny_bert(), helpers.encode(tokenizer, SHORT), progress=False
    )
    with pytest.raises(ValueError, match="not a sentence pair"):
        helpers.methods.attribution.cls_segments(single)
    with pytest.raises(ValueError, match="window"):
        helpers.methods.attribution.cls_around_separator(pair_result, window=-1)


def test_own_input_is_largest_matches_argmax(pair_result):
    largest = helpers.methods.attribution.own_input_is_largest(pair_result)
    argmax = pair_result.contributions.argmax(-1)
    assert torch.equal(largest, argmax == torch.arange(pair_result.n))


def test_share_own_input_not_largest_counts_hidden_tokens_per_layer(pair_result):
    table = helpers.drivers.attribution.self_contribution_table([pair_result])
    share = helpers.drivers.attribution.share_own_input_not_largest(table)
    largest = helpers.methods.attribution.own_input_is_largest(pair_result)  # (L, n)
    expected = 1.0 - largest.double().mean(-1)
    assert list(share.index) == list(pair_result.layer_numbers)
    assert torch.allclose(torch.tensor(share.to_numpy()), expected)
    with pytest.raises(ValueError, match="own_is_largest"):
        helpers.drivers.attribution.share_own_input_not_largest(table.drop(columns="own_is_largest"))


def test_compare_attributions(pair_result, tokenizer):
    same = helpers.methods.attribution.compare_attributions(pair_result, pair_result)
    assert same._asdict() == {
        "median_relative_error": 0.0,
        "p95_relative_error": 0.0,
        "max_abs_error": 0.0,
        "top_agreement": 1.0,
    }
    other = helpers.methods.attribution.hidden_token_attribution(
        make_tiny_bert(), helpers.encode(tokenizer, SHORT), progress=False
    )
    with pytest.raises(ValueError, match="different"):
        helpers.methods.attribution.compare_attributions(other, pair_result)


def test_tables(pair_result):
    results = [pair_result, pair_result]
    table = helpers.drivers.attribution.self_contribution_table(results)
    assert len(table) == 2 * 3 * pair_result.n
    assert table["self_contribution"].between(0, 1).all()
    distance = helpers.drivers.attribution.distance_table(results)
    assert distance.groupby("layer")["contribution"].sum().sub(1).abs().max() < 1e-6
    own = distance[distance["group"] == "self"].set_index("layer")
    assert (own["per_token"] - own["contribution"]).abs().max() < 1e-6  # one (i, i) pair per hidden token
    n = pair_result.n
    left_far = distance[(distance["group"] == "left 11+")].set_index("layer")
    pairs_left_far = sum(max(0, i - 10) for i in range(n))  # j <= i - 11
    assert torch.allclose(
        torch.tensor(left_far["per_token"].to_numpy() * 2 * pairs_left_far),
        torch.tensor(left_far["contribution"].to_numpy() * 2 * n),
        atol=1e-6,
    )
    segments, around = helpers.drivers.attribution.cls_table(results, window=2)
    assert segments.groupby("layer")["contribution"].sum().sub(1).abs().max() < 1e-6
    assert sorted(around["offset"].unique()) == [-2, -1, 0, 1, 2]
    for function in (
        helpers.drivers.attribution.self_contribution_table,
        helpers.drivers.attribution.distance_table,
        helpers.drivers.attribution.cls_table,
    ):
        with pytest.raises(ValueError, match="No results"):
            function([])


def test_paper_layer_maps_by_relative_depth():
    assert helpers.paper.paper_layer(3, 6) == 6
    assert helpers.paper.paper_layer(6, 6) == 12
    with pytest.raises(ValueError):
        helpers.paper.paper_layer(7, 6)


def test_attribution_plots_name_the_estimators_samples(pair_result, tokenizer):
    import matplotlib.pyplot as plt

    estimate = helpers.methods.attribution.hidden_token_attribution(
        make_tiny_bert(), helpers.encode(tokenizer, SHORT), "estimate", samples=3, progress=False
    )
    exact = helpers.methods.attribution.hidden_token_attribution(
        make_tiny_bert(), helpers.encode(tokenizer, SHORT), progress=False
    )
    axes = helpers.plots.plot_contribution_maps(estimate, [str(i) for i in range(estimate.n)], layer_numbers=(1,))
    assert "3 samples per token" in axes[0].figure._suptitle.get_text()
    ax = helpers.plots.plot_estimate_vs_exact(estimate, exact)
    assert "3 samples per token" in ax.get_ylabel()
    plt.close("all")


# ---------------------------------------------------------------- per example, for intervals over pairs


def test_distance_by_example_pools_to_the_corpus_table(pair_result):
    results = [pair_result, pair_result]
    frame = helpers.drivers.attribution.distance_by_example(results)
    assert set(frame["example"]) == {0, 1}
    corpus = helpers.drivers.attribution.distance_table(results).set_index(["layer", "group"])
    pooled = frame.groupby(["layer", "group"])[["total", "pairs"]].sum()
    per_token = pooled["total"] / pooled["pairs"].clip(lower=1)
    assert (per_token - corpus["per_token"]).abs().max() < 1e-6
    near = helpers.drivers.attribution.per_pair_share(frame, ["left 1-5", "right 1-5"])
    assert near.shape == (2, 3)
    n = pair_result.n
    offset = (torch.arange(n)[None, :] - torch.arange(n)[:, None]).abs()
    mask = (offset >= 1) & (offset <= 5)
    expected = pair_result.contributions.double()[:, mask].sum(-1) / mask.sum()
    assert torch.allclose(torch.tensor(near.loc[0].to_numpy()), expected)
    with pytest.raises(ValueError, match="groups"):
        helpers.drivers.attribution.per_pair_share(frame, ["left 99+"])
    with pytest.raises(ValueError, match="No results"):
        helpers.drivers.attribution.distance_by_example([])


def test_cls_table_by_example_averages_to_cls_table(pair_result):
    by_example = helpers.drivers.attribution.cls_table_by_example([pair_result, pair_result], window=2)
    assert list(by_example.segments.columns[:2]) == ["example", "layer"]
    mean = helpers.drivers.attribution.cls_table([pair_result], window=2)
    one = by_example.segments[by_example.segments["example"] == 1].reset_index(drop=True)
    assert (one["contribution"] - mean.segments["contribution"]).abs().max() < 1e-9


def test_depth_spearman():
    import pandas as pd

    frame = pd.DataFrame(
        [[3.0, 2.0, 1.0], [1.0, 2.0, 3.0], [2.0, 2.0, 2.0], [1.0, float("nan"), 0.0]], columns=[1, 2, 3]
    )
    trend = helpers.drivers.attribution.depth_spearman(frame)
    assert trend.tolist() == pytest.approx([-1.0, 1.0, 0.0, -1.0])
    with pytest.raises(ValueError, match="two layers"):
        helpers.drivers.attribution.depth_spearman(frame[[1]])


def test_class_gap_and_its_permutation_control(pair_result, tokenizer):
    results = [pair_result, pair_result, pair_result]
    classes = [helpers.methods.word_classes.word_classes_of(tokenizer, r.input_ids) for r in results]
    table = helpers.drivers.attribution.self_contribution_table(results, classes=classes)
    gap = helpers.drivers.attribution.class_gap(table, "function", from_layer=2)
    summary = helpers.methods.word_classes.class_summary(table)
    wide = summary.pivot(index="layer", columns="word_class", values="median")
    expected = float((wide["content"] - wide["function"]).loc[2:].min())
    assert abs(gap.value - expected) < 1e-12 and gap.sequences == 3
    assert gap.low <= gap.value <= gap.high
    shuffled = helpers.drivers.attribution.class_gap(table, "function", from_layer=2, shuffle=True)
    assert shuffled == helpers.drivers.attribution.class_gap(table, "function", from_layer=2, shuffle=True)
    assert shuffled.sequences == 3
    with pytest.raises(ValueError, match="other"):
        helpers.drivers.attribution.class_gap(table, "content")
    with pytest.raises(ValueError, match="word_class"):
        helpers.drivers.attribution.class_gap(table.drop(columns="word_class"))


def test_class_gap_paired_is_the_two_gaps_and_their_difference(pair_result, tokenizer):
    results = [pair_result] * 4
    classes = [helpers.methods.word_classes.word_classes_of(tokenizer, r.input_ids) for r in results]
    table = helpers.drivers.attribution.self_contribution_table(results, classes=classes)
    paired = helpers.drivers.attribution.class_gap_paired(table, "function", from_layer=2)
    assert paired.gap == helpers.drivers.attribution.class_gap(table, "function", from_layer=2)
    assert paired.shuffled == helpers.drivers.attribution.class_gap(table, "function", from_layer=2, shuffle=True)
    assert paired.difference.value == pytest.approx(paired.gap.value - paired.shuffled.value)
    assert paired.difference.sequences == 4 and paired.difference.low <= paired.difference.high


def test_neighbour_contribution_is_the_mean_of_the_two_next_inputs(pair_result):
    near = helpers.drivers.attribution.neighbour_contribution(pair_result)
    c = pair_result.contributions
    n = pair_result.n
    assert near.shape == (3, n)
    assert torch.allclose(near[:, 0], c[:, 0, 1]) and torch.allclose(near[:, -1], c[:, -1, n - 2])
    assert torch.allclose(near[:, 4], (c[:, 4, 3] + c[:, 4, 5]) / 2)
    table = helpers.drivers.attribution.self_contribution_table([pair_result], neighbours=True)
    assert table["neighbour_contribution"].to_numpy() == pytest.approx(near.double().numpy().ravel())
    assert "neighbour_contribution" not in helpers.drivers.attribution.self_contribution_table([pair_result])


def test_cls_sources_by_example(pair_result, tokenizer):
    frame = helpers.drivers.attribution.cls_sources_by_example([pair_result, pair_result])
    assert len(frame) == 2 * 3 and set(frame["example"]) == {0, 1}
    tokens = tokenizer.convert_ids_to_tokens(pair_result.input_ids.tolist())
    sep, last = tokens.index("[SEP]"), len(tokens) - 1
    row = pair_result.contributions[0, 0].double()
    first = frame.iloc[0]
    assert abs(first["neighbours"] - float((row[sep - 1] + row[sep + 1]) / 2)) < 1e-9
    assert abs(first["separators"] - float((row[sep] + row[last]) / 2)) < 1e-9
    assert abs(first["sentence_2"] - float(row[sep + 1 : last].mean())) < 1e-9
    sentences = torch.cat([row[1:sep], row[sep + 1 : last]])
    assert abs(first["sentences"] - float(sentences.mean())) < 1e-9
    with pytest.raises(ValueError, match="No results"):
        helpers.drivers.attribution.cls_sources_by_example([])


def test_pair_positions_of_a_model_without_token_types():
    """MPNet writes a pair <s> A </s></s> B </s> with no token types: the separators come from the ids."""
    from .test_capture_mpnet import make_mpnet_tokenizer, make_tiny_mpnet

    mpnet_tokenizer = make_mpnet_tokenizer()
    model = make_tiny_mpnet(len(mpnet_tokenizer))
    encoding = helpers.encode(mpnet_tokenizer, "The cat sat.", "It was warm there.", model=model)
    result = helpers.hidden_token_attribution(model, encoding, estimator="estimate", samples=2, progress=False)
    tokens = mpnet_tokenizer.convert_ids_to_tokens(result.input_ids.tolist())
    first = tokens.index("</s>")
    assert tokens[first + 1] == "</s>" and tokens[-1] == "</s>"
    positions = helpers.methods.attribution.pair_positions(result)
    assert positions == (first, len(tokens) - 1, first + 2)
    _, shares = helpers.methods.attribution.cls_segments(result)
    torch.testing.assert_close(shares[:, 2], result.contributions[:, 0, first : first + 2].sum(-1))
    torch.testing.assert_close(shares.sum(-1), torch.ones(len(result.layer_numbers)), rtol=0, atol=1e-6)
    single = helpers.hidden_token_attribution(
        model,
        helpers.encode(mpnet_tokenizer, "The cat sat.", model=model),
        estimator="estimate",
        samples=2,
        progress=False,
    )
    with pytest.raises(ValueError, match="not a sentence pair"):
        helpers.methods.attribution.cls_segments(single)
