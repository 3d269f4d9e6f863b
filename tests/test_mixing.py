"""Context-mixing measures: each against an independent slow implementation (helpers.methods.reference)."""

import numpy as np
import pandas as pd
import pytest
import torch

import helpers
from helpers.methods import reference

from .conftest import make_tiny_bert

PAIR = ("The cat sat on the mat.", "It was happy.")


@pytest.fixture(scope="module")
def tiny64():
    return make_tiny_bert().double()


@pytest.fixture(scope="module")
def setup(tiny64, tokenizer):
    encoding = helpers.encode(tokenizer, *PAIR, model=tiny64)
    return tiny64, encoding, helpers.capture(tiny64, encoding)


# ---------------------------------------------------------------- defining identities


@pytest.mark.parametrize("effective", [False, True, "null_doubled", "null_random"])
def test_decomposition_sums_to_the_real_intermediate_and_layer_outputs(setup, effective):
    model, encoding, internals = setup
    for layer in range(1, internals.num_layers + 1):
        slow = reference.norm_vectors_reference(model, encoding, layer)
        parts = helpers.methods.decomposition.decompose_layer(model, internals, layer, effective=effective)
        # LN1's real input: sum_j z_ij + b^O; its real output: sum_j g1(z_ij) + g1(b^O) + beta_1
        b_O = model.encoder.layer[layer - 1].attention.output.dense.bias
        assert torch.allclose(parts.z.sum(1) + b_O, slow.ln1_in, atol=1e-5)
        assert torch.allclose(parts.ln1.sum(1) + parts.ln1_rest, slow.ln1_out, atol=1e-5)
        assert torch.allclose(parts.ln2.sum(1) + parts.ln2_rest, internals.hidden_states[layer], atol=1e-5)
        if not effective:  # the per-(i, j) vectors themselves, from loops over the raw weights
            assert torch.allclose(parts.attention, slow.attention, atol=1e-10)
            assert torch.allclose(parts.z, slow.z, atol=1e-10)


def test_effective_attention_changes_the_vectors_not_their_sum(setup):
    model, _, internals = setup
    plain = helpers.methods.decomposition.decompose_layer(model, internals, 2)
    effective = helpers.methods.decomposition.decompose_layer(model, internals, 2, effective=True)
    assert torch.allclose(plain.attention.sum(1), effective.attention.sum(1), atol=1e-8)
    assert (plain.attention - effective.attention).abs().max() > 1e-3  # n > d_v: a real null part


def test_same_output_rewrites_keep_the_head_output_and_move_as_far_as_the_null_part(setup):
    _, _, internals = setup
    A, V, H, T = internals.A[1], internals.V[1], internals.H[1], internals.T[1]
    rewrite = helpers.methods.decomposition.rewrite_attention
    null = A - rewrite(A, V, H, "effective")
    assert null.abs().max() > 1e-3  # n > d_v: a real null part
    for how in helpers.methods.decomposition.REWRITES:
        B = rewrite(A, V, H, how, seed=3)
        assert torch.allclose(B @ T, A @ T, atol=1e-8), how  # the same head output
        # each move has, row by row, the size of the null part: effective -A_null, doubled +A_null, random R
        assert torch.allclose((B - A).norm(dim=-1), null.norm(dim=-1), atol=1e-8), how
    random = rewrite(A, V, H, "null_random", seed=3) - A
    assert torch.equal(random, rewrite(A, V, H, "null_random", seed=3) - A)  # seeded
    assert not torch.allclose(random, null, atol=1e-3) and not torch.allclose(random, -null, atol=1e-3)
    with pytest.raises(ValueError, match="rewrite"):
        rewrite(A, V, H, "shuffle")


