"""Effective attention: the part of A that reaches the head output (paper section 3.4).

For one head, with ``T = V H`` (value bias folded in, see ``helpers.internals``)
and ``P`` the orthogonal projector onto the column space of T:

    A_eff  = A P              (rows of A projected onto range(T))
    A_null = A (I - P)        (rows of A projected onto LN(T))

so ``A = A_eff + A_null``, ``A_null T = 0`` and ``A_eff T = A T``: the head
output, and therefore the whole network, only sees A_eff. The numerical rank
of T uses a tolerance relative to its largest singular value, on the
unpadded sequence.

Fast path: if H (d_v x d) has full row rank, ``x^T V H = 0`` iff ``x^T V = 0``,
so LN(T) = LN(V) and the SVD of V (n x d_v) replaces the SVD of T (n x d).
``effective_attention(A, V=V, H=H)`` checks the rank of every H and falls
back to T = V H for any head where it fails.
"""
from __future__ import annotations

import string
import unicodedata
import warnings
from typing import NamedTuple, Sequence

import torch

from .internals import Internals
from .linalg import DEFAULT_RTOL, _check_matrix, left_null_space, numerical_rank, range_basis


class EffectiveAttention(NamedTuple):
    """Effective and null parts of attention; both ``(..., n, n)``, ``effective + null = A``."""

    effective: torch.Tensor
    null: torch.Tensor


def _check_rtol(rtol: float) -> None:
    if not isinstance(rtol, (int, float)) or not rtol > 0 or not rtol < 1:
        raise ValueError(f"rtol must be a number in (0, 1), relative to the largest singular value; got {rtol!r}.")


def _check_attention(A: torch.Tensor) -> None:
    _check_matrix(A, "A")
    if A.shape[-1] != A.shape[-2]:
        raise ValueError(f"A must be square in its last two dimensions, (..., n, n); got {tuple(A.shape)}.")
    if A.shape[-1] == 0:
        raise ValueError("A is empty (n = 0): give at least one token.")


def _check_same_batch(A: torch.Tensor, M: torch.Tensor, name: str) -> None:
    if M.shape[:-2] != A.shape[:-2] or M.shape[-2] != A.shape[-1]:
        raise ValueError(
            f"{name} must have shape (..., n, m) with the leading dimensions and n of A {tuple(A.shape)}; "
            f"got {tuple(M.shape)}."
        )


def _split(A: torch.Tensor, basis: torch.Tensor, rank: torch.Tensor) -> EffectiveAttention:
    """A (..., n, n) and a zero-padded range basis (..., n, k) -> effective and null parts.

    The projection runs in float64. Where the null space is empty (rank == n)
    the null part is exactly zero and the effective part exactly A.
    """
    null = A.to(torch.float64, copy=True)  # never write into the caller's A
    null -= (null @ basis) @ basis.transpose(-1, -2)
    empty = rank == A.shape[-1]
    if bool(empty.any()):
        null[empty] = 0.0
    null = null.to(A.dtype)
    return EffectiveAttention(A - null, null)


def effective_attention(
    A: torch.Tensor,
    T: torch.Tensor | None = None,
    *,
    V: torch.Tensor | None = None,
    H: torch.Tensor | None = None,
    rtol: float = DEFAULT_RTOL,
) -> EffectiveAttention:
    """Split attention into its effective part and its part in the left null space of T.

    Batched over any leading dimensions (all layers and heads in one call).
    Pass either ``T`` (the direct path) or ``V`` and ``H`` (the fast path).

    Args:
        A: attention, ``(..., n, n)``; rows need not be stochastic.
        T: ``(..., n, d)``, the matrix the head multiplies A with (``T = V H``).
        V: ``(..., n, d_v)``, per-head values (value bias included).
        H: ``(..., d_v, d)``, the head's rows of W^O; needed with V to check that
            LN(V H) = LN(V), i.e. that every H has full row rank. Heads where it
            has not fall back to the SVD of ``V @ H`` (with a warning).
        rtol: singular values at most ``rtol * max singular value`` count as zero.

    Returns:
        ``EffectiveAttention(effective, null)``, both ``(..., n, n)`` in A's dtype
        (computed in float64), with ``effective @ T == A @ T`` and ``null @ T == 0``.

    Raises:
        TypeError, ValueError: non-tensors, mismatched shapes, NaN/inf, bad rtol,
        or an ambiguous choice of T / V / H.
    """
    return _effective_attention_and_rank(A, T, V, H, rtol)[0]


