"""Edits of the attention on one position, to ask what a causal model uses (chapter 9).

The null space says what a head's output cannot see; an intervention says what the
model's predictions depend on. Each edit changes, in every head of the chosen layers,
one thing about one position ``p`` (one per sequence of the batch):

* ``"zero value"``: the value row ``V_h[p] = 0``, so no query takes anything from ``p``
  (its attention weight still counts in the softmax's normalisation);
* ``"median value norm"``: ``V_h[p]`` rescaled, in its own direction, to the median norm
  of the head's other value rows (a value drain undone);
* ``"effective weight"``: the weight ``a_ip`` of every row replaced by its effective part
  ``(P_i a_i)_p`` (chapter 9's row-by-row effective attention), the other weights kept. The
  whole effective row would change nothing the head writes; one entry of it changes the
  output by ``((P_i a_i)_p - a_ip) v_p``, the null weight on ``p`` times ``p``'s value.
* ``"zero value past d_v"``: what ``"zero value"`` does, in the rows ``i >= d_v`` only (their
  weight ``a_ip`` set to 0 without renormalising, which removes ``a_ip v_p`` from them): the
  rows whose prefix can have a null space, where ``"effective weight"`` acts (it also acts on
  earlier rows whose prefix repeats a value row). The control for that edit.

Two more edits are controls for the sink (``CONTROL_EDITS``), made at the other positions:

* ``"sink's norm factor"``: ``V_h[p]`` multiplied by the factor that ``"median value norm"``
  applies to position 0 of the same head (median norm of the rows other than 0 over
  ``||V_h[0]||``). At ``p = 0`` it is ``"median value norm"``; elsewhere it is as large a change
  of norm as the sink's, where ``"median value norm"`` barely moves a row of median size.
* ``"null weight, rows shuffled"``: the amounts ``a_ip - (P_i a_i)_p`` that ``"effective weight"``
  removes from the rows ``i >= d_v``, reassigned among those rows at random (per sequence and
  head, seeded): the same total weight taken off ``p``, in rows where it is not the null part.

An edit is a callable ``(module, A, values) -> (A, values)`` for
:func:`helpers.model.capture.editing`; ``A``: (B, h, n, n), ``values``: (B, h, n, d_v).
The effective weight is computed from the edited run's own ``A`` and values, layer by
layer, with ``range(V_h[:i+1])`` for ``range(T_h[:i+1])``: equal when ``H_h`` has full row
rank, which the caller checks (:func:`helpers.drivers.interventions.intervention_losses` does).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from .causal import causal_effective_attention
from .linalg import DEFAULT_RTOL

__all__ = ["CONTROL_EDITS", "EDITS", "INTERVENTIONS", "PositionEdit"]

INTERVENTIONS = ("zero value", "median value norm", "effective weight", "zero value past d_v")
CONTROL_EDITS = ("sink's norm factor", "null weight, rows shuffled")
EDITS = INTERVENTIONS + CONTROL_EDITS


@dataclass(frozen=True)
class PositionEdit:
    """One intervention at one position per sequence, in every head of ``layers``.

    kind: one of ``EDITS`` (``INTERVENTIONS`` or ``CONTROL_EDITS``).
    positions: (B,) the edited position of each sequence of the batch.
    layers: 0-based layer indices to edit; None edits every layer.
    groups: query heads per key/value head (the values of a group are equal).
    seed: the draw of ``"null weight, rows shuffled"``.
    """

    kind: str
    positions: torch.Tensor
    layers: frozenset[int] | None = None
    groups: int = 1
    rtol: float = DEFAULT_RTOL
    seed: int = 0

    def __post_init__(self):
        if self.kind not in EDITS:
            raise ValueError(f"kind must be one of {EDITS}; got {self.kind!r}.")
        if not isinstance(self.positions, torch.Tensor) or self.positions.dim() != 1:
            raise ValueError("positions must be a 1-D tensor: one position per sequence of the batch.")
        if self.positions.dtype not in (torch.int32, torch.int64) or bool((self.positions < 0).any()):
            raise ValueError("positions must be non-negative integers.")

    @classmethod
    def at(cls, kind: str, positions: Iterable[int], layers: Iterable[int] | None = None, groups: int = 1):
        """The edit from plain integers (0-based positions and layers)."""
        chosen = None if layers is None else frozenset(int(k) for k in layers)
        # cpu: plain integers; __call__ moves them to the attention's device
        return cls(kind, torch.tensor([int(p) for p in positions]), chosen, groups)

    def __call__(self, module: nn.Module, A: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.layers is not None and module.layer_idx not in self.layers:
            return A, values
        B, _, n, _ = A.shape
        if len(self.positions) != B:
            raise ValueError(f"The edit has {len(self.positions)} positions for a batch of {B} sequences.")
        if bool((self.positions >= n).any()):
            raise ValueError(f"An edited position lies past the sequence's {n} tokens.")
        batch, p = torch.arange(B, device=A.device), self.positions.to(A.device)
        if self.kind == "zero value":
            values = values.clone()
            values[batch, :, p] = 0.0
        elif self.kind in ("median value norm", "sink's norm factor"):
            source = p if self.kind == "median value norm" else torch.zeros_like(p)
            scale = _median_norm_factor(values, batch, source)  # (B, h)
            values = values.clone()
            values[batch, :, p] = values[batch, :, p] * scale[..., None]
        elif self.kind == "zero value past d_v":
            A = A.clone()
            A[batch, :, values.shape[-1] :, p] = 0.0
        else:
            effective = causal_effective_attention(A, values, groups=self.groups, rtol=self.rtol).effective
            removed = A[batch, :, :, p] - effective[batch, :, :, p]  # (B, h, n)
            if self.kind == "null weight, rows shuffled":
                removed = _shuffled_rows(removed, values.shape[-1], self.seed)
            A = A.clone()
            A[batch, :, :, p] = A[batch, :, :, p] - removed
        return A, values


def _median_norm_factor(values: torch.Tensor, batch: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """(B, h): median norm of the value rows other than ``source`` over the norm of row ``source``."""
    norms = values.norm(dim=-1)  # (B, h, n)
    others = norms.clone()
    others[batch, :, source] = float("nan")
    target = others.nanmedian(dim=-1).values
    return target / norms[batch, :, source].clamp_min(torch.finfo(norms.dtype).tiny)


def _shuffled_rows(removed: torch.Tensor, first_row: int, seed: int) -> torch.Tensor:
    """``removed`` (B, h, n) with its entries in rows first_row.. permuted at random per sequence and head."""
    B, h, n = removed.shape
    if n - first_row < 2:
        return removed
    generator = torch.Generator().manual_seed(int(seed))
    # cpu: seeded draws on the CPU, then moved to the weights' device
    order = torch.rand(B, h, n - first_row, generator=generator).argsort(dim=-1).to(removed.device)
    shuffled = removed.clone()
    shuffled[..., first_row:] = removed[..., first_row:].gather(-1, order)
    return shuffled
