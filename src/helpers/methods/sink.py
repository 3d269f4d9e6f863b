"""The attention sink in the literature's terms, from one capture of a causal model (chapter 9).

* Gu et al. (2025): the sink score of key k in head (l, h) is the mean attention it receives
  from the queries that can see it, alpha = mean_{i >= k} A_ik, and Sink_k^eps is the share of
  heads with alpha > eps (eps = 0.3, on 64-token prompts).
* Guo et al. (2024), "value-state drains": the sink's value state, row k of T_h = V_h H_h, is
  much smaller than the others'. Here: ||T_h[k]|| over the median ||T_h[j]||, j != k.
* Sun et al. (2024), "massive activations": a few residual-stream entries at the sink position
  are orders of magnitude larger than the rest. Here: per layer and position, the largest
  |h_i| entry, against the median |entry| of that layer.

And the link to this book's null spaces. For causal row i with prefix T_{0..i}, let P_i project
onto the column space of T_{0..i} (in R^{i+1}). The effective weight on position k is
(P_i a_i)_k, and the part of it that comes from a_ik itself is a_ik (P_i)_kk; (P_i)_kk is the
*leverage* of row k, ||P_i e_k||^2, the squared cosine between e_k and the column space. A row
t_k small against the others has a small leverage: e_k lies close to the null space
LN(T_{0..i}), and most of a_ik is removed from the effective row. ``drain_split`` measures how
much of the raw-minus-effective gap on position k that one term, a_ik (1 - (P_i)_kk), accounts for.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .causal import causal_effective_attention, check_causal
from .effective import EffectiveAttention
from .linalg import DEFAULT_RTOL
from .prefix_gram import prefix_gram_solve

__all__ = [
    "SINK_EPSILON",
    "sink_scores",
    "sink_rate",
    "value_norm_ratio",
    "largest_activations",
    "SplitWithLeverage",
    "effective_and_leverage",
    "position_leverage",
    "DrainSplit",
    "drain_split",
    "PositionTerms",
    "position_terms",
]

SINK_EPSILON = 0.3  # Gu et al.'s threshold


def _check_position(n: int, position: int) -> int:
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < n:
        raise ValueError(f"position must be an integer in 0..{n - 1}; got {position!r}.")
    return position


def sink_scores(A: torch.Tensor, position: int = 0) -> torch.Tensor:
    """alpha = mean over queries i >= position of A[..., i, position]: A (..., n, n) causal -> (...)."""
    check_causal(A)
    position = _check_position(A.shape[-1], position)
    return A[..., position:, position].mean(dim=-1)


def sink_rate(A: torch.Tensor, position: int = 0, epsilon: float = SINK_EPSILON) -> float:
    """Gu et al.'s Sink_k^eps: the share of heads (all leading dimensions of A) with alpha > eps."""
    if not 0 < epsilon < 1:
        raise ValueError(f"epsilon must be in (0, 1); got {epsilon}.")
    return float((sink_scores(A, position) > epsilon).double().mean())


def value_norm_ratio(T: torch.Tensor, position: int = 0) -> torch.Tensor:
    """||T[..., position, :]|| over the median ||T[..., j, :]|| of the other positions: T (..., n, d) -> (...)."""
    if T.dim() < 2 or T.shape[-2] < 2:
        raise ValueError(f"T must be (..., n, d) with n >= 2; got {tuple(T.shape)}.")
    position = _check_position(T.shape[-2], position)
    norms = T.norm(dim=-1)
    others = torch.cat([norms[..., :position], norms[..., position + 1 :]], dim=-1)
    return norms[..., position] / others.median(dim=-1).values


class Activations(NamedTuple):
    """The largest residual-stream entries per layer and position (``largest_activations``)."""

    largest: torch.Tensor  # (L + 1, n)  max_c |h^l_{i,c}|
    dimension: torch.Tensor  # (L + 1, n)  the channel c where it sits
    median: torch.Tensor  # (L + 1,)  median |h^l_{i,c}| over all positions and channels of the layer


def largest_activations(hidden_states: torch.Tensor) -> Activations:
    """Per hidden state (L + 1, n, d): each position's largest |entry|, its channel, and the layer's median |entry|."""
    if hidden_states.dim() != 3:
        raise ValueError(f"hidden_states must be (L + 1, n, d); got {tuple(hidden_states.shape)}.")
    magnitude = hidden_states.abs()
    largest, dimension = magnitude.max(dim=-1)
    return Activations(largest, dimension, magnitude.flatten(1).median(dim=-1).values)


