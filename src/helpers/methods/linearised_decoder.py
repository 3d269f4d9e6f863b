"""A decoder (Llama, Qwen2, GPT-2) linearised around one input: the primal pass and its caches.

Each block of Llama and Qwen2 is pre-norm (Zhang and Sennrich's RMSNorm, no mean
subtraction, no bias), rotates queries and keys by position (RoPE: a fixed
linear map per position, inside attention), lets ``groups`` query heads share
one key/value head, and ends with a gated FFN (SwiGLU):

    u = RMSNorm_1(h),      q, k, v = u W^Q, u W^K, u W^V (+ biases in Qwen2)
    a = causal softmax(R(q) R(k)^T * s) ,   h' = h + (a v) W^O
    w = RMSNorm_2(h'),     h'' = h' + (act(w W^gate) * (w W^up)) W^down

The input is the token embeddings themselves (no position embedding is added;
position enters through R only), and "layer l" is block l's output *before* the
final norm, as in ``capture``.

GPT-2 is the same pre-norm block with three differences, each a special case of
the code below: LayerNorm (mean subtracted, a bias) in place of RMSNorm; no
rotation (R the identity: cos = 1, sin = 0), positions being learned vectors
already added to the input, so that x_j is token j's embedding plus its
position's; and a plain FFN, act(w W^fc + b) W^proj + b, with no gate
(``gate_value`` None, ``W_gate_up`` then W^fc alone). The modules come from
``helpers.model.pre_norm``.

``linearise_decoder(model, x)`` runs that primal pass once and keeps the weights in the row-vector convention and the
activations a Jacobian-vector product needs; ``helpers.methods.decoder_jacobians``
pushes tangents through it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..model.checks import UnsupportedModelError, check_autograd
from ..model.families import linear_bias, linear_weight
from ..model.pre_norm import pre_norm_layers
from .linearised import check_reproduces

__all__ = ["DECODER_FAMILIES", "LinearisedDecoderBlock", "LinearisedDecoder", "linearise_decoder"]

DECODER_FAMILIES = ("llama", "qwen2", "gpt2")


@dataclass
class LinearisedDecoderBlock:
    """Weights (row-vector convention, ``y = x @ W``) and cached primal quantities of one block.

    n tokens, hidden size d, h query heads of size d_v, h_kv key/value heads, FFN width f.
    """

    W_qkv: torch.Tensor  # (d, (h + 2 h_kv) d_v)
    W_o: torch.Tensor  # (h d_v, d)
    W_gate_up: torch.Tensor  # (d, 2 f)
    W_down: torch.Tensor  # (f, d)
    cos: torch.Tensor  # (n, d_v)  RoPE: R(q) = q * cos + rotate_half(q) * sin
    sin: torch.Tensor  # (n, d_v)
    Q: torch.Tensor  # (h, n, d_v)  rotated queries times the score scaling
    K: torch.Tensor  # (h_kv, n, d_v)  rotated keys
    V: torch.Tensor  # (h_kv, n, d_v)
    A: torch.Tensor  # (h, n, n)  attention probabilities, zero above the diagonal
    heads_out: torch.Tensor  # (h, n, d_v)  head outputs A V
    xhat_1: torch.Tensor  # (n, d)  h / rms(h) (LayerNorm: (h - mean h) / sigma), input of the attention norm
    xhat_2: torch.Tensor  # (n, d)
    gate_slope: torch.Tensor  # (n, f)  act'(w W^gate) * (w W^up); GPT-2: act'(w W^fc + b)
    gate_value: torch.Tensor | None  # (n, f)  act(w W^gate); None for GPT-2's ungated FFN
    gamma_1: torch.Tensor  # (d,)  weight of the attention norm
    gamma_2: torch.Tensor  # (d,)  weight of the FFN norm
    inv_rms_1: torch.Tensor  # (n, 1)  1 / rms(h)
    inv_rms_2: torch.Tensor  # (n, 1)
    scaling: float
    centred: bool = False  # LayerNorm (GPT-2): the norms subtract the mean
    M: torch.Tensor | None = None  # (n, d, d)  Jacobian of the FFN sub-block (residual included), per token
    factors: object = None  # the tangent pass's per-row constants for one start row (decoder_jacobians)
    factors_start: int | None = None

    @property
    def K_T(self) -> torch.Tensor:
        """(h_kv, d_v, n): the rotated keys, transposed."""
        return self.K.transpose(-1, -2)

    @property
    def heads(self) -> int:
        return self.Q.shape[0]

    @property
    def kv_heads(self) -> int:
        return self.K.shape[0]

    @property
    def d_v(self) -> int:
        return self.Q.shape[-1]

    @property
    def f(self) -> int:
        return self.W_down.shape[0]


@dataclass
class LinearisedDecoder:
    """A decoder linearised around one input. ``hidden_states: (L + 1, n, d)`` are the first block's input
    (the token embeddings; GPT-2: plus the position vectors), then each block's output (before the final norm)."""

    blocks: list[LinearisedDecoderBlock]
    hidden_states: torch.Tensor  # (L + 1, n, d)
    family: str

    @property
    def n(self) -> int:
        return self.hidden_states.shape[1]

    @property
    def d(self) -> int:
        return self.hidden_states.shape[2]

    @property
    def depth(self) -> int:
        return len(self.blocks)

    @property
    def dtype(self) -> torch.dtype:
        return self.hidden_states.dtype


