"""The exact per-(i, j) decomposition of one BERT layer that the norm-based measures read (chapter 7).

The attention block, the residual and the first LayerNorm split exactly into one vector per
pair (notation of :mod:`helpers.methods.mixing`):

    z_ij = sum_h A^h_ij T^h_j + [i = j] E_i,         sum_j z_ij + b^O = r_i (LN1's input)
    g1(v) = (v - mean(v)) * gamma_1 / sigma_1(r_i)    (LN1 split linearly, beta_1 left over)

and the second LayerNorm likewise with the standard deviation of its real input.
``norm_scores`` turns one decomposition into a measure's local scores.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from ..model.internals import Internals
from ..model.numbering import layer_index
from .effective import effective_attention

__all__ = ["NORM_MEASURES", "LayerDecomposition", "decompose_layer", "norm_scores"]

NORM_MEASURES = ("attention_norm", "norm_residual", "norm_residual_ln", "globenc", "alti")


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


def _layer_norm_parts(norm: torch.nn.LayerNorm, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """gamma / sigma per row for LN input r: (n, d) -> (n, d), and beta (d,)."""
    sigma = torch.sqrt(r.var(-1, unbiased=False, keepdim=True) + norm.eps)
    return norm.weight / sigma, norm.bias


def _centre(v: torch.Tensor) -> torch.Tensor:
    return v - v.mean(-1, keepdim=True)


@torch.no_grad()
def decompose_layer(
    model: PreTrainedModel, internals: Internals, layer: int, effective: bool = False
) -> LayerDecomposition:
    """Split layer ``layer`` (1..L) into one vector per (hidden token i, input token j).

    With ``effective=True`` A is replaced by its effective part (``helpers.methods.effective``);
    the sums are unchanged because A_eff T = A T.
    """
    index = layer_index(layer, internals.num_layers)
    block = model.encoder.layer[index]
    E = internals.E[index]  # (n, d)
    A = internals.A[index]  # (h, n, n)
    if effective:
        A = effective_attention(A, V=internals.V[index], H=internals.H[index]).effective
    n = E.shape[0]
    attention = torch.einsum("hij,hjd->ijd", A, internals.T[index])  # (n, n, d)
    z = attention.clone()
    diagonal = torch.arange(n, device=z.device)
    z[diagonal, diagonal] += E
    r = internals.attention_output[index] + E  # LN1's real input
    scale_1, beta_1 = _layer_norm_parts(block.attention.output.LayerNorm, r)
    ln1 = _centre(z) * scale_1[:, None, :]
    ln1_rest = _centre(internals.b_O[index])[None] * scale_1 + beta_1
    y = block.attention.output.LayerNorm(r)
    feed_forward = block.output.dense(block.intermediate(y))  # before the second residual
    u = feed_forward + y  # LN2's real input
    scale_2, beta_2 = _layer_norm_parts(block.output.LayerNorm, u)
    ln2 = _centre(ln1) * scale_2[:, None, :]
    ln2_rest = _centre(ln1_rest + feed_forward) * scale_2 + beta_2
    output = block.output.LayerNorm(u)
    return LayerDecomposition(attention, z, ln1, ln1_rest, y, ln2, ln2_rest, output)


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
        y = decomposition.y[:, None, :]
        return (y.abs().sum(-1) - (y - decomposition.ln1).abs().sum(-1)).clamp_min(0)
    raise ValueError(f"{measure!r} is not a norm-based measure; choose one of {NORM_MEASURES}.")
