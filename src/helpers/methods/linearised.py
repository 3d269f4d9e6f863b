"""A post-norm encoder linearised around one input: the primal pass and the caches its tangents read.

``linearise(model, x)`` runs the model once on the raw embeddings ``x`` (token +
segment + position, before the embedding LayerNorm) and keeps, for every layer,
its weights in the row-vector convention (``y = x @ W``) and the activations a
Jacobian-vector product needs: attention probabilities, LayerNorm statistics and
the activation's slopes. ``helpers.methods.jacobians`` pushes tangents through it.

MPNet (all-mpnet-base-v2) is a post-norm BERT layer with a relative-position bias P added to
the scaled scores, ``A = softmax(Q K^T / sqrt(d_v) + P)``; its x is word + position embeddings.
P depends on the length only, not on x, so it enters the primal A and no tangent: the tangent
code is the same for both.

The same code takes every post-norm encoder family (``helpers.model.post_norm``: BERT, RoBERTa,
ELECTRA, DistilBERT, ALBERT, MPNet). ELECTRA (when its embeddings are narrower than its layers)
and ALBERT map the normalised embeddings to the layers' width by a linear map, ``E_0 = LN(x) W_p + b_p``;
then x has the embeddings' width ``d_x`` and the first tangent is multiplied by W_p.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..model.capture_mpnet import mpnet_position_bias
from ..model.checks import check_autograd
from ..model.families import layer_modules
from ..model.post_norm import embedding_parts, post_norm_layers

__all__ = ["LinearisedBlock", "LinearisedBert", "linearise", "check_reproduces"]


@dataclass
class LinearisedBlock:
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
    """A post-norm encoder linearised around one input: the primal pass and its caches.

    ``hidden_states: (L + 1, n, d)`` are the embedding LayerNorm output (after the projection,
    where there is one) and each layer's output of the primal pass.
    """

    xhat_0: torch.Tensor  # (n, d_x) normalised input of the embedding LayerNorm
    scale_0: torch.Tensor  # (n, d_x)
    blocks: list[LinearisedBlock]
    hidden_states: torch.Tensor  # (L + 1, n, d)
    heads: int
    projection: torch.Tensor | None = None  # (d_x, d) W_p of ELECTRA / ALBERT (row-vector convention), or None

    @property
    def n(self) -> int:
        return self.xhat_0.shape[0]

    @property
    def d(self) -> int:
        """The layers' width."""
        return self.hidden_states.shape[-1]

    @property
    def d_x(self) -> int:
        """The width of x, the input embeddings (d but where a projection follows the embedding LayerNorm)."""
        return self.xhat_0.shape[1]

    @property
    def depth(self) -> int:
        return len(self.blocks)