def _effective_attention_and_rank(
    A: torch.Tensor,
    T: torch.Tensor | None,
    V: torch.Tensor | None,
    H: torch.Tensor | None,
    rtol: float,
    full_row_rank: torch.Tensor | None = None,
) -> tuple[EffectiveAttention, torch.Tensor]:
    """effective_attention, plus the numerical rank of T per head: (...,).

    ``full_row_rank`` (bool, (...,)) lets a caller that runs the same model
    many times check the ranks of H once instead of on every call.
    """
    _check_rtol(rtol)
    _check_attention(A)
    if T is not None:
        if V is not None or H is not None:
            raise ValueError("Pass either T, or V and H (T = V H), not both.")
        _check_matrix(T, "T")
        _check_same_batch(A, T, "T")
        basis, rank = range_basis(T, rtol)
        return _split(A, basis, rank), rank
    if V is None:
        raise ValueError("Pass T (n x d), or V (n x d_v) with H (d_v x d).")
    if H is None:
        raise ValueError(
            "The V fast path needs H too, to check that H has full row rank (so LN(V H) = LN(V)). "
            "To split against LN(V) itself, pass it as T."
        )
    _check_matrix(V, "V")
    _check_matrix(H, "H")
    _check_same_batch(A, V, "V")
    if H.shape[:-2] != A.shape[:-2] or H.shape[-2] != V.shape[-1]:
        raise ValueError(
            f"H must have shape (..., d_v, d) with the leading dimensions of A {tuple(A.shape[:-2])} and "
            f"d_v = {V.shape[-1]} (the last dimension of V); got {tuple(H.shape)}."
        )
    if full_row_rank is None:
        full_row_rank = numerical_rank(H.mT, rtol) == H.shape[-2]  # (...,); tall is faster for LAPACK
    basis, rank = range_basis(V, rtol)
    result = _split(A, basis, rank)
    if bool(full_row_rank.all()):
        return result, rank
    bad = ~full_row_rank
    warnings.warn(
        f"{int(bad.sum())} head(s) have an H without full row rank, so LN(V H) may be larger than "
        "LN(V); using the SVD of T = V H for them.",
        stacklevel=3,
    )
    slow_basis, slow_rank = range_basis(V[bad] @ H[bad], rtol)
    slow = _split(A[bad], slow_basis, slow_rank)
    effective, null, rank = result.effective.clone(), result.null.clone(), rank.clone()
    effective[bad], null[bad], rank[bad] = slow.effective, slow.null, slow_rank
    return EffectiveAttention(effective, null), rank


def effective_attention_of(internals: Internals, rtol: float = DEFAULT_RTOL) -> EffectiveAttention:
    """Effective attention of every layer and head of one captured sequence: ``(L, h, n, n)`` twice.

    Uses the V fast path (checked against the rank of each H).
    """
    if not isinstance(internals, Internals):
        raise TypeError(f"Expected helpers.Internals (from helpers.capture), got {type(internals).__name__}.")
    return _effective_attention_and_rank(internals.A, None, internals.V, internals.H, rtol)[0]


def effective_attention_loop(A: torch.Tensor, T: torch.Tensor, rtol: float = DEFAULT_RTOL) -> EffectiveAttention:
    """Reference implementation: one full SVD of T per head, ``A_null = A U_n U_n^T``.

    The paper's formula taken literally (U_n: the left singular vectors of T
    past its numerical rank, from ``helpers.left_null_space``), looped over the
    leading dimensions. Slow; kept for tests and the benchmark.
    A: (..., n, n), T: (..., n, d) -> effective and null parts (..., n, n).
    """
    _check_rtol(rtol)
    _check_attention(A)
    _check_matrix(T, "T")
    _check_same_batch(A, T, "T")
    batch = A.shape[:-2]
    flat_A, flat_T = A.reshape(-1, *A.shape[-2:]), T.reshape(-1, *T.shape[-2:])
    nulls = []
    for a, t in zip(flat_A, flat_T):
        U_n = left_null_space(t.double(), rtol)  # (n, n - rank)
        nulls.append(a.double() @ U_n @ U_n.T)
    null = torch.stack(nulls).reshape(*batch, *A.shape[-2:])
    return EffectiveAttention((A.double() - null).to(A.dtype), null.to(A.dtype))


