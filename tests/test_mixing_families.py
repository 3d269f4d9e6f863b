"""Context mixing on every family the capture takes (helpers.methods.mixing_families): every measure runs on
the post-norm encoders and on the pre-norm decoders (GPT-2, Llama, Qwen2), the layer decomposition adds up to
the model's own layer output, and on the decoders gradient x input, layer-local HTA and value zeroing equal
brute-force references through the model's own modules (helpers.methods.reference_decoders), on models whose
norm weights and biases are random too; leave-one-out refuses a decoder, saying why."""

from __future__ import annotations

import copy

import pytest
import torch

import helpers
from helpers.methods import mixing, reference_decoders
from helpers.methods.decomposition import decompose_layer, norm_scores
from helpers.methods.linearised_decoder import DECODER_FAMILIES
from helpers.methods.token_effects import grad_input_scores
from helpers.model.checks import UnsupportedModelError
from helpers.model.post_norm import POST_NORM_ENCODERS

from .test_capture_mpnet import make_tiny_mpnet
from .test_families import encoding, make_tiny

N = 9
pytestmark = pytest.mark.filterwarnings("ignore::helpers.model.checks.InputWarning")  # random ids: no [CLS]


def tiny(family: str):
    return make_tiny_mpnet(1000) if family == "mpnet" else make_tiny(family)


@pytest.fixture(scope="module")
def encoders():
    return {family: tiny(family) for family in POST_NORM_ENCODERS}


@pytest.mark.parametrize("family", POST_NORM_ENCODERS)
def test_every_measure_runs_on_every_post_norm_encoder(encoders, family):
    model, inputs = encoders[family], encoding(N)
    L = model.config.num_hidden_layers
    for measure in mixing.MEASURES:
        options = {"progress": False} if measure == "hta" else {}
        result = helpers.context_mixing(model, inputs, measure, **options)
        assert result.scores.shape == (L, N, N), (family, measure)
        assert torch.isfinite(result.scores).all(), (family, measure)
        torch.testing.assert_close(result.scores.sum(-1), torch.ones(L, N), rtol=0, atol=1e-4)
    rolled = helpers.context_mixing(model, inputs, "globenc", rollout=True)
    assert rolled.scores.shape == (L, N, N)


