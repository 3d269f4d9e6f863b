"""What every loader returns: a model and its tokenizer, by name."""

from __future__ import annotations

from typing import NamedTuple

from transformers import PreTrainedModel, PreTrainedTokenizerBase


class LoadedModel(NamedTuple):
    """A model in eval mode and its tokenizer; unpacks as ``model, tokenizer = load_model()``."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
