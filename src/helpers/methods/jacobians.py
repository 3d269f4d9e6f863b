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
  bounded by ``memory_mb`` whatever the length of the input. On a CPU a chunk
  also spans at most ``CPU_ROWS_PER_CHUNK`` rows (B n): products with more rows
  fall out of the cores' caches and ran about a quarter slower
  (``benchmarks/bench_attribution.py``).

The primal pass and its caches are ``helpers.methods.linearised``; it checks itself
against the model's hidden states when given them.
"""

from __future__ import annotations

import math

import torch

from ..model.numbering import layer_index
from ..model.progress import progress_bar
from .linalg import orthonormal_samples
from .linearised import LinearisedBert, LinearisedBlock

__all__ = [
    "block_norms",
    "hidden_state_tangents",
    "prepare_ffn_jacobians",
    "push_tangents",
    "default_chunk_size",
    "DirectionChunks",
    "direction_chunks",
    "layer_tangents",
    "check_norm_options",
]

DEFAULT_MEMORY_MB = 1024  # a quarter for one chunk of tangents, half for the per-token FFN Jacobians
CPU_ROWS_PER_CHUNK = 4096  # B n of one chunk on a CPU: larger products fall out of the cores' caches


def _ln_tangent(t: torch.Tensor, xhat: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Tangent of a LayerNorm: ``t @ J_LN`` for t: (..., d) with xhat, scale broadcastable to it.

    J_LN = (I - 1 1^T / d - xhat xhat^T / d) diag(gamma / sigma), symmetric projector first.
    """
    d = t.shape[-1]
    centred = t - t.mean(-1, keepdim=True) - (t * xhat).sum(-1, keepdim=True) * (xhat / d)
    return centred * scale


