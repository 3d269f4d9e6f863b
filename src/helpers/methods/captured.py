"""Effective attention of one captured sequence, bidirectional or causal as the model is.

``effective_attention_of(internals)`` reads ``Internals.causal``: an encoder's capture
gets the paper's split with one null space per head (``effective.effective_attention``),
a decoder's the row-by-row split of ``causal.causal_effective_attention``, whose row i
only sees positions 0..i. The bidirectional split of a causal head would move up to a
whole row's mass onto future positions, so it is never applied to a decoder's capture.
"""

from __future__ import annotations

from ..model.internals import Internals
from .causal import causal_effective_attention
from .effective import EffectiveAttention, effective_attention_and_rank
from .linalg import DEFAULT_RTOL

__all__ = ["effective_attention_of"]


def effective_attention_of(internals: Internals, rtol: float = DEFAULT_RTOL) -> EffectiveAttention:
    """Effective attention of every layer and head of one captured sequence: ``(L, h, n, n)`` twice.

    Bidirectional for an encoder (the V fast path, checked against the rank of each H),
    causal row by row for a decoder (``internals.causal``; grouped-query heads share
    their key/value head's prefix bases).
    """
    if not isinstance(internals, Internals):
        raise TypeError(f"Expected helpers.Internals (from helpers.capture), got {type(internals).__name__}.")
    if internals.causal:
        return causal_effective_attention(internals.A, V=internals.V, H=internals.H, groups=internals.groups, rtol=rtol)
    return effective_attention_and_rank(internals.A, None, internals.V, internals.H, rtol)[0]
