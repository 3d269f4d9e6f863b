"""What every loader returns (a model and its tokenizer, by name), and where it puts the model."""

from __future__ import annotations

import copy
import os
from typing import NamedTuple

import torch
from transformers import BatchEncoding, PreTrainedModel, PreTrainedTokenizerBase

from .checks import ModelLoadError


class LoadedModel(NamedTuple):
    """A model in eval mode and its tokenizer; unpacks as ``model, tokenizer = load_model()``."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase


def model_device(device: str | torch.device | None = None) -> torch.device:
    """Where a loader puts the model: ``device`` if given, else ``$BOOK_DEVICE``, else the CPU.

    The book's committed outputs are CPU outputs, so the CPU is the default even where a GPU
    is present; ``BOOK_DEVICE=cuda`` (or ``device="cuda"``) asks for the GPU, and every method
    then runs on the model's device. Asking for CUDA where there is none is an error, not a
    silent fall-back.
    """
    chosen = device if device is not None else (os.environ.get("BOOK_DEVICE") or "cpu")
    try:
        chosen = torch.device(chosen)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N'; got {chosen!r}.") from err
    if chosen.type == "cuda" and not torch.cuda.is_available():
        fix = "unset BOOK_DEVICE" if device is None else "pass device='cpu' (or leave device out)"
        raise ModelLoadError(
            f"device {str(chosen)!r} was asked for ({'BOOK_DEVICE' if device is None else 'device='}), but this "
            f"machine has no CUDA GPU: {fix} to run on the CPU."
        )
    if chosen.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N'; got {str(chosen)!r}.")
    return chosen


class OnDevice(NamedTuple):
    """A model and an encoding on one device (``on_device``)."""

    model: PreTrainedModel
    encoding: BatchEncoding


def on_device(model: PreTrainedModel, encoding: BatchEncoding, device: str | torch.device) -> OnDevice:
    """``model`` and ``encoding`` on ``device`` (checked: ``helpers.model.loaded.model_device``): the model
    itself where it is there already, else a copy of it there; the encoding's tensors moved."""
    target = model_device(device)
    here = next(model.parameters()).device
    if here != target and not (target.type == "cuda" and target.index is None and here.type == "cuda"):
        model = copy.deepcopy(model).to(target)
        here = target
    moved = BatchEncoding({k: v.to(here) if isinstance(v, torch.Tensor) else v for k, v in encoding.items()})
    return OnDevice(model, moved)
