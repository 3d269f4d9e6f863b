"""Token classes the paper looks at ([CLS], [SEP], punctuation) and the attention they receive."""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Sequence

import pandas as pd
import torch

from .effective import check_attention

SINK_CLASSES = ("[CLS]", "[SEP]", "punctuation")
"""The token classes a sink is sought among (``token_classes``' names; the model's own tokens stand in)."""


def is_punctuation(token: str) -> bool:
    """True for a wordpiece or word made only of punctuation and symbol characters (``##`` prefix ignored).

    ASCII punctuation, and every Unicode punctuation (P*) or symbol (S*) character: "." "--" "£" "°".
    """
    token = token.removeprefix("##")
    return bool(token) and all(c in string.punctuation or unicodedata.category(c)[0] in "PS" for c in token)


def token_classes(
    tokens: Sequence[str],
    cls_token: str = "[CLS]",
    sep_token: str = "[SEP]",
) -> dict[str, torch.Tensor]:
    """Boolean masks ``(n,)`` of the token classes the paper looks at.

    ``"[CLS]"``, ``"[SEP]"``, ``"punctuation"`` (wordpieces made only of
    punctuation characters) and ``"other"`` (everything else); the masks
    partition the sequence.
    """
    if isinstance(tokens, str) or not all(isinstance(t, str) for t in tokens):
        raise TypeError("tokens must be a sequence of wordpiece strings (helpers.tokens_of).")
    if len(tokens) == 0:
        raise ValueError("tokens is empty.")
    flags = [(t == cls_token, t == sep_token, is_punctuation(t)) for t in tokens]
    cls, sep, punct = torch.tensor(flags).T.contiguous()  # cpu: read off strings; attention_to moves them to A
    punct = punct & ~cls & ~sep
    return {"[CLS]": cls, "[SEP]": sep, "punctuation": punct, "other": ~(cls | sep | punct)}


def attention_to(A: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Attention each query gives the keys in ``mask``, averaged over queries.

    A: (..., n, n), mask: (n,) bool -> (...,): ``mean_i sum_{j in mask} A_ij``.
    For raw attention this is a share of 1; effective attention rows need not
    sum to 1, so there it is the same sum, not a share.
    """
    check_attention(A)
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != (A.shape[-1],):
        raise ValueError(f"mask must be a bool tensor of shape ({A.shape[-1]},), one entry per key.")
    return (A.double() @ mask.to(A.device, torch.float64)).mean(dim=-1)


def summarise_token_classes(table, classes: Sequence[str] = SINK_CLASSES):
    """Per layer and token class, raw vs effective attention averaged over examples and heads.

    table: from ``helpers.drivers.effective.effective_attention_sweep``. Returns a long DataFrame
    ``layer, token_class, raw, effective, removed`` where ``removed = 1 - effective / raw``
    is the share of the raw attention that lies in the null space.
    """
    missing = [c for c in classes if f"raw_{c}" not in table.columns]
    if missing:
        raise ValueError(f"No columns for token classes {missing}; the table has {list(table.columns)}.")
    parts = []
    for c in classes:
        mean = table.groupby("layer")[[f"raw_{c}", f"effective_{c}"]].mean()
        parts.append(
            pd.DataFrame(
                {
                    "layer": mean.index,
                    "token_class": c,
                    "raw": mean[f"raw_{c}"].values,
                    "effective": mean[f"effective_{c}"].values,
                }
            )
        )
    out = pd.concat(parts, ignore_index=True)
    out["removed"] = 1 - out["effective"] / out["raw"]
    return out