def _layer_norm(r: torch.Tensor, norm: nn.LayerNorm) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LayerNorm of ``r: (n, d)``; returns the output, xhat and gamma / sigma, each (n, d)."""
    mean = r.mean(-1, keepdim=True)
    var = (r - mean).pow(2).mean(-1, keepdim=True)
    inv_sigma = torch.rsqrt(var + norm.eps)
    xhat = (r - mean) * inv_sigma
    gamma = norm.weight if norm.weight is not None else torch.ones_like(r[0])
    beta = norm.bias if norm.bias is not None else torch.zeros_like(r[0])
    return xhat * gamma + beta, xhat, gamma * inv_sigma


@torch.no_grad()
def linearise(
    model: nn.Module,
    x: torch.Tensor,
    reference: torch.Tensor | None = None,
    atol: float = 1e-4,
) -> LinearisedBert:
    """Run the primal pass of a post-norm encoder on raw embeddings and cache what the tangents need.

    Args:
        model: a bare encoder of a family of ``helpers.model.post_norm.POST_NORM_ENCODERS`` (BertModel,
            RobertaModel, ElectraModel, DistilBertModel, AlbertModel, MPNetModel).
        x: ``(n, d_x)``, token + segment + position (MPNet, DistilBERT: word + position), before the
            embedding LayerNorm.
        reference: the model's own hidden states ``(L + 1, n, d)``; if given, the primal
            pass must reproduce them (a guard against a model variant this code does not
            implement).
        atol: tolerance of that check, relative to the largest hidden-state entry.

    Raises:
        ValueError: wrong shapes, or the primal pass disagrees with ``reference``.
    """
    check_autograd("linearise (the activation slopes)")
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be one sequence of input embeddings (n, d_x); got {got}.")
    layers = post_norm_layers(model, "the linearised forward (exact HTA)")
    flags = [model.config, *layer_modules(model)]
    if any(getattr(f, "is_decoder", False) or getattr(f, "add_cross_attention", False) for f in flags):
        raise ValueError("Decoder and cross-attention layers are not supported; use an encoder-only model.")
    embedding = embedding_parts(model, "the linearised forward (exact HTA)")
    config = model.config
    d, heads = config.hidden_size, config.num_attention_heads
    d_x = embedding.norm.weight.shape[0]
    if x.shape[1] != d_x:
        raise ValueError(f"x has width {x.shape[1]}, the model's input embeddings have width {d_x}.")
    d_v = d // heads
    n = x.shape[0]
    x = x.to(device=embedding.norm.weight.device, dtype=embedding.norm.weight.dtype)

    E, xhat_0, scale_0 = _layer_norm(x, embedding.norm)
    projection = None
    if embedding.projection is not None:
        E = embedding.projection(E)
        projection = embedding.projection.weight.T.contiguous()  # (d_x, d)
    hidden = [E]
    blocks = []
    scaling = d_v**-0.5
    # MPNet: P (h, n, n), added to every layer's scaled scores; the others: none
    bias = mpnet_position_bias(model, n).to(x) if getattr(config, "model_type", None) == "mpnet" else 0.0
    for parts in layers:
        W_qkv = torch.cat([parts.query.weight, parts.key.weight, parts.value.weight]).T  # (d, 3d)
        b_qkv = torch.cat([parts.query.bias, parts.key.bias, parts.value.bias])
        qkv = (E @ W_qkv + b_qkv).view(n, 3, heads, d_v).permute(1, 2, 0, 3)  # (3, h, n, d_v)
        Q, K, V = qkv[0], qkv[1], qkv[2]
        A = torch.softmax(Q @ K.transpose(-1, -2) * scaling + bias, dim=-1)
        heads_out = (A @ V).transpose(0, 1).reshape(n, d)
        Y, xhat_1, scale_1 = _layer_norm(heads_out @ parts.output.weight.T + parts.output.bias + E, parts.norm_1)
        pre = parts.ffn_in(Y)
        with torch.enable_grad():  # the activation is elementwise: the gradient of its sum is its slope
            pre = pre.detach().requires_grad_(True)
            G = parts.activation(pre)
            (slope,) = torch.autograd.grad(G.sum(), pre)
        G, pre = G.detach(), pre.detach()
        Z, xhat_2, scale_2 = _layer_norm(parts.ffn_out(G) + Y, parts.norm_2)
        blocks.append(
            LinearisedBlock(
                W_qkv_T=W_qkv.T.contiguous(),
                W_o=parts.output.weight.T.contiguous(),
                W_1=parts.ffn_in.weight.T.contiguous(),
                W_2=parts.ffn_out.weight.T.contiguous(),
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
    check_reproduces(hidden_states, reference, atol, f"the post-norm {config.model_type} encoder")
    return LinearisedBert(xhat_0, scale_0, blocks, hidden_states, heads, projection)


def check_reproduces(hidden_states: torch.Tensor, reference: torch.Tensor | None, atol: float, what: str) -> None:
    """Raise unless a primal pass's ``hidden_states`` equal the model's own ``reference`` (both (L + 1, n, d))
    to ``atol`` relative to its largest entry; ``what`` names the architecture the pass implements."""
    if reference is None:
        return
    reference = reference.to(hidden_states)
    if reference.shape != hidden_states.shape:
        raise ValueError(f"reference hidden states {tuple(reference.shape)} != {tuple(hidden_states.shape)}.")
    error = (reference - hidden_states).abs().max() / reference.abs().max().clamp_min(1e-12)
    if error > atol:
        raise ValueError(
            f"The linearised model does not reproduce this model's hidden states (relative error "
            f"{float(error):.2e}); the model is not {what} this code implements."
        )
