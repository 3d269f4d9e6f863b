"""One forward pass that exposes every per-layer, per-head tensor of a BERT encoder.

Notation (paper section 3, one layer l, one head h, sequence length n):

    E      layer input                                  (n, d)
    Q, K   E W^Q + b^Q, E W^K + b^K                      (n, d_v)
    V      E W^V + b^V   (value bias included)           (n, d_v)
    A      softmax(Q K^T / sqrt(d_v) + P)                (n, n)
    P      a relative-position bias (MPNet; absent in BERT) (n, n)
    H      the head's d_v rows of W^O                    (d_v, d)
    T      V H = (E W^V + 1 b^V) H                       (n, d)

The attention block's dense output (before dropout, residual and LayerNorm)
is exactly ``sum_h A_h T_h + b^O``. The paper writes ``T = E W^V H`` and
leaves biases out; we fold the value bias into T so that identity holds for
*any* A. For a row-stochastic A the two differ only by the constant row
``b^V H`` (``A 1 b^V H = 1 b^V H``), and rank(T) <= d_v either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from transformers import PreTrainedModel

from .numbering import layer_index, layer_number

INPUT_PARTS = {
    "bert": "token + segment + position",
    "electra": "token + segment + position",
    "albert": "token + segment + position",
    "roberta": "token + segment + position",  # one token type, added all the same
    "distilbert": "token + position",
    "mpnet": "token + position",  # relative positions enter the attention scores as a bias as well
    "gpt2": "token + position",
    "llama": "token (positions enter through the rotary embedding of Q and K)",
    "qwen2": "token (positions enter through the rotary embedding of Q and K)",
}
"""What the input embeddings x sum, per family (``Internals.input_parts``)."""


def position_parts(family: str) -> str:
    """What x adds to the word-piece embedding in an encoder ``family``, position first:
    "position + segment embeddings" (BERT), "position embeddings" (MPNet). The target of a
    position-only control. A family whose x is the token alone (positions elsewhere) is refused."""
    if family not in INPUT_PARTS:
        raise ValueError(f"No input parts are recorded for family {family!r}: add it to INPUT_PARTS.")
    parts = INPUT_PARTS[family].split(" + ")
    if len(parts) < 2 or parts[0] != "token":
        raise ValueError(f"In family {family!r} x is {INPUT_PARTS[family]!r}: nothing but the token to aim at.")
    return " + ".join(sorted(parts[1:], key=lambda part: part != "position")) + " embeddings"


@dataclass
class Internals:
    """Every tensor of one forward pass over one unpadded sequence.

    L layers, h heads, n tokens, hidden size d, head size d_v.
    """

    input_ids: torch.Tensor  # (n,)
    x: torch.Tensor  # (n, d)  the input embeddings (``input_parts``), before any embedding LayerNorm
    E: torch.Tensor  # (L, n, d)  input of each layer
    Q: torch.Tensor  # (L, h, n, d_v)
    K: torch.Tensor  # (L, h, n, d_v)
    V: torch.Tensor  # (L, h, n, d_v)  value bias included
    A: torch.Tensor  # (L, h, n, n)  the model's own attention probabilities
    W_V: torch.Tensor  # (L, h, d, d_v)  so that V = E W_V + b_V
    b_V: torch.Tensor  # (L, h, d_v)
    H: torch.Tensor  # (L, h, d_v, d)  rows of W^O that belong to head h
    b_O: torch.Tensor  # (L, d)
    T: torch.Tensor  # (L, h, n, d)  T = V H
    attention_output: torch.Tensor  # (L, n, d)  the model's dense output of the attention block
    hidden_states: torch.Tensor  # (L + 1, n, d)  embedding output, then each layer's output
    # Filled by the generic capture (any supported family); the BERT fast path leaves the defaults.
    family: str = "bert"
    causal: bool = False  # row i attends to positions 0..i only
    kv_heads: int | None = None  # key/value heads (< heads for grouped-query attention); None: = heads
    normed: torch.Tensor | None = None  # (L, n, d) what Q, K, V are computed from (pre-norm models); None: = E
    # (L, h, n, n) added to Q K^T / sqrt(d_v) before the softmax (MPNet's relative-position bias,
    # the same in every layer); None: no bias (BERT and the generic capture)
    position_bias: torch.Tensor | None = None

    @property
    def input_parts(self) -> str:
        """What x sums, in this family: "token + segment + position" for BERT, "token + position" for MPNet."""
        if self.family not in INPUT_PARTS:
            raise ValueError(f"No input parts are recorded for family {self.family!r}: add it to INPUT_PARTS.")
        return INPUT_PARTS[self.family]

    def head_bias(self, layer_index: int, head_index: int) -> torch.Tensor | None:
        """The fixed (n, n) logits head ``head_index`` of layer ``layer_index`` (both from 0) adds to
        Q K^T / sqrt(d_v) before the softmax: MPNet's position bias; None where the family adds none."""
        return None if self.position_bias is None else self.position_bias[layer_index, head_index]

    @property
    def num_layers(self) -> int:
        return self.A.shape[0]

    @property
    def heads(self) -> int:
        return self.A.shape[1]

    @property
    def n(self) -> int:
        return self.A.shape[-1]

    @property
    def qkv_input(self) -> torch.Tensor:
        """(L, n, d): the input Q, K and V are computed from (E itself in post-norm models)."""
        return self.E if self.normed is None else self.normed

    @property
    def groups(self) -> int:
        """Query heads per key/value head (1 without grouped-query attention)."""
        return 1 if self.kv_heads is None else self.heads // self.kv_heads

    def head_outputs(self) -> torch.Tensor:
        """A_h T_h for every layer and head: (L, h, n, d)."""
        return self.A @ self.T

    def reconstructed_attention_output(self) -> torch.Tensor:
        """sum_h A_h T_h + b^O: (L, n, d); equals ``attention_output``."""
        return attention_block_output(self.A, self.T, self.b_O)

    def shape_table(self) -> list[dict]:
        """One row per tensor: name, shape (as a string), what it holds."""
        rows = [
            ("x", self.x, f"input embeddings: {self.input_parts}"),
            ("E", self.E, "input of each layer"),
            ("Q, K", self.Q, "queries and keys per head"),
            ("V", self.V, "values per head, E W^V + b^V"),
            ("A", self.A, "attention probabilities (rows sum to 1)"),
            *(
                [("position_bias", self.position_bias, "relative-position bias added to the scaled scores")]
                if self.position_bias is not None
                else []
            ),
            ("H", self.H, "the head's rows of the output projection W^O"),
            ("T", self.T, "T = V H, what A multiplies"),
            ("attention_output", self.attention_output, "sum over heads of A T, plus b^O"),
            ("hidden_states", self.hidden_states, "embedding output, then each layer's output"),
        ]
        return [{"tensor": name, "shape": " x ".join(map(str, t.shape)), "holds": holds} for name, t, holds in rows]


