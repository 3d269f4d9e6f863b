"""Naive identifiability beside its position and word controls, per sequence (chapter 8); maps over seeds (chapter 5).

x = word piece + (position + segment) on an encoder, so the naive measure can find a token by its
position alone, and copies of a word piece tie: ``naive_control_rates`` scores the paper's measure
beside both parts of x as targets, on all tokens and on the tokens whose piece is unique.
``seed_hits`` tabulates, token by token, what maps trained with different seeds identify, one column
per seed, for an interval that resamples the seeds as well as the sequences (``bootstrap(seeds=True)``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from transformers import PreTrainedModel

from ..methods.hidden_tokens import HiddenTokens
from ..methods.probes import LOSSES, TokenMap, check_choice, nearest_in_sequence
from ..model.corpus import check_records
from .identifiability import collect_hidden_tokens, identified, input_parts, unique_pieces

__all__ = ["NAIVE_TARGETS", "naive_control_rates", "seed_hits"]

NAIVE_TARGETS = ("x", "position", "word")


def naive_control_rates(
    model: PreTrainedModel, tokenizer, examples: Sequence, distance: str = "cosine", progress: bool = True
) -> pd.DataFrame:
    """Naive identifiability per example and hidden state, beside its position and word controls.

    Token i counts at hidden state l when e_i^l is nearest (``distance``) among its sequence's targets to its own:
    ``target`` "x" is the paper's measure (x_j, the whole input), "position" the position + segment part of x_j
    alone (what position allows), "word" the word-piece part alone (a token counts when the nearest carries its
    piece, as copies of a piece tie). ``tokens`` "all" or "unique" (only the tokens whose piece occurs once in
    their sequence; NaN for an example without one). Returns ``example, hidden_state, target, tokens, rate``
    (an encoder only: ``input_parts``).
    """
    examples = check_records(examples)
    check_choice(distance, LOSSES, "distance")
    tokens = collect_hidden_tokens(model, tokenizer, examples, progress=progress)
    parts = input_parts(model, tokens)
    targets = {"x": tokens.x, "position": parts.position, "word": parts.word}
    own = torch.arange(len(tokens))
    sequences = tokens.sequence.long().cpu()
    subsets = {"all": torch.ones(len(tokens), dtype=torch.bool), "unique": unique_pieces(tokens).cpu()}
    rows = []
    for state in range(tokens.num_layers + 1):
        for name in NAIVE_TARGETS:
            nearest = nearest_in_sequence(
                tokens.hidden[state], tokens.sequence, targets[name], tokens.sequence, distance
            )
            hit = tokens.input_ids[nearest] == tokens.input_ids if name == "word" else nearest == own.to(nearest.device)
            hit = hit.double().cpu()
            for subset, chosen in subsets.items():
                counts = torch.bincount(sequences[chosen], minlength=len(examples)).double()
                hits = torch.bincount(sequences[chosen], weights=hit[chosen], minlength=len(examples))
                rate = torch.where(counts > 0, hits / counts.clamp_min(1), torch.nan)
                rows.append(
                    pd.DataFrame(
                        {
                            "example": range(len(examples)),
                            "hidden_state": state,
                            "target": name,
                            "tokens": subset,
                            "rate": rate.numpy(),  # cpu: bincounts of CPU tensors
                        }
                    )
                )
    return pd.concat(rows, ignore_index=True)


def seed_hits(
    maps: Sequence[TokenMap],
    tokens: HiddenTokens,
    hidden_state: int | None = None,
    distance: str | None = None,
    same_piece: bool = False,
) -> np.ndarray:
    """(N, S) per token and map (one per training seed): 1.0 if that map identifies it (``identified``).

    The maps must be of one kind, loss and training hidden state; ``hidden_state`` (default: theirs),
    ``distance`` and ``same_piece`` are passed to :func:`~helpers.drivers.identifiability.identified`.
    The mean over axis 1 is the share of the seeds that identify each token; pass the table whole to
    ``helpers.bootstrap(..., seeds=True)`` to put the seeds inside the interval (averaging them first
    would leave the seed-to-seed spread out of it).
    """
    if len(maps) == 0:
        raise ValueError("No maps given: pass one fitted map per seed.")
    if len({(m.kind, m.loss, m.hidden_state, m.offset) for m in maps}) != 1:
        raise ValueError("The maps differ in kind, loss, hidden state or offset; give one map per seed of one fit.")
    found = [identified(m, tokens, hidden_state, distance, same_piece).cpu().numpy() for m in maps]
    return np.stack(found, axis=1).astype(float)