@pytest.mark.parametrize("family", POST_NORM_ENCODERS)
def test_the_layer_decomposition_adds_up_to_the_models_own_layer_output(encoders, family):
    model, inputs = encoders[family], encoding(N)
    internals = helpers.capture(model, inputs)
    for layer in range(1, model.config.num_hidden_layers + 1):
        parts = decompose_layer(model, internals, layer)
        torch.testing.assert_close(parts.output, internals.hidden_states[layer], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(parts.ln2.sum(1) + parts.ln2_rest, parts.output, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(parts.ln1.sum(1) + parts.ln1_rest, parts.y, rtol=1e-4, atol=1e-4)


def randomised(model):
    """``model`` with every 1-D parameter (norm weights and biases, projection biases) drawn at random: the tiny
    models start with gamma 1, beta 0 and zero biases, which would hide a misplaced gamma or a dropped bias."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.copy_(1 + 0.3 * torch.randn(parameter.shape, generator=generator))
    return model


@pytest.fixture(scope="module")
def decoders():
    return {family: randomised(make_tiny(family)) for family in DECODER_FAMILIES}


@pytest.mark.parametrize("family", DECODER_FAMILIES)
def test_every_measure_runs_on_every_decoder_and_stays_causal(decoders, family):
    model, inputs = decoders[family], encoding(N)
    L = model.config.num_hidden_layers
    for measure in mixing.MEASURES:
        options = {"progress": False} if measure == "hta" else {}
        result = helpers.context_mixing(model, inputs, measure, **options)
        assert result.scores.shape == (L, N, N), (family, measure)
        torch.testing.assert_close(result.scores.sum(-1), torch.ones(L, N), rtol=0, atol=1e-4)
        # no token mixes in a later one: exactly (value zeroing, which recomputes the block, sets j > i to 0
        # where rounding left 2.8e-13 under ATEN_CPU_CAPABILITY=default)
        assert result.scores.triu(1).abs().max() == 0, (family, measure)
    for measure in ("globenc", "alti", "value_zeroing"):
        assert helpers.context_mixing(model, inputs, measure, rollout=True).scores.shape == (L, N, N)
    several = helpers.context_mixing(model, inputs, ["attention", "alti", "grad_input", ("hta", {"progress": False})])
    torch.testing.assert_close(several[2].scores, helpers.context_mixing(model, inputs, "grad_input").scores)


@pytest.mark.parametrize("family", DECODER_FAMILIES)
def test_a_decoder_blocks_decomposition_adds_up_to_its_own_output(decoders, family):
    model, inputs = decoders[family], encoding(N)
    internals = helpers.capture(model, inputs)
    for layer in range(1, model.config.num_hidden_layers + 1):
        parts = decompose_layer(model, internals, layer)
        b_O = internals.b_O[layer - 1]
        torch.testing.assert_close(parts.output, internals.hidden_states[layer], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(parts.z.sum(1) + b_O, parts.residual_sum, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(parts.ln1.sum(1) + parts.ln1_rest, parts.y, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(parts.ln2.sum(1) + parts.ln2_rest, parts.output, rtol=1e-4, atol=1e-4)
        # no norm on the residual path: GlobEnc reads the residual norm; ALTI the pieces of r
        torch.testing.assert_close(norm_scores(parts, "globenc"), norm_scores(parts, "norm_residual"))
        r = parts.residual_sum[:, None]
        expected = (r.abs().sum(-1) - (r - parts.z).abs().sum(-1)).clamp_min(0)
        torch.testing.assert_close(norm_scores(parts, "alti"), expected)


@pytest.mark.parametrize("family", DECODER_FAMILIES)
def test_decoder_measures_equal_brute_force_references_through_the_models_own_modules(decoders, family):
    model, inputs = decoders[family], encoding(N)
    double = copy.deepcopy(model).double()
    internals = helpers.capture(model, inputs)
    # gradient x input: J_ij w_j from the full Jacobian of the model's forward, w the input embeddings
    jacobian = reference_decoders.decoder_model_jacobian(double, inputs)  # (L, n, d, n, d)
    words = double.get_input_embeddings()(inputs["input_ids"])[0]
    expected = torch.einsum("lidjk,jk->lijd", jacobian, words).norm(dim=-1)
    got = grad_input_scores(model, internals).double()
    assert (got - expected).abs().max() / expected.abs().max() < 1e-5
    local = mixing.local_hta(model, inputs)
    for layer in range(1, model.config.num_hidden_layers + 1):
        blocks = reference_decoders.decoder_layer_jacobian(double, inputs, layer).pow(2).sum((1, 3)).sqrt()
        torch.testing.assert_close(
            local.scores[layer - 1].double(), blocks / blocks.sum(-1, keepdim=True), atol=1e-5, rtol=1e-4
        )
        brute = reference_decoders.decoder_value_zeroing_reference(double, inputs, layer)
        ours = mixing.value_zeroing_scores(double, helpers.capture(double, inputs), layer)
        torch.testing.assert_close(ours, brute, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("family", DECODER_FAMILIES)
def test_effective_attention_on_a_decoder_is_split_row_by_row(decoders, family):
    model, inputs = decoders[family], encoding(N)
    effective = helpers.context_mixing(model, inputs, "globenc", effective=True)
    assert effective.scores.triu(1).abs().max() == 0  # no row reads a later token
    raw = helpers.context_mixing(model, inputs, "globenc")
    assert not torch.allclose(effective.scores, raw.scores)  # the split moved something
    internals = helpers.capture(model, inputs)
    parts = decompose_layer(model, internals, 1, effective=True)
    torch.testing.assert_close(parts.output, internals.hidden_states[1], rtol=1e-4, atol=1e-4)  # A_eff T = A T
    with pytest.raises(ValueError, match="null_doubled.*causal row has its own"):
        helpers.context_mixing(model, inputs, "globenc", effective="null_doubled")


def test_leave_one_out_refuses_a_decoder_saying_why(decoders):
    with pytest.raises(UnsupportedModelError, match=r"leave_one_out does not apply to model_type='gpt2'.*mean-pooled"):
        mixing.leave_one_out(decoders["gpt2"], encoding(N), mask_token_id=0)


def test_the_sweep_runs_on_another_encoder_family():
    from helpers.model.corpus import Example

    tokenizer = helpers.load_model().tokenizer
    model = make_tiny("roberta", vocab_size=tokenizer.vocab_size)
    pair = Example(id="e0", text_a="The cat sat on the mat.", text_b="It was warm.", label=1, source="t", topic="t")
    sweep = helpers.context_mixing_sweep(model, tokenizer, [pair], progress=False)
    assert len(sweep.agreement) > 0 and sweep.agreement["rho"].notna().all()