def test_rewritten_measures_carry_their_own_names(setup):
    model, _, internals = setup
    measures = [("globenc", {"effective": r}) for r in (True, "effective", "null_doubled", "null_random")]
    names = [m.name for m in helpers.methods.mixing.local_measures(model, internals, measures)]
    assert names == ["globenc+eff", "globenc+eff", "globenc+2null", "globenc+rnull"]
    rolled = helpers.methods.mixing.rolled_out(helpers.methods.mixing.local_measures(model, internals, measures[3:])[0])
    assert rolled.name == "globenc+rnull rollout"


def test_norm_scores_follow_their_definitions(setup):
    model, encoding, internals = setup
    slow = reference.norm_vectors_reference(model, encoding, 1)
    expected = {
        "attention_norm": slow.attention.norm(dim=-1),
        "norm_residual": slow.z.norm(dim=-1),
    }
    for measure, unnormalised in expected.items():
        got = helpers.methods.mixing.context_mixing(model, encoding, measure).at(1)
        assert torch.allclose(got, helpers.methods.rollout.normalise_rows(unnormalised).float(), atol=1e-6)
    # ALTI from its definition with the real LN1 output y
    parts = helpers.methods.decomposition.decompose_layer(model, internals, 1)
    y = slow.ln1_out
    alti = torch.zeros(internals.n, internals.n, dtype=y.dtype)
    for i in range(internals.n):
        for j in range(internals.n):
            alti[i, j] = max(0.0, float(y[i].abs().sum() - (y[i] - parts.ln1[i, j]).abs().sum()))
    assert torch.allclose(
        helpers.methods.mixing.context_mixing(model, encoding, "alti").at(1),
        helpers.methods.rollout.normalise_rows(alti).float(),
        atol=1e-6,
    )


def test_value_zeroing_equals_hooked_reruns(setup):
    model, encoding, internals = setup
    result = helpers.methods.mixing.context_mixing(model, encoding, "value_zeroing")
    for layer in (1, 2):
        slow = reference.value_zeroing_reference(model, encoding, layer)
        assert torch.allclose(helpers.methods.mixing.value_zeroing_scores(model, internals, layer), slow, atol=1e-8)
        assert torch.allclose(result.at(layer), helpers.methods.rollout.normalise_rows(slow).float(), atol=1e-5)


def test_grad_input_equals_autograd(tiny64, tokenizer):
    model, encoding = tiny64, helpers.encode(tokenizer, "The cat sat.", model=tiny64)
    slow = reference.grad_input_reference(model, encoding)
    result = helpers.methods.mixing.context_mixing(model, encoding, "grad_input")
    assert torch.allclose(result.scores, helpers.methods.rollout.normalise_rows(slow).float(), atol=1e-6)
    assert result.is_global and not result.rollout


def test_local_hta_equals_the_full_layer_jacobian(setup, one_thread):
    model, encoding, _ = setup
    slow = helpers.methods.rollout.normalise_rows(reference.local_hta_reference(model, encoding)).float()
    exact = helpers.methods.mixing.local_hta(model, encoding)
    assert torch.allclose(exact.scores, slow, atol=1e-6)
    estimate = helpers.methods.mixing.local_hta(model, encoding, samples=4, seed=1)
    assert (estimate.scores - slow).abs().max() > 1e-4  # a real estimate ...
    assert (
        helpers.methods.linalg.row_spearman(estimate.scores, slow).nanmedian() > 0.8
    )  # ... that tracks the exact values


def test_rollout_is_the_explicit_product(setup):
    model, encoding, internals = setup
    for measure in ("attention", "globenc", "value_zeroing"):
        local = helpers.methods.mixing.context_mixing(model, encoding, measure).scores
        rolled = helpers.methods.mixing.context_mixing(
            model, encoding, measure, rollout=True, aggregation="normalise_first"
        ).scores
        if measure == "attention":
            eye = torch.eye(internals.n)
            local = 0.5 * local + 0.5 * eye
            local = local / local.sum(-1, keepdim=True)
        assert torch.allclose(rolled[0], local[0], atol=1e-6)
        assert torch.allclose(rolled[1], local[1] @ local[0], atol=1e-6)


