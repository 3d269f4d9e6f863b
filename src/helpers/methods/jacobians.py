"""Frobenius norms of the Jacobian blocks d e^l_i / d x_j of a BERT encoder, in forward mode.

For every layer l, hidden token i and input token j (paper section 5)

    J^l_ij = d e^l_i / d x_j      (d x d),   x_j = token + segment + position embedding,

taken through the embedding LayerNorm and every layer. Forward mode pushes a
tangent dx (nonzero on one input token) through the *linearised* network and
reads the tangents of every layer at once, so all L layers cost about as much
as one; the exact norms need d tangents per input token (the basis of x_j),
the estimate k random orthonormal ones (Hutchinson). Tangents are row vectors
here: ``dy = dx @ J``.

What makes it fast (n tokens, hidden d, FFN width f = 4d):

* The primal pass runs once per sentence; its activations (attention
  probabilities, LayerNorm statistics, the activation slopes) are cached and
  every chunk of tangents reuses them.
* The position-wise block LayerNorm -> FFN -> residual -> LayerNorm has, for
  each hidden token i, one d x d Jacobian ``M_i``. Forming all of them costs
  ~2 n f d^2 once; applying them costs 2 n d^2 per tangent instead of the
  4 n f d = 16 n d^2 of pushing the tangent through the FFN. That halves the
  work of a layer (10 n d^2 + 8 n^2 d per tangent instead of 24 n d^2 + 8 n^2 d).
* The first layer's input tangent is nonzero on one row only, so its Q, K, V
  tangents are one row, the score tangent is one row plus one column, and the
  value path is an outer product.
* Chunks of tangents are pushed as batched matrix products; peak memory is
  bounded by ``memory_mb`` whatever the length of the input.

The module only needs the model's weights and the raw embeddings ``x``; it
checks its own primal pass against the model's hidden states when given them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .linalg import orthonormal_samples

__all__ = [
    "LinearisedBert",
    "linearise",
    "block_norms",
    "hidden_state_tangents",
    "prepare_ffn_jacobians",
    "push_tangents",
    "default_chunk_size",
]

DEFAULT_MEMORY_MB = 1024  # a quarter for one chunk of tangents, half for the per-token FFN Jacobians


@dataclass
class _Layer:
    """Weights (row-vector convention, ``y = x @ W``) and cached primal quantities of one layer."""

    W_qkv_T: torch.Tensor  # (3d, d)
    W_o: torch.Tensor  # (d, d)
    W_1: torch.Tensor  # (d, f)
    W_2: torch.Tensor  # (f, d)
    Q_T: torch.Tensor  # (h, d_v, n)  queries, times the score scaling 1 / sqrt(d_v)
    K_T: torch.Tensor  # (h, d_v, n)  keys, times the score scaling
    V_T: torch.Tensor  # (h, d_v, n)
    A: torch.Tensor  # (h, n, n)  attention probabilities
    A_T: torch.Tensor  # (h, n, n)  their transpose
    O_T: torch.Tensor  # (h, d_v, n)  head outputs A V, transposed
    xhat_1: torch.Tensor  # (n, d) normalised input of the attention LayerNorm
    scale_1: torch.Tensor  # (n, d) gamma / sigma of the attention LayerNorm
    slope: torch.Tensor  # (n, f) derivative of the activation at the FFN pre-activation
    xhat_2: torch.Tensor  # (n, d) normalised input of the output LayerNorm
    scale_2: torch.Tensor  # (n, d)
    M: torch.Tensor | None = None  # (n, d, d) Jacobian of LayerNorm -> FFN -> LayerNorm, per token


@dataclass
class LinearisedBert:
    """A BERT encoder linearised around one input: the primal pass and its caches.

    ``hidden_states: (L + 1, n, d)`` are the embedding LayerNorm output and
    each layer's output of the primal pass.
    """

    xhat_0: torch.Tensor  # (n, d) normalised input of the embedding LayerNorm
    scale_0: torch.Tensor  # (n, d)
    layers: list[_Layer]
    hidden_states: torch.Tensor  # (L + 1, n, d)
    heads: int

    @property
    def n(self) -> int:
        return self.xhat_0.shape[0]

    @property
    def d(self) -> int:
        return self.xhat_0.shape[1]

    @property
    def depth(self) -> int:
        return len(self.layers)


def _layer_norm(r: torch.Tensor, norm: nn.LayerNorm) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LayerNorm of ``r: (n, d)``; returns the output, xhat and gamma / sigma, each (n, d)."""
    mean = r.mean(-1, keepdim=True)
    var = (r - mean).pow(2).mean(-1, keepdim=True)
    inv_sigma = torch.rsqrt(var + norm.eps)
    xhat = (r - mean) * inv_sigma
    gamma = norm.weight if norm.weight is not None else torch.ones_like(r[0])
    beta = norm.bias if norm.bias is not None else torch.zeros_like(r[0])
    return xhat * gamma + beta, xhat, gamma * inv_sigma