def attention_block_output(A: torch.Tensor, T: torch.Tensor, b_O: torch.Tensor) -> torch.Tensor:
    """The attention block's dense output from its heads: sum_h A_h T_h + b^O.

    A: (..., h, n, n) (raw or effective attention), T: (..., h, n, d),
    b_O: (..., d) -> (..., n, d).
    """
    if A.dim() < 3 or T.dim() != A.dim() or A.shape[:-1] != T.shape[:-1] or A.shape[-1] != A.shape[-2]:
        raise ValueError(
            f"A must be (..., h, n, n) and T (..., h, n, d) with the same leading shape; "
            f"got {tuple(A.shape)} and {tuple(T.shape)}."
        )
    if b_O.shape != (*A.shape[:-3], T.shape[-1]):
        raise ValueError(f"b_O must be {(*A.shape[:-3], T.shape[-1])}; got {tuple(b_O.shape)}.")
    return (A @ T).sum(dim=-3) + b_O[..., None, :]


class HeadWeights(NamedTuple):
    """The per-head weight slices of one BERT layer (row-vector convention, ``y = x @ W + b``)."""

    W_Q: torch.Tensor  # (h, d, d_v)
    W_K: torch.Tensor  # (h, d, d_v)
    W_V: torch.Tensor  # (h, d, d_v)
    b_Q: torch.Tensor  # (h, d_v)
    b_K: torch.Tensor  # (h, d_v)
    b_V: torch.Tensor  # (h, d_v)
    H: torch.Tensor  # (h, d_v, d)  rows of W^O that belong to head h
    b_O: torch.Tensor  # (d,)


