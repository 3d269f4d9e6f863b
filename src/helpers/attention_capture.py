"""An attention function for transformers' AttentionInterface that records what each head sees.

transformers (5.x) routes self-attention of most families through
``ALL_ATTENTION_FUNCTIONS[config._attn_implementation]``. The function
registered here computes exactly what the models' eager functions compute,

    A = softmax(Q K^T * scaling + mask)        (optionally soft-capped logits)
    output = A V                               (K, V repeated for grouped-query heads)

and, inside ``recording()``, appends one ``HeadRecord`` per call. The mask
function is registered under the same name (``eager_mask``): without it the
models silently drop the causal and padding masks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["CAPTURE", "HeadRecord", "register", "recording", "repeat_kv", "eager_attention"]

CAPTURE = "helpers_capture"


@dataclass
class HeadRecord:
    """One call of the attention function: one layer, the whole batch.

    B batch, h query heads, h_kv key/value heads, n queries, k keys, d_v head size.
    """

    module: nn.Module
    Q: torch.Tensor  # (B, h, n, d_v), as the model passed it (rotated for RoPE models)
    K: torch.Tensor  # (B, h_kv, k, d_v)
    V: torch.Tensor  # (B, h_kv, k, d_v)
    A: torch.Tensor  # (B, h, n, k)
    scaling: float


_recorders: list[list[HeadRecord]] = []


def repeat_kv(X: torch.Tensor, groups: int) -> torch.Tensor:
    """(B, h_kv, k, d_v) -> (B, h_kv * groups, k, d_v): each key/value head serves ``groups`` query heads in a row."""
    if groups == 1:
        return X
    return X.repeat_interleave(groups, dim=1)


def eager_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    softcap: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The eager attention every supported family uses, recording Q, K, V, A when a recorder is active.

    query: (B, h, n, d_v); key, value: (B, h_kv, k, d_v). Returns ``(output (B, n, h, d_v), A (B, h, n, k))``.
    """
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    groups = query.shape[1] // key.shape[1]
    keys, values = repeat_kv(key, groups), repeat_kv(value, groups)
    logits = query @ keys.transpose(-1, -2) * scaling
    if softcap is not None:
        logits = torch.tanh(logits / softcap) * softcap
    if attention_mask is not None:
        mask = attention_mask[..., : keys.shape[-2]]
        if mask.dtype == torch.bool:  # True = may attend
            logits = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
        else:
            logits = logits + mask
    A = torch.softmax(logits, dim=-1, dtype=torch.float32).to(query.dtype)
    A = nn.functional.dropout(A, p=dropout, training=module.training)
    if _recorders:
        _recorders[-1].append(HeadRecord(module, query, key, value, A, float(scaling)))
    output = A @ values
    return output.transpose(1, 2).contiguous(), A


def register() -> str:
    """Register the function and its mask under ``CAPTURE`` (idempotent); returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(CAPTURE, eager_attention)
    AttentionMaskInterface.register(CAPTURE, eager_mask)
    return CAPTURE


@contextlib.contextmanager
def recording(model: nn.Module) -> Iterator[list[HeadRecord]]:
    """Within the block, ``model`` runs the capture function and every call is appended to the yielded list.

    The model's attention implementation is restored afterwards.
    """
    register()
    previous = model.config._attn_implementation
    records: list[HeadRecord] = []
    _recorders.append(records)
    try:
        model.set_attn_implementation(CAPTURE)
        yield records
    finally:
        _recorders.pop()
        model.set_attn_implementation(previous)
