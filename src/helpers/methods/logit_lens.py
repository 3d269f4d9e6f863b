"""The logit lens: a hidden token read through the model's own final norm and output head (chapter 9).

A probe (:mod:`~helpers.methods.probes`) learns a map from hidden tokens back to input space. A decoder
language model carries its own map: the final norm and the output head turn the last hidden state into
next-token logits, and with tied embeddings the logit of token ``t`` is ``norm(e) . E[t]``, the input
embedding ``x`` of ``t``. The *logit lens* applies that readout to any hidden token and asks which token
it names. A hidden token *identifies* its target ``x_{i + offset}`` when, among the tokens of its own
sequence (the probe's candidates), the target's id has the largest logit; copies of one id share one
logit, so they count as one candidate. ``among="vocabulary"`` takes the largest logit of the whole
vocabulary instead: at the last hidden state with ``offset=1`` that is the model's own top-1 prediction.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .probes import NeighbourRows, neighbour_rows

__all__ = ["AMONG", "lens_hits"]

AMONG = ("sequence", "vocabulary")


def lens_hits(
    readout: Callable[[torch.Tensor], torch.Tensor],
    hidden: torch.Tensor,
    input_ids: torch.Tensor,
    sequence: torch.Tensor,
    position: torch.Tensor,
    offset: int = 1,
    among: str = "sequence",
    chunk: int = 256,
) -> NeighbourRows:
    """Per token: does the logit lens name its target ``x_{i + offset}``?

    readout: (M, d) hidden tokens -> (M, V) logits (the model's final norm, then its output head);
    hidden: (N, d) the tokens of one hidden state; input_ids, sequence, position: (N,) each token's
    vocabulary id, sequence id and position in its sequence; offset: 0 scores x_i itself, 1 the next
    token (tokens without a neighbour there are left out); among: ``"sequence"`` (the candidates are the
    ids of the token's own sequence, as for a probe) or ``"vocabulary"`` (every id).
    Returns ``sources`` (M,) the rows scored and ``targets`` (M,) bool, True where the target's id has
    the largest logit among the candidates.
    """
    if among not in AMONG:
        raise ValueError(f"Unknown among {among!r}; choose one of {list(AMONG)}.")
    if hidden.dim() != 2:
        raise ValueError(f"hidden must be (N, d) tokens of one hidden state; got shape {tuple(hidden.shape)}.")
    N = hidden.shape[0]
    for name, value in (("input_ids", input_ids), ("sequence", sequence), ("position", position)):
        if value.shape != (N,):
            raise ValueError(f"{name} must have shape ({N},), got {tuple(value.shape)}.")
    if chunk < 1:
        raise ValueError(f"chunk must be at least 1, got {chunk}.")
    if offset == 0:
        sources = targets = torch.arange(N)  # cpu: row bookkeeping, like neighbour_rows' indices
    else:
        sources, targets = neighbour_rows(sequence.cpu(), position.cpu(), offset)
        if sources.numel() == 0:
            raise ValueError(f"No token has a neighbour at offset {offset} in its sequence.")
    ids = input_ids.cpu().long()
    _, group = torch.unique(sequence.cpu(), return_inverse=True)
    chosen = torch.empty(len(sources), dtype=torch.long)  # cpu: the logits are read out to the CPU
    allowed = None
    for start in range(0, len(sources), chunk):
        rows = sources[start : start + chunk]
        logits = readout(hidden[rows]).detach().float().cpu()  # (c, V)
        if logits.dim() != 2 or logits.shape[0] != len(rows):
            raise ValueError(f"readout must return ({len(rows)}, V) logits; got {tuple(logits.shape)}.")
        if among == "sequence":
            if allowed is None:  # (S, V): the ids each sequence holds
                if int(ids.max()) >= logits.shape[1]:
                    raise ValueError(f"an input id ({int(ids.max())}) lies outside the {logits.shape[1]} logits.")
                # cpu: a mask over the CPU copy of the logits
                allowed = torch.zeros(int(group.max()) + 1, logits.shape[1], dtype=torch.bool)
                allowed[group, ids] = True
            logits = logits.masked_fill(~allowed[group[rows]], float("-inf"))
        chosen[start : start + len(rows)] = logits.argmax(dim=-1)
    return NeighbourRows(sources, chosen == ids[targets])
