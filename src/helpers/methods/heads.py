"""How much each head contributes to its layer, and the null of heads of equal size (chapter 1).

A head adds ``A_h T_h`` to its layer's attention output; its *share* is
``||A_h T_h||_F`` over the sum of that norm over the layer's heads. Over a
corpus the question is whether some heads are systematically larger than
others, and the null model is heads of equal expected size: the same shares
with the head labels shuffled independently in every sequence and layer
(:func:`exchangeable_heads`), so that each head's mean share tends to 1/h.

::

    shares = np.stack([head_shares(capture(model, e)).cpu().numpy() for e in encodings])  # (m, L, h)
    share_ratio(shares)                        # (L,): largest / smallest mean share per layer
    share_ratio(exchangeable_heads(shares))    # the same under the null
"""

from __future__ import annotations

import numpy as np
import torch

from ..model.internals import Internals

__all__ = ["head_shares", "concentration", "share_ratio", "exchangeable_heads", "within_layer_spearman"]


def head_shares(internals: Internals) -> torch.Tensor:
    """Each head's share of its layer's output, ``||A_h T_h||_F / sum_h' ||A_h' T_h'||_F``: (L, h).

    Every row (a layer) sums to one.
    """
    norms = internals.head_outputs().double().norm(dim=(-2, -1))  # (L, h)
    return norms / norms.sum(dim=-1, keepdim=True)


def concentration(internals: Internals) -> torch.Tensor:
    """The largest mean attention any one key receives, per head: (L, h), between 1/n and 1."""
    return internals.A.double().mean(dim=-2).amax(dim=-1)


def _check_shares(shares) -> np.ndarray:
    array = np.asarray(shares, dtype=float)
    if array.ndim < 2 or array.shape[-1] < 2:
        raise ValueError(f"shares must be (..., h) with at least two heads, got shape {array.shape}")
    if (array <= 0).any() or not np.isfinite(array).all():
        raise ValueError("shares must be positive, finite numbers (each head's share of its layer)")
    return array


def share_ratio(shares) -> np.ndarray:
    """Largest over smallest mean share per layer: shares (m, L, h) -> (L,), each >= 1.

    The mean is over the m sequences (the first axis), so a head that is large in
    one sequence and small in the next counts as average.
    """
    array = _check_shares(shares)
    if array.ndim != 3:
        raise ValueError(f"shares must be (sequences, layers, heads), got shape {array.shape}")
    mean = array.mean(axis=0)  # (L, h)
    return mean.max(axis=-1) / mean.min(axis=-1)


def exchangeable_heads(shares, seed: int = 0) -> np.ndarray:
    """The null of heads of equal expected size: shares (m, L, h) with the heads of every (sequence, layer) shuffled.

    Each sequence keeps its own spread of shares; only which head holds which share
    is drawn at random (seeded), so no head is larger than another on average.
    """
    array = _check_shares(shares)
    if array.ndim != 3:
        raise ValueError(f"shares must be (sequences, layers, heads), got shape {array.shape}")
    rng = np.random.default_rng(seed)
    order = rng.random(array.shape).argsort(axis=-1)
    return np.take_along_axis(array, order, axis=-1)


def within_layer_spearman(x, y) -> np.ndarray:
    """Spearman correlation of two per-head figures across the heads of each layer: (..., L, h) twice -> (..., L).

    The Pearson correlation of the heads' ranks within each layer (ties broken by order).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim < 2 or x.shape[-1] < 3:
        raise ValueError(f"x and y must share a shape (..., L, h) with h >= 3, got {x.shape} and {y.shape}")
    rx = x.argsort(axis=-1).argsort(axis=-1).astype(float)
    ry = y.argsort(axis=-1).argsort(axis=-1).astype(float)
    rx -= rx.mean(axis=-1, keepdims=True)
    ry -= ry.mean(axis=-1, keepdims=True)
    return (rx * ry).sum(axis=-1) / np.sqrt((rx**2).sum(axis=-1) * (ry**2).sum(axis=-1))