def _rms_norm(h: torch.Tensor, norm: nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """RMSNorm (or, for an ``nn.LayerNorm``, LayerNorm) of ``h: (n, d)``; returns the output, the normalised
    input h / rms (LayerNorm: (h - mean) / sigma), each (n, d), and 1 / rms (or 1 / sigma), (n, 1)."""
    if isinstance(norm, nn.LayerNorm):
        centred = h - h.mean(-1, keepdim=True)
        inv_sigma = torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + norm.eps)
        xhat = centred * inv_sigma
        return norm.weight * xhat + norm.bias, xhat, inv_sigma
    eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
    if eps is None or getattr(norm, "bias", None) is not None:
        raise UnsupportedModelError(f"{type(norm).__name__} is not the RMSNorm this linearisation implements.")
    inv_rms = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    xhat = h * inv_rms
    return norm.weight * xhat, xhat, inv_rms


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., d_v): the second half negated, then the first (the RoPE pairing of Llama and Qwen2)."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE, linear in x: (..., n, d_v) with cos, sin (n, d_v)."""
    return x * cos + rotate_half(x) * sin


def _check_model(model: nn.Module) -> None:
    if getattr(model.config, "use_sliding_window", False):
        raise UnsupportedModelError("Sliding-window attention is not implemented by the decoder linearisation.")


def _rotation(model: nn.Module, x: torch.Tensor, d_v: int) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE's cos and sin, (n, d_v) each; GPT-2 (no rotary embedding): ones and zeros, R the identity."""
    base = model.base_model
    n = x.shape[0]
    if not hasattr(base, "rotary_emb"):
        return x.new_ones(n, d_v), x.new_zeros(n, d_v)
    position_ids = torch.arange(n, device=x.device)[None]
    cos, sin = (t[0].to(x.dtype) for t in base.rotary_emb(x[None], position_ids))
    return cos, sin