# per family: the paths from a layer's ``attention`` module to W^Q, W^K, W^V, W^O and the LayerNorm
# after the residual sum (the post-norm encoders with a layer-by-layer path: checks.LINEARISED_ENCODERS)
ATTENTION_PARTS = {
    "bert": ("self.query", "self.key", "self.value", "output.dense", "output.LayerNorm"),
    "mpnet": ("attn.q", "attn.k", "attn.v", "attn.o", "LayerNorm"),
}


class AttentionParts(NamedTuple):
    """The modules of one post-norm encoder layer's attention block (BERT, MPNet)."""

    query: torch.nn.Linear
    key: torch.nn.Linear
    value: torch.nn.Linear
    output: torch.nn.Linear  # W^O
    norm: torch.nn.LayerNorm  # after the residual sum


def attention_parts(model: PreTrainedModel, layer: int) -> AttentionParts:
    """W^Q, W^K, W^V, W^O and the LayerNorm of layer ``layer`` (numbered 1..L) of a BERT or MPNet encoder."""
    model_type = getattr(model.config, "model_type", None)
    if model_type not in ATTENTION_PARTS:
        raise ValueError(
            f"The layer-by-layer path covers {', '.join(ATTENTION_PARTS)} encoders; got model_type={model_type!r}."
        )
    attention = model.encoder.layer[layer_index(layer, model.config.num_hidden_layers)].attention
    modules = []
    for path in ATTENTION_PARTS[model_type]:
        module = attention
        for part in path.split("."):
            module = getattr(module, part)
        modules.append(module)
    return AttentionParts(*modules)


def head_weights(model: PreTrainedModel, layer: int) -> HeadWeights:
    """The per-head weight slices of layer ``layer`` (numbered 1..L) of a BERT or MPNet encoder: a ``HeadWeights``."""
    parts = attention_parts(model, layer)
    heads = model.config.num_attention_heads
    d = model.config.hidden_size
    d_v = d // heads
    out = {}
    for key, linear in (("Q", parts.query), ("K", parts.key), ("V", parts.value)):
        # nn.Linear computes x W^T + b; W^T columns h*d_v:(h+1)*d_v belong to head h
        out[f"W_{key}"] = linear.weight.T.reshape(d, heads, d_v).permute(1, 0, 2)
        out[f"b_{key}"] = linear.bias.reshape(heads, d_v)
    out["H"] = parts.output.weight.T.reshape(heads, d_v, d)
    out["b_O"] = parts.output.bias
    return HeadWeights(**out)


def attention_from_qk(Q: torch.Tensor, K: torch.Tensor, position_bias: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d_v) + P) for Q, K: (..., n, d_v) -> (..., n, n).

    position_bias: P, broadcastable to (..., n, n) (``Internals.position_bias``, MPNet); None: no bias (BERT).
    """
    scores = Q @ K.transpose(-1, -2) / Q.shape[-1] ** 0.5
    if position_bias is not None:
        if position_bias.shape[-2:] != scores.shape[-2:]:
            raise ValueError(f"position_bias must end in {tuple(scores.shape[-2:])}; got {tuple(position_bias.shape)}.")
        scores = scores + position_bias
    return torch.softmax(scores, dim=-1)


@torch.no_grad()
def finish_layer(model: PreTrainedModel, layer: int, attention_output: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """The rest of BERT (or MPNet) layer ``layer`` (numbered 1..L) after the heads: residual, LayerNorm, feed-forward.

    attention_output: (n, d) the dense output ``sum_h A_h T_h + b^O``;
    E: (n, d) the layer input. Returns the layer output (n, d), i.e. the
    next hidden state. Shows that the layer sees attention only through A T.
    """
    if attention_output.shape != E.shape or E.dim() != 2:
        raise ValueError(
            f"attention_output and E must both be (n, d); got {tuple(attention_output.shape)} and {tuple(E.shape)}."
        )
    block = model.encoder.layer[layer_index(layer, model.config.num_hidden_layers)]
    attended = attention_parts(model, layer).norm(attention_output + E)
    return block.output(block.intermediate(attended), attended)


def rebuild_hidden_states(model: PreTrainedModel, internals: Internals) -> torch.Tensor:
    """Each layer's output recomputed from the head outputs A_h T_h alone: (L, n, d).

    Layer l uses ``sum_h A_h T_h + b^O`` and the layer input E_l; compare with
    ``internals.hidden_states[1:]``.
    """
    attention = internals.reconstructed_attention_output()
    return torch.stack(
        [finish_layer(model, layer_number(i), attention[i], internals.E[i]) for i in range(internals.num_layers)]
    )
