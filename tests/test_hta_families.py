"""Exact HTA on every post-norm encoder family the capture takes (helpers.model.post_norm): the forward-mode
norms equal the full Jacobian of the model's own forward in float64, on tiny random models; GPT-2 is refused
with the method, the family and the reason."""

from __future__ import annotations

import copy

import pytest
import torch

import helpers
from helpers.methods import reference
from helpers.model.checks import ModelLoadError, UnsupportedModelError
from helpers.model.post_norm import POST_NORM_ENCODERS, embedding_parts, input_width, post_norm_layers

from .test_capture_mpnet import make_tiny_mpnet
from .test_families import encoding, make_tiny

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


def test_gpt2_is_refused_naming_the_method_the_family_and_why():
    with pytest.raises(UnsupportedModelError, match=r"hidden_token_attribution.*'gpt2'.*pre-norm"):
        helpers.hidden_token_attribution(make_tiny("gpt2"), encoding(N), progress=False)


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
