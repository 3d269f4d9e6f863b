"""What a careless user passes: each case either gets the right answer or an early, clear error.

One test per case found by trying the public helpers as a user would; each
of them failed (silently wrong, or deep inside torch) before the checks at
the entry points.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

import helpers
from helpers.model.checks import ModelLoadError
from helpers.model.corpus import Example
from tests.conftest import SENTENCE, make_tiny_bert

# ------------------------------------------------------------------ layers given as the wrong type


@pytest.mark.parametrize("layers", ["12", [2.7], "1", 2.0, [True]])
def test_layers_of_the_wrong_type_are_refused(tiny_model, tokenizer, layers, one_thread):
    encoding = helpers.encode(tokenizer, "A short text.")
    with pytest.raises(TypeError, match="must be an integer|layer number"):
        helpers.hidden_token_attribution(tiny_model, encoding, layer_numbers=layers, progress=False)


@pytest.mark.parametrize("layers", [2, np.int64(2), [np.int64(2)], np.array([2]), torch.tensor([2]), (2,)])
def test_one_layer_as_an_int_or_numpy_integer_means_that_layer(tiny_model, tokenizer, layers, one_thread):
    encoding = helpers.encode(tokenizer, "A short text.")
    result = helpers.hidden_token_attribution(tiny_model, encoding, layer_numbers=layers, progress=False)
    assert result.layer_numbers == (2,)
    full = helpers.hidden_token_attribution(tiny_model, encoding, progress=False)
    assert torch.equal(result.contributions[0], full.at(2))


@pytest.mark.parametrize("layers", [0, [3], [-1], []])
def test_layers_out_of_range_are_refused(tiny_model, tokenizer, layers, one_thread):
    encoding = helpers.encode(tokenizer, "A short text.")
    with pytest.raises(ValueError, match="numbered 1..2|empty"):
        helpers.hidden_token_attribution(tiny_model, encoding, layer_numbers=layers, progress=False)


# ------------------------------------------------------------------ padding without an attention mask


def test_padded_encoding_without_attention_mask_is_refused(tiny_model, tokenizer):
    encoding = tokenizer(
        SENTENCE, padding="max_length", max_length=40, return_attention_mask=False, return_tensors="pt"
    )
    assert "attention_mask" not in encoding and bool((encoding["input_ids"] == 0).any())
    with pytest.raises(ValueError, match="padding tokens"):
        helpers.capture(tiny_model, encoding)
    with pytest.raises(ValueError, match="padding tokens"):
        helpers.hidden_token_attribution(tiny_model, encoding, progress=False)


def test_padded_encoding_with_its_mask_is_refused_too(tiny_model, tokenizer):
    encoding = tokenizer(SENTENCE, padding="max_length", max_length=40, return_tensors="pt")
    with pytest.raises(ValueError, match="padded"):
        helpers.capture(tiny_model, encoding)


def test_unpadded_encoding_without_mask_still_runs(tiny_model, tokenizer):
    encoding = tokenizer(SENTENCE, return_attention_mask=False, return_tensors="pt")
    internals = helpers.capture(tiny_model, encoding)
    reference = helpers.capture(tiny_model, helpers.encode(tokenizer, SENTENCE))
    torch.testing.assert_close(internals.hidden_states, reference.hidden_states)


# ------------------------------------------------------------------ model folders and the hub


def test_folder_without_tokenizer_files_is_a_clear_error(tmp_path, tiny_model):
    tiny_model.save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="no tokenizer files"):
        helpers.load_model(str(tmp_path), device="cpu")


def test_folder_with_weights_and_tokenizer_loads(tmp_path, tiny_model, tokenizer):
    tiny_model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    model, loaded = helpers.load_model(tmp_path, device="cpu")
    assert len(loaded) == model.config.vocab_size
    assert loaded.convert_ids_to_tokens(helpers.encode(loaded, "river")["input_ids"][0])[1] == "river"


def test_folder_without_config_is_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="config.json"):
        helpers.load_model(str(tmp_path), device="cpu")


def test_hub_name_offline_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(ModelLoadError, match="not reachable"):
        helpers.load_model("some-user/no-such-model-for-the-book", device="cpu")
    assert time.perf_counter() - start < 5.0
    assert not helpers.model.loading.hub_reachable()


@pytest.mark.parametrize("name", [3, ["bert-base-uncased"]])
def test_model_name_of_the_wrong_type(name):
    with pytest.raises(TypeError, match="name must be"):
        helpers.load_model(name)


# ------------------------------------------------------------------ effective attention on other dtypes


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.float16, torch.bfloat16])
def test_effective_attention_of_integer_bool_and_half_A(dtype):
    generator = torch.Generator().manual_seed(0)
    n, d = 6, 3
    A = (torch.rand(n, n, generator=generator) * 3).to(dtype)
    T = torch.randn(n, d, generator=generator, dtype=torch.float64)
    split = helpers.effective_attention(A, T)
    assert split.effective.dtype == torch.float32
    A32 = A.to(torch.float32)
    torch.testing.assert_close(split.effective + split.null, A32)
    torch.testing.assert_close(split.effective.double() @ T, A32.double() @ T, atol=1e-5, rtol=1e-5)
    assert float((split.null.double() @ T).abs().max()) < 1e-5
    assert float(split.null.abs().max()) > 1e-3  # n > d: a null part exists and is not rounded away


def test_effective_attention_of_complex_A_is_refused():
    with pytest.raises(TypeError, match="real"):
        helpers.effective_attention(torch.ones(3, 3, dtype=torch.complex64), torch.ones(3, 2))


@pytest.mark.parametrize("rtol", [np.float32(1e-5), np.float64(1e-5), 1e-5])
def test_numpy_rtol_is_accepted(rtol):
    split = helpers.effective_attention(torch.eye(3), torch.ones(3, 2), rtol=rtol)
    assert torch.isfinite(split.effective).all()


# ------------------------------------------------------------------ invisible-only texts


@pytest.mark.parametrize("text", ["\u200b\x00", "\u200b", "\x00\x01", "\ufeff \u2060", "\u200d\t\u200c"])
def test_invisible_only_text_is_empty(tokenizer, tiny_model, text):
    with pytest.raises(ValueError, match="empty|no token"):
        helpers.encode(tokenizer, text)
    with pytest.raises(ValueError, match="empty|no token"):
        helpers.encode(tokenizer, "A real sentence.", text)
    with pytest.raises(ValueError, match="empty"):
        helpers.collect_hidden_tokens(tiny_model, tokenizer, [text], progress=False)


def test_text_with_only_characters_the_tokenizer_drops(tokenizer):
    # visible to unicodedata but dropped by the BERT normaliser (a lone combining accent)
    with pytest.raises(ValueError, match="no token"):
        helpers.encode(tokenizer, "\u0301")


# ------------------------------------------------------------------ ids the model cannot embed


def test_token_ids_beyond_the_vocabulary(tiny_model):
    ids = torch.tensor([[101, 40000, 102]])
    encoding = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        helpers.capture(tiny_model, encoding)
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        helpers.capture(tiny_model, {"input_ids": torch.tensor([[101, -3, 102]])})


def test_float_input_ids_are_refused(tiny_model):
    with pytest.raises(TypeError, match="integer token ids"):
        helpers.capture(tiny_model, {"input_ids": torch.tensor([[101.0, 2000.0, 102.0]])})


def one_segment_bert() -> BertModel:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        type_vocab_size=1,
        attn_implementation="eager",
    )
    return BertModel(config, add_pooling_layer=False).eval()


def test_sentence_pair_on_a_model_with_one_token_type(tokenizer):
    model = one_segment_bert()
    with pytest.raises(ValueError, match="one segment"):
        helpers.encode(tokenizer, "First sentence.", "Second sentence.", model=model)
    pair = helpers.encode(tokenizer, "First sentence.", "Second sentence.")
    with pytest.raises(ValueError, match="type_vocab_size = 1"):
        helpers.capture(model, pair)
    with pytest.raises(ValueError, match="one segment"):
        helpers.collect_hidden_tokens(model, tokenizer, [("First.", "Second.")], progress=False)
    single = helpers.capture(model, helpers.encode(tokenizer, "First sentence.", model=model))
    assert torch.isfinite(single.A).all()


# ------------------------------------------------------------------ half-precision models


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_model_is_computed_in_float32(tokenizer, dtype, one_thread):
    half = make_tiny_bert().to(dtype)
    as_float = make_tiny_bert().to(dtype).float()  # the same rounded weights, in float32
    encoding = helpers.encode(tokenizer, SENTENCE)
    internals = helpers.capture(half, encoding)
    assert internals.A.dtype == torch.float32
    torch.testing.assert_close(internals.A, helpers.capture(as_float, encoding).A)
    split = helpers.effective_attention_of(internals)
    torch.testing.assert_close(split.effective @ internals.T, internals.A @ internals.T, atol=1e-4, rtol=1e-4)
    result = helpers.hidden_token_attribution(half, encoding, progress=False)
    reference = helpers.hidden_token_attribution(as_float, encoding, progress=False)
    assert torch.equal(result.contributions, reference.contributions)
    assert next(half.parameters()).dtype == dtype  # the caller's model is left as it was
    tokens = helpers.collect_hidden_tokens(half, tokenizer, [SENTENCE], progress=False)
    assert tokens.hidden.dtype == torch.float32


# ------------------------------------------------------------------ records: strings, pairs and Examples


RECORDS = [
    "The river rose.",
    ("The river rose.", "Water covered the fields."),
    Example("e0", "The river rose.", None, None, "test"),
]


def test_effective_attention_sweep_takes_strings_pairs_and_examples(tiny_model, tokenizer):
    table = helpers.effective_attention_sweep(tiny_model, tokenizer, RECORDS, progress=False)
    assert list(table["example"].unique()) == ["0", "1", "e0"]
    assert set(table["source"]) == {"given text", "test"}
    by_record = table.groupby("example")["n"].first()
    assert by_record["0"] == by_record["e0"] < by_record["1"]


def test_attribute_examples_takes_strings_pairs_and_examples(tiny_model, tokenizer, one_thread):
    results = helpers.attribute_examples(
        tiny_model, tokenizer, RECORDS, estimator="estimate", samples=4, progress=False
    )
    assert [r.n for r in results][0] == results[2].n
    assert int(results[1].token_type_ids.max()) == 1


@pytest.mark.parametrize(
    "records, error",
    [
        ("one text", TypeError),
        ([], ValueError),
        ([3], TypeError),
        ([("a", "b", "c")], TypeError),
        ([("a", None)], None),
    ],
)
def test_bad_records_are_refused_before_the_model_runs(tiny_model, tokenizer, records, error, one_thread):
    if error is None:
        assert (
            len(
                helpers.attribute_examples(
                    tiny_model, tokenizer, records, samples=2, estimator="estimate", progress=False
                )
            )
            == 1
        )
        return
    with pytest.raises(error):
        helpers.effective_attention_sweep(tiny_model, tokenizer, records, progress=False)
    with pytest.raises(error):
        helpers.attribute_examples(tiny_model, tokenizer, records, progress=False)


# ------------------------------------------------------------------ seeds, samples, numpy integers


@pytest.mark.parametrize("seed, error", [(None, TypeError), (1.5, TypeError), ("0", TypeError), (-1, ValueError)])
def test_bad_seeds_are_refused(tiny_model, tokenizer, seed, error):
    encoding = helpers.encode(tokenizer, "A short text.")
    with pytest.raises(error, match="seed"):
        helpers.hidden_token_attribution(tiny_model, encoding, estimator="estimate", samples=2, seed=seed)
    with pytest.raises(error, match="seed"):
        helpers.attribute_examples(tiny_model, tokenizer, ["A short text."], seed=seed, progress=False)
    with pytest.raises(error, match="seed"):
        helpers.methods.nullspace.null_direction(torch.randn(8, 2, dtype=torch.float64), seed=seed)
    with pytest.raises(error, match="seed"):
        helpers.methods.probes.fit_map(torch.randn(10, 4), torch.randn(10, 4), kind="mlp", seed=seed)


def test_numpy_seed_is_accepted(tiny_model, tokenizer, one_thread):
    encoding = helpers.encode(tokenizer, "A short text.")
    a = helpers.hidden_token_attribution(
        tiny_model, encoding, estimator="estimate", samples=2, seed=np.int64(3), progress=False
    )
    b = helpers.hidden_token_attribution(tiny_model, encoding, estimator="estimate", samples=2, seed=3, progress=False)
    assert torch.equal(a.contributions, b.contributions)


@pytest.mark.parametrize("samples", [0, None, -4, 10**6])
def test_exact_method_ignores_samples(tiny_model, tokenizer, samples, one_thread):
    encoding = helpers.encode(tokenizer, "A short text.")
    result = helpers.hidden_token_attribution(tiny_model, encoding, estimator="exact", samples=samples, progress=False)
    assert result.samples is None


@pytest.mark.parametrize("samples, error", [(0, ValueError), (None, TypeError), (2.0, TypeError), (True, TypeError)])
def test_estimate_needs_valid_samples(tiny_model, tokenizer, samples, error):
    encoding = helpers.encode(tokenizer, "A short text.")
    with pytest.raises(error, match="samples"):
        helpers.hidden_token_attribution(tiny_model, encoding, estimator="estimate", samples=samples, progress=False)


def test_numpy_integers_for_layer_and_head(tiny_model, tokenizer):
    encoding = helpers.encode(tokenizer, "A short text.")
    n = encoding["input_ids"].shape[1]
    uniform = torch.full((n, n), 1.0 / n)
    patched = helpers.model.patching.run_patched(tiny_model, encoding, np.int64(1), np.int32(3), uniform)
    assert torch.equal(patched, helpers.model.patching.run_patched(tiny_model, encoding, 1, 3, uniform))
    result = helpers.hidden_token_attribution(
        tiny_model, encoding, estimator="estimate", samples=np.int64(4), progress=False
    )
    assert result.samples == 4


# ------------------------------------------------------------------ found by the property suite and the review


@pytest.mark.parametrize("lengths", [["12"], [2.7], [True, 3]])
def test_rank_sweep_lengths_must_be_integers(tiny_model, tokenizer, lengths):
    encoding = helpers.encode(tokenizer, SENTENCE)
    with pytest.raises(TypeError, match="lengths .a token count. must be an integer"):
        helpers.rank_sweep(tiny_model, [encoding], lengths, progress=False)


def test_numpy_integers_for_counts(tiny_model, tokenizer, one_thread):
    tokens = helpers.collect_hidden_tokens(
        tiny_model, tokenizer, ["A text.", "Another one."], batch_size=np.int64(1), progress=False
    )
    assert len(tokens.sequence_ids) == 2
    table = helpers.rank_sweep(
        tiny_model, [helpers.encode(tokenizer, SENTENCE)], np.arange(4, 6), per_text=np.int64(1), progress=False
    )
    assert len(table["n"].unique()) == 1
    assert helpers.methods.keys.dimension_count(
        np.int64(8), np.int64(2), np.int64(3)
    ) == helpers.methods.keys.dimension_count(8, 2, 3)


@pytest.mark.parametrize("layer, error", [(2.7, TypeError), ("1", TypeError), (None, TypeError), (9, ValueError)])
def test_token_map_layer_must_be_an_integer(tiny_model, tokenizer, layer, error):
    tokens = helpers.collect_hidden_tokens(tiny_model, tokenizer, ["A text.", "Another one."], progress=False)
    with pytest.raises(error, match="hidden_state"):
        helpers.methods.probes.fit_token_map(tokens, layer)


def test_nan_norms_are_refused():
    with pytest.raises(ValueError, match="NaN"):
        helpers.methods.attribution.contributions_from_norms(torch.tensor([[1.0, float("nan")], [1.0, 1.0]]))


@pytest.mark.parametrize("fractions, error", [([], ValueError), (["a"], TypeError), ([2.0], ValueError)])
def test_alternative_family_fractions(fractions, error):
    A = torch.full((6, 6), 1 / 6, dtype=torch.float64)
    T = torch.randn(6, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    with pytest.raises(error, match="fractions"):
        helpers.alternative_family(A, T, fractions=fractions)