def _ln_tangent(t: torch.Tensor, xhat: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Tangent of a LayerNorm: ``t @ J_LN`` for t: (..., d) with xhat, scale broadcastable to it.

    J_LN = (I - 1 1^T / d - xhat xhat^T / d) diag(gamma / sigma), symmetric projector first.
    """
    d = t.shape[-1]
    centred = t - t.mean(-1, keepdim=True) - (t * xhat).sum(-1, keepdim=True) * (xhat / d)
    return centred * scale


def _check_bert_layer(layer: nn.Module) -> None:
    if getattr(layer, "add_cross_attention", False) or getattr(layer, "is_decoder", False):
        raise ValueError("Decoder and cross-attention layers are not supported; use an encoder-only BERT.")


@torch.no_grad()
def linearise(
    model: nn.Module,
    x: torch.Tensor,
    reference: torch.Tensor | None = None,
    atol: float = 1e-4,
) -> LinearisedBert:
    """Run the primal pass of a BERT encoder on raw embeddings and cache what the tangents need.

    Args:
        model: a BertModel (``model.embeddings.LayerNorm`` and ``model.encoder.layer``).
        x: ``(n, d)``, token + segment + position, before the embedding LayerNorm.
        reference: the model's own hidden states ``(L + 1, n, d)``; if given, the primal
            pass must reproduce them (a guard against a model variant this code does not
            implement).
        atol: tolerance of that check, relative to the largest hidden-state entry.

    Raises:
        ValueError: wrong shapes, or the primal pass disagrees with ``reference``.
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be one sequence of input embeddings (n, d); got {got}.")
    config = model.config
    d, heads = config.hidden_size, config.num_attention_heads
    if x.shape[1] != d:
        raise ValueError(f"x has width {x.shape[1]}, the model's hidden size is {d}.")
    d_v = d // heads
    n = x.shape[0]
    x = x.to(device=model.embeddings.LayerNorm.weight.device, dtype=model.embeddings.LayerNorm.weight.dtype)

    E, xhat_0, scale_0 = _layer_norm(x, model.embeddings.LayerNorm)
    hidden = [E]
    layers = []
    scaling = d_v**-0.5
    for layer in model.encoder.layer:
        _check_bert_layer(layer)
        sa, out = layer.attention.self, layer.attention.output
        W_qkv = torch.cat([sa.query.weight, sa.key.weight, sa.value.weight]).T  # (d, 3d)
        b_qkv = torch.cat([sa.query.bias, sa.key.bias, sa.value.bias])
        qkv = (E @ W_qkv + b_qkv).view(n, 3, heads, d_v).permute(1, 2, 0, 3)  # (3, h, n, d_v)
        Q, K, V = qkv[0], qkv[1], qkv[2]
        A = torch.softmax(Q @ K.transpose(-1, -2) * scaling, dim=-1)
        heads_out = (A @ V).transpose(0, 1).reshape(n, d)
        Y, xhat_1, scale_1 = _layer_norm(heads_out @ out.dense.weight.T + out.dense.bias + E, out.LayerNorm)
        pre = layer.intermediate.dense(Y)
        act = layer.intermediate.intermediate_act_fn
        with torch.enable_grad():  # the activation is elementwise: the gradient of its sum is its slope
            pre = pre.detach().requires_grad_(True)
            G = act(pre)
            (slope,) = torch.autograd.grad(G.sum(), pre)
        G, pre = G.detach(), pre.detach()
        Z, xhat_2, scale_2 = _layer_norm(layer.output.dense(G) + Y, layer.output.LayerNorm)
        layers.append(
            _Layer(
                W_qkv_T=W_qkv.T.contiguous(),
                W_o=out.dense.weight.T.contiguous(),
                W_1=layer.intermediate.dense.weight.T.contiguous(),
                W_2=layer.output.dense.weight.T.contiguous(),
                Q_T=(Q * scaling).transpose(1, 2).contiguous(),
                K_T=(K * scaling).transpose(1, 2).contiguous(),
                V_T=V.transpose(1, 2).contiguous(),
                A=A.contiguous(),
                A_T=A.transpose(1, 2).contiguous(),
                O_T=(A @ V).transpose(1, 2).contiguous(),
                xhat_1=xhat_1,
                scale_1=scale_1,
                slope=slope,
                xhat_2=xhat_2,
                scale_2=scale_2,
            )
        )
        E = Z
        hidden.append(E)
    hidden_states = torch.stack(hidden)
    if reference is not None:
        reference = reference.to(hidden_states)
        if reference.shape != hidden_states.shape:
            raise ValueError(f"reference hidden states {tuple(reference.shape)} != {tuple(hidden_states.shape)}.")
        error = (reference - hidden_states).abs().max() / reference.abs().max().clamp_min(1e-12)
        if error > atol:
            raise ValueError(
                f"The linearised BERT does not reproduce this model's hidden states (relative error "
                f"{float(error):.2e}); the model is not the post-LayerNorm BERT encoder this code implements."
            )
    return LinearisedBert(xhat_0, scale_0, layers, hidden_states, heads)


def _build_ffn_jacobians(layer: _Layer, step_mb: float = 64) -> torch.Tensor:
    """M_i = J_LN1 (I + W_1 diag(slope_i) W_2) J_LN2 for every token: (n, d, d).

    Tokens are processed a few at a time so the (rows, d, f) scaled copies of W_1
    stay under ``step_mb``.
    """
    n, d = layer.xhat_1.shape
    rows_per_step = max(1, int(step_mb * 2**20 // (layer.W_1.numel() * layer.W_1.element_size())))
    M = torch.empty(n, d, d, dtype=layer.W_1.dtype, device=layer.W_1.device)
    eye = torch.eye(d, dtype=M.dtype, device=M.device)
    for start in range(0, n, rows_per_step):
        rows = slice(start, min(n, start + rows_per_step))
        inner = torch.matmul(layer.W_1[None] * layer.slope[rows, None, :], layer.W_2) + eye  # (r, d, d)
        # left factor J_LN1 = P_1 diag(s_1): scale the rows, then project the columns
        inner = inner * layer.scale_1[rows, :, None]
        xhat = layer.xhat_1[rows]
        inner = inner - inner.mean(-2, keepdim=True) - xhat[:, :, None] * ((xhat[:, None, :] @ inner) / d)
        M[rows] = _ln_tangent(inner, layer.xhat_2[rows, None, :], layer.scale_2[rows, None, :])
    return M


def _ffn_block_tangent(layer: _Layer, dR: torch.Tensor) -> torch.Tensor:
    """Tangent of LayerNorm -> FFN -> residual -> LayerNorm for dR: (B, n, d) -> (B, n, d)."""
    if layer.M is not None:  # one d x d product per token, batched over tokens
        return torch.bmm(dR.transpose(0, 1), layer.M).transpose(0, 1).contiguous()
    dY = _ln_tangent(dR, layer.xhat_1, layer.scale_1)
    dZ = torch.matmul(torch.matmul(dY, layer.W_1).mul_(layer.slope), layer.W_2).add_(dY)
    return _ln_tangent(dZ, layer.xhat_2, layer.scale_2)


def _attention_tangent(layer: _Layer, dE: torch.Tensor, heads: int) -> torch.Tensor:
    """Tangent of the attention block up to the residual sum, dE: (B, n, d) -> dR: (B, n, d).

    The batch folds into the columns of ``W^T dE^T`` (one (3d, d) x (d, B n) product)
    and into the rows of the per-head products, which read transposed operands in
    place. With P = A * dS, the softmax tangent is dA = P - A * (P 1), and since
    A V = O (the primal head output) dA V = P V - (P 1) O.
    """
    B, n, d = dE.shape
    h = heads
    d_v = d // h
    dqkv = torch.mm(layer.W_qkv_T, dE.view(B * n, d).t()).view(3, h, d_v, B * n)  # [_, h, e, (b, i)]
    dq, dk, dv = dqkv[0], dqkv[1], dqkv[2]
    dS = torch.bmm(dq.transpose(1, 2), layer.K_T).view(h, B, n, n)  # [h, b, i, m] = s dq_bi . k_m
    dS.add_(torch.bmm(dk.transpose(1, 2), layer.Q_T).view(h, B, n, n).transpose(-1, -2))  # + s q_i . dk_bm
    P = dS.mul_(layer.A[:, None])
    row = P.sum(-1)  # (h, B, n)
    dO = torch.bmm(layer.V_T, P.view(h, B * n, n).transpose(1, 2)).view(h, d_v, B, n)  # [h, e, b, i]
    dO.add_(torch.bmm(dv.view(h, d_v * B, n), layer.A_T).view(h, d_v, B, n))  # sum_m A_im dv_bm
    dO.addcmul_(row[:, None], layer.O_T[:, :, None, :], value=-1.0)
    return torch.mm(dO.view(d, B * n).t(), layer.W_o).view(B, n, d).add_(dE)


def _first_attention_tangent(layer: _Layer, r: torch.Tensor, token: torch.Tensor, n: int, heads: int) -> torch.Tensor:
    """As ``_attention_tangent`` for an input tangent nonzero on one row only.

    r: (B, d) the tangent of row ``token[b]``; returns dR: (B, n, d). The Q, K, V
    tangents are one row each, the score tangent one row plus one column, the
    value path an outer product.
    """
    B, d = r.shape
    h = heads
    d_v = d // h
    batch = torch.arange(B, device=r.device)
    dqkv = (r @ layer.W_qkv_T.t()).view(B, 3, h, d_v)
    dq, dk, dv = dqkv[:, 0], dqkv[:, 1], dqkv[:, 2]  # (B, h, d_v)
    dS = r.new_zeros(h, B, n, n)  # [h, b, i, m]
    dS[:, batch, token, :] = torch.einsum("bhe,hem->hbm", dq, layer.K_T)  # row j: s dq_j K^T
    dS[:, batch, :, token] += torch.einsum("hei,bhe->bhi", layer.Q_T, dk)  # column j (indexed dims go first)
    P = dS.mul_(layer.A[:, None])
    row = P.sum(-1)  # (h, B, n)
    dO = torch.bmm(layer.V_T, P.view(h, B * n, n).transpose(1, 2)).view(h, d_v, B, n)  # [h, e, b, i]
    dO.add_(dv.permute(1, 2, 0)[..., None] * layer.A_T[:, token][:, None])  # A[:, :, j] dv_j
    dO.addcmul_(row[:, None], layer.O_T[:, :, None, :], value=-1.0)
    dR = torch.mm(dO.view(d, B * n).t(), layer.W_o).view(B, n, d)
    dR[batch, token] += r
    return dR


def push_tangents(lin: LinearisedBert, token: torch.Tensor, directions: torch.Tensor, depth: int | None = None):
    """One batched Jacobian-vector product through the linearised network, for tangents
    that are nonzero on one input token each.

    Args:
        lin: the linearised model.
        token: (B,) the input token j of each tangent.
        directions: (B, d) the tangent dx_j in the space of the raw embeddings.
        depth: the last layer to reach (default: all).

    Yields:
        The tangent of each layer's output, ``dx @ J^l``: (B, n, d), for l = 1..depth.
    """
    depth = lin.depth if depth is None else depth
    if directions.dim() != 2 or directions.shape[1] != lin.d or token.shape != directions.shape[:1]:
        raise ValueError(
            f"directions must be (B, {lin.d}) with token (B,); got {tuple(directions.shape)}, {tuple(token.shape)}."
        )
    r = _ln_tangent(directions.to(lin.xhat_0), lin.xhat_0[token], lin.scale_0[token])  # row j of the LN tangent
    first = lin.layers[0]
    dE = _ffn_block_tangent(first, _first_attention_tangent(first, r, token, lin.n, lin.heads))
    yield dE
    for layer in lin.layers[1:depth]:
        dE = _ffn_block_tangent(layer, _attention_tangent(layer, dE, lin.heads))
        yield dE


def hidden_state_tangents(lin: LinearisedBert, tangents: torch.Tensor) -> torch.Tensor:
    """Jacobian-vector products of every layer for dense input tangents.

    tangents: (B, n, d) directions in the space of x -> (L, B, n, d), the
    tangents of each layer's output (``dx @ J``). Unoptimised reference path.
    """
    if tangents.dim() != 3 or tangents.shape[1:] != (lin.n, lin.d):
        raise ValueError(f"tangents must be (B, {lin.n}, {lin.d}); got {tuple(tangents.shape)}.")
    dE = _ln_tangent(tangents.to(lin.xhat_0), lin.xhat_0, lin.scale_0)
    out = []
    for layer in lin.layers:
        dE = _ffn_block_tangent(layer, _attention_tangent(layer, dE, lin.heads))
        out.append(dE)
    return torch.stack(out)


def prepare_ffn_jacobians(
    lin: LinearisedBert,
    tangents: int,
    depth: int | None = None,
    memory_mb: float = DEFAULT_MEMORY_MB,
    explicit: bool | None = None,
) -> int:
    """Form (or drop) the per-token Jacobians M_i of the position-wise block of each layer.

    Forming them costs 2 n f d^2 per layer; each tangent then saves 4 n f d - 2 n d^2,
    so they pay off beyond ~4d/7 tangents in all. ``explicit`` forces (True) or
    forbids (False) them; they are kept for as many layers as fit in half of
    ``memory_mb``. Returns the number of layers that use them.
    """
    n, d = lin.n, lin.d
    depth = lin.depth if depth is None else depth
    f = lin.layers[0].W_1.shape[1]
    if explicit is None:
        explicit = tangents * (4 * f * d - 2 * d * d) > 2 * f * d * d
    budget_floats = memory_mb / 2 * 2**20 / lin.xhat_0.element_size()
    used = 0
    for index, layer in enumerate(lin.layers):
        wanted = explicit and index < depth and (index + 1) * n * d * d <= budget_floats
        if wanted and layer.M is None:
            layer.M = _build_ffn_jacobians(layer)
        elif not wanted:
            layer.M = None
        used += layer.M is not None
    return used


def default_chunk_size(lin: LinearisedBert, memory_mb: float = DEFAULT_MEMORY_MB) -> int:
    """Tangents per chunk so that one chunk needs about a quarter of ``memory_mb``."""
    n, d, h = lin.n, lin.d, lin.heads
    f = lin.layers[0].W_1.shape[1]
    # score tangent and its transposed term, ~10 (n, d) tangents alive at once, the FFN's (n, f) if pushed
    floats_per_tangent = 2 * h * n * n + n * (10 * d + (0 if lin.layers[0].M is not None else 2 * f))
    bytes_per_tangent = floats_per_tangent * lin.xhat_0.element_size()
    return max(1, int(memory_mb / 4 * 2**20 // bytes_per_tangent))


def block_norms(
    lin: LinearisedBert,
    samples: int | None = None,
    depth: int | None = None,
    seed: int = 0,
    chunk_size: int | None = None,
    memory_mb: float = DEFAULT_MEMORY_MB,
    explicit_ffn: bool | None = None,
    progress: bool = True,
) -> torch.Tensor:
    """||J^l_ij||_F for layers 1..depth, every hidden token i and input token j: (depth, n, n).

    Args:
        lin: the linearised model (``linearise``).
        samples: ``None`` for the exact norms (d basis tangents per input token);
            k for the Hutchinson estimate with k random orthonormal tangents per
            input token (``orthonormal_samples``; exact again at k = d).
        depth: the last layer needed (default: all); deeper layers are not pushed.
        seed: seed of the samples.
        chunk_size: tangents per batched push; default from ``memory_mb``.
        memory_mb: rough bound on the working memory: a quarter for one chunk of
            tangents, half for the cached per-token FFN Jacobians (layers beyond
            that push their tangents through the FFN instead).
        explicit_ffn: force (True) or forbid (False) the per-token FFN Jacobians;
            default: use them when they save work.
        progress: show a tqdm progress bar over chunks.
    """
    n, d = lin.n, lin.d
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1; got {chunk_size}.")
    if not memory_mb > 0:
        raise ValueError(f"memory_mb must be positive; got {memory_mb}.")
    depth = lin.depth if depth is None else depth
    if not 1 <= depth <= lin.depth:
        raise ValueError(f"depth must be between 1 and {lin.depth}; got {depth}.")
    k = d if samples is None else samples
    if samples is not None and not 1 <= samples <= d:
        raise ValueError(f"samples must be between 1 and d = {d}; got {samples}.")
    total = n * k
    device, dtype = lin.xhat_0.device, lin.xhat_0.dtype

    prepare_ffn_jacobians(lin, total, depth=depth, memory_mb=memory_mb, explicit=explicit_ffn)

    if samples is None:
        directions = None
    else:
        directions = orthonormal_samples(n, d, k, seed=seed, dtype=dtype).to(device)  # (n, k, d)
    B = chunk_size or default_chunk_size(lin, memory_mb)
    squares = torch.zeros(depth, n, n, dtype=torch.float64 if dtype == torch.float64 else torch.float32, device=device)
    iterator = range(0, total, B)
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(iterator, total=math.ceil(total / B), desc="Jacobian blocks", unit="chunk")
    for start in iterator:
        index = torch.arange(start, min(total, start + B), device=device)
        token, direction = index // k, index % k
        if directions is None:
            u = torch.zeros(len(index), d, dtype=dtype, device=device)
            u[torch.arange(len(index), device=device), direction] = 1.0
        else:
            u = directions[token, direction]
        for layer, dE in enumerate(push_tangents(lin, token, u, depth)):
            # squares[layer, j, i] += sum over this chunk's directions of token j of ||dE_i||^2
            squares[layer].index_add_(0, token, dE.pow(2).sum(-1).to(squares.dtype))
    if samples is not None:
        squares *= d / k
    return squares.clamp_min_(0).sqrt_().transpose(1, 2).contiguous()
