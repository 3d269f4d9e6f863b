"""Turning text into one model-ready, unpadded encoding, with early checks."""
from __future__ import annotations

import numbers

import torch
from transformers import BatchEncoding, PreTrainedModel


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
        text_pair: optional second segment (token_type_ids 1).
        model: if given, the encoding is checked against its maximum length
            and moved to its device.

    Returns:
        A ``BatchEncoding`` with ``input_ids``, ``token_type_ids`` and
        ``attention_mask``, each ``(1, n)``.

    Raises:
        ValueError: empty text, or more tokens than the model takes.
    """
    for label, value in (("text", text), ("text_pair", text_pair)):
        if value is None and label == "text_pair":
            continue
        if not isinstance(value, str):
            raise TypeError(f"{label} must be a string, got {type(value).__name__}.")
        if not value.strip():
            raise ValueError(f"{label} is empty: give at least one word to encode.")
    encoding = tokenizer(text, text_pair, return_tensors="pt", truncation=False)
    n = encoding["input_ids"].shape[1]
    if model is not None:
        limit = model.config.max_position_embeddings
        if n > limit:
            raise ValueError(
                f"The text has {n} tokens but the model takes at most {limit}; "
                "shorten it (the book never truncates silently)."
            )
        encoding = encoding.to(model.device)
    return encoding


def tokens_of(tokenizer, encoding: BatchEncoding) -> list[str]:
    """The wordpiece strings of a batch-of-one encoding, in order."""
    ids = encoding["input_ids"]
    if ids.dim() != 2 or ids.shape[0] != 1:
        raise ValueError(f"Expected a batch of one, input_ids of shape (1, n); got {tuple(ids.shape)}.")
    return tokenizer.convert_ids_to_tokens(ids[0].tolist())


def check_single_sequence(encoding: BatchEncoding) -> int:
    """Return n for a batch-of-one, unpadded encoding; raise otherwise."""
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


def prefix_encoding(encoding: BatchEncoding, length: int) -> BatchEncoding:
    """The first ``length - 1`` tokens of a one-sequence encoding, closed by its last token ([SEP]).

    encoding: input_ids ``(1, n)``; returns input_ids ``(1, length)`` with the
    same token types, so a long passage yields valid inputs of any length.
    """
    n = check_single_sequence(encoding)
    if not isinstance(length, numbers.Integral) or isinstance(length, bool):
        raise TypeError(f"length must be an int, got {type(length).__name__}.")
    if not 2 <= length <= n:
        raise ValueError(f"length must be between 2 and the sequence length {n}; got {length}.")

    def keep(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([t[:, : length - 1], t[:, -1:]], dim=1)

    return BatchEncoding({key: keep(value) for key, value in encoding.items() if isinstance(value, torch.Tensor)})