def test_the_two_orders_by_hand():
    # layer 1's rows sum to 4 and 2, so the order matters
    N1 = torch.tensor([[1.0, 3.0], [1.0, 1.0]])
    N2 = torch.tensor([[2.0, 0.0], [1.0, 3.0]])
    local = helpers.methods.mixing.Mixing(
        scores=torch.stack([N1 / N1.sum(-1, keepdim=True), N2 / N2.sum(-1, keepdim=True)]),
        measure="globenc",
        rollout=False,
        totals=torch.stack([N1.sum(-1), N2.sum(-1)]),
    )
    first = helpers.methods.mixing.rolled_out(local, "normalise_first")
    last = helpers.methods.mixing.rolled_out(local)  # GlobEnc's own order
    assert last.aggregation == "normalise_last" and last.name == "globenc rollout"
    assert first.name == "globenc rollout (normalise first)"
    # normalise first: [[1, 0], [1/4, 3/4]] @ [[1/4, 3/4], [1/2, 1/2]]
    assert torch.allclose(first.at(2), torch.tensor([[0.25, 0.75], [0.4375, 0.5625]]))
    # normalise last: N2 N1 = [[2, 6], [4, 6]], rows normalised
    assert torch.allclose(last.at(2), torch.tensor([[0.25, 0.75], [0.4, 0.6]]), atol=1e-7)
    assert torch.allclose(last.at(1), first.at(1))


def test_globenc_rolls_out_its_unnormalised_norms(setup):
    """GlobEnc's rollout on a tiny model against the product of its norms, computed here."""
    model, encoding, internals = setup
    norms = [
        helpers.methods.decomposition.norm_scores(
            helpers.methods.decomposition.decompose_layer(model, internals, layer), "globenc"
        )
        for layer in (1, 2)
    ]
    by_hand = helpers.methods.rollout.normalise_rows(norms[1] @ norms[0])
    rolled = helpers.methods.mixing.context_mixing(model, encoding, "globenc", rollout=True)
    assert rolled.aggregation == "normalise_last"
    assert torch.allclose(rolled.at(2).double(), by_hand.double(), atol=1e-6)
    toolkit = helpers.methods.mixing.context_mixing(
        model, encoding, "globenc", rollout=True, aggregation="normalise_first"
    )
    assert (toolkit.at(2) - rolled.at(2)).abs().max() > 1e-3  # the order matters here too
    for measure in helpers.methods.decomposition.NORM_MEASURES:
        result = helpers.methods.mixing.context_mixing(
            model, encoding, measure, rollout=True, aggregation="normalise_last"
        )
        parts = [helpers.methods.decomposition.decompose_layer(model, internals, k) for k in (1, 2)]
        N = [helpers.methods.decomposition.norm_scores(p, measure) for p in parts]
        assert torch.allclose(
            result.at(2).double(), helpers.methods.rollout.normalise_rows(N[1] @ N[0]).double(), atol=1e-6
        )


def test_unnormalised_rollout_survives_twelve_layers_of_large_norms():
    local = torch.full((12, 5, 5), 1e4)
    local[:, 0, 0] = 1e5
    rolled = helpers.methods.rollout.unnormalised_rollout(local)
    assert torch.isfinite(rolled).all()
    assert torch.allclose(rolled.sum(-1), torch.ones(12, 5, dtype=rolled.dtype))


def test_value_zeroing_keeps_its_digits_in_float32(real_model):
    """Float32 value zeroing agrees with float64 on the bundled model (1 - cos would not)."""
    import copy

    model, tokenizer = real_model
    model64 = copy.deepcopy(model).double()
    encoding = helpers.encode(tokenizer, *PAIR, model=model)
    internals32, internals64 = helpers.capture(model, encoding), helpers.capture(model64, encoding)
    worst = 0.0
    for layer in range(1, internals32.num_layers + 1):
        single = helpers.methods.mixing.value_zeroing_scores(model, internals32, layer).double()
        double = helpers.methods.mixing.value_zeroing_scores(model64, internals64, layer)
        normalise = helpers.methods.rollout.normalise_rows
        worst = max(worst, float((normalise(single) - normalise(double)).abs().max()))
    assert worst < 1e-4


