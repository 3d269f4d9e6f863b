"""Do the keys allow the alternatives? (Bhardwaj et al. 2021, tested rather than assumed.)

A head computes A = softmax(Z) with logits Z = Q K^T / sqrt(d_v); Q and K
have d_v columns (the head size, as the values; biases included), so
rank(Z) <= d_v. Softmax ignores a constant added to a row, hence an attention matrix A' that *some* queries and
keys of size d_v produce is exactly one whose row-centred log has rank <= d_v:

    C(A') = log A' (I - 1 1^T / n),   A' producible  <=>  rank C(A') <= d_v,

and A' must be strictly positive (a zero weight needs an infinite logit).

A model that adds a fixed bias B (n, n) to the logits (MPNet's relative-position
bias) produces softmax(Q K^T / sqrt(d_v) + B): the test is then on
C(A') - C(B), and every function here takes that ``bias`` (None: no bias, BERT).

* ``logit_rank_distance``: the relative Frobenius distance of C(A') from the
  nearest matrix of rank d_v, sqrt(sum_{k > d_v} s_k^2 / sum_k s_k^2) (the
  square root of the energy share beyond d_v); 0 for a producible A', ``inf``
  where A' has a zero entry.
* ``same_keys_freedom``: with the head's own keys fixed, how many directions
  of query i keep row i's output; 0 means the row is locally identifiable.
* ``producible_dimension``: the local dimension of the set of producible
  alternatives with the same output, counted from Jacobian ranks (small cases);
  ``dimension_count`` gives the generic count d_v (2n - 1 - d_v) - n r.
* ``producible_alternative``: a search for such an alternative: queries and
  keys (n, d_v) optimised so that softmax(P R^T + B) moves toward a target (e.g.
  one of chapter 3's null-space alternatives) while keeping the output A T.

Tensors in, tensors and small dataclasses out; this module never loads a model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..model.checks import check_autograd
from ..model.numbering import check_count, check_integer
from .linalg import DEFAULT_RTOL, numerical_rank, range_basis
from .nullspace import check_attention_and_values, with_ones

__all__ = [
    "centred_log",
    "logit_rank_distance",
    "output_basis",
    "same_keys_freedom",
    "dimension_count",
    "producible_dimension",
    "ProducibleAlternative",
    "producible_alternative",
]


def _check_dv(d_v: int) -> int:
    return check_count(d_v, "d_v")


def centred_log(A: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """log A - bias with each row's mean removed: (..., n, n) -> (..., n, n) float64. A must be > 0.

    ``bias``: the fixed logits the model adds (broadcastable to A; None: none), so the result is
    the row-centred Q K^T / sqrt(d_v) for the model's own A.
    """
    if not isinstance(A, torch.Tensor) or A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError("A must be a tensor of shape (..., n, n).")
    if not (A > 0).all():
        raise ValueError("A has zero or negative entries: no finite logits produce it (use logit_rank_distance).")
    L = A.double().log()
    bias = _check_bias(bias, A.shape[-1])
    if bias is not None:
        L = L - bias.to(L.device)
    return L - L.mean(dim=-1, keepdim=True)


def _check_bias(bias: torch.Tensor | None, n: int) -> torch.Tensor | None:
    """None, or the fixed logit bias as float64 (..., n, n)."""
    if bias is None:
        return None
    if not isinstance(bias, torch.Tensor) or bias.dim() < 2 or tuple(bias.shape[-2:]) != (n, n):
        raise ValueError(
            f"bias must be a tensor ending in ({n}, {n}); got {getattr(bias, 'shape', type(bias).__name__)}."
        )
    if not torch.isfinite(bias).all():
        raise ValueError("bias contains NaN or infinite values.")
    return bias.double()


def logit_rank_distance(A: torch.Tensor, d_v: int, bias: torch.Tensor | None = None) -> torch.Tensor:
    """How far log A - bias is from (rank <= d_v) + (a constant per row): (..., n, n) -> (...,).

    The relative Frobenius distance of C = ``centred_log(A, bias)`` (``bias``
    broadcastable to A: the fixed logits the model adds, e.g.
    ``Internals.position_bias[layer, head]``; None: none) from the nearest matrix of
    rank d_v, sqrt(sum_{k > d_v} s_k^2 / sum_k s_k^2) over C's singular values s: 0 when
    some d_v-dimensional queries and keys produce A exactly, at most 1; ``inf`` for a
    matrix with a zero (or negative) entry.
    """
    d_v = _check_dv(d_v)
    if not isinstance(A, torch.Tensor) or A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError("A must be a tensor of shape (..., n, n).")
    if not torch.isfinite(A).all():
        raise ValueError("A contains NaN or infinite values.")
    positive = (A > 0).flatten(-2).all(dim=-1)
    safe = torch.where(positive[..., None, None], A.double(), torch.ones_like(A, dtype=torch.float64))
    S = torch.linalg.svdvals(centred_log(safe, bias))
    total = (S**2).sum(-1)
    beyond = (S[..., d_v:] ** 2).sum(-1)
    distance = torch.where(total > 0, (beyond / total.clamp_min(1e-300)).sqrt(), torch.zeros_like(total))
    return torch.where(positive, distance, torch.full_like(distance, float("inf")))


def output_basis(T: torch.Tensor, rtol: float = DEFAULT_RTOL) -> torch.Tensor:
    """Orthonormal U: (n, r) spanning span([T, 1]) minus the direction 1.

    For row-stochastic A and A', (A' - A) T = 0 exactly when (A' - A) U = 0
    (the row sums already agree); r = rank([T, 1]) - 1.
    """
    basis, rank = range_basis(with_ones(T.detach().cpu()), rtol)
    Q = basis[:, : int(rank)]
    centred = Q - Q.mean(dim=0, keepdim=True)  # (I - 1 1^T / n) Q
    U, rank = range_basis(centred, rtol)
    return U[:, : int(rank)].to(T.device)


def _check_qk(Q: torch.Tensor, K: torch.Tensor, T: torch.Tensor) -> None:
    for name, M in (("Q", Q), ("K", K), ("T", T)):
        if not isinstance(M, torch.Tensor) or M.dim() != 2:
            raise ValueError(f"{name} must be a 2-D tensor; got {getattr(M, 'shape', type(M).__name__)}.")
        if not torch.isfinite(M).all():
            raise ValueError(f"{name} contains NaN or infinite values.")
    if Q.shape != K.shape:
        raise ValueError(f"Q and K must both be (n, d_v); got {tuple(Q.shape)} and {tuple(K.shape)}.")
    if T.shape[0] != Q.shape[0]:
        raise ValueError(f"T has {T.shape[0]} rows but Q has {Q.shape[0]}; all are (n, ...).")


def _logits(Q: torch.Tensor, K: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    logits = Q.double() @ K.double().T / Q.shape[-1] ** 0.5
    return logits if bias is None else logits + bias


def same_keys_freedom(
    Q: torch.Tensor, K: torch.Tensor, T: torch.Tensor, rtol: float = 1e-8, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """With the keys fixed, the dimension of query moves that keep each row's output: (n,) integers.

    Row i: a_i = softmax(K q_i / sqrt(d_v) + b_i) (``bias``: the fixed (n, n) logits, or None); its output moves by
    U^T (diag(a_i) - a_i a_i^T) K dq / sqrt(d_v) (U from ``output_basis``), an
    (r, d_v) Jacobian; the freedom is d_v minus its rank. 0 means row i is
    locally identifiable given the keys (no nearby query gives the same output).
    """
    _check_qk(Q, K, T)
    d_v = Q.shape[1]
    A = torch.softmax(_logits(Q, K, _check_bias(bias, Q.shape[0])), dim=-1)  # (n, n)
    U = output_basis(T)  # (n, r)
    S = torch.diag_embed(A) - A[:, :, None] * A[:, None, :]  # (n, n, n): softmax Jacobian per row
    J = U.T[None] @ S @ K.double()[None] / d_v**0.5  # (n, r, d_v)
    return d_v - numerical_rank(J, rtol)


def dimension_count(n: int, d_v: int, r: int) -> int:
    """Generic local dimension of producible same-output alternatives: max(0, d_v (2n - 1 - d_v) - n r).

    Centred logits of rank d_v form a manifold of dimension d_v (2n - 1 - d_v)
    (for d_v < n); keeping the output imposes n r equations (r from
    ``output_basis``). With d_v >= n - 1 every centred logit matrix is allowed:
    the count is n (n - 1 - r), the simplex-constrained null space of chapter 3.
    """
    n, d_v, r = (check_integer(value, name, 0) for name, value in (("n", n), ("d_v", d_v), ("r", r)))
    k = min(d_v, n - 1)
    return max(0, k * (2 * n - 1 - k) - n * r)


def producible_dimension(
    Q: torch.Tensor,
    K: torch.Tensor,
    T: torch.Tensor,
    rtol: float = 1e-8,
    max_entries: int = 4_000_000,
    bias: torch.Tensor | None = None,
) -> int:
    """The local dimension of {softmax(P R^T + B) : P, R (n, d_v), same output A T} at the head's own (Q, K).

    ``bias``: B, the fixed (n, n) logits the model adds (None: zero).
    rank(d centred logits / d(P, R)) - rank(d output / d(P, R)), from Jacobians in
    float64 (n^2 x 2 n d_v entries: small cases only, up to ``max_entries``).
    Directions that leave the centred logits unchanged leave A unchanged too.
    """
    check_autograd("producible_dimension (its Jacobians)")
    _check_qk(Q, K, T)
    n, d_v = Q.shape
    if n * n * 2 * n * d_v > max_entries:
        raise ValueError(
            f"The Jacobian would have {n * n * 2 * n * d_v} entries (> max_entries = {max_entries}); "
            "use dimension_count for the generic count."
        )
    B = _check_bias(bias, n)
    B = torch.zeros(n, n, dtype=torch.float64, device=Q.device) if B is None else B.to(Q.device)
    U = output_basis(T)
    scale = d_v**-0.25
    P0, R0 = Q.double() * scale, K.double() * scale
    centre = torch.eye(n, dtype=torch.float64, device=P0.device) - 1.0 / n

    def centred_logits(P, R):
        return (P @ R.T) @ centre

    def output(P, R):
        return torch.softmax(P @ R.T + B, dim=-1) @ U

    def flat_jacobian(f):
        JP, JR = torch.func.jacrev(f, argnums=(0, 1))(P0, R0)
        rows = f(P0, R0).numel()
        return torch.cat([JP.reshape(rows, -1), JR.reshape(rows, -1)], dim=1)

    return int(numerical_rank(flat_jacobian(centred_logits), rtol)) - int(numerical_rank(flat_jacobian(output), rtol))


def _gauss_newton(
    P: torch.Tensor,
    R: torch.Tensor,
    U: torch.Tensor,
    AU: torch.Tensor,
    steps: int,
    B: torch.Tensor,
    tol: float = 1e-13,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Damped least-norm Gauss-Newton on queries and keys jointly: softmax(P R^T + B) U -> AU (B fixed, (n, n)).

    Residual (n, r); Jacobian (n r, 2 n d_v), written out: with M_i = U^T (diag(a_i) - a_i a_i^T),
    d res_i / d p_i = M_i R and d res_i / d r_j = M_i[:, j] p_i^T. Each step is
    -J^T (J J^T + lam I)^{-1} res, kept only if the residual shrinks.
    """
    n, d_v = P.shape
    r = U.shape[1]
    lam = 1e-8

    def residual_of(P, R):
        X = torch.softmax(P @ R.T + B, dim=-1)
        return X, (X @ U - AU).reshape(-1)

    X, res = residual_of(P, R)
    for _ in range(steps):
        size = float(res.abs().max())
        if size < tol:
            break
        S = torch.diag_embed(X) - X[:, :, None] * X[:, None, :]  # (n, n, n)
        M = U.T[None] @ S  # (n, r, n)
        J_P = torch.block_diag(*(M @ R[None]))  # (n r, n d_v)
        J_R = (M[:, :, :, None] * P[:, None, None, :]).reshape(n * r, n * d_v)
        J = torch.cat([J_P, J_R], dim=1)
        G = J @ J.T
        scale = float(torch.diagonal(G).mean())
        for _ in range(12):
            step = J.T @ torch.linalg.solve(G + lam * scale * torch.eye(n * r, dtype=G.dtype, device=G.device), res)
            P_new, R_new = P - step[: n * d_v].reshape(n, d_v), R - step[n * d_v :].reshape(n, d_v)
            X_new, res_new = residual_of(P_new, R_new)
            if float((res_new**2).sum()) < float((res**2).sum()):
                P, R, X, res = P_new, R_new, X_new, res_new
                lam = max(lam / 10, 1e-14)
                break
            lam *= 10
        else:
            break
    return P, R


@dataclass
class ProducibleAlternative:
    """An attention matrix softmax(P R^T + bias) with d_v-dimensional queries P and keys R: (n, d_v), the bias fixed.

    attention: (n, n) float64; output_error = max |(A' - A) T| / max |A T|;
    movement = ||A' - A||_F / ||A||_F; max_change = max |A' - A|;
    toward_target = <A' - A, B - A> / ||B - A||_F^2 (1: reached the target B);
    rank_distance = logit_rank_distance(A', d_v, bias) (0 up to rounding).
    """

    attention: torch.Tensor
    queries: torch.Tensor
    keys: torch.Tensor
    output_error: float
    movement: float
    max_change: float
    toward_target: float
    rank_distance: float


def producible_alternative(
    Q: torch.Tensor,
    K: torch.Tensor,
    T: torch.Tensor,
    target: torch.Tensor,
    penalty: float = 1e4,
    steps: int = 300,
    polish_steps: int = 30,
    bias: torch.Tensor | None = None,
) -> ProducibleAlternative:
    """Search queries and keys whose attention moves toward ``target`` with the head's output unchanged.

    Q, K: (n, d_v) the head's queries and keys (biases included), so that
    A = softmax(Q K^T / sqrt(d_v) + bias), with ``bias`` the fixed (n, n) logits the model adds
    (``Internals.position_bias[layer, head]`` on MPNet; None: zero, as in BERT);
    T: (n, d) the head's T = V H; target: (n, n),
    e.g. a chapter 3 alternative A + t D. Starting from (Q, K), L-BFGS minimises
    ||A' - target||^2 / ||target - A||^2 + penalty * ||(A' - A) U||^2 / ||A U||^2,
    then damped least-norm Gauss-Newton steps on queries and keys (``polish_steps``), so the result keeps A T to
    optimisation precision: read ``output_error`` before trusting it.
    Deterministic (no randomness): the start is the head's own (Q, K).
    """
    check_autograd("producible_alternative (its L-BFGS search)")
    _check_qk(Q, K, T)
    if not isinstance(target, torch.Tensor) or target.shape != (Q.shape[0], Q.shape[0]):
        raise ValueError(f"target must be an (n, n) tensor with n = {Q.shape[0]}.")
    if not torch.isfinite(target).all():
        raise ValueError("target contains NaN or infinite values.")
    steps, polish_steps = check_integer(steps, "steps", 0), check_integer(polish_steps, "polish_steps", 0)
    if not penalty > 0:
        raise ValueError(f"penalty must be positive, got {penalty}.")
    n, d_v = Q.shape
    fixed = _check_bias(bias, n)
    fixed = torch.zeros(n, n, dtype=torch.float64, device=Q.device) if fixed is None else fixed.to(Q.device)
    A = torch.softmax(_logits(Q, K, fixed), dim=-1)
    check_attention_and_values(A, T)
    B = target.double()
    U = output_basis(T)
    AU = A @ U
    output_scale = (AU**2).sum().clamp_min(1e-300)
    target_scale = ((B - A) ** 2).sum().clamp_min(1e-300)
    scale = d_v**-0.25
    P = (Q.double() * scale).clone().requires_grad_(True)
    R = (K.double() * scale).clone().requires_grad_(True)

    def run(loss_of, iterations: int) -> None:
        if iterations == 0:
            return
        optimiser = torch.optim.LBFGS(
            [P, R],
            lr=1.0,
            max_iter=iterations,
            history_size=50,
            tolerance_grad=1e-14,
            tolerance_change=1e-16,
            line_search_fn="strong_wolfe",
        )

        def closure():
            optimiser.zero_grad()
            loss = loss_of(torch.softmax(P @ R.T + fixed, dim=-1))
            loss.backward()
            return loss

        optimiser.step(closure)

    def output_term(X):
        return ((X @ U - AU) ** 2).sum() / output_scale

    run(lambda X: ((X - B) ** 2).sum() / target_scale + penalty * output_term(X), steps)
    with torch.no_grad():
        P_end, R_end = _gauss_newton(P.detach(), R.detach(), U, AU, polish_steps, fixed)
        P.copy_(P_end)
        R.copy_(R_end)

    with torch.no_grad():
        X = torch.softmax(P @ R.T + fixed, dim=-1)
        T64 = T.double()
        change = X - A
        return ProducibleAlternative(
            attention=X,
            queries=P.detach() / scale,
            keys=R.detach() / scale,
            output_error=float((change @ T64).abs().max() / (A @ T64).abs().max()),
            movement=float(torch.linalg.matrix_norm(change) / torch.linalg.matrix_norm(A)),
            max_change=float(change.abs().max()),
            toward_target=float((change * (B - A)).sum() / target_scale),
            rank_distance=float(logit_rank_distance(X, d_v, fixed)),
        )
