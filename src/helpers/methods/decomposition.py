"""The exact per-(i, j) decomposition of one layer that the norm-based measures read (chapter 7).

In a post-norm encoder (BERT and its family) the attention block, the residual and the first
LayerNorm split exactly into one vector per pair (notation of :mod:`helpers.methods.mixing`):

    z_ij = sum_h A^h_ij T^h_j + [i = j] E_i,         sum_j z_ij + b^O = r_i (LN1's input)
    g1(v) = (v - mean(v)) * gamma_1 / sigma_1(r_i)    (LN1 split linearly, beta_1 left over)

and the second LayerNorm likewise with the standard deviation of its real input.

A pre-norm decoder block (GPT-2, Llama, Qwen2; ``helpers.model.pre_norm``) normalises inside
each branch, so no norm sits on the residual path: z_ij and r_i are as above (T computed from
the normalised input, the residual adding the raw one), and the block's output is
r_i + FFN(norm_2(r_i)). There ``ln1`` splits r_i through the norm that reads it (norm_2, the
FFN's input; an RMSNorm is not centred and has no beta), ``ln2`` is z_ij itself (the FFN
output left over), and ALTI compares z_ij with r_i, the residual stream it adds up to (as
Ferrando et al. 2023 do for decoders). So on a decoder GlobEnc equals the residual norm.
``norm_scores`` turns one decomposition into a measure's local scores.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from ..model.internals import Internals
from ..model.numbering import layer_index
from ..model.post_norm import post_norm_layers
from ..model.pre_norm import PRE_NORM_DECODERS, pre_norm_layers
from .causal import causal_effective_attention
from .effective import effective_attention
from .linalg import cosine_distance

__all__ = [
    "NORM_MEASURES",
    "REWRITES",
    "LayerDecomposition",
    "decompose_layer",
    "norm_scores",
    "rewrite_attention",
    "value_zeroing_scores",
]

NORM_MEASURES = ("attention_norm", "norm_residual", "norm_residual_ln", "globenc", "alti")
# the same-output rewrites of A a decomposition can read in place of A (``rewrite_attention``)
REWRITES = ("effective", "null_doubled", "null_random")


@dataclass
class LayerDecomposition:
    """The exact decomposition of one layer's attention block, residual and LayerNorms.

    ``attention[i, j] = sum_h A^h_ij T^h_j`` and ``z = attention + [i = j] E_i``, both (n, n, d);
    ``ln1[i, j] = g1(z_ij)``; ``ln1_rest[i] = g1(b^O) + beta_1`` so that
    ``ln1.sum(1) + ln1_rest`` is LN1's output ``y`` (n, d); ``ln2[i, j] = g2(g1(z_ij))`` and
    ``ln2_rest[i]`` (n, d) what the second LayerNorm adds (the bias terms, the feed-forward
    output, beta_2) so that ``ln2.sum(1) + ln2_rest`` is the layer's output.
    """

    attention: torch.Tensor  # (n, n, d)
    z: torch.Tensor  # (n, n, d)
    ln1: torch.Tensor  # (n, n, d)
    ln1_rest: torch.Tensor  # (n, d)
    y: torch.Tensor  # (n, d)  LN1's output
    ln2: torch.Tensor  # (n, n, d)
    ln2_rest: torch.Tensor  # (n, d)
    output: torch.Tensor  # (n, d)  the layer's output
    residual_sum: torch.Tensor | None = None  # (n, d)  r, the residual stream ALTI splits (pre-norm)
    pre_norm: bool = False  # a decoder block: ALTI reads z and r, not ln1 and y


def _layer_norm_parts(norm: torch.nn.Module, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """gamma / sigma per row for LN input r: (n, d) -> (n, d), and beta (d,); an RMSNorm: gamma / rms, beta 0."""
    if not isinstance(norm, torch.nn.LayerNorm):
        eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6))
        rms = torch.sqrt(r.pow(2).mean(-1, keepdim=True) + eps)
        return norm.weight / rms, torch.zeros_like(norm.weight)
    sigma = torch.sqrt(r.var(-1, unbiased=False, keepdim=True) + norm.eps)
    return norm.weight / sigma, norm.bias


def _centre(v: torch.Tensor, norm: torch.nn.Module | None = None) -> torch.Tensor:
    """v less its mean over the last axis, as a LayerNorm does; unchanged for an RMSNorm ``norm``."""
    if norm is not None and not isinstance(norm, torch.nn.LayerNorm):
        return v
    return v - v.mean(-1, keepdim=True)


@torch.no_grad()
def rewrite_attention(A: torch.Tensor, V: torch.Tensor, H: torch.Tensor, rewrite: str, seed: int = 0) -> torch.Tensor:
    """A same-output rewrite of one layer's attention: (h, n, n) -> (h, n, n), with the same ``A @ T``.

    A: (h, n, n) attention; V: (h, n, d_v) values; H: (h, d_v, d) the heads' rows of W^O
    (``T = V H``). With A_null = A (I - P), P the projector onto the column space of T:
    ``"effective"``: A - A_null (chapter 4's effective attention); ``"null_doubled"``:
    A + A_null, the mirror move of the same size; ``"null_random"``: A + R, where each row of
    R is a Gaussian row (seeded) projected onto the left null space of T and scaled to the norm
    of the same row of A_null, a random move of the same size. Each adds a matrix whose rows
    lie in the left null space of T, so the head outputs, and every decomposition's sums, stay.
    """
    if rewrite not in REWRITES:
        raise ValueError(f"rewrite must be one of {REWRITES}; got {rewrite!r}.")
    split = effective_attention(A, V=V, H=H)
    if rewrite == "effective":
        return split.effective
    if rewrite == "null_doubled":
        return A + split.null
    generator = torch.Generator().manual_seed(int(seed))
    noise = torch.randn(A.shape, generator=generator, dtype=torch.float64).to(A)
    random = effective_attention(noise, V=V, H=H).null  # rows in the left null space of T
    size = split.null.norm(dim=-1, keepdim=True)
    scale = torch.where(size > 0, size / random.norm(dim=-1, keepdim=True).clamp_min(1e-30), 0.0)
    return A + random * scale


@torch.no_grad()
def decompose_layer(
    model: PreTrainedModel, internals: Internals, layer: int, effective: bool | str = False
) -> LayerDecomposition:
    """Split layer ``layer`` (1..L) into one vector per (hidden token i, input token j).

    With ``effective=True`` A is replaced by its effective part (``helpers.methods.effective``);
    the sums are unchanged because A_eff T = A T. A name of ``REWRITES`` replaces A by that
    same-output rewrite (``rewrite_attention``; the random one seeded by the layer).
    """
    index = layer_index(layer, internals.num_layers)
    if internals.family in PRE_NORM_DECODERS:
        return _decompose_pre_norm(model, internals, index, effective, layer)
    block = post_norm_layers(model, "the norm-based context-mixing measures")[index]
    E = internals.E[index]  # (n, d)
    attention, z = _attention_pieces(internals, index, effective, layer)  # (n, n, d) each
    r = internals.attention_output[index] + E  # LN1's real input
    scale_1, beta_1 = _layer_norm_parts(block.norm_1, r)
    ln1 = _centre(z) * scale_1[:, None, :]
    ln1_rest = _centre(internals.b_O[index])[None] * scale_1 + beta_1
    y = block.norm_1(r)
    feed_forward = block.ffn_out(block.activation(block.ffn_in(y)))  # before the second residual
    u = feed_forward + y  # LN2's real input
    scale_2, beta_2 = _layer_norm_parts(block.norm_2, u)
    ln2 = _centre(ln1) * scale_2[:, None, :]
    ln2_rest = _centre(ln1_rest + feed_forward) * scale_2 + beta_2
    output = block.norm_2(u)
    return LayerDecomposition(attention, z, ln1, ln1_rest, y, ln2, ln2_rest, output, r)


def _attention_pieces(internals: Internals, index: int, effective: bool | str, layer: int):
    """sum_h A^h_ij T^h_j and z_ij = that + [i = j] E_i, each (n, n, d), A rewritten if asked.

    A causal model's effective attention is split row by row, each row on the prefix it sees
    (``causal_effective_attention``); the two control rewrites are not defined row by row and refuse it.
    """
    E, A = internals.E[index], internals.A[index]
    how = "effective" if effective is True else effective
    if effective and internals.causal:
        if how != "effective":
            raise ValueError(
                f"effective={how!r} rewrites A with one null space for the whole sequence; a causal row has its "
                "own (its prefix). On a decoder pass effective=True, which splits row by row."
            )
        A = causal_effective_attention(A, V=internals.V[index], H=internals.H[index]).effective
    elif effective:
        A = rewrite_attention(A, internals.V[index], internals.H[index], how, seed=layer)
    attention = torch.einsum("hij,hjd->ijd", A, internals.T[index])
    z = attention.clone()
    diagonal = torch.arange(E.shape[0], device=z.device)
    z[diagonal, diagonal] += E
    return attention, z


def _decompose_pre_norm(
    model: PreTrainedModel, internals: Internals, index: int, effective: bool | str, layer: int
) -> LayerDecomposition:
    """``decompose_layer`` for a pre-norm decoder block (the module docstring says what each part holds)."""
    block = pre_norm_layers(model, "the norm-based context-mixing measures")[index]
    attention, z = _attention_pieces(internals, index, effective, layer)
    r = internals.attention_output[index] + internals.E[index]  # the residual stream after attention
    scale, beta = _layer_norm_parts(block.norm_2, r)
    ln1 = _centre(z, block.norm_2) * scale[:, None, :]
    ln1_rest = _centre(internals.b_O[index], block.norm_2)[None] * scale + beta
    y = block.norm_2(r)  # what the FFN reads
    feed_forward = block.mlp(y)
    output = r + feed_forward
    rest = internals.b_O[index][None] + feed_forward
    return LayerDecomposition(attention, z, ln1, ln1_rest, y, z, rest, output, r, pre_norm=True)


def norm_scores(decomposition: LayerDecomposition, measure: str) -> torch.Tensor:
    """Unnormalised local scores (n, n) of one norm-based measure."""
    if measure == "attention_norm":
        return decomposition.attention.norm(dim=-1)
    if measure == "norm_residual":
        return decomposition.z.norm(dim=-1)
    if measure == "norm_residual_ln":
        return decomposition.ln1.norm(dim=-1)
    if measure == "globenc":
        return decomposition.ln2.norm(dim=-1)
    if measure == "alti":
        if decomposition.pre_norm:  # the residual stream: pieces z_ij adding up to r_i
            y, pieces = decomposition.residual_sum[:, None, :], decomposition.z
        else:
            y, pieces = decomposition.y[:, None, :], decomposition.ln1
        return (y.abs().sum(-1) - (y - pieces).abs().sum(-1)).clamp_min(0)
    raise ValueError(f"{measure!r} is not a norm-based measure; choose one of {NORM_MEASURES}.")


@torch.no_grad()
def value_zeroing_scores(model: PreTrainedModel, internals: Internals, layer: int) -> torch.Tensor:
    """Unnormalised value-zeroing scores of one layer (1..L): (n, n).

    C_ij = 1 - cos(e_i, e_i^(-j)), e^(-j) the layer's output recomputed from its
    original input with token j's value vectors zeroed in every head. Only the
    values change, so the new head outputs are A V - A[:, j] V_j; all n variants
    run through the rest of the layer as one batch. The distance is computed
    without cancellation (``linalg.cosine_distance``): in the first layers many
    C_ij are 1e-8 to 1e-5, below what ``1 - cos`` resolves in float32. On a causal
    model C_ij is exactly 0 for j > i (rounding would otherwise leave 1e-13 there).
    """
    index = layer_index(layer, internals.num_layers)
    pre_norm = internals.family in PRE_NORM_DECODERS
    block = (pre_norm_layers if pre_norm else post_norm_layers)(model, "value zeroing")[index]
    E, A, V = internals.E[index], internals.A[index], internals.V[index]  # (n, d), (h, n, n), (h, n, d_v)
    h, n, d_v = V.shape
    heads = A @ V  # (h, n, d_v)
    # variant j: heads - A[:, :, j, None] * V[:, j]  -> (j, h, i, d_v)
    variants = heads[None] - A.permute(2, 0, 1)[..., None] * V.permute(1, 0, 2)[:, :, None, :]
    context = variants.permute(0, 2, 1, 3).reshape(n, n, h * d_v)  # (j, i, d)
    dense = block.output(context)
    if pre_norm:  # V came from norm_1's output, which zeroing leaves alone; the residual adds E
        r = dense + E[None]
        out = r + block.mlp(block.norm_2(r))  # (j, i, d)
    else:
        y = block.norm_1(dense + E[None])
        out = block.norm_2(block.ffn_out(block.activation(block.ffn_in(y))) + y)  # (j, i, d)
    original = internals.hidden_states[index + 1]
    distance = cosine_distance(out, original[None].expand_as(out)).T  # (i, j)
    if internals.causal:  # zeroing a later token cannot reach token i: exactly 0, not the rounding of a recomputation
        distance = distance.tril()
    return distance
