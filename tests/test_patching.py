import pytest
import torch

import helpers

from .conftest import LONG_TEXT, SENTENCE, make_tiny_bert

LAYER, HEAD = 2, 3  # the reader's numbers (1..L, 1..h); tensors index LAYER - 1, HEAD - 1


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def setup(tiny_model, tokenizer):
    encoding = helpers.encode(tokenizer, LONG_TEXT, model=tiny_model)
    return tiny_model, encoding, helpers.capture(tiny_model, encoding)


def relative_change(patched, original):
    return float((patched - original).abs().max() / original.abs().max())


def test_patching_with_the_models_own_attention_changes_nothing(setup):
    model, encoding, internals = setup
    hidden = helpers.model.patching.run_patched(model, encoding, LAYER, HEAD, internals.A[LAYER - 1, HEAD - 1])
    assert relative_change(hidden, internals.hidden_states) < 1e-6


def test_a_null_space_alternative_leaves_every_hidden_state_unchanged(setup):
    model, encoding, internals = setup
    A, T = internals.A[LAYER - 1, HEAD - 1], internals.T[LAYER - 1, HEAD - 1]
    alternative = helpers.methods.nullspace.same_output_towards(A, T, torch.eye(internals.n))
    assert (alternative - A).abs().max() > 0.1
    hidden = helpers.model.patching.run_patched(model, encoding, LAYER, HEAD, alternative)
    assert relative_change(hidden, internals.hidden_states) < 1e-5


def test_a_perturbation_outside_the_null_space_changes_the_output(setup):
    model, encoding, internals = setup
    A = internals.A[LAYER - 1, HEAD - 1]
    perturbed = A + 0.05 * torch.randn(A.shape, generator=torch.Generator().manual_seed(0))
    hidden = helpers.model.patching.run_patched(model, encoding, LAYER, HEAD, perturbed)
    assert torch.equal(hidden[:LAYER], internals.hidden_states[:LAYER])  # hidden states before layer LAYER untouched
    assert relative_change(hidden[LAYER:], internals.hidden_states[LAYER:]) > 1e-3


def test_the_patch_reaches_the_attention_block_and_the_models_attentions(setup):
    model, encoding, internals = setup
    A = internals.A[LAYER - 1, HEAD - 1]
    replacement = torch.softmax(torch.randn(A.shape, generator=torch.Generator().manual_seed(1)), dim=-1)
    with helpers.patch_attention(model, LAYER, HEAD, replacement) as patch:
        patched = helpers.capture(model, encoding)
    assert patch.calls == 1
    # the model's own attentions output shows the replacement, and only for that head
    assert torch.equal(patched.A[LAYER - 1, HEAD - 1], replacement)
    others = [k for k in range(4) if k != HEAD - 1]
    assert torch.allclose(patched.A[LAYER - 1, others], internals.A[LAYER - 1, others])
    # the attention block computes sum_h A_h T_h + b^O with the replacement in place
    assert torch.allclose(
        patched.reconstructed_attention_output()[LAYER - 1], patched.attention_output[LAYER - 1], atol=1e-4
    )
    expected = internals.attention_output[LAYER - 1] + (replacement - A) @ internals.T[LAYER - 1, HEAD - 1]
    assert torch.allclose(patched.attention_output[LAYER - 1], expected, atol=1e-4)


def test_patch_is_seen_even_when_transformers_recorded_attentions_before(tokenizer):
    model = make_tiny_bert()
    encoding = helpers.encode(tokenizer, SENTENCE, model=model)
    model(**encoding, output_attentions=True)  # installs transformers' recording hooks first
    n = encoding["input_ids"].shape[1]
    uniform = torch.full((n, n), 1.0 / n)
    with helpers.patch_attention(model, 1, 1, uniform):
        attentions = model(**encoding, output_attentions=True).attentions
    assert torch.equal(attentions[0][0, 0], uniform)


def test_the_hook_is_removed_on_exit_and_on_error(setup):
    model, encoding, internals = setup
    n = internals.n
    with pytest.raises(RuntimeError, match="inside"):
        with helpers.patch_attention(model, LAYER, HEAD, torch.eye(n)):
            raise RuntimeError("error inside the context")
    with helpers.patch_attention(model, LAYER, HEAD, torch.eye(n)):
        pass
    after = helpers.capture(model, encoding)
    assert torch.equal(after.hidden_states, internals.hidden_states)
    assert torch.equal(after.A, internals.A)