def test_cosine_distance_has_no_cancellation():
    u = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    v = u + torch.tensor([[1e-5, -2e-5, 0.5e-5]], dtype=torch.float64)
    exact = helpers.methods.linalg.cosine_distance(u, v)
    single = helpers.methods.linalg.cosine_distance(u.float(), v.float())
    naive = 1 - torch.nn.functional.cosine_similarity(u.float(), v.float())
    assert float((single.double() - exact).abs() / exact) < 1e-2
    assert float((naive.double() - exact).abs() / exact) > 0.1  # what the old formula lost
    with pytest.raises(ValueError, match="zero vector"):
        helpers.methods.linalg.cosine_distance(torch.zeros(1, 3), u.float())


def test_every_method_gives_rows_that_sum_to_one(setup):
    model, encoding, internals = setup
    for measure in helpers.methods.mixing.MEASURES:
        for rollout in (False, True):
            if rollout and measure in helpers.methods.mixing.GLOBAL_MEASURES:
                continue
            result = helpers.methods.mixing.context_mixing(model, encoding, measure, rollout=rollout)
            assert result.scores.shape == (internals.num_layers, internals.n, internals.n)
            assert (result.scores >= 0).all()
            assert torch.allclose(result.scores.sum(-1), torch.ones(internals.num_layers, internals.n), atol=1e-5)
            assert result.measure == measure and result.rollout == rollout


def test_hta_passes_its_options(setup):
    model, encoding, _ = setup
    exact = helpers.methods.mixing.context_mixing(model, encoding, "hta")
    attribution = helpers.hidden_token_attribution(model, encoding, progress=False)
    assert torch.equal(exact.scores, attribution.contributions)
    estimate = helpers.methods.mixing.context_mixing(model, encoding, "hta", estimator="estimate", samples=4, seed=3)
    assert not torch.equal(estimate.scores, exact.scores)
    with pytest.raises(ValueError, match=r"Unknown options \['layer_numbers'\]"):  # a Mixing holds every layer
        helpers.methods.mixing.context_mixing(model, encoding, "hta", layer_numbers=[2])


def test_row_spearman_and_leave_one_out(setup, tokenizer):
    model, encoding, internals = setup
    a = torch.tensor([[[1.0, 2.0, 3.0], [3.0, 1.0, 2.0]]])
    assert torch.allclose(helpers.methods.linalg.row_spearman(a, a), torch.ones(1, 2, dtype=torch.float64))
    assert helpers.methods.linalg.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    loo = helpers.methods.mixing.leave_one_out(model, encoding, tokenizer.mask_token_id)
    assert loo.shape == (internals.n,) and (loo >= -1e-6).all() and loo.max() > 0


# ---------------------------------------------------------------- bad input