def _embedding_tangent(lin: LinearisedBert, t: torch.Tensor, xhat: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The tangent of E_0 for a tangent ``t: (..., d_x)`` of x: the embedding LayerNorm's, then W_p's where
    there is a projection (ELECTRA, ALBERT) -> (..., d)."""
    t = _ln_tangent(t, xhat, scale)
    return t if lin.projection is None else t @ lin.projection


def _build_ffn_jacobians(layer: LinearisedBlock, step_mb: float = 64) -> torch.Tensor:
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


def _ffn_block_tangent(layer: LinearisedBlock, dR: torch.Tensor) -> torch.Tensor:
    """Tangent of LayerNorm -> FFN -> residual -> LayerNorm for dR: (B, n, d) -> (B, n, d)."""
    if layer.M is not None:  # one d x d product per token, batched over tokens
        return torch.bmm(dR.transpose(0, 1), layer.M).transpose(0, 1).contiguous()
    dY = _ln_tangent(dR, layer.xhat_1, layer.scale_1)
    dZ = torch.matmul(torch.matmul(dY, layer.W_1).mul_(layer.slope), layer.W_2).add_(dY)
    return _ln_tangent(dZ, layer.xhat_2, layer.scale_2)


def _attention_tangent(layer: LinearisedBlock, dE: torch.Tensor, heads: int) -> torch.Tensor:
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


def _first_attention_tangent(
    layer: LinearisedBlock, r: torch.Tensor, token: torch.Tensor, n: int, heads: int
) -> torch.Tensor:
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
        directions: (B, d_x) the tangent dx_j in the space of the raw embeddings.
        depth: the last layer to reach (default: all).

    Yields:
        The tangent of each layer's output, ``dx @ J^l``: (B, n, d), for l = 1..depth.
    """
    depth = lin.depth if depth is None else depth
    if directions.dim() != 2 or directions.shape[1] != lin.d_x or token.shape != directions.shape[:1]:
        raise ValueError(
            f"directions must be (B, {lin.d_x}) with token (B,); got {tuple(directions.shape)}, {tuple(token.shape)}."
        )
    r = _embedding_tangent(lin, directions.to(lin.xhat_0), lin.xhat_0[token], lin.scale_0[token])  # row j of dE_0
    first = lin.blocks[0]
    dE = _ffn_block_tangent(first, _first_attention_tangent(first, r, token, lin.n, lin.heads))
    yield dE
    for layer in lin.blocks[1:depth]:
        dE = _ffn_block_tangent(layer, _attention_tangent(layer, dE, lin.heads))
        yield dE


def hidden_state_tangents(lin: LinearisedBert, tangents: torch.Tensor) -> torch.Tensor:
    """Jacobian-vector products of every layer for dense input tangents.

    tangents: (B, n, d_x) directions in the space of x -> (L, B, n, d), the
    tangents of each layer's output (``dx @ J``). Unoptimised reference path.
    """
    if tangents.dim() != 3 or tangents.shape[1:] != (lin.n, lin.d_x):
        raise ValueError(f"tangents must be (B, {lin.n}, {lin.d_x}); got {tuple(tangents.shape)}.")
    dE = _embedding_tangent(lin, tangents.to(lin.xhat_0), lin.xhat_0, lin.scale_0)
    out = []
    for layer in lin.blocks:
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
    f = lin.blocks[0].W_1.shape[1]
    if explicit is None:
        explicit = tangents * (4 * f * d - 2 * d * d) > 2 * f * d * d
    budget_floats = memory_mb / 2 * 2**20 / lin.xhat_0.element_size()
    used = 0
    for index, layer in enumerate(lin.blocks):
        wanted = explicit and index < depth and (index + 1) * n * d * d <= budget_floats
        if wanted and layer.M is None:
            layer.M = _build_ffn_jacobians(layer)
        elif not wanted:
            layer.M = None
        used += layer.M is not None
    return used


def default_chunk_size(lin: LinearisedBert, memory_mb: float = DEFAULT_MEMORY_MB) -> int:
    """Tangents per chunk so that one chunk needs about a quarter of ``memory_mb`` and, on a CPU,
    spans at most ``CPU_ROWS_PER_CHUNK`` rows (B n)."""
    n, d, h = lin.n, lin.d, lin.heads
    f = lin.blocks[0].W_1.shape[1]
    # score tangent and its transposed term, ~10 (n, d) tangents alive at once, the FFN's (n, f) if pushed
    floats_per_tangent = 2 * h * n * n + n * (10 * d + (0 if lin.blocks[0].M is not None else 2 * f))
    bytes_per_tangent = floats_per_tangent * lin.xhat_0.element_size()
    size = int(memory_mb / 4 * 2**20 // bytes_per_tangent)
    if lin.xhat_0.device.type == "cpu":
        size = min(size, CPU_ROWS_PER_CHUNK // n)
    return max(1, size)


class DirectionChunks:
    """The tangent directions of a Jacobian-norm sum, in chunks: iterate for ``(token, u)``.

    ``token: (B,)`` the input token of each tangent and ``u: (B, d)`` its direction;
    over all chunks, every token gets the d basis vectors (``samples=None``, exact) or
    k random orthonormal directions (``orthonormal_samples``, the Hutchinson estimate:
    multiply the summed squares by d / k). ``len()`` is the number of chunks.
    """

    def __init__(self, n: int, d: int, samples: int | None, seed: int, chunk_size: int, dtype, device) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1; got {chunk_size}.")
        self.n, self.d, self.chunk_size, self.dtype, self.device = n, d, chunk_size, dtype, device
        self.k = d if samples is None else samples
        self.samples = (
            None if samples is None else orthonormal_samples(n, d, samples, seed=seed, dtype=dtype).to(device)
        )  # (n, k, d)

    def __len__(self) -> int:
        return math.ceil(self.n * self.k / self.chunk_size)

    def __iter__(self):
        total = self.n * self.k
        for start in range(0, total, self.chunk_size):
            index = torch.arange(start, min(total, start + self.chunk_size), device=self.device)
            token, direction = index // self.k, index % self.k
            if self.samples is None:
                u = torch.zeros(len(index), self.d, dtype=self.dtype, device=self.device)
                u[torch.arange(len(index), device=self.device), direction] = 1.0
            else:
                u = self.samples[token, direction]
            yield token, u


def direction_chunks(
    n: int, d: int, samples: int | None, seed: int, chunk_size: int, dtype=torch.float32, device=None
) -> DirectionChunks:
    """The one chunk loop of the Jacobian sums (``block_norms``, layer-local HTA): see ``DirectionChunks``."""
    return DirectionChunks(n, d, samples, seed, chunk_size, dtype, device)


def layer_tangents(lin: LinearisedBert, layer: int, token: torch.Tensor, directions: torch.Tensor) -> torch.Tensor:
    """Tangents of layer ``layer``'s output (1..L) for tangents of its own input E^(l-1).

    token: (B,), directions: (B, d), the tangent of row ``token[b]`` of E^(l-1) -> (B, n, d),
    ``dE^(l-1) @ d E^l / d E^(l-1)``: the blocks of the layer-local Jacobian.
    """
    block = lin.blocks[layer_index(layer, lin.depth)]
    return _ffn_block_tangent(
        block, _first_attention_tangent(block, directions.to(lin.xhat_0), token, lin.n, lin.heads)
    )


def check_norm_options(
    layers: int, d: int, samples: int | None, depth: int | None, chunk_size: int | None, memory_mb: float
) -> int:
    """Check the options of a Jacobian-norm sum (``block_norms``, ``decoder_block_norms``); returns the depth."""
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1; got {chunk_size}.")
    if not memory_mb > 0:
        raise ValueError(f"memory_mb must be positive; got {memory_mb}.")
    depth = layers if depth is None else depth
    if not 1 <= depth <= layers:
        raise ValueError(f"depth must be between 1 and {layers}; got {depth}.")
    if samples is not None and not 1 <= samples <= d:
        raise ValueError(f"samples must be between 1 and d = {d}; got {samples}.")
    return depth


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
        progress: show a progress bar over chunks (``helpers.model.progress``).
    """
    n, d = lin.n, lin.d_x  # d: the input width, over which the squares are summed
    depth = check_norm_options(lin.depth, d, samples, depth, chunk_size, memory_mb)
    k = d if samples is None else samples
    device, dtype = lin.xhat_0.device, lin.xhat_0.dtype

    prepare_ffn_jacobians(lin, n * k, depth=depth, memory_mb=memory_mb, explicit=explicit_ffn)

    squares = torch.zeros(depth, n, n, dtype=torch.float64 if dtype == torch.float64 else torch.float32, device=device)
    chunks = direction_chunks(n, d, samples, seed, chunk_size or default_chunk_size(lin, memory_mb), dtype, device)
    chunks = progress_bar(chunks, "Jacobian blocks", progress, total=len(chunks), unit="chunk")
    for token, u in chunks:
        for layer, dE in enumerate(push_tangents(lin, token, u, depth)):
            # squares[layer, j, i] += sum over this chunk's directions of token j of ||dE_i||^2
            squares[layer].index_add_(0, token, dE.pow(2).sum(-1).to(squares.dtype))
    if samples is not None:
        squares *= d / k
    return squares.clamp_min_(0).sqrt_().transpose(1, 2).contiguous()
