"""Context mixing on every family the capture takes (helpers.methods.mixing_families): on the post-norm
encoders every measure runs and the layer decomposition adds up to the model's own layer output; on the
decoders attention rollout runs, HTA where it linearises, and every other measure refuses, naming the
measure, the family and why."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers.methods import mixing
from helpers.methods.decomposition import decompose_layer
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


def test_decoders_take_rollout_and_hta_and_refuse_the_encoder_measures():
    inputs = encoding(N)
    llama = make_tiny("llama")
    L = llama.config.num_hidden_layers
    assert helpers.context_mixing(llama, inputs, "attention", rollout=True).scores.shape == (L, N, N)
    hta = helpers.context_mixing(llama, inputs, "hta", progress=False)
    expected = helpers.hidden_token_attribution(llama, inputs, progress=False)
    torch.testing.assert_close(hta.scores, expected.contributions)
    for measure in ("globenc", "alti", "value_zeroing", "grad_input"):
        with pytest.raises(UnsupportedModelError, match=rf"{measure} does not apply to model_type='llama'.*post-norm"):
            helpers.context_mixing(llama, inputs, measure)
    gpt2 = make_tiny("gpt2")
    assert helpers.context_mixing(gpt2, inputs, "attention").scores.shape == (2, N, N)
    with pytest.raises(UnsupportedModelError, match=r"context_mixing\(measure='hta'\).*'gpt2'.*pre-norm"):
        helpers.context_mixing(gpt2, inputs, "hta", progress=False)


def test_the_sweep_runs_on_another_encoder_family():
    from helpers.model.corpus import Example

    tokenizer = helpers.load_model().tokenizer
    model = make_tiny("roberta", vocab_size=tokenizer.vocab_size)
    pair = Example(id="e0", text_a="The cat sat on the mat.", text_b="It was warm.", label=1, source="t", topic="t")
    sweep = helpers.context_mixing_sweep(model, tokenizer, [pair], progress=False)
    assert len(sweep.agreement) > 0 and sweep.agreement["rho"].notna().all()