def _with_probe(X: torch.Tensor, probe: torch.Tensor, groups: int) -> torch.Tensor:
    """Interleave per-query-head tensors (L, h, ...) so that each key/value head's run of ``groups``
    heads is followed by ``groups`` copies of ``probe`` (L, h, ...): (L, 2h, ...), runs of 2 groups."""
    L, h = X.shape[:2]
    shape = X.shape[2:]
    runs = torch.cat([X.reshape(L, h // groups, groups, *shape), probe.reshape(L, h // groups, groups, *shape)], dim=2)
    return runs.reshape(L, 2 * h, *shape)


class SplitWithLeverage(NamedTuple):
    """``effective_and_leverage``'s result: the causal split and position k's leverage per row."""

    split: EffectiveAttention  # effective and null, each (L, h, n, n)
    leverage: torch.Tensor  # (L, h, n), NaN for rows before k


def effective_and_leverage(
    A: torch.Tensor, V: torch.Tensor, H: torch.Tensor, groups: int = 1, position: int = 0
) -> SplitWithLeverage:
    """``causal_effective_attention(A, V=V, H=H, groups=groups)`` and, from the same prefix bases,
    (P_i)_kk for k = ``position`` and every row i: the squared cosine between e_k and the column
    space of T_{0..i} = V_{0..i} H.

    A: (L, h, n, n) causal; V: (L, h, n, d_v) as ``Internals.V``; H: (L, h, d_v, d). The leverage,
    (L, h, n) with NaN for rows i < k, is the effective weight on k of the row that puts all its
    weight on k (a valid causal row): (P_i e_k)_k = (P_i)_kk. The probe rows ride along as extra
    query heads of each key/value head, so every prefix's basis is computed once.
    """
    check_causal(A)
    L, h, n = A.shape[0], A.shape[1], A.shape[-1]
    position = _check_position(n, position)
    probe = A.new_zeros(L, h, n, n)
    probe[..., position:, position] = 1.0
    # rows before k: any valid causal row
    probe[..., :position, :position] = torch.eye(position, dtype=A.dtype, device=A.device)
    both = causal_effective_attention(
        _with_probe(A, probe, groups), V=_with_probe(V, V, groups), H=_with_probe(H, H, groups), groups=2 * groups
    )
    # per key/value head: the real heads, then the probes
    pick = torch.arange(2 * h, device=A.device).reshape(h // groups, 2, groups)
    real, probes = pick[:, 0].flatten(), pick[:, 1].flatten()
    split = EffectiveAttention(both.effective[:, real], both.null[:, real])
    leverage = both.effective[:, probes][..., position].clone()
    leverage[..., :position] = float("nan")
    return SplitWithLeverage(split, leverage)


def position_leverage(V: torch.Tensor, H: torch.Tensor, groups: int = 1, position: int = 0) -> torch.Tensor:
    """(P_i)_kk for k = ``position``, every layer, head and row i: (L, h, n), NaN for rows i < k.

    V: (L, h, n, d_v) as ``Internals.V``, H: (L, h, d_v, d). See ``effective_and_leverage``.
    """
    L, h, n = V.shape[0], H.shape[1], V.shape[-2]
    uniform = torch.tril(V.new_ones(n, n)) / torch.arange(1, n + 1, dtype=V.dtype, device=V.device)[:, None]
    return effective_and_leverage(uniform.expand(L, h, n, n), V, H, groups, position)[1]


class DrainSplit(NamedTuple):
    """Raw and effective attention on one position, and the share of their gap its own leverage explains.

    Each (L, h), summed over the rows ``from_row``..n-1 of one capture: ``raw`` = sum a_ik,
    ``effective`` = sum (P_i a_i)_k, ``own`` = sum a_ik (P_i)_kk, the part of the effective weight
    that position k's own raw weight keeps. ``explained`` = (raw - own) / (raw - effective): 1 when
    the gap is all position k's own weight projected out; above 1 when the other positions' weights
    add effective weight back on k.
    """

    raw: torch.Tensor
    effective: torch.Tensor
    own: torch.Tensor
    leverage: torch.Tensor  # (L, h) mean (P_i)_kk over the rows
    explained: torch.Tensor


def drain_split(
    A: torch.Tensor,
    effective: torch.Tensor,
    leverage: torch.Tensor,
    position: int = 0,
    from_row: int = 1,
) -> DrainSplit:
    """Split the raw-minus-effective gap on ``position`` into the part position k's leverage accounts for.

    A, effective: (L, h, n, n) raw and causal effective attention, leverage: (L, h, n) from
    ``effective_and_leverage``. Rows ``from_row``..n-1 are summed (d_v is the first row whose
    prefix can have a null space).
    """
    check_causal(A)
    if effective.shape != A.shape or leverage.shape != A.shape[:-1]:
        raise ValueError(
            f"effective must be {tuple(A.shape)} and leverage {tuple(A.shape[:-1])}; "
            f"got {tuple(effective.shape)} and {tuple(leverage.shape)}."
        )
    n = A.shape[-1]
    first = from_row
    if not position < first < n:
        raise ValueError(f"from_row must be in {position + 1}..{n - 1}; got {first} (the sequence has {n} tokens).")
    leverage = leverage[..., first:]  # (L, h, rows)
    raw_rows = A[..., first:, position]
    raw = raw_rows.sum(-1)
    eff = effective[..., first:, position].sum(-1)
    own = (raw_rows * leverage).sum(-1)
    return DrainSplit(raw, eff, own, leverage.mean(-1), (raw - own) / (raw - eff))


class PositionTerms(NamedTuple):
    """``position_terms``' result: per layer, head and position, summed over the rows ``from_row``..n-1.

    Each (L, h, p) for the p positions asked for. ``raw`` = sum a_ik; ``effective`` = sum (P_i a_i)_k;
    ``own`` = sum a_ik (P_i)_kk; ``leverage`` = mean (P_i)_kk; ``bound`` = sum ||a_{i, not k}||
    sqrt((P_i)_kk (1 - (P_i)_kk)), which bounds |effective - own| (P_i is a projection, so
    sum_j (P_i)_jk^2 = (P_i)_kk); ``expected`` = sum a_ik r_i / (i + 1), the effective weight a random
    column space of the same rank r_i = rank T_{0..i} keeps on average.
    """

    raw: torch.Tensor
    effective: torch.Tensor
    own: torch.Tensor
    leverage: torch.Tensor
    bound: torch.Tensor
    expected: torch.Tensor


def position_terms(
    A: torch.Tensor,
    V: torch.Tensor,
    positions: tuple[int, ...] = (0,),
    groups: int = 1,
    from_row: int = 1,
    rtol: float = DEFAULT_RTOL,
) -> PositionTerms:
    """The sink's terms at several positions from one pseudo-inverse solve per prefix's Gram matrix.

    A: (L, h, n, n) causal; V: (L, h, n, d_v) as ``Internals.V`` (its prefixes have the column
    spaces of T's when H has full row rank; or pass T itself); query heads in runs of ``groups``
    share V. Every position must lie before ``from_row``, so that every summed row sees it.
    The same projections as ``causal_effective_attention`` (its Gram route), read at the positions.
    """
    check_causal(A)
    if A.dim() != 4 or V.dim() != 4 or V.shape[:3] != A.shape[:3]:
        raise ValueError(f"A must be (L, h, n, n) and V (L, h, n, d_v); got {tuple(A.shape)} and {tuple(V.shape)}.")
    L, h, n = A.shape[0], A.shape[1], A.shape[-1]
    if not isinstance(from_row, int) or not 0 < from_row < n:
        raise ValueError(f"from_row must be in 1..{n - 1}; got {from_row!r}.")
    positions = tuple(_check_position(n, k) for k in positions)
    if not positions or max(positions) >= from_row:
        raise ValueError(f"positions must be a non-empty tuple of positions before from_row = {from_row}.")
    if groups < 1 or h % groups:
        raise ValueError(f"groups must divide the {h} heads; got {groups!r}.")
    M = V[:, ::groups].to(torch.float64)  # (L, h_kv, n, m)
    A64 = A.to(torch.float64).reshape(L, h // groups, groups, n, n)
    index = torch.tensor(positions, device=A.device)
    sizes = torch.arange(1, n + 1, dtype=torch.float64, device=A.device)
    rows = slice(from_row, n)
    out = {name: A64.new_zeros(L, h // groups, groups, len(positions)) for name in PositionTerms._fields}
    for layer in range(L):
        for kv in range(M.shape[1]):
            Mb = M[layer, kv]  # (n, m)
            a = A64[layer, kv]  # (g, n, n)
            g = a.shape[0]
            # one solve for both: row i of (A M) (the effective weights) and M[p] (the leverages)
            rhs = torch.cat([a @ Mb, Mb[index][:, None, :].expand(len(positions), n, -1)])  # (g + p, n, m)
            solved = prefix_gram_solve(Mb, rhs, rtol)
            rank = solved.rank.to(torch.float64)  # (n,)
            full = solved.row_full
            W, P = solved.solution[:g], solved.solution[g:]  # (g, n, m): G_i^+ M^T a_i; (p, n, m): G_i^+ M[p]
            leverage = torch.where(full[:, None], 1.0, (P * Mb[index][:, None, :]).sum(-1).T)[rows]  # (rows, p)
            effective = torch.where(full[:, None], a[..., index], W @ Mb[index].T)[:, rows]  # (g, rows, p)
            raw = a[:, rows][..., index]  # (g, rows, p)
            rest = (a[:, rows].pow(2).sum(-1, keepdim=True) - raw**2).clamp_min(0.0).sqrt()
            spread = (leverage * (1 - leverage)).clamp_min(0.0).sqrt()
            terms = {
                "raw": raw,
                "effective": effective,
                "own": raw * leverage,
                "leverage": leverage.expand_as(raw),
                "bound": rest * spread,
                "expected": raw * (rank / sizes)[rows, None],
            }
            for name, value in terms.items():
                out[name][layer, kv] = value.mean(1) if name == "leverage" else value.sum(1)
    return PositionTerms(*(out[name].reshape(L, h, len(positions)) for name in PositionTerms._fields))
