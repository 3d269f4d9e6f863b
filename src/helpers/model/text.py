"""Turning text into one model-ready, unpadded encoding, with early checks."""

from __future__ import annotations

import unicodedata
from typing import NamedTuple

import torch
from transformers import BatchEncoding, PreTrainedModel

from .checks import check_encoding_type, check_unknown_tokens, warn_at_caller
from .numbering import check_integer


def _is_decoder_only(model: PreTrainedModel) -> bool:
    """A causal language model without segments (the families ``helpers.model.families`` marks causal)."""
    from .families import FAMILIES

    family = FAMILIES.get(getattr(model.config, "model_type", None))
    return family is not None and family.causal


def token_limit(config) -> int:
    """The most tokens a model takes: ``max_position_embeddings``, less the positions that RoBERTa-style
    models (RoBERTa, MPNet) never use: they number positions from ``pad_token_id + 1`` (all-mpnet-base-v2:
    514 position embeddings, 512 tokens)."""
    limit = config.max_position_embeddings
    pad = getattr(config, "pad_token_id", None)
    if getattr(config, "model_type", None) in ("roberta", "mpnet") and pad is not None:
        limit -= pad + 1
    return limit


def first_tokens(encoding: BatchEncoding, length: int) -> BatchEncoding:
    """The first ``length`` tokens of a one-sequence encoding: a decoder's prompt of fixed length.

    (An encoder's sequence would lose its closing [SEP]: use this for decoders only.)

    Raises:
        ValueError: the encoding is shorter than ``length`` (nothing is padded).
    """
    n = check_single_sequence(encoding)
    length = check_integer(length, "length", 1, None)
    if n < length:
        raise ValueError(f"The text has {n} tokens, fewer than the {length} asked for; choose a longer text.")
    return BatchEncoding({key: value[:, :length] for key, value in encoding.items()})


def leading_words(tokenizer, text: str, max_tokens: int) -> str:
    """The longest run of ``text``'s first words whose encoding (special tokens included) has at most
    ``max_tokens`` tokens: an encoder's input cut to a length at a word boundary, its [SEP] kept.

    Raises:
        ValueError: not even the first word fits.
    """
    max_tokens = check_integer(max_tokens, "max_tokens", 1, None)
    words = text.split()

    def length(k: int) -> int:
        return len(tokenizer(" ".join(words[:k]))["input_ids"])

    if not words or length(1) > max_tokens:
        raise ValueError(f"Not even the first word of the text fits in {max_tokens} tokens.")
    low, high = 1, len(words)  # length() grows with k: the largest k that fits, by bisection
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if length(middle) <= max_tokens else (low, middle - 1)
    return " ".join(words[:low])


def encode(
    tokenizer,
    text: str,
    text_pair: str | None = None,
    model: PreTrainedModel | None = None,
) -> BatchEncoding:
    """Tokenize one text (or sentence pair) as a batch of one, without padding.

    Args:
        tokenizer: the model's tokenizer.
        text: first segment; must contain a non-space character.
        text_pair: optional second segment (token_type_ids 1 where the model has segments).
        model: if given, the encoding is checked against its maximum length
            and moved to its device.

    Returns:
        A ``BatchEncoding`` with ``input_ids`` and ``attention_mask``, each ``(1, n)``, and
        ``token_type_ids`` where the tokenizer gives them (BERT's do; MPNet's, GPT-2's and Llama's do not).

    Raises:
        ValueError: empty text, more tokens than the model takes, a tokenizer with more tokens than the
            model's vocabulary.

    Warns:
        InputWarning: over a quarter of the text's tokens are unknown to the tokenizer; a tokenizer that
            does not look like the model's (``check_tokenizer_fits``).
    """
    for label, value in (("text", text), ("text_pair", text_pair)):
        if value is None and label == "text_pair":
            continue
        if not isinstance(value, str):
            raise TypeError(f"{label} must be a string, got {type(value).__name__}.")
        if not value.strip():
            raise ValueError(f"{label} is empty: give at least one word to encode.")
        if not visible_text(value):
            raise ValueError(
                f"{label} holds only invisible characters (zero-width, control or format characters): "
                "it is empty after normalisation; give at least one word to encode."
            )
        if not tokenizer(value, add_special_tokens=False)["input_ids"]:
            raise ValueError(f"The tokenizer finds no token in {label} {value!r}; give at least one word to encode.")
    if text_pair is not None and model is not None and _is_decoder_only(model):
        raise ValueError(
            f"{type(model).__name__} is a decoder: it has no segments, so a sentence pair has no meaning for it. "
            "Join the two texts into one (or pass text_a only)."
        )
    if model is not None:
        check_tokenizer_fits(tokenizer, model)
    encoding = tokenizer(text, text_pair, return_tensors="pt", truncation=False)
    check_unknown_tokens(encoding["input_ids"], tokenizer.unk_token_id, tokenizer.all_special_ids)
    n = encoding["input_ids"].shape[1]
    if model is not None:
        limit = token_limit(model.config)
        if n > limit:
            raise ValueError(
                f"The text has {n} tokens but the model takes at most {limit}; "
                "shorten it (the book never truncates silently)."
            )
        check_encoding(model, encoding)
        encoding = encoding.to(model.device)
    return encoding