def test_bad_input_gets_clear_errors(setup, tokenizer):
    model, encoding, internals = setup
    with pytest.raises(ValueError, match="Unknown measure"):
        helpers.methods.mixing.context_mixing(model, encoding, "flow")
    with pytest.raises(ValueError, match="rollout is not defined"):
        helpers.methods.mixing.context_mixing(model, encoding, "hta", rollout=True)
    with pytest.raises(ValueError, match="rollout is not defined"):
        helpers.methods.mixing.context_mixing(model, encoding, "grad_input", rollout=True)
    with pytest.raises(TypeError, match="rollout"):
        helpers.methods.mixing.context_mixing(model, encoding, "attention", rollout="yes")
    with pytest.raises(ValueError, match="norm-based"):
        helpers.methods.mixing.context_mixing(model, encoding, "attention", effective=True)
    with pytest.raises(ValueError, match="rollout=True"):
        helpers.methods.mixing.context_mixing(model, encoding, "globenc", aggregation="normalise_last")
    with pytest.raises(ValueError, match="Unknown aggregation"):
        helpers.methods.mixing.context_mixing(model, encoding, "globenc", rollout=True, aggregation="sum")
    with pytest.raises(ValueError, match="Abnar"):
        helpers.methods.mixing.context_mixing(model, encoding, "attention", rollout=True, aggregation="normalise_last")
    with pytest.raises(ValueError, match="Unknown options"):
        helpers.methods.mixing.context_mixing(model, encoding, "alti", samples=3)
    with pytest.raises(ValueError, match="no options"):
        helpers.methods.mixing.context_mixing(model, encoding, "grad_input", effective=True)
    padded = tokenizer(["The cat sat.", "A much longer sentence than that."], padding=True, return_tensors="pt")
    assert len(helpers.methods.mixing.context_mixing(model, padded, "alti")) == 2  # a batch: one per sequence
    one = {"input_ids": padded["input_ids"][:1], "attention_mask": padded["attention_mask"][:1]}
    with pytest.raises(ValueError, match="padded"):
        helpers.methods.mixing.context_mixing(model, one, "alti")
    with pytest.raises(ValueError, match="samples"):
        helpers.methods.mixing.local_hta(model, encoding, samples=0)
    with pytest.raises(ValueError, match="mask_token_id"):
        helpers.methods.mixing.leave_one_out(model, encoding, -1)
    with pytest.raises(ValueError, match="layer"):
        helpers.methods.decomposition.decompose_layer(model, internals, 0)
    with pytest.raises(ValueError, match="non-negative"):
        helpers.methods.rollout.normalise_rows(-torch.ones(2, 2))
    with pytest.raises(ValueError, match="same shape"):
        helpers.methods.linalg.row_spearman(torch.ones(2, 2), torch.ones(3, 3))
    sdpa = make_tiny_bert(attn_implementation="sdpa")
    with pytest.raises(helpers.model.checks.UnsupportedModelError):
        helpers.methods.mixing.context_mixing(sdpa, helpers.encode(tokenizer, "Hi there."), "attention")


# ---------------------------------------------------------------- the corpus driver (helpers.drivers)


def test_sweep_tables(tokenizer, one_thread):
    from helpers.model.corpus import Example

    model = make_tiny_bert(num_layers=2)
    examples = [
        Example(id=f"e{k}", text_a=a, text_b=b, label=None, source="test", topic="test")
        for k, (a, b) in enumerate([PAIR, ("Dogs bark.", "Cats purr loudly.")])
    ]
    measures = (("attention", {}), ("globenc", {}), ("globenc", {"effective": True}))
    sweep = helpers.drivers.mixing.context_mixing_sweep(
        model,
        tokenizer,
        examples,
        measures=measures,
        hta_options={"estimator": "estimate", "samples": 4},
        local_samples=4,
        local_examples=1,
    )
    assert set(sweep.agreement["kind"]) == {"global", "local"}
    assert set(sweep.agreement[sweep.agreement["kind"] == "local"]["example"]) == {"e0"}
    assert sweep.agreement["layer"].between(1, 2).all() and sweep.agreement["rho"].abs().max() <= 1 + 1e-9
    table = helpers.drivers.mixing.agreement_table(sweep)
    assert list(table.columns) == [1, 2] and "grad_input" in table.index and "globenc+eff rollout" in table.index
    assert set(sweep.loo["measure"]) == {
        "hta",
        "attention rollout",
        "globenc rollout",
        "globenc rollout (normalise first)",  # the toolkit's order, beside GlobEnc's own
        "globenc+eff rollout",
        "grad_input",
    }
    with pytest.raises(ValueError, match="kind"):
        helpers.drivers.mixing.agreement_table(sweep, "other")
    orders = helpers.drivers.mixing.orders_table(sweep, measures=["globenc"])
    table = helpers.drivers.mixing.agreement_table(sweep)
    assert orders.loc["globenc", ("vs HTA (last layer)", "last")] == table.loc["globenc rollout", 2]
    assert orders.loc["globenc", ("vs HTA (last layer)", "first")] == table.loc["globenc rollout (normalise first)", 2]
    gap = helpers.drivers.mixing.rollout_order_gap(model, tokenizer, examples[:1])
    assert list(gap.columns) == [1, 2, "first-token row Spearman"] and list(gap.index) == ["e0"]
    assert gap.loc["e0", 1] < 1e-6 < gap.loc["e0", 2]  # the orders differ only once a product is taken


