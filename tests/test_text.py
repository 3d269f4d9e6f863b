import pytest
import torch

import helpers
from helpers.model.text import check_single_sequence

from .conftest import LONG_TEXT, SENTENCE, make_tiny_bert


def test_encode_is_one_unpadded_sequence(tokenizer):
    encoding = helpers.encode(tokenizer, SENTENCE)
    assert encoding["input_ids"].shape[0] == 1
    tokens = helpers.tokens_of(tokenizer, encoding)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert check_single_sequence(encoding) == len(tokens)


def test_sentence_pair_has_two_segments(tokenizer):
    encoding = helpers.encode(tokenizer, "A dog barked.", "The dog was loud.")
    types = encoding["token_type_ids"][0].tolist()
    assert types[0] == 0 and types[-1] == 1
    assert helpers.tokens_of(tokenizer, encoding).count("[SEP]") == 2


@pytest.mark.parametrize("text", ["", "   \n"])
def test_empty_text_is_rejected(tokenizer, text):
    with pytest.raises(ValueError, match="empty"):
        helpers.encode(tokenizer, text)


def test_empty_pair_is_rejected(tokenizer):
    with pytest.raises(ValueError, match="text_pair is empty"):
        helpers.encode(tokenizer, "fine", " ")


def test_non_string_is_rejected(tokenizer):
    with pytest.raises(TypeError):
        helpers.encode(tokenizer, ["a", "list"])


def test_text_longer_than_the_model_is_rejected(tokenizer):
    model = make_tiny_bert(max_positions=16)
    with pytest.raises(ValueError, match="at most 16"):
        helpers.encode(tokenizer, "word " * 40, model=model)


class _Tokenizer:
    """Stands for another model's tokenizer: its size and special ids, wrapping the real one for the rest."""

    def __init__(self, tokenizer, size: int, **ids):
        self._tokenizer, self._size, self._ids = tokenizer, size, ids

    def __len__(self):
        return self._size

    def __getattr__(self, name):
        return self._ids[name] if name in self._ids else getattr(self._tokenizer, name)

    def __call__(self, *args, **kwargs):
        return self._tokenizer(*args, **kwargs)


def test_another_models_tokenizer_is_refused_or_warned(tokenizer):
    model = make_tiny_bert()  # the real tokenizer's vocabulary, 30,522 rows
    with pytest.raises(ValueError, match="not this model's tokenizer"):
        helpers.encode(_Tokenizer(tokenizer, 49152), SENTENCE, model=model)
    with pytest.warns(helpers.model.checks.InputWarning, match="20,000 tokens against 30,522"):
        helpers.encode(_Tokenizer(tokenizer, 20000), SENTENCE, model=model)
    model.config.pad_token_id = 2
    with pytest.warns(helpers.model.checks.InputWarning, match="pad_token_id 0 against 2"):
        helpers.encode(tokenizer, SENTENCE, model=model)


def test_the_models_own_tokenizer_passes_without_a_warning(tokenizer):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        helpers.encode(tokenizer, SENTENCE, model=make_tiny_bert())


def test_padded_batch_is_rejected(tokenizer):
    batch = tokenizer(["short", "a much longer sentence here"], padding=True, return_tensors="pt")
    with pytest.raises(ValueError, match="one sequence"):
        check_single_sequence(batch)
    single = tokenizer(["short"], padding="max_length", max_length=8, return_tensors="pt")
    with pytest.raises(ValueError, match="padded"):
        check_single_sequence(single)


def test_prefix_encoding_keeps_the_start_and_the_closing_token(tokenizer):
    encoding = helpers.encode(tokenizer, LONG_TEXT)
    prefix = helpers.model.text.prefix_encoding(encoding, 10)
    ids = prefix["input_ids"]
    assert ids.shape == (1, 10)
    assert torch.equal(ids[0, :9], encoding["input_ids"][0, :9])
    assert int(ids[0, -1]) == tokenizer.sep_token_id
    assert prefix["attention_mask"].shape == (1, 10) and prefix["token_type_ids"].shape == (1, 10)
    full = helpers.model.text.prefix_encoding(encoding, encoding["input_ids"].shape[1])
    assert torch.equal(full["input_ids"], encoding["input_ids"])


@pytest.mark.parametrize("length, error", [(1, ValueError), (10_000, ValueError), (5.0, TypeError), (True, TypeError)])
def test_prefix_encoding_rejects_bad_lengths(tokenizer, length, error):
    with pytest.raises(error):
        helpers.model.text.prefix_encoding(helpers.encode(tokenizer, LONG_TEXT), length)


def test_leading_words_cut_at_a_word_boundary_within_the_length(tokenizer):
    from helpers.model.text import leading_words

    text = LONG_TEXT
    for max_tokens in (5, 12, 30):
        cut = leading_words(tokenizer, text, max_tokens)
        n = len(tokenizer(cut)["input_ids"])
        assert n <= max_tokens and text.startswith(cut)
        longer = " ".join(text.split()[: len(cut.split()) + 1])
        assert longer == cut or len(tokenizer(longer)["input_ids"]) > max_tokens  # the longest that fits
    assert leading_words(tokenizer, "two words", 100) == "two words"
    with pytest.raises(ValueError, match="first word"):
        leading_words(tokenizer, text, 2)  # [CLS] and [SEP] alone fill two tokens
