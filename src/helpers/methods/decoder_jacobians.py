"""Frobenius norms of the Jacobian blocks d h^l_i / d x_j of a pre-norm decoder (Llama, Qwen2, GPT-2), in forward mode.

The decoder counterpart of ``helpers.methods.jacobians`` (read that module first):
x_j is the first block's input at token j (its embedding; GPT-2: plus its position vector), h^l_i block l's output at position i (before the
final norm). Tangents are row vectors, ``dy = dx @ J``, pushed in batched chunks
through the linearisation of ``helpers.methods.linearised_decoder``.

What changes with causality: a tangent on input token j never reaches a
position before j, so a chunk whose earliest token is s carries rows s..n-1
only (about half the work of a full push over a whole sentence) and the
blocks above the diagonal are zero by construction, not by cancellation.
What stays: the per-token Jacobian M_i of the position-wise half of a block
(norm -> FFN -> residual) is formed once when enough tangents pass
through it, so that each tangent costs one d x d product per row there
instead of three d x f ones (two for GPT-2's ungated FFN).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..model.progress import progress_bar
from .jacobians import CPU_ROWS_PER_CHUNK, DEFAULT_MEMORY_MB, check_norm_options, direction_chunks
from .linearised_decoder import LinearisedDecoder, LinearisedDecoderBlock

__all__ = [
    "push_decoder_tangents",
    "prepare_decoder_ffn_jacobians",
    "default_decoder_chunk_size",
    "decoder_block_norms",
    "decoder_tangent_macs",
    "decoder_local_norms",
]


def _rms_tangent(t: torch.Tensor, xhat: torch.Tensor, centred: bool = False) -> torch.Tensor:
    """The projector of an RMSNorm's tangent, ``t (I - xhat xhat^T / d)``, for t: (r, B, d), xhat: (r, d).

    A LayerNorm's (``centred``, GPT-2) subtracts the mean first: ``t (I - 1 1^T / d - xhat xhat^T / d)``
    (xhat is centred, so the two projections commute). The rest of the tangent, diag(gamma / rms),
    is folded into the weights (gamma) and the per-row factors (1 / rms) of ``TangentFactors``.
    """
    if centred:
        t = t - t.mean(-1, keepdim=True)
    dots = torch.bmm(t, xhat[:, :, None]).div_(-t.shape[-1])  # (r, B, 1)
    return torch.baddbmm(t, dots, xhat[:, None, :])


def _build_ffn_jacobians(block: LinearisedDecoderBlock, step_mb: float = 64) -> torch.Tensor:
    """M_i = I + J_RMS2,i (W^gate diag(slope_i) + W^up diag(act_i)) W^down for every token: (n, d, d).

    GPT-2's ungated FFN: M_i = I + J_LN2,i W^fc diag(slope_i) W^proj.
    """
    n, d = block.xhat_2.shape
    W = block.W_gate_up  # (d, 2f), or (d, f) ungated
    gated = block.gate_value is not None
    down = torch.cat([block.W_down, block.W_down]) if gated else block.W_down  # (2f, d) or (f, d)
    rows_per_step = max(1, int(step_mb * 2**20 // (W.numel() * W.element_size())))
    M = torch.empty(n, d, d, dtype=W.dtype, device=W.device)
    weights = torch.cat([block.gate_slope, block.gate_value], dim=-1) if gated else block.gate_slope  # (n, 2f)
    eye = torch.eye(d, dtype=W.dtype, device=W.device)
    for start in range(0, n, rows_per_step):
        rows = slice(start, min(n, start + rows_per_step))
        inner = torch.matmul(W[None] * weights[rows, None, :], down)  # (r, d, d)
        inner = inner * (block.gamma_2 * block.inv_rms_2[rows])[:, :, None]  # diag(gamma / rms) on the left
        xhat = block.xhat_2[rows]
        inner = inner - xhat[:, :, None] * ((xhat[:, None, :] @ inner) / d)  # then the projector
        if block.centred:  # and LayerNorm's mean subtraction
            inner = inner - inner.mean(1, keepdim=True)
        M[rows] = inner + eye
    return M


class TangentFactors(NamedTuple):
    """Per-block constants of the tangent pass, for rows start..n-1 (``tangent_factors``)."""

    W_qkv: torch.Tensor  # (d, (h + 2 h_kv) d_v)  diag(gamma_1) W^QKV
    W_gate_up: torch.Tensor  # (d, 2 f)  diag(gamma_2) [W^gate W^up]; (d, f) diag(gamma_2) W^fc for GPT-2
    cos_q: torch.Tensor  # (r, 1, 1, d_v)  cos / rms_1 times the score scaling
    sin_q: torch.Tensor  # (r, 1, 1, d_v)  sin / rms_1 times the scaling, first half negated
    cos_k: torch.Tensor  # (r, 1, 1, d_v)
    sin_k: torch.Tensor  # (r, 1, 1, d_v)
    inv_rms_1: torch.Tensor  # (r, 1, 1)
    inv_rms_2: torch.Tensor  # (r, 1, 1)


def tangent_factors(block: LinearisedDecoderBlock, start: int) -> TangentFactors:
    """Fold each RMSNorm's gamma into the weights after it, and 1 / rms (and RoPE) into per-row factors."""
    inv_rms_1, inv_rms_2 = block.inv_rms_1, block.inv_rms_2  # (n, 1)
    half = block.d_v // 2
    sin_signed = torch.cat([-block.sin[:, :half], block.sin[:, half:]], dim=-1)
    rows = slice(start, None)

    def per_row(t):
        return t[rows, None, None, :]

    return TangentFactors(
        W_qkv=block.gamma_1[:, None] * block.W_qkv,
        W_gate_up=block.gamma_2[:, None] * block.W_gate_up,
        cos_q=per_row(block.cos * inv_rms_1 * block.scaling),
        sin_q=per_row(sin_signed * inv_rms_1 * block.scaling),
        cos_k=per_row(block.cos * inv_rms_1),
        sin_k=per_row(sin_signed * inv_rms_1),
        inv_rms_1=inv_rms_1[rows, :, None],
        inv_rms_2=inv_rms_2[rows, :, None],
    )