def pearson(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """Pearson correlation of the entries of each matrix pair: (..., n, m) twice -> (...,).

    Computed in float64. A constant matrix has no correlation: NaN there.
    """
    _check_matrix(X, "X")
    _check_matrix(Y, "Y")
    if X.shape != Y.shape:
        raise ValueError(f"X and Y must have the same shape; got {tuple(X.shape)} and {tuple(Y.shape)}.")
    return _pearson(X, Y)


def _pearson(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    x = X.to(torch.float64, copy=True).flatten(-2)  # a copy: centred in place below
    x -= x.mean(dim=-1, keepdim=True)
    y = Y.to(torch.float64, copy=True).flatten(-2)
    y -= y.mean(dim=-1, keepdim=True)
    return torch.einsum("...i,...i->...", x, y) / (x.norm(dim=-1) * y.norm(dim=-1))


def _is_punctuation(token: str) -> bool:
    token = token.removeprefix("##")
    return bool(token) and all(c in string.punctuation or unicodedata.category(c).startswith("P") for c in token)


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
    cls = torch.tensor([t == cls_token for t in tokens])
    sep = torch.tensor([t == sep_token for t in tokens])
    punct = torch.tensor([_is_punctuation(t) for t in tokens]) & ~cls & ~sep
    return {"[CLS]": cls, "[SEP]": sep, "punctuation": punct, "other": ~(cls | sep | punct)}


def attention_to(A: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Attention each query gives the keys in ``mask``, averaged over queries.

    A: (..., n, n), mask: (n,) bool -> (...,): ``mean_i sum_{j in mask} A_ij``.
    For raw attention this is a share of 1; effective attention rows need not
    sum to 1, so there it is the same sum, not a share.
    """
    _check_attention(A)
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != (A.shape[-1],):
        raise ValueError(f"mask must be a bool tensor of shape ({A.shape[-1]},), one entry per key.")
    return _attention_to(A, mask)


def _attention_to(A: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (A.double() @ mask.to(A.device, torch.float64)).mean(dim=-1)


def effective_attention_sweep(
    model,
    tokenizer,
    examples: Sequence,
    rtol: float = DEFAULT_RTOL,
    progress: bool = True,
):
    """Effective attention over a corpus: one row per (example, layer, head).

    Args:
        model, tokenizer: from ``helpers.load_model``.
        examples: ``helpers.Example`` records (text_a, optional text_b).
        rtol: rank tolerance, relative to the largest singular value.
        progress: show a tqdm bar.

    Returns:
        A pandas DataFrame with columns ``id, source, n, layer, head, rank,
        null_dim, correlation`` (Pearson, raw vs effective) and, for each token
        class ``c`` of :func:`token_classes`, ``raw_c`` and ``effective_c``
        (:func:`attention_to`). Layers and heads count from 1.
    """
    import pandas as pd
    from tqdm.auto import tqdm

    from .internals import capture
    from .text import encode, tokens_of

    if len(examples) == 0:
        raise ValueError("No examples to sweep.")
    rows = []
    full_row_rank = None  # the weights, hence the ranks of H, are the same for every example
    for example in tqdm(examples, disable=not progress, desc="effective attention"):
        encoding = encode(tokenizer, example.text_a, example.text_b, model=model)
        internals = capture(model, encoding)
        A = internals.A
        if full_row_rank is None:
            full_row_rank = numerical_rank(internals.H.mT, rtol) == internals.H.shape[-2]
        split, rank = _effective_attention_and_rank(A, None, internals.V, internals.H, rtol, full_row_rank)
        columns = {
            "rank": rank,
            "null_dim": internals.n - rank,
            "correlation": _pearson(A, split.effective),
        }
        masks = token_classes(tokens_of(tokenizer, encoding), tokenizer.cls_token, tokenizer.sep_token)
        for name, mask in masks.items():
            columns[f"raw_{name}"] = _attention_to(A, mask)
            columns[f"effective_{name}"] = _attention_to(split.effective, mask)
        L, h = A.shape[:2]
        layer = torch.arange(1, L + 1).repeat_interleave(h)
        head = torch.arange(1, h + 1).repeat(L)
        frame = {"layer": layer.numpy(), "head": head.numpy()}
        frame.update({key: value.reshape(-1).double().cpu().numpy() for key, value in columns.items()})
        part = pd.DataFrame(frame)
        part.insert(0, "n", internals.n)
        part.insert(0, "source", example.source)
        part.insert(0, "id", example.id)
        rows.append(part)
    table = pd.concat(rows, ignore_index=True)
    table["rank"] = table["rank"].astype(int)
    table["null_dim"] = table["null_dim"].astype(int)
    return table


def summarise_token_classes(table, classes: Sequence[str] = ("[CLS]", "[SEP]", "punctuation")):
    """Per layer and token class, raw vs effective attention averaged over examples and heads.

    table: from :func:`effective_attention_sweep`. Returns a long DataFrame
    ``layer, token, raw, effective, removed`` where ``removed = 1 - effective / raw``
    is the share of the raw attention that lies in the null space.
    """
    import pandas as pd

    missing = [c for c in classes if f"raw_{c}" not in table.columns]
    if missing:
        raise ValueError(f"No columns for token classes {missing}; the table has {list(table.columns)}.")
    parts = []
    for c in classes:
        mean = table.groupby("layer")[[f"raw_{c}", f"effective_{c}"]].mean()
        parts.append(pd.DataFrame({"layer": mean.index, "token": c, "raw": mean[f"raw_{c}"].values,
                                   "effective": mean[f"effective_{c}"].values}))
    out = pd.concat(parts, ignore_index=True)
    out["removed"] = 1 - out["effective"] / out["raw"]
    return out