def test_reference_check_against_exact_hta(tokenizer, one_thread):
    from helpers.model.corpus import Example

    model = make_tiny_bert(num_layers=2)
    examples = [Example(id="e0", text_a=PAIR[0], text_b=PAIR[1], label=None, source="test", topic="test")]
    measures = (("attention", {}), ("globenc", {}))
    check = helpers.drivers.mixing.check_reference(
        model, tokenizer, examples, samples=4, measures=measures, progress=False
    )
    encoding = helpers.encode(tokenizer, *PAIR, model=model)
    exact = helpers.methods.mixing.context_mixing(model, encoding, "hta")
    estimate = helpers.methods.mixing.context_mixing(model, encoding, "hta", estimator="estimate", samples=4, seed=0)
    globenc = helpers.methods.mixing.context_mixing(model, encoding, "globenc", rollout=True)
    rows = check.agreement.query("measure == 'globenc rollout' and layer == 2")
    for name, target in (("exact", exact), ("estimate", estimate)):
        expected = helpers.methods.linalg.row_spearman(globenc.scores, target.scores)[1]
        got = rows[rows["reference"] == name].sort_values("position")["rho"].to_numpy()
        assert torch.allclose(torch.from_numpy(got), expected)
    tables = helpers.drivers.mixing.reference_tables(check)
    assert tables._fields == ("exact", "estimate")
    shift = helpers.drivers.mixing.reference_shift(check)
    assert shift.loc["globenc rollout", 1] == pytest.approx(
        tables.estimate.loc["globenc rollout", 1] - tables.exact.loc["globenc rollout", 1]
    )
    names = {"attention rollout", "globenc rollout", "globenc rollout (normalise first)", "grad_input"}
    assert set(shift.index) == names and list(shift.columns) == [1, 2]
    exact_rho = helpers.methods.linalg.row_spearman(globenc.scores, exact.scores)[1]
    by_hand = float(np.median(expected.numpy())) - float(np.median(exact_rho.numpy()))  # the median of an even count
    assert shift.loc["globenc rollout", 2] == pytest.approx(by_hand)
    estimate_rho = check.estimate.query("layer == 1").sort_values("position")["rho"].to_numpy()
    assert torch.allclose(
        torch.from_numpy(estimate_rho), helpers.methods.linalg.row_spearman(estimate.scores, exact.scores)[0]
    )
    cost = helpers.drivers.mixing.cost_table(check)
    assert cost.loc["hta (exact)", "fraction of exact HTA"] == 1
    assert {"hta (estimate, 4 samples)", "attention rollout", "globenc rollout", "grad_input"} <= set(cost.index)
    assert (cost["seconds per sentence"] > 0).all() and set(check.cost["n"]) == {encoding["input_ids"].shape[1]}


