"""Careless inputs get a clear, early error or a warning (helpers.model.checks), on the tiny models and the
bundled tokenizer: text or bare ids where an encoding belongs, inference mode where autograd is needed,
a tokenizer that does not fit the text, an encoding without the model's special tokens, a map fitted on
fewer tokens than dimensions."""

from __future__ import annotations

import types
import warnings

import pytest
import torch

import helpers
from helpers.methods import attribution, mixing, probes
from helpers.model.checks import (
    InputWarning,
    check_autograd,
    check_encoding_type,
    check_enough_tokens,
    check_special_tokens,
    check_unknown_tokens,
)

from .conftest import SENTENCE, make_tiny_bert

SHORT = "The cat sat on the mat."


@pytest.fixture
def encoding(tokenizer, tiny_model):
    return helpers.encode(tokenizer, SHORT, model=tiny_model)


@pytest.fixture
def no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# --------------------------------------------------------------------------- not an encoding


def careless_inputs(tokenizer, encoding) -> dict:
    return {
        "the text": SHORT,
        "a bare tensor of ids": encoding["input_ids"],
        "a list of ids": encoding["input_ids"][0].tolist(),
        "the tokenizer's lists": tokenizer(SHORT),
        "a dict without input_ids": {"ids": encoding["input_ids"]},
    }


@pytest.mark.parametrize(
    "entry",
    [
        helpers.capture,
        lambda model, enc: attribution.hidden_token_attribution(model, enc, progress=False),
        lambda model, enc: mixing.context_mixing(model, enc, "attention"),
        lambda model, enc: mixing.context_mixing(model, enc, "hta"),
    ],
    ids=["capture", "hidden_token_attribution", "context_mixing", "context_mixing-hta"],
)
def test_what_is_not_an_encoding_is_a_type_error_naming_encode(entry, tiny_model, tokenizer, encoding):
    for what, value in careless_inputs(tokenizer, encoding).items():
        with pytest.raises(TypeError, match=r"helpers\.encode") as raised:
            entry(tiny_model, value)
        assert "indices" not in str(raised.value), f"{what}: an error from deep inside"


def test_the_text_itself_is_named_in_the_error():
    with pytest.raises(TypeError, match=r"got the text itself \('The cat"):
        check_encoding_type(SHORT)
    with pytest.raises(TypeError, match='return_tensors="pt"'):
        check_encoding_type({"input_ids": [[101, 102]]})


def test_encodings_pass(tokenizer, encoding):
    check_encoding_type(encoding)
    check_encoding_type({"input_ids": encoding["input_ids"]})  # a plain dict of tensors is an encoding too
    check_encoding_type(tokenizer(SHORT, return_tensors="pt"))


# --------------------------------------------------------------------------- inference mode


@pytest.mark.parametrize(
    "entry",
    [
        lambda model, enc: attribution.hidden_token_attribution(model, enc, progress=False),
        lambda model, enc: mixing.context_mixing(model, enc, "hta"),
        lambda model, enc: mixing.context_mixing(model, enc, "grad_input"),
        lambda model, enc: mixing.local_hta(model, enc),
    ],
    ids=["hidden_token_attribution", "hta", "grad_input", "local_hta"],
)
def test_inference_mode_is_refused_before_any_forward_pass(entry, tiny_model, encoding, monkeypatch):
    def no_forward(*args, **kwargs):
        raise AssertionError("the model ran before inference mode was detected")

    for module in (attribution, mixing):
        monkeypatch.setattr(module, "capture", no_forward)
    with torch.inference_mode(), pytest.raises(RuntimeError, match="inference_mode.*outside"):
        entry(tiny_model, encoding)


def test_methods_without_autograd_run_under_inference_mode_and_hta_under_no_grad(tiny_model, encoding):
    with torch.inference_mode():
        rollout = mixing.context_mixing(tiny_model, encoding, "attention", rollout=True)
    assert torch.allclose(rollout.scores.sum(-1), torch.ones(()), atol=1e-5)
    with torch.no_grad():
        attributed = attribution.hidden_token_attribution(tiny_model, encoding, progress=False)
    n = encoding["input_ids"].shape[1]
    assert attributed.contributions.shape[-2:] == (n, n)


def test_the_other_autograd_entry_points_refuse_inference_mode(tiny_model, tokenizer, encoding):
    internals = helpers.capture(tiny_model, encoding)
    Q, K, T = internals.Q[0, 0], internals.K[0, 0], internals.T[0, 0]
    with torch.inference_mode():
        for call in (
            lambda: check_autograd("this method"),
            lambda: helpers.fine_tune(tiny_model, tokenizer, []),
            lambda: helpers.methods.linearised.linearise(tiny_model, internals.x),
            lambda: helpers.methods.keys.producible_dimension(Q, K, T),
            lambda: helpers.methods.keys.producible_alternative(Q, K, T, internals.A[0, 0]),
            lambda: helpers.methods.probes.fit_map(torch.randn(80, 4), torch.randn(80, 4), "mlp", "l2", epochs=1),
        ):
            with pytest.raises(RuntimeError, match="inference_mode"):
                call()
    check_autograd("this method")  # outside inference mode: nothing to say
    with torch.inference_mode():  # the closed-form fits need no autograd
        helpers.methods.probes.fit_map(torch.randn(80, 4), torch.randn(80, 4), "linear", "l2")


