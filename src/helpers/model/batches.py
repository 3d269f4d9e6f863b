"""A padded batch of encodings as the sequences it holds, each unpadded, for the methods that work on one.

``tokenizer(texts, padding=True, return_tensors="pt")`` pads the shorter sequences of a batch and marks
the padding with ``attention_mask``. The helpers' methods compute on one unpadded sequence (a head's null
space depends on its length); :func:`sequences_of` cuts the batch into its sequences, each with only its
real tokens, so that ``capture``, ``hidden_token_attribution`` and ``context_mixing`` can take the batch
and return one result per sequence, each equal to that sequence run alone.
"""

from __future__ import annotations

import torch
from transformers import BatchEncoding

from .checks import check_encoding_type

__all__ = ["is_batch", "sequences_of"]


def is_batch(encoding) -> bool:
    """True for an encoding of more than one sequence: ``input_ids`` of shape ``(B, n)`` with B > 1."""
    check_encoding_type(encoding)
    ids = encoding["input_ids"]
    return isinstance(ids, torch.Tensor) and ids.dim() == 2 and ids.shape[0] > 1


def sequences_of(encoding: BatchEncoding) -> list[BatchEncoding]:
    """The B sequences of a padded batch, each ``(1, n_b)`` with its real tokens only (padding on either side).

    Every per-token field (``input_ids``, ``attention_mask``, ``token_type_ids``, ...) is cut the same way.
    Without an ``attention_mask`` every row is taken whole.

    Raises:
        ValueError: a row with no real token, a row of special tokens only (an empty text, from a fast
            tokenizer's encoding), or a row whose real tokens are not one contiguous run (a mask that is
            not padding).
    """
    check_encoding_type(encoding)
    ids = encoding["input_ids"]
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
        raise ValueError(f"Expected input_ids of shape (B, n); got {type(ids).__name__}.")
    mask = encoding.get("attention_mask")
    mask = torch.ones_like(ids, dtype=torch.bool) if mask is None else mask.bool()
    made = getattr(encoding, "encodings", None)  # a fast tokenizer's: which tokens it added, per row
    sequences = []
    for row in range(ids.shape[0]):
        kept = mask[row].nonzero().flatten()
        if len(kept) == 0:
            raise ValueError(f"Sequence {row} of the batch has no token its attention mask keeps.")
        start, stop = int(kept[0]), int(kept[-1]) + 1
        special = made[row].special_tokens_mask[start:stop] if made and row < len(made) else None
        if special and all(special):
            raise ValueError(
                f"Sequence {row} of the batch holds only special tokens: its text was empty. Run alone it is "
                "refused the same way; leave the empty text out of the batch."
            )
        if stop - start != len(kept):
            raise ValueError(
                f"The attention mask of sequence {row} keeps tokens that are not one run: that is not padding."
            )
        sequences.append(
            BatchEncoding(
                {
                    key: value[row : row + 1, start:stop]
                    if isinstance(value, torch.Tensor) and value.shape[:2] == ids.shape
                    else value
                    for key, value in encoding.items()
                }
            )
        )
    return sequences