TOKENIZER_SHARE = 0.9
"""A tokenizer with fewer tokens than this share of the model's vocabulary rows is most likely another
model's: a model's rows exceed its tokenizer's size only by padding (to a multiple of 64 or 128) or a few
reserved rows (SmolLM2: 49,152 both; Qwen2: 151,665 tokens, 151,936 rows)."""


def check_tokenizer_fits(tokenizer, model: PreTrainedModel) -> None:
    """Raise when ``tokenizer`` has more tokens than ``model``'s vocabulary (ids past its rows); warn
    (:class:`InputWarning`) when it has fewer than ``TOKENIZER_SHARE`` of them or its beginning / end /
    padding ids differ from the model config's: in each case it is most likely another model's tokenizer,
    whose ids read as other words (or ``[unusedN]``) in this model."""
    size, vocab = len(tokenizer), getattr(model.config, "vocab_size", None)
    if not isinstance(vocab, int) or vocab <= 0:
        return
    hint = "Use the tokenizer of the same checkpoint (the one load_model or load_decoder returns with the model)."
    if size > vocab:
        raise ValueError(
            f"The tokenizer has {size:,} tokens but {type(model).__name__} has {vocab:,} vocabulary rows: it is "
            f"not this model's tokenizer. {hint}"
        )
    clashes = [
        f"{name} {getattr(tokenizer, name)} against {getattr(model.config, name)}"
        for name in ("bos_token_id", "eos_token_id", "pad_token_id")
        if isinstance(getattr(tokenizer, name, None), int)
        and isinstance(getattr(model.config, name, None), int)
        and getattr(tokenizer, name) != getattr(model.config, name)
    ]
    if size < TOKENIZER_SHARE * vocab or clashes:
        reason = "; ".join(clashes) if clashes else f"{size:,} tokens against {vocab:,} vocabulary rows"
        warn_at_caller(
            f"The tokenizer does not look like {type(model).__name__}'s ({reason}): its ids would read as other "
            f"words in this model. {hint}",
        )


class TextPair(NamedTuple):
    """One record as the tokenizer takes it: a text and its optional second segment."""

    text: str
    text_pair: str | None


def text_pair_of(item, index: int = 0) -> TextPair:
    """``(text, text_pair or None)`` of one record: a string, a ``(text, text_pair)`` tuple or an
    ``Example`` (anything with ``text_a`` and ``text_b``). ``index`` names the item in errors."""
    if hasattr(item, "text_a"):  # helpers.model.corpus.Example
        a, b = item.text_a, getattr(item, "text_b", None)
    elif isinstance(item, str):
        a, b = item, None
    elif isinstance(item, tuple) and len(item) == 2:
        a, b = item
    else:
        raise TypeError(
            f"Item {index} is a {type(item).__name__}; give a string, a (text, text_pair) tuple or an Example."
        )
    for value in (a, b) if b is not None else (a,):
        if not isinstance(value, str):
            raise TypeError(f"Item {index}: texts must be strings, got {type(value).__name__}.")
        if not visible_text(value):
            raise ValueError(
                f"Item {index} has an empty text (nothing visible): every sequence needs at least one word."
            )
    return TextPair(a, b)