def test_local_measures_equal_one_call_each(setup):
    model, encoding, internals = setup
    measures = [("attention", {}), ("alti", {}), ("alti", {"effective": True}), ("value_zeroing", {})]
    together = helpers.methods.mixing.local_measures(model, internals, measures)
    for (measure, options), result in zip(measures, together, strict=True):
        alone = helpers.methods.mixing.context_mixing(model, encoding, measure, **options)
        assert result.name == alone.name and torch.equal(result.scores, alone.scores)
    with pytest.raises(ValueError, match="not a local measure"):
        helpers.methods.mixing.local_measures(model, internals, [("hta", {})])
    with pytest.raises(ValueError, match="norm-based"):
        helpers.methods.mixing.local_measures(model, internals, [("value_zeroing", {"effective": True})])
    with pytest.raises(TypeError, match="effective"):
        helpers.methods.mixing.local_measures(model, internals, [("alti", {"effective": "yes"})])


def test_published_figures_sit_under_the_measure_they_were_computed_for():
    from helpers.book import paper

    Mixing = helpers.methods.mixing.Mixing

    def name(measure, aggregation):
        return Mixing(torch.zeros(1, 1, 1), measure, rollout=True, aggregation=aggregation).name

    # ALTI's "norm rollout": ||T_i(x_j)|| with the residual and LN1, rows normalised per layer
    assert paper.published_mixing(name("norm_residual_ln", "normalise_first")) == {"alti_sst2": 0.41}
    assert paper.published_mixing(name("attention_norm", "normalise_first")) == {}
    # GlobEnc's Table 1: every norm measure rolled out unnormalised
    assert paper.published_mixing(name("norm_residual_ln", "normalise_last")) == {"globenc_table1": -0.21}
    assert paper.published_mixing(name("globenc", "normalise_last")) == {"globenc_table1": 0.77}
    assert paper.published_mixing(name("globenc", "normalise_first")) == {}
    assert paper.published_mixing("attention rollout", task="mnli") == {"globenc_table1": -0.05}


def test_every_local_measure_has_its_authors_rollout_order():
    orders = helpers.methods.rollout.ROLLOUT_AGGREGATION
    assert set(orders) == set(helpers.methods.mixing.LOCAL_MEASURES)
    assert set(orders.values()) <= set(helpers.methods.rollout.AGGREGATIONS)
    assert orders["globenc"] == "normalise_last"  # the GlobEnc code


# ---------------------------------------------------------------- the positional prior and per-example tables


def test_positional_prior_ranks_by_distance_whatever_the_decay():
    prior = helpers.methods.rollout.positional_prior(7, num_layers=3)
    assert prior.shape == (3, 7, 7) and torch.allclose(prior.sum(-1), torch.ones(3, 7, dtype=torch.float64))
    row = prior[0, 3]
    assert row.argmax() == 3 and row[2] == row[4] and row[4] > row[5] > row[6]  # self, then by |i - j|
    other = helpers.methods.rollout.positional_prior(7, decay=0.9)
    rho = helpers.methods.linalg.row_spearman(prior[:1], other)
    assert torch.allclose(rho, torch.ones_like(rho))  # a Spearman correlation cannot see the decay's rate
    for bad in (0, 1, 1.5):
        with pytest.raises(ValueError, match="decay"):
            helpers.methods.rollout.positional_prior(4, decay=bad)
    with pytest.raises(ValueError):
        helpers.methods.rollout.positional_prior(0)


def test_sweep_prior_and_per_example_table(tokenizer, one_thread):
    from helpers.model.corpus import Example

    model = make_tiny_bert(num_layers=2)
    examples = [Example(id=f"e{k}", text_a=a, text_b=b, label=None, source="test", topic="test")
                for k, (a, b) in enumerate([PAIR, ("Dogs bark.", "Cats purr loudly.")])]  # fmt: skip
    sweep = helpers.drivers.mixing.context_mixing_sweep(
        model, tokenizer, examples, measures=(("attention", {}),),
        hta_options={"estimator": "estimate", "samples": 4}, local_examples=0, prior=True, progress=False,
    )  # fmt: skip
    assert "positional prior" in set(sweep.loo["measure"])
    table = helpers.drivers.mixing.example_agreement(sweep)
    assert list(table.index.names) == ["example", "layer"] and len(table) == 4
    assert "positional prior" in table.columns and "attention rollout" in table.columns
    rows = sweep.agreement[(sweep.agreement["measure"] == "grad_input") & (sweep.agreement["example"] == "e1")]
    assert table.loc[("e1", 2), "grad_input"] == rows[rows["layer"] == 2]["rho"].median()
    with pytest.raises(ValueError, match="kind"):
        helpers.drivers.mixing.example_agreement(sweep, "local")