def _rotated(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """RoPE of x (r, B, heads, d_v) into ``out`` (any layout of the same shape): x cos + rotate_half(x) sin."""
    half = x.shape[-1] // 2
    torch.mul(x, cos, out=out)
    out[..., :half].addcmul_(x[..., half:], sin_signed[..., :half])
    out[..., half:].addcmul_(x[..., :half], sin_signed[..., half:])
    return out


def _attention_tangent(block: LinearisedDecoderBlock, dh: torch.Tensor, start: int) -> torch.Tensor:
    """Tangent of h -> h + attention(RMSNorm(h)) for dh: (r, B, d), the tangents of rows start..n-1.

    Rows before ``start`` carry no tangent (no earlier input token was perturbed), so their keys and
    values have none either: the score tangent of query i is dq_i . k_m over every key m <= i plus
    q_i . dk_m over keys m >= start. Head tensors are laid out (h_kv, g, r, B, .): the g query heads
    of one key/value head and all tangents are the rows of one product with that head's K or V.
    """
    r, B, d = dh.shape
    h, hk, d_v = block.heads, block.kv_heads, block.d_v
    g, n = h // hk, block.A.shape[-1]
    factors = block.factors if block.factors_start == start else None
    if factors is None:
        factors = block.factors = tangent_factors(block, start)
        block.factors_start = start
    dqkv = torch.mm(_rms_tangent(dh, block.xhat_1[start:], block.centred).view(r * B, d), factors.W_qkv)
    dqkv = dqkv.view(r, B, h + 2 * hk, d_v)
    dq = _rotated(
        dqkv[:, :, :h].view(r, B, hk, g, d_v),
        factors.cos_q[..., None, :],
        factors.sin_q[..., None, :],
        dh.new_empty(hk, g, r, B, d_v).permute(2, 3, 0, 1, 4),
    )  # a (r, B, hk, g, d_v) view of (hk, g, r, B, d_v) memory
    dk = _rotated(
        dqkv[:, :, h : h + hk], factors.cos_k, factors.sin_k, dh.new_empty(hk, d_v, r, B).permute(2, 3, 0, 1)
    )  # a (r, B, hk, d_v) view of (hk, d_v, r, B) memory
    dv = dqkv[:, :, h + hk :].mul(factors.inv_rms_1[..., None]).permute(2, 0, 1, 3).contiguous()  # (hk, r, B, d_v)
    A = block.A[:, start:].view(hk, g, r, 1, n)
    dq = dq.permute(2, 3, 0, 1, 4).reshape(hk, g * r * B, d_v)  # no copy: the memory is already in this order
    dS = torch.bmm(dq, block.K_T).view(hk, g, r, B, n)  # dq_i . k_m
    Q = block.Q[:, start:].reshape(hk, g * r, d_v)
    dk = dk.permute(2, 3, 0, 1).reshape(hk, d_v, r * B)
    dS[..., start:] += torch.bmm(Q, dk).view(hk, g, r, r, B).transpose(-1, -2)  # q_i . dk_m
    P = dS.mul_(A)
    row = P.sum(-1, keepdim=True)  # (hk, g, r, B, 1)
    dO = torch.bmm(P.view(hk, g * r * B, n), block.V).view(hk, g, r, B, d_v)
    dO += torch.bmm(block.A[:, start:, start:].reshape(hk, g * r, r), dv.view(hk, r, B * d_v)).view(
        hk, g, r, B, d_v
    )  # sum over m >= start of A_im dv_m
    dO -= row * block.heads_out[:, start:].view(hk, g, r, 1, d_v)
    heads_out = dO.permute(2, 3, 0, 1, 4).reshape(r * B, h * d_v)
    return torch.addmm(dh.view(r * B, d), heads_out, block.W_o).view(r, B, d)


def _ffn_tangent(block: LinearisedDecoderBlock, dh: torch.Tensor, start: int) -> torch.Tensor:
    """Tangent of h -> h + SwiGLU(RMSNorm(h)) (GPT-2: h + MLP(LayerNorm(h))) for dh: (r, B, d), rows start..n-1."""
    if block.M is not None:  # one d x d product per token, batched over tokens
        return torch.bmm(dh, block.M[start:])
    r, B, d = dh.shape
    factors = block.factors
    dgu = torch.mm(_rms_tangent(dh, block.xhat_2[start:], block.centred).view(r * B, d), factors.W_gate_up)
    dgu = dgu.view(r, B, factors.W_gate_up.shape[1]).mul_(factors.inv_rms_2)
    dm = dgu[..., : block.f].mul_(block.gate_slope[start:, None])
    if block.gate_value is not None:
        dm.addcmul_(dgu[..., block.f :], block.gate_value[start:, None])
    return torch.addmm(dh.view(r * B, d), dm.view(r * B, block.f), block.W_down).view(r, B, d)


def push_decoder_tangents(lin: LinearisedDecoder, token: torch.Tensor, directions: torch.Tensor, depth=None):
    """One batched Jacobian-vector product for tangents nonzero on one input token each.

    Args:
        lin: the linearised decoder.
        token: (B,) the input token j of each tangent.
        directions: (B, d) the tangent dx_j.
        depth: the last block to reach (default: all).

    Yields:
        ``(start, dh)`` per block l = 1..depth: dh (n - start, B, d) holds the tangents of positions
        start..n-1 of block l's output (rows first), start = min(token); earlier positions' are zero.
    """
    depth = lin.depth if depth is None else depth
    if directions.dim() != 2 or directions.shape[1] != lin.d or token.shape != directions.shape[:1]:
        raise ValueError(
            f"directions must be (B, {lin.d}) with token (B,); got {tuple(directions.shape)}, {tuple(token.shape)}."
        )
    start = int(token.min())
    B = len(token)
    dh = directions.new_zeros(lin.n - start, B, lin.d, dtype=lin.dtype)
    dh[token - start, torch.arange(B, device=dh.device)] = directions.to(lin.dtype)
    for block in lin.blocks[:depth]:
        dh = _ffn_tangent(block, _attention_tangent(block, dh, start), start)
        yield start, dh


def prepare_decoder_ffn_jacobians(
    lin: LinearisedDecoder,
    tangents: int,
    depth: int | None = None,
    memory_mb: float = DEFAULT_MEMORY_MB,
    explicit: bool | None = None,
) -> int:
    """Form (or drop) the per-token FFN Jacobians M_i of each block; returns how many blocks use them.

    Forming them costs n w d^2 multiply-adds per block (w = 2f for a gated FFN, f for GPT-2's);
    each tangent row then saves m f d - d^2 (m = 3 maps, or 2). With ``tangents`` pushed over
    about n / 2 rows each they pay off when tangents (m f d - d^2) n / 2 > n w d^2. ``explicit``
    forces (True) or forbids (False) them; they are kept for as many blocks as fit in half of ``memory_mb``.
    """
    n, d = lin.n, lin.d
    depth = lin.depth if depth is None else depth
    block = lin.blocks[0]
    f, w = block.f, block.W_gate_up.shape[1]
    maps = 3 if block.gate_value is not None else 2
    if explicit is None:
        explicit = tangents * (maps * f * d - d * d) / 2 > w * d * d
    budget_floats = memory_mb / 2 * 2**20 / lin.hidden_states.element_size()
    used = 0
    for index, block in enumerate(lin.blocks):
        wanted = explicit and index < depth and (index + 1) * n * d * d <= budget_floats
        if wanted and block.M is None:
            block.M = _build_ffn_jacobians(block)
        elif not wanted:
            block.M = None
        used += block.M is not None
    return used


def default_decoder_chunk_size(
    lin: LinearisedDecoder, memory_mb: float = DEFAULT_MEMORY_MB, cpu_row_cap: bool = True
) -> int:
    """Tangents per chunk so that one chunk needs about a quarter of ``memory_mb`` (rows of a full push)
    and, on a CPU with ``cpu_row_cap``, spans at most ``CPU_ROWS_PER_CHUNK`` rows (B n), as the encoder's."""
    block = lin.blocks[0]
    n, d, h = lin.n, lin.d, block.heads
    width = (h + 2 * block.kv_heads) * block.d_v
    floats_per_tangent = 2 * h * n * n + n * (8 * d + 2 * width + (0 if block.M is not None else 4 * block.f))
    bytes_per_tangent = floats_per_tangent * lin.hidden_states.element_size()
    size = int(memory_mb / 4 * 2**20 // bytes_per_tangent)
    if cpu_row_cap and lin.hidden_states.device.type == "cpu":
        size = min(size, CPU_ROWS_PER_CHUNK // n)
    return max(1, size)


def decoder_tangent_macs(block: LinearisedDecoderBlock, tangents: int, rows: int) -> int:
    """Multiply-adds of the matrix products of one block's tangent pass: ``tangents`` tangents over ``rows`` rows."""
    n, d, d_v, h = block.A.shape[-1], block.xhat_1.shape[1], block.d_v, block.heads
    width = (h + 2 * block.kv_heads) * d_v
    attention = rows * (d * width + h * d_v * d) + h * d_v * (2 * rows * n + 2 * rows * rows)
    maps = 3 if block.gate_value is not None else 2  # gate, up, down; or fc, proj
    ffn = rows * d * d if block.M is not None else rows * maps * block.f * d
    return tangents * (attention + ffn)


def decoder_block_norms(
    lin: LinearisedDecoder,
    samples: int | None = None,
    depth: int | None = None,
    seed: int = 0,
    chunk_size: int | None = None,
    memory_mb: float = DEFAULT_MEMORY_MB,
    explicit_ffn: bool | None = None,
    progress: bool = True,
    macs: list[int] | None = None,
) -> torch.Tensor:
    """||d h^l_i / d x_j||_F for blocks 1..depth, every position i and input token j: (depth, n, n).

    Zero above the diagonal (j > i). Arguments as ``helpers.methods.jacobians.block_norms``;
    ``macs``, if given a list, gets the multiply-adds of the matrix products appended
    (forming the FFN Jacobians included), for benchmarks.
    """
    n, d = lin.n, lin.d
    depth = check_norm_options(lin.depth, d, samples, depth, chunk_size, memory_mb)
    k = d if samples is None else samples
    device, dtype = lin.hidden_states.device, lin.dtype
    used = prepare_decoder_ffn_jacobians(lin, n * k, depth=depth, memory_mb=memory_mb, explicit=explicit_ffn)
    if macs is not None:
        block = lin.blocks[0]
        macs.append(used * n * block.W_gate_up.shape[1] * d * d)
    squares = torch.zeros(depth, n, n, dtype=torch.float64 if dtype == torch.float64 else torch.float32, device=device)
    chunks = direction_chunks(
        n, d, samples, seed, chunk_size or default_decoder_chunk_size(lin, memory_mb), dtype, device
    )
    chunks = progress_bar(chunks, "Jacobian blocks", progress, total=len(chunks), unit="chunk")
    for token, u in chunks:
        for layer, (start, dh) in enumerate(push_decoder_tangents(lin, token, u, depth)):
            # squares[layer, j, start + i'] += sum over this chunk's directions of token j of ||dh_i'||^2
            rows = torch.linalg.vector_norm(dh, dim=-1).pow_(2)  # (n - start, B)
            squares[layer, :, start:].index_add_(0, token, rows.t().to(squares.dtype))
            if macs is not None:
                macs.append(decoder_tangent_macs(lin.blocks[layer], len(token), n - start))
    if samples is not None:
        squares *= d / k
    return squares.clamp_min_(0).sqrt_().transpose(1, 2).contiguous()


def decoder_local_norms(
    lin: LinearisedDecoder, samples: int | None = None, seed: int = 0, chunk_size: int | None = None
) -> torch.Tensor:
    """Layer-local HTA norms ||d h^l_i / d h^(l-1)_j||_F of every block: (L, n, n), zero above the diagonal.

    Each block is pushed alone, as a one-block decoder whose input is the block's own input;
    ``samples`` as in ``decoder_block_norms``.
    """
    norms = []
    for index, block in enumerate(lin.blocks):
        one = LinearisedDecoder([block], lin.hidden_states[index : index + 2], lin.family)
        norms.append(decoder_block_norms(one, samples, seed=seed, chunk_size=chunk_size, progress=False)[0])
        block.M = block.factors = block.factors_start = None  # one block's FFN Jacobians in memory at a time
    return torch.stack(norms)
