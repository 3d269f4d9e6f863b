"""The rank argument and the (simplex-constrained) left null space of T (paper sections 3.2-3.3).

One head, sequence length n (the paper's d_s), head size d_v, hidden size d:

    T = V H            (n, d)   value bias folded in (see ``helpers.model.internals``)
    LN(T)              {x : x^T T = 0},           dim n - rank(T) >= n - d_v
    LN([T, 1])         {x : x^T T = 0, x^T 1 = 0}, dim >= n - d_v - 1

Any Ã whose rows lie in LN(T) gives (A + Ã) T = A T. If the rows lie in
LN([T, 1]), A + Ã is still row-stochastic, and it stays non-negative for
steps up to ``step_range``. Ranks and null spaces use ``helpers.methods.linalg``
(tolerance relative to the largest singular value).

This module never loads a model and never draws.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd
import torch

from ..model.checks import check_attention_and_values, check_attention_distribution, check_not_causal, check_tensor
from ..model.internals import Internals
from ..model.numbering import check_seed, head_number, layer_number
from ..model.progress import progress_bar
from .linalg import DEFAULT_RTOL, left_null_space, numerical_rank, relative_output_change

MATRICES = ("V", "T", "V1", "T1")


def with_ones(M: torch.Tensor) -> torch.Tensor:
    """[M / ||M||_2, 1 / sqrt(n)] for M: (..., n, m) -> (..., n, m + 1), both parts on one scale."""
    M = M.double()
    scale = torch.linalg.matrix_norm(M, ord=2)[..., None, None].clamp_min(torch.finfo(M.dtype).tiny)
    ones = torch.full((*M.shape[:-1], 1), M.shape[-2] ** -0.5, dtype=M.dtype, device=M.device)
    return torch.cat([M / scale, ones], dim=-1)


def check_matrices(matrices: Sequence[str]) -> None:
    """Raise unless ``matrices`` is a non-empty list of names from ``MATRICES``."""
    if isinstance(matrices, str) or not matrices or [m for m in matrices if m not in MATRICES]:
        raise ValueError(f"matrices must be a non-empty list drawn from {MATRICES}; got {matrices!r}.")


def ranks_of(
    internals: Internals, matrices: Sequence[str] = ("V",), rtol: float = DEFAULT_RTOL
) -> dict[str, torch.Tensor]:
    """Numerical ranks per layer and head: name -> (L, h) integer tensor.

    ``"V"``: rank(V), ``"T"``: rank(T), ``"V1"``: rank([V, 1]), ``"T1"``: rank([T, 1]).
    """
    check_matrices(matrices)
    source = {"V": internals.V, "T": internals.T}
    return {
        name: numerical_rank(with_ones(source[name[0]]) if name.endswith("1") else source[name], rtol)
        for name in matrices
    }


def rank_ties(internals: Internals, rtol: float = DEFAULT_RTOL) -> torch.Tensor:
    """Per layer and head, whether rank(T) may differ from rank(V) at tolerance ``rtol``: (L, h) bool.

    T = V H with H (d_v, d) of full row rank, so each singular value of T lies between that of V times
    sigma_min(H) and times sigma_max(H), and each ratio sigma_i / sigma_1 of T within a factor
    kappa(H) = sigma_max(H) / sigma_min(H) of V's. The two numerical ranks can therefore differ only
    where a ratio of V lies within that factor of the tolerance: (rtol / kappa, rtol * kappa]. True
    marks such a tie at the threshold (neither rank is wrong); elsewhere rank(T) = rank(V) is an identity.
    """
    S_V = torch.linalg.svdvals(internals.V.double())  # (L, h, min(n, d_v))
    S_H = torch.linalg.svdvals(internals.H.double())  # (L, h, d_v)
    kappa = S_H[..., 0] / S_H[..., -1]
    ratios = S_V / S_V[..., :1]
    low, high = (rtol / kappa)[..., None], (rtol * kappa)[..., None]
    return ((ratios > low) & (ratios <= high)).any(dim=-1)


# --------------------------------------------------------------------------- principal angles


def principal_angles(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """Principal angles (radians, largest first) between the column spaces of X and Y.

    X: (n, k), Y: (n, l), each of full column rank -> (min(k, l),) float64.
    All angles zero and k = l mean the two subspaces coincide. Small angles
    come from sines, large ones from cosines (Knyazev and Argentati, 2002,
    the method of ``scipy.linalg.subspace_angles``), so both are accurate.
    """
    check_tensor(X, "X", dims=2)
    check_tensor(Y, "Y", dims=2)
    if X.shape[0] != Y.shape[0]:
        raise ValueError(
            f"X and Y must live in the same space (same number of rows); got {tuple(X.shape)} and {tuple(Y.shape)}."
        )
    if X.shape[1] == 0 or Y.shape[1] == 0:
        return torch.zeros(0, dtype=torch.float64, device=X.device)
    QX, QY = torch.linalg.qr(X.double()).Q, torch.linalg.qr(Y.double()).Q
    if QX.shape[1] < QY.shape[1]:
        QX, QY = QY, QX
    overlap = QX.T @ QY
    cosines = torch.linalg.svdvals(overlap)  # descending: angles ascending
    sines = torch.linalg.svdvals(QY - QX @ overlap)  # descending: angles descending
    from_cos = torch.arccos(cosines.clamp(-1.0, 1.0))
    from_sin = torch.arcsin(sines.clamp(-1.0, 1.0)).flip(0)
    return torch.where(cosines**2 >= 0.5, from_sin, from_cos).flip(0)


def _largest_angle(NX: torch.Tensor, NY: torch.Tensor) -> float:
    """Largest principal angle in degrees between two null-space bases (nan if their dimensions differ)."""
    if NX.shape[1] != NY.shape[1]:
        return float("nan")
    angles = principal_angles(NX, NY)
    return math.degrees(float(angles[0])) if len(angles) else 0.0


def compare_null_spaces(
    internals: Internals, rtol: float = DEFAULT_RTOL, simplex: bool = False, progress: bool = True
) -> pd.DataFrame:
    """Do the per-head value matrices give the same left null space as T? One row per (layer, head).

    ``layer`` counts 1..L and ``head`` 1..h; ``n`` is the sequence length.

    Columns: ``rank_H`` and ``cond_H`` (H: (d_v, d); full row rank means
    rank d_v); for each pair ``P`` of (paper's E W^V vs E W^V H), (V vs T =
    V H), (E W^V vs V, which differ by the value bias): ``dim_a_P``,
    ``dim_b_P`` and ``angle_P``, the largest principal angle in degrees
    between the two null spaces. ``angle_bias_second`` is the second largest
    angle of the last pair (the bias moves only one direction).

    With ``simplex=True`` also the constrained null spaces LN([., 1]):
    ``dim_simplex_EW``, ``dim_simplex_V``, ``dim_simplex_T`` and the largest
    angles ``angle_simplex_bias`` (LN([E W^V, 1]) vs LN([V, 1]), equal
    because V - E W^V = 1 b^V) and ``angle_simplex_book`` (LN([V, 1]) vs LN([T, 1])).
    """
    rows = []
    L, h = internals.num_layers, internals.heads
    for layer, head in progress_bar([(i, k) for i in range(L) for k in range(h)], "null spaces", progress):
        E = internals.E[layer].double()
        W_V, H = internals.W_V[layer, head].double(), internals.H[layer, head].double()
        EW = E @ W_V
        S_H = torch.linalg.svdvals(H)
        null = {
            "EW": left_null_space(EW, rtol),
            "EWH": left_null_space(EW @ H, rtol),
            "V": left_null_space(internals.V[layer, head].double(), rtol),
            "T": left_null_space(internals.T[layer, head].double(), rtol),
        }
        row = {
            "layer": layer_number(layer),
            "head": head_number(head),
            "n": internals.n,
            "rank_H": int((S_H > rtol * S_H[0]).sum()),
            "cond_H": float(S_H[0] / S_H[-1]),
        }
        for key, (a, b) in {"paper": ("EW", "EWH"), "book": ("V", "T"), "bias": ("EW", "V")}.items():
            row[f"dim_a_{key}"], row[f"dim_b_{key}"] = null[a].shape[1], null[b].shape[1]
            row[f"angle_{key}"] = _largest_angle(null[a], null[b])
        same_dim = null["EW"].shape[1] == null["V"].shape[1]
        angles = principal_angles(null["EW"], null["V"]) if same_dim else torch.zeros(0, device=S_H.device)
        row["angle_bias_second"] = math.degrees(float(angles[1])) if len(angles) > 1 else 0.0
        if simplex:
            constrained = {
                "EW": simplex_null_space(EW, rtol),
                "V": simplex_null_space(internals.V[layer, head], rtol),
                "T": simplex_null_space(internals.T[layer, head], rtol),
            }
            for key, basis in constrained.items():
                row[f"dim_simplex_{key}"] = basis.shape[1]
            row["angle_simplex_bias"] = _largest_angle(constrained["EW"], constrained["V"])
            row["angle_simplex_book"] = _largest_angle(constrained["V"], constrained["T"])
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- simplex-constrained null space


def simplex_null_space(T: torch.Tensor, rtol: float = DEFAULT_RTOL) -> torch.Tensor:
    """Orthonormal basis of LN([T, 1]) = {x : x^T T = 0, x^T 1 = 0}.

    T: (n, d) -> (n, k), float64, k = n - rank([T, 1]). T and the column of
    ones are put on one scale first, so the relative tolerance treats both alike.
    """
    check_tensor(T, "T", dims=2)
    return left_null_space(with_ones(T), rtol)


class NullDimensions(NamedTuple):
    """dim LN(T) and dim LN([T, 1]), each an integer tensor (...,)."""

    plain: torch.Tensor
    with_ones: torch.Tensor


def null_space_dimensions(T: torch.Tensor, rtol: float = DEFAULT_RTOL) -> NullDimensions:
    """dim LN(T) and dim LN([T, 1]) for T: (..., n, d) -> two (...,) integer tensors."""
    check_tensor(T, "T", min_dims=2)
    n = T.shape[-2]
    return NullDimensions(n - numerical_rank(T, rtol), n - numerical_rank(with_ones(T), rtol))


def null_projection(M: torch.Tensor, N: torch.Tensor) -> torch.Tensor:
    """Project each row of ``M: (..., n)`` onto span(N), N: (n, k) orthonormal: M N N^T."""
    check_tensor(M, "M", min_dims=1)
    check_tensor(N, "N", dims=2)
    if M.shape[-1] != N.shape[0]:
        raise ValueError(f"M has rows of length {M.shape[-1]} but N spans vectors of length {N.shape[0]}.")
    N = N.to(M.dtype)
    return (M @ N) @ N.T


def same_output_towards(
    A: torch.Tensor, T: torch.Tensor, target: torch.Tensor, simplex: bool = False, rtol: float = DEFAULT_RTOL
) -> torch.Tensor:
    """A + Ã with the rows of Ã = (target - A) projected onto LN(T) (or LN([T, 1])).

    A, target: (n, n); T: (n, d) -> (n, n). Of all matrices with the same
    head output A T, this is the one closest to ``target`` (Frobenius norm);
    it need not be non-negative. ``simplex=True`` also keeps the row sums.
    """
    check_attention_and_values(A, T)
    check_tensor(target, "target", dims=2)
    if target.shape != A.shape:
        raise ValueError(f"target must have A's shape {tuple(A.shape)}; got {tuple(target.shape)}.")
    N = simplex_null_space(T, rtol) if simplex else left_null_space(T.double(), rtol)
    return (A.double() + null_projection(target.double() - A.double(), N)).to(A.dtype)


def null_direction(
    T: torch.Tensor,
    coefficients: torch.Tensor | None = None,
    seed: int = 0,
    rtol: float = DEFAULT_RTOL,
) -> torch.Tensor:
    """A direction Ã: (n, n) whose every row lies in LN([T, 1]), unit Frobenius norm, float64.

    Ã = C N^T with N the basis of LN([T, 1]) and C: (n, k) the given
    ``coefficients`` or standard normal draws seeded with ``seed``.
    Raises if LN([T, 1]) is trivial (n <= rank([T, 1])): A is then identifiable.
    """
    seed = check_seed(seed)
    N = simplex_null_space(T, rtol)
    n, k = N.shape
    if k == 0:
        raise ValueError(
            f"LN([T, 1]) is trivial for this T (n = {n} <= rank([T, 1])): there is no null direction; "
            "attention is identifiable here. Use a longer input."
        )
    if coefficients is None:
        draws = torch.Generator().manual_seed(seed)  # seeded on the CPU: the same direction on every device
        coefficients = torch.randn(n, k, generator=draws, dtype=torch.float64).to(N.device)
    else:
        check_tensor(coefficients, "coefficients", dims=2)
        if coefficients.shape != (n, k):
            raise ValueError(f"coefficients must be (n, k) = ({n}, {k}); got {tuple(coefficients.shape)}.")
    D = coefficients.double() @ N.T
    norm = torch.linalg.matrix_norm(D)
    if not norm > 0:
        raise ValueError("The coefficients are all zero: no direction.")
    return D / norm


class StepRange(NamedTuple):
    """The steps t with A + t D >= 0: ``t_low <= 0 <= t_high``."""

    t_low: float
    t_high: float


def step_range(A: torch.Tensor, D: torch.Tensor) -> StepRange:
    """The largest interval [t_low, t_high] (t_low <= 0 <= t_high) with A + t D >= 0 entrywise.

    A: (..., n, n) non-negative attention; D: same shape. Each bound is a
    ratio a_ij / |d_ij| over the entries where D pushes toward zero
    (``inf`` if D pushes nowhere). Softmax attention is strictly positive,
    so both bounds are strictly non-zero for any non-zero direction.
    """
    check_tensor(A, "A", min_dims=2)
    check_tensor(D, "D", min_dims=2)
    if A.shape != D.shape:
        raise ValueError(f"A and D must have the same shape; got {tuple(A.shape)} and {tuple(D.shape)}.")
    if float(A.min()) < 0:
        raise ValueError(f"A has negative entries (min {float(A.min()):.3g}); the step range starts from a valid A.")
    A, D = A.double(), D.double()
    down, up = D < 0, D > 0
    t_high = float((A[down] / -D[down]).min()) if down.any() else float("inf")
    t_low = -float((A[up] / D[up]).min()) if up.any() else float("-inf")
    return StepRange(t_low, t_high)


@dataclass
class AlternativeFamily:
    """Valid alternatives A + t D for several steps t.

    attentions: (m, n, n) float64; steps: (m,); direction D: (n, n);
    t_low, t_high: the step range where A + t D >= 0.
    """

    attentions: torch.Tensor
    steps: torch.Tensor
    direction: torch.Tensor
    t_low: float
    t_high: float


def alternative_family(
    A: torch.Tensor,
    T: torch.Tensor,
    fractions: Sequence[float] | torch.Tensor = (-1.0, -0.5, 0.0, 0.5, 1.0),
    direction: torch.Tensor | None = None,
    seed: int = 0,
    rtol: float = DEFAULT_RTOL,
) -> AlternativeFamily:
    """A family of valid attention matrices with the head output of A.

    A: (n, n) row-stochastic, non-negative; T: (n, d). ``fractions`` in
    [-1, 1] place each member along the direction: -1 is t_low, +1 is
    t_high (the last non-negative steps, where some entry hits 0 exactly).
    ``direction``: (n, n) with rows in LN([T, 1]) (default: ``null_direction``).
    """
    check_attention_and_values(A, T)
    check_attention_distribution(A)
    check_not_causal(A, "alternative_family")
    try:
        fractions = torch.as_tensor(fractions, dtype=torch.float64, device=A.device)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(f"fractions must be a 1-D sequence of numbers in [-1, 1]; got {fractions!r}.") from err
    if (
        fractions.dim() != 1
        or not fractions.numel()
        or not torch.isfinite(fractions).all()
        or float(fractions.abs().max()) > 1
    ):
        raise ValueError("fractions must be a 1-D sequence of numbers in [-1, 1].")
    if direction is None:
        direction = null_direction(T, seed=seed, rtol=rtol)
    else:
        check_tensor(direction, "direction", dims=2)
        if direction.shape != A.shape:
            raise ValueError(f"direction must have A's shape {tuple(A.shape)}; got {tuple(direction.shape)}.")
        N = simplex_null_space(T, rtol)
        D64 = direction.double()
        leak = torch.linalg.matrix_norm(D64 - null_projection(D64, N)) / torch.linalg.matrix_norm(D64).clamp_min(1e-300)
        if leak > 1e-6:
            raise ValueError(
                f"direction has rows outside LN([T, 1]) (relative part outside {float(leak):.2g}); "
                "project it with null_projection(direction, simplex_null_space(T))."
            )
    t_low, t_high = step_range(A, direction)
    steps = torch.where(fractions >= 0, fractions * t_high, -fractions * t_low)
    # the extreme steps land exactly on zero in exact arithmetic; rounding may leave entries
    # of order -1e-17 there: they are kept, so validity() reports them
    attentions = A.double()[None] + steps[:, None, None] * direction.double()[None]
    return AlternativeFamily(attentions, steps, direction.double(), t_low, t_high)


class Validity(NamedTuple):
    """How valid alternatives to A are: the worst entry, row sum and output over all of them."""

    min_entry: float  # the smallest entry (>= 0 for valid attention)
    row_sum_error: float  # max |row sum - 1|
    output_error: float  # max |(A' - A) T| / max |A T| (0 for the same output)


def validity(alternatives: torch.Tensor, A: torch.Tensor, T: torch.Tensor) -> Validity:
    """How valid are alternatives to A? alternatives: (..., n, n); A: (n, n); T: (n, d)."""
    output_change = relative_output_change(alternatives, A, T)
    X = alternatives.double()
    return Validity(
        min_entry=float(X.min()),
        row_sum_error=float((X.sum(-1) - 1).abs().max()),
        output_error=float(output_change.max()),
    )


def row_total_variation(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """0.5 ||x_i - y_i||_1 for every row: X, Y (..., n, n), broadcast -> (..., n) float64.

    For two attention rows, the share of the mass that must move to turn one into the
    other (0: the same row, 1: disjoint supports).
    """
    check_tensor(X, "X")
    check_tensor(Y, "Y")
    if X.shape[-1] != Y.shape[-1]:
        raise ValueError(f"X and Y must have rows of one length; got {X.shape[-1]} and {Y.shape[-1]}.")
    return 0.5 * (X.double() - Y.double()).abs().sum(dim=-1)


def random_values(T: torch.Tensor, seed: int = 0, rtol: float = DEFAULT_RTOL) -> torch.Tensor:
    """A random stand-in for T: the control of dimension counting for the simplex-constrained null space.

    T: (n, d) -> X: (n, r) float64 standard normal draws (seeded on the CPU), r = rank([T, 1]) - 1,
    so that LN([X, 1]) has the dimension of LN([T, 1]) (almost surely) but a column space drawn
    at random: what the valid alternatives would be if the head's values carried no structure.
    """
    seed = check_seed(seed)
    check_tensor(T, "T", dims=2)
    r = int(numerical_rank(with_ones(T), rtol)) - 1
    draws = torch.Generator().manual_seed(seed)
    return torch.randn(T.shape[0], max(r, 0), generator=draws, dtype=torch.float64).to(T.device)