def test_effective_change_is_the_per_example_mean_over_layers():
    rows = [
        {"example": e, "measure": m, "kind": "global", "layer": layer, "position": i, "rho": rho}
        for e, shift in (("a", 0.1), ("b", 0.3))
        for layer in (1, 2)
        for i in range(3)
        for m, rho in (("attention_norm rollout", 0.9), ("attention_norm+eff rollout", 0.9 - shift * layer))
    ]
    sweep = helpers.drivers.mixing.MixingSweep(pd.DataFrame(rows), pd.DataFrame(), {}, None)
    change = helpers.drivers.mixing.effective_change(sweep, ["attention_norm"])
    # layers 1 and 2 move by shift and 2 shift: their mean is 1.5 shift, lower with effective attention
    assert change.loc["a", "attention_norm"] == pytest.approx(-0.15)
    assert change.loc["b", "attention_norm"] == pytest.approx(-0.45)
    with pytest.raises(ValueError, match="globenc"):
        helpers.drivers.mixing.effective_change(sweep, ["globenc"])
    # the same change for another rewrite of A, read from its own rows
    doubled = pd.DataFrame(rows).assign(measure=lambda f: f["measure"].str.replace("+eff", "+2null", regex=False))
    sweep = helpers.drivers.mixing.MixingSweep(doubled, pd.DataFrame(), {}, None)
    change = helpers.drivers.mixing.effective_change(sweep, ["attention_norm"], rewrite="null_doubled")
    assert change.loc["b", "attention_norm"] == pytest.approx(-0.45)
    both = helpers.drivers.mixing.MixingSweep(pd.concat([pd.DataFrame(rows), doubled]), pd.DataFrame(), {}, None)
    kept = helpers.drivers.mixing.without_rewrites(both)
    assert set(kept.agreement["measure"]) == {"attention_norm rollout", "attention_norm+eff rollout"}


def test_plan_pairs_scales_with_the_model(tokenizer):
    from helpers.model.corpus import Example

    texts = ["a " * k for k in range(1, 30)]
    pairs = [Example(id=f"p{k}", text_a=t, text_b=None, label=None, source="t", topic="t") for k, t in enumerate(texts)]
    plan = helpers.drivers.mixing.plan_pairs(tokenizer, pairs, d_v=8)
    lengths = [len(tokenizer(p.text_a)["input_ids"]) for p in plan.pairs]
    assert lengths and all(8 < n <= 12 for n in lengths) and plan.validation == plan.pairs[:2]
    assert plan.local_pairs == 3
    costly = helpers.drivers.mixing.plan_pairs(tokenizer, pairs, d_v=8, scale=8, exact_scale=4, minimum=2)
    assert len(costly.pairs) == 4  # round(30 / 8)
    assert len(helpers.drivers.mixing.plan_pairs(tokenizer, pairs * 3, d_v=8, scale=8).pairs) == 10  # the floor
    assert costly.local_pairs == 1 and len(costly.validation) == 2 and "longest" in costly.rule
    assert [len(tokenizer(p.text_a)["input_ids"]) for p in costly.validation] == [4, 3]  # n <= 9 / 4 ** 0.5
    dearer = helpers.drivers.mixing.plan_pairs(tokenizer, pairs, d_v=8, exact_scale=100)
    assert "shortest" in dearer.rule and dearer.validation == pairs[:2]
    with pytest.raises(ValueError, match="Fewer than 2"):
        helpers.drivers.mixing.plan_pairs(tokenizer, pairs, d_v=100)