def test_batched_patch(tiny_model, tokenizer):
    encoding = tokenizer([SENTENCE, SENTENCE], return_tensors="pt")
    n = encoding["input_ids"].shape[1]
    batch = torch.stack([torch.eye(n), torch.full((n, n), 1.0 / n)])
    with helpers.patch_attention(tiny_model, 1, 2, batch):
        out = tiny_model(**encoding, output_attentions=True)
    assert torch.equal(out.attentions[0][:, 1], batch)
    assert not torch.allclose(out.last_hidden_state[0], out.last_hidden_state[1])


@pytest.mark.parametrize(
    "layer, head, attention, error, match",
    [
        (5, 1, torch.eye(3), ValueError, "layer"),
        (0, 1, torch.eye(3), ValueError, "layer"),  # layers count from 1
        (1, 0, torch.eye(3), ValueError, "head"),
        (1.0, 1, torch.eye(3), TypeError, "layer"),
        (1, 1, [[1.0]], TypeError, "Tensor"),
        (1, 1, torch.ones(3, 4), ValueError, "square|n, n"),
        (1, 1, torch.ones(3), ValueError, "n, n"),
        (1, 1, torch.full((3, 3), float("nan")), ValueError, "NaN"),
    ],
)
def test_bad_arguments_fail_on_entry(tiny_model, layer, head, attention, error, match):
    with pytest.raises(error, match=match):
        with helpers.patch_attention(tiny_model, layer, head, attention):
            pass


def test_length_mismatch_fails_during_the_forward_pass(setup):
    model, encoding, internals = setup
    with pytest.raises(ValueError, match="tokens"):
        helpers.model.patching.run_patched(model, encoding, 1, 1, torch.eye(internals.n + 1))


def test_training_mode_and_sdpa_are_rejected(tokenizer):
    with pytest.raises(ValueError, match="eval"):
        with helpers.patch_attention(make_tiny_bert().train(), 1, 1, torch.eye(3)):
            pass
    with pytest.raises(helpers.model.checks.UnsupportedModelError):
        with helpers.patch_attention(make_tiny_bert(attn_implementation="sdpa"), 1, 1, torch.eye(3)):
            pass


def test_real_model_null_patch_keeps_the_last_hidden_state(real_model):
    model, tokenizer = real_model
    encoding = helpers.encode(tokenizer, LONG_TEXT, model=model)
    internals = helpers.capture(model, encoding)
    layer, head = 3, 1
    A, T = internals.A[layer - 1, head - 1], internals.T[layer - 1, head - 1]
    alternative = helpers.methods.nullspace.same_output_towards(A, T, torch.roll(torch.eye(internals.n), -1, dims=1))
    assert (alternative - A).abs().max() > 0.3
    hidden = helpers.model.patching.run_patched(model, encoding, layer, head, alternative)
    assert relative_change(hidden[-1], internals.hidden_states[-1]) < 1e-5
    control = A + (alternative - A).flip(1)  # same size, keys reversed: rows leave the null space
    hidden = helpers.model.patching.run_patched(model, encoding, layer, head, control)
    assert relative_change(hidden[-1], internals.hidden_states[-1]) > 1e-2


def test_hidden_state_change_is_zero_for_the_models_own_attention_and_large_otherwise(setup):
    model, encoding, internals = setup
    A = internals.A[LAYER - 1, HEAD - 1]
    changes = helpers.model.patching.hidden_state_change(
        model, encoding, LAYER, HEAD, torch.stack([A, A.flip(1)]), progress=False
    )
    assert changes.shape == (2, model.config.num_hidden_layers + 1)
    assert float(changes[0].max()) < 1e-5 * float(internals.hidden_states.abs().max())
    assert float(changes[1, :LAYER].max()) == 0.0  # layers before the patch never see it
    assert float(changes[1, -1]) > 1e-3
    with pytest.raises(ValueError, match="m, n, n"):
        helpers.model.patching.hidden_state_change(model, encoding, LAYER, HEAD, A, progress=False)