def _slope(activation, pre: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """act(pre) and act'(pre), (n, f) each: the activation is elementwise, so the gradient of its sum is its slope."""
    with torch.enable_grad():
        pre = pre.detach().requires_grad_(True)
        value = activation(pre)
        (slope,) = torch.autograd.grad(value.sum(), pre)
    return value.detach(), slope


@torch.no_grad()
def linearise_decoder(
    model: nn.Module,
    x: torch.Tensor,
    reference: torch.Tensor | None = None,
    atol: float = 1e-4,
) -> LinearisedDecoder:
    """Run the primal pass of a Llama, Qwen2 or GPT-2 decoder on its input and cache what tangents need.

    Args:
        model: a ``LlamaForCausalLM`` / ``Qwen2ForCausalLM`` / ``GPT2LMHeadModel`` (or their base models), eval mode.
        x: ``(n, d)`` the first block's input (``capture(model, encoding).x``): the token embeddings
            (GPT-2: plus the position embeddings).
        reference: the model's own hidden states ``(L + 1, n, d)`` (``capture(...).hidden_states``);
            if given, the primal pass must reproduce them.
        atol: tolerance of that check, relative to the largest hidden-state entry.

    Raises:
        UnsupportedModelError: not a Llama, Qwen2 or GPT-2 model, or a variant this code does not implement.
        ValueError: wrong shapes, or the primal pass disagrees with ``reference``.
    """
    check_autograd("linearise_decoder (the activation slopes)")
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in DECODER_FAMILIES:
        raise UnsupportedModelError(
            f"The decoder linearisation covers {', '.join(DECODER_FAMILIES)}; got model_type={model_type!r}."
        )
    _check_model(model)
    config = model.config
    d = config.hidden_size
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != d:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be one sequence of token embeddings (n, {d}); got {got}.")
    weight = model.get_input_embeddings().weight
    x = x.to(device=weight.device, dtype=weight.dtype)
    n = x.shape[0]
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    d_v = getattr(config, "head_dim", None) or d // heads
    groups = heads // kv_heads
    cos, sin = _rotation(model, x, d_v)
    causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()

    h = x
    hidden, blocks = [h], []
    for layer in pre_norm_layers(model, "linearise_decoder"):
        scaling = float(getattr(layer.attention, "scaling", d_v**-0.5))
        u, xhat_1, inv_rms_1 = _rms_norm(h, layer.norm_1)
        W_qkv = torch.cat([linear_weight(p) for p in layer.qkv], dim=1)  # (d, (h + 2 h_kv) d_v)
        b_qkv = torch.cat([linear_bias(p) for p in layer.qkv])
        q, k, v = (u @ W_qkv + b_qkv).split([heads * d_v, kv_heads * d_v, kv_heads * d_v], dim=-1)
        Q = rotate(q.view(n, heads, d_v).transpose(0, 1), cos, sin) * scaling  # (h, n, d_v)
        K = rotate(k.view(n, kv_heads, d_v).transpose(0, 1), cos, sin)  # (h_kv, n, d_v)
        V = v.view(n, kv_heads, d_v).transpose(0, 1)
        K_rep, V_rep = K.repeat_interleave(groups, dim=0), V.repeat_interleave(groups, dim=0)
        logits = (Q @ K_rep.transpose(-1, -2)).masked_fill(~causal, float("-inf"))
        A = torch.softmax(logits, dim=-1)
        heads_out = A @ V_rep  # (h, n, d_v)
        W_o = linear_weight(layer.output)
        h1 = h + heads_out.transpose(0, 1).reshape(n, heads * d_v) @ W_o + linear_bias(layer.output)
        w, xhat_2, inv_rms_2 = _rms_norm(h1, layer.norm_2)
        value, slope = _slope(layer.activation, layer.ffn_in[0](w))
        if layer.gated:
            up = layer.ffn_in[1](w)
            slope, value, gate_value = slope * up, value * up, value
        else:
            gate_value = None
        h2 = h1 + layer.ffn_out(value)
        blocks.append(
            LinearisedDecoderBlock(
                W_qkv=W_qkv.contiguous(),
                W_o=W_o.detach().contiguous(),
                W_gate_up=torch.cat([linear_weight(p) for p in layer.ffn_in], dim=1).contiguous(),
                W_down=linear_weight(layer.ffn_out).detach().contiguous(),
                cos=cos,
                sin=sin,
                Q=Q.contiguous(),
                K=K.contiguous(),
                V=V.contiguous(),
                A=A.contiguous(),
                heads_out=heads_out.contiguous(),
                xhat_1=xhat_1,
                xhat_2=xhat_2,
                gate_slope=slope.contiguous(),
                gate_value=None if gate_value is None else gate_value.contiguous(),
                gamma_1=layer.norm_1.weight.detach(),
                gamma_2=layer.norm_2.weight.detach(),
                inv_rms_1=inv_rms_1,
                inv_rms_2=inv_rms_2,
                scaling=scaling,
                centred=isinstance(layer.norm_1, nn.LayerNorm),
            )
        )
        h = h2
        hidden.append(h)
    hidden_states = torch.stack(hidden)
    check_reproduces(hidden_states, reference, atol, f"the {model_type} decoder")
    return LinearisedDecoder(blocks, hidden_states, model_type)