def visible_text(text: str) -> str:
    """``text`` without the characters a tokenizer drops: whitespace, control (Cc),
    format (Cf: zero-width spaces and joiners, BOM) and unassigned (Cn) code points."""
    return "".join(c for c in text if not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf", "Cn", "Zs"))


def tokens_of(tokenizer, encoding: BatchEncoding) -> list[str]:
    """The wordpiece strings of a batch-of-one encoding, in order."""
    ids = encoding["input_ids"]
    if ids.dim() != 2 or ids.shape[0] != 1:
        raise ValueError(
            f"Expected a batch of one, input_ids of shape (1, n); got {tuple(ids.shape)}. For a padded batch, "
            "take the tokens of each of helpers.model.batches.sequences_of(encoding)."
        )
    return tokenizer.convert_ids_to_tokens(ids[0].tolist())


def check_single_sequence(encoding: BatchEncoding) -> int:
    """Return n for a batch-of-one, unpadded encoding; raise otherwise (a TypeError naming ``helpers.encode``
    for text, a bare tensor or list, or plain lists of ids: ``helpers.model.checks.check_encoding_type``)."""
    check_encoding_type(encoding)
    ids = encoding["input_ids"]
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[0] != 1:
        shape = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"Expected one sequence, input_ids of shape (1, n); got {shape}. Use helpers.encode.")
    if ids.shape[1] == 0:
        raise ValueError("The encoding has no tokens.")
    mask = encoding.get("attention_mask")
    if mask is not None and not bool(mask.all()):
        raise ValueError("The encoding is padded; the method works on the unpadded sequence. Use helpers.encode.")
    return ids.shape[1]


def check_encoding(model: PreTrainedModel, encoding: BatchEncoding) -> int:
    """Return n for one unpadded sequence that ``model`` can run; raise a clear error otherwise.

    Checks, before any forward pass: one sequence ``(1, n)`` of integer ids; no
    padding (by the attention mask or, without one, by the model's pad_token_id);
    token ids inside the vocabulary; token_type ids inside the model's
    ``type_vocab_size`` (a sentence pair needs 2); at most
    ``token_limit(config)`` tokens (``max_position_embeddings``, less RoBERTa-style offsets).
    """
    n = check_single_sequence(encoding)
    ids = encoding["input_ids"]
    if ids.dtype.is_floating_point or ids.dtype == torch.bool or ids.is_complex():
        raise TypeError(f"input_ids must be integer token ids, got dtype {ids.dtype}. Use helpers.encode.")
    config = model.config
    pad = getattr(config, "pad_token_id", None)
    if encoding.get("attention_mask") is None and pad is not None and bool((ids == pad).any()):
        raise ValueError(
            f"The encoding has padding tokens (id {pad}) and no attention mask, so the model would attend to "
            "them and every hidden state would change. Pass the tokenizer's attention_mask with a padded batch, "
            "or encode one text without padding (helpers.encode)."
        )
    vocab = config.vocab_size
    if bool((ids < 0).any()) or bool((ids >= vocab).any()):
        bad = ids[(ids < 0) | (ids >= vocab)][:5].tolist()
        raise ValueError(
            f"Token ids {bad} are outside the model's vocabulary 0..{vocab - 1}: the tokenizer does not "
            "belong to this model. Use the tokenizer that load_model returns with it."
        )
    types = encoding.get("token_type_ids")
    if types is not None:
        if types.shape != ids.shape:
            raise ValueError(
                f"token_type_ids {tuple(types.shape)} must have the shape of input_ids {tuple(ids.shape)}."
            )
        allowed = getattr(config, "type_vocab_size", 2)
        if bool((types < 0).any()) or bool((types >= allowed).any()):
            raise ValueError(
                f"token_type_ids must lie in 0..{allowed - 1} for this model (type_vocab_size = {allowed}); got "
                f"{sorted(set(types.flatten().tolist()))}. "
                + ("This model takes one segment: encode a single text, not a sentence pair." if allowed == 1 else "")
            )
    limit = token_limit(config)
    if n > limit:
        raise ValueError(f"The sequence has {n} tokens but the model takes at most {limit}; shorten it.")
    return n


def prefix_encoding(encoding: BatchEncoding, length: int) -> BatchEncoding:
    """The first ``length - 1`` tokens of a one-sequence encoding, closed by its last token ([SEP]).

    encoding: input_ids ``(1, n)``; returns input_ids ``(1, length)`` with the
    same token types, so a long passage yields valid inputs of any length.
    """
    n = check_single_sequence(encoding)
    length = check_integer(length, "length (at most the sequence length)", 2, n)

    def keep(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([t[:, : length - 1], t[:, -1:]], dim=1)

    return BatchEncoding({key: keep(value) for key, value in encoding.items() if isinstance(value, torch.Tensor)})
