"""Interventions on an encoder's attention, scored by its sentence embedding (chapter 4).

An encoder predicts no next token. What the bundled encoder was trained to output is a
sentence embedding: the mean of its last hidden states over the tokens. :func:`embedding_changes`
runs the model on each text once as it is and once per edit, and returns how far each edit
moves that embedding (cosine distance). The edits act in every head of every layer:

* ``"zero value"`` at one position: its value row set to zero, so no query takes anything from it
  (``helpers.methods.interventions``); made at ``[CLS]``, at the first ``[SEP]`` and, one at a
  time, at a few tokens of each text that are neither, drawn at random (``ordinary`` of them: the
  control, what zeroing a typical token's value does, not one draw's luck);
* ``"effective rows"``: every row of every head's ``A`` replaced by its effective part. The null
  part as a whole adds nothing to what a head writes, so this edit should move nothing: a check of
  the split inside the running model, not a finding.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch
from torch import nn
from transformers import BatchEncoding, PreTrainedModel

from ..methods.effective import effective_attention
from ..methods.interventions import PositionEdit
from ..model.capture import editing
from ..model.checks import UnsupportedModelError
from ..model.corpus import check_records
from ..model.families import family_of
from ..model.numbering import check_count
from ..model.progress import progress_bar
from ..model.text import encode, text_pair_of

__all__ = [
    "EMBEDDING_ROLES",
    "ORDINARY_TOKENS",
    "cosine_distance",
    "effective_rows",
    "embedding_changes",
    "mean_embedding",
]

EMBEDDING_ROLES = ("[CLS]", "[SEP]", "ordinary token")
ORDINARY_TOKENS = 8  # ordinary tokens zeroed per text, one at a time


def effective_rows(module: nn.Module, A: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An edit for ``helpers.model.capture.editing``: every row of ``A`` (B, h, n, n) replaced by its
    effective part, with ``range(V_h)`` for ``range(T_h)`` (the same where ``H_h`` has full row rank,
    which chapter 4 checks)."""
    return effective_attention(A, values).effective, values


@torch.no_grad()
def mean_embedding(model: PreTrainedModel, encoding: BatchEncoding, edit=None) -> torch.Tensor:
    """(d,) float64: the mean of the last hidden states over the tokens of one unpadded sequence,
    with ``edit`` (``helpers.model.capture.editing``) applied to every attention call if given."""
    inputs = {k: v.to(model.device) for k, v in encoding.items()}
    if edit is None:
        hidden = model(**inputs).last_hidden_state
    else:
        with editing(model, edit):
            hidden = model(**inputs).last_hidden_state
    return hidden[0].mean(dim=0).double().cpu()


def _positions(input_ids: torch.Tensor, tokenizer, generator: torch.Generator, ordinary: int) -> list[tuple[str, int]]:
    """(role, position) pairs of one sequence: [CLS], the first [SEP], and ``ordinary`` tokens that are
    neither, drawn without replacement (all of them if there are fewer), in the order of the sequence."""
    ids = input_ids.tolist()
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    others = [k for k, token in enumerate(ids) if token not in (cls, sep)]
    if ids[0] != cls or sep not in ids or not others:
        raise ValueError("Each text must encode as [CLS] ... [SEP] with at least one other token.")
    picks = torch.randperm(len(others), generator=generator)[:ordinary].sort().values.tolist()
    return [("[CLS]", 0), ("[SEP]", ids.index(sep))] + [("ordinary token", others[k]) for k in picks]


def cosine_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """1 - cos(a, b) for two (d,) vectors, computed as half the squared distance of the unit vectors in float64:
    the same number, but never below zero (1 - cos in float32 falls below zero by rounding when the two
    vectors nearly coincide, and its logarithm is then undefined)."""
    a, b = a.double(), b.double()
    return float(0.5 * (a / a.norm() - b / b.norm()).pow(2).sum())


def embedding_changes(
    model: PreTrainedModel,
    tokenizer,
    examples: Sequence,
    seed: int = 0,
    ordinary: int = ORDINARY_TOKENS,
    progress: bool = True,
) -> pd.DataFrame:
    """How far each edit moves an encoder's sentence embedding, per text.

    Args:
        model, tokenizer: a bidirectional encoder whose tokenizer has [CLS] and [SEP] tokens.
        examples: ``helpers.model.corpus.Example`` records, strings or ``(text, text_pair)`` tuples.
        seed: the draw of each text's ordinary tokens.
        ordinary: how many ordinary tokens (neither [CLS] nor [SEP]) of each text to zero, one at a time
            (all of them where a text has fewer); each costs one forward pass.

    Returns:
        One row per example and edit: ``example`` (its id, or index), ``n``, ``kind`` ("zero value"
        or "effective rows"), ``role`` (``EMBEDDING_ROLES``, or "every row" for "effective rows";
        ``ordinary`` rows of "ordinary token" per text),
        ``position`` (-1 for "effective rows") and ``distance`` = 1 - cos(edited, unedited
        ``mean_embedding``), :func:`cosine_distance`.
    """
    if family_of(model).causal:
        raise UnsupportedModelError(
            f"embedding_changes scores an encoder's mean-pooled embedding; {type(model).__name__} is causal. "
            "For a decoder use helpers.drivers.interventions.intervention_losses (next-token loss)."
        )
    if model.training:
        raise ValueError("The model is in training mode; call model.eval() first.")
    ordinary = check_count(ordinary, "ordinary")
    if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
        raise ValueError("embedding_changes needs a tokenizer with [CLS] and [SEP] tokens.")
    records = check_records(examples)
    generator = torch.Generator().manual_seed(int(seed))
    rows = []
    for index, example in enumerate(progress_bar(records, "embedding edits", progress)):
        text_a, text_b = text_pair_of(example, index)
        encoding = encode(tokenizer, text_a, text_b, model=model)
        name = getattr(example, "id", index)
        n = int(encoding["input_ids"].shape[1])
        clean = mean_embedding(model, encoding)
        edits = [("effective rows", "every row", -1, effective_rows)]
        for role, position in _positions(encoding["input_ids"][0], tokenizer, generator, ordinary):
            edits.append(("zero value", role, position, PositionEdit.at("zero value", [position])))
        for kind, role, position, edit in edits:
            edited = mean_embedding(model, encoding, edit)
            distance = cosine_distance(edited, clean)
            rows.append(
                {"example": name, "n": n, "kind": kind, "role": role, "position": position, "distance": distance}
            )
    return pd.DataFrame(rows)