# --------------------------------------------------------------------------- unknown tokens


def test_a_text_mostly_unknown_to_the_tokenizer_warns(tokenizer):
    with pytest.warns(InputWarning, match=r"3 of the text's 4 tokens are the tokenizer's unknown token"):
        encoding = helpers.encode(tokenizer, "\U0001f642 \U0001f643 \U0001f600 hello")
    assert encoding["input_ids"].shape == (1, 6)  # still encoded: a warning, not an error


def test_a_quarter_unknown_or_less_does_not_warn(tokenizer, no_warnings):
    helpers.encode(tokenizer, "\U0001f600 hello there friend")  # 1 of 4: exactly a quarter
    helpers.encode(tokenizer, SENTENCE)


def test_unknown_tokens_are_counted_among_the_texts_tokens_only():
    ids = torch.tensor([[101, 100, 7, 102]])  # [CLS] [UNK] word [SEP]: 1 of 2 text tokens
    with pytest.warns(InputWarning, match="1 of the text's 2 tokens"):
        check_unknown_tokens(ids, 100, special_ids=[100, 101, 102])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_unknown_tokens(ids, None, special_ids=[101, 102])  # no unknown token: nothing to check


# --------------------------------------------------------------------------- special tokens


def test_an_encoding_without_special_tokens_warns(tokenizer, tiny_model):
    bare = tokenizer(SHORT, add_special_tokens=False, return_tensors="pt")
    with pytest.warns(InputWarning, match=r"lacks the special tokens"):
        helpers.capture(tiny_model, bare)


def test_an_input_warning_points_at_the_callers_line_not_inside_torch_or_the_helpers(tokenizer, tiny_model):
    bare = tokenizer(SHORT, add_special_tokens=False, return_tensors="pt")
    with pytest.warns(InputWarning) as caught:
        helpers.capture(tiny_model, bare)  # capture runs under torch.no_grad's wrapper
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, caught[0].lineno)]
    assert "capture(tiny_model, bare)" in open(__file__).read().splitlines()[caught[0].lineno - 1]


def test_an_encoding_with_its_special_tokens_does_not_warn(tokenizer, tiny_model, encoding, no_warnings):
    helpers.capture(tiny_model, encoding)
    helpers.capture(tiny_model, helpers.encode(tokenizer, SHORT, "A second segment.", model=tiny_model))


def test_an_encoding_of_nothing_but_special_tokens_is_refused(tokenizer, tiny_model):
    with pytest.raises(ValueError, match="only special tokens"):
        helpers.capture(tiny_model, tokenizer("", return_tensors="pt"))


def test_a_hand_made_encoding_is_checked_against_the_configs_ids():
    roberta_like = types.SimpleNamespace(bos_token_id=0, eos_token_id=2)  # <s> ... </s>
    with pytest.warns(InputWarning):
        check_special_tokens({"input_ids": torch.tensor([[5, 6, 7]])}, roberta_like, causal=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_special_tokens({"input_ids": torch.tensor([[0, 6, 2]])}, roberta_like, causal=False)
        bert_like = types.SimpleNamespace(bos_token_id=None, eos_token_id=None, pad_token_id=0)
        check_special_tokens({"input_ids": torch.tensor([[5, 6, 7]])}, bert_like, causal=False)  # cannot tell
        check_special_tokens({"input_ids": torch.tensor([[5, 6, 7]])}, roberta_like, causal=True)  # decoders


# --------------------------------------------------------------------------- too few tokens for a map


def test_a_map_fitted_on_fewer_tokens_than_dimensions_warns():
    generator = torch.Generator().manual_seed(0)
    hidden, targets = torch.randn(40, 32, generator=generator), torch.randn(40, 32, generator=generator)
    with pytest.warns(InputWarning, match="fitted on 20 tokens, fewer than their 32 dimensions"):
        probes.fit_map(hidden[:20], targets[:20], "linear", "l2")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        probes.fit_map(hidden, targets, "linear", "l2")  # 40 tokens, 32 dimensions
        probes.fit_map(hidden[:20], targets[:20], "naive", "l2")  # nothing fitted
        check_enough_tokens(32, 32, "a map")


def test_a_token_map_on_too_few_sequences_warns(tokenizer):
    model = make_tiny_bert()
    tokens = helpers.collect_hidden_tokens(model, tokenizer, [SHORT, SENTENCE], progress=False)
    assert len(tokens) < model.config.hidden_size
    with pytest.warns(InputWarning, match="fewer than their 32 dimensions"):
        probes.fit_token_map(tokens, 1, "linear", "l2")
