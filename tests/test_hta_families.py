"""Exact HTA on every family the capture takes: the post-norm encoders (helpers.model.post_norm) and the
pre-norm decoders (helpers.model.pre_norm: GPT-2, Llama, Qwen2). On tiny random models the forward-mode
norms equal the full Jacobian of the model's own forward in float64; a family no linearisation follows is
refused with the method, the family and the reason."""

from __future__ import annotations

import copy

import pytest
import torch

import helpers
from helpers.methods import reference, reference_decoders
from helpers.methods.linearised_decoder import DECODER_FAMILIES
from helpers.model.checks import ModelLoadError, UnsupportedModelError
from helpers.model.post_norm import POST_NORM_ENCODERS, embedding_parts, input_width, post_norm_layers

from .test_capture_mpnet import make_tiny_mpnet
from .test_families import encoding, make_tiny
from .test_mixing_families import randomised

N = 9
# random ids carry no [CLS] ... [SEP]: the capture's warning about it is expected here
pytestmark = pytest.mark.filterwarnings("ignore::helpers.model.checks.InputWarning")
ENCODERS = [f for f in POST_NORM_ENCODERS if f != "mpnet"]


def tiny(family: str):
    return make_tiny_mpnet(1000) if family == "mpnet" else make_tiny(family)


@pytest.mark.parametrize("family", POST_NORM_ENCODERS)
def test_exact_hta_equals_the_float64_jacobian_of_the_models_own_forward(family):
    model = tiny(family)
    inputs = encoding(N)
    attribution = helpers.hidden_token_attribution(model, inputs, progress=False)
    double = copy.deepcopy(model).double()
    x = helpers.capture(double, inputs).x
    expected = reference.model_block_norms(double, inputs, x)
    assert attribution.norms.shape == (model.config.num_hidden_layers, N, N)
    error = (attribution.norms.double() - expected).abs().max() / expected.abs().max()
    assert error < 1e-5, f"{family}: relative error {float(error):.1e}"


@pytest.mark.parametrize("family", ["electra", "albert"])
def test_a_projection_after_the_embedding_norm_is_followed_and_sets_the_input_width(family):
    model = tiny(family)
    assert embedding_parts(model).projection is not None
    assert input_width(model) == 16 < model.config.hidden_size
    # the estimate at k = d_x tangents is the exact value; one more tangent than x has dimensions is refused
    inputs = encoding(N)
    exact = helpers.hidden_token_attribution(model, inputs, progress=False)
    full = helpers.hidden_token_attribution(model, inputs, estimator="estimate", samples=16, progress=False)
    torch.testing.assert_close(full.norms, exact.norms, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="samples"):
        helpers.hidden_token_attribution(model, inputs, estimator="estimate", samples=17, progress=False)


def test_albert_repeats_its_shared_layer():
    model = tiny("albert")
    layers = post_norm_layers(model)
    assert len(layers) == model.config.num_hidden_layers == 3
    assert all(layer.ffn_in is layers[0].ffn_in for layer in layers)


@pytest.mark.parametrize("family", DECODER_FAMILIES)
def test_exact_hta_on_a_decoder_equals_the_float64_jacobian_of_its_own_forward(family):
    model = randomised(make_tiny(family))  # random norm weights and biases too
    inputs = encoding(N)
    attribution = helpers.hidden_token_attribution(model, inputs, progress=False)
    double = copy.deepcopy(model).double()
    expected = reference.frobenius_blocks(reference_decoders.decoder_model_jacobian(double, inputs))
    assert attribution.norms.shape == (model.config.num_hidden_layers, N, N)
    error = (attribution.norms.double() - expected).abs().max() / expected.abs().max()
    assert error < 1e-5, f"{family}: relative error {float(error):.1e}"
    assert attribution.norms.triu(1).abs().max() == 0  # no token reaches an earlier position
    # the estimate at k = d tangents is the exact value
    full = helpers.hidden_token_attribution(model, inputs, estimator="estimate", samples=32, progress=False)
    torch.testing.assert_close(full.norms, attribution.norms, rtol=1e-4, atol=1e-5)


def test_gpt2s_input_is_words_plus_positions():
    model = make_tiny("gpt2")
    inputs = encoding(N)
    x = helpers.capture(model, inputs).x
    ids = inputs["input_ids"][0]
    torch.testing.assert_close(x, model.wte(ids) + model.wpe(torch.arange(N)))


def test_a_family_no_linearisation_follows_is_refused_naming_the_method_the_family_and_why():
    import transformers as tf

    config = tf.DebertaV2Config(
        vocab_size=1000, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
    )
    model = tf.DebertaV2Model(config).eval()
    with pytest.raises(UnsupportedModelError, match=r"hidden_token_attribution.*'deberta-v2'.*linearised forwards"):
        helpers.hidden_token_attribution(model, encoding(N), progress=False)
    with pytest.raises(UnsupportedModelError, match=r"cannot capture its heads \(model_type='deberta-v2'\)"):
        helpers.context_mixing(model, encoding(N), "hta", progress=False)  # the capture's own refusal, first


def test_the_device_argument_runs_where_it_is_asked_and_leaves_the_model_in_place():
    model = tiny("bert")
    inputs = encoding(N)
    here = helpers.hidden_token_attribution(model, inputs, progress=False)
    on_cpu = helpers.hidden_token_attribution(model, inputs, progress=False, device="cpu")
    torch.testing.assert_close(on_cpu.norms, here.norms, rtol=0, atol=0)
    assert on_cpu.norms.device.type == "cpu"
    with pytest.raises(ValueError, match="device must be"):
        helpers.hidden_token_attribution(model, inputs, progress=False, device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ModelLoadError, match="no CUDA GPU"):
            helpers.hidden_token_attribution(model, inputs, progress=False, device="cuda")
    assert next(model.parameters()).device.type == "cpu"
