"""One forward pass that exposes every per-layer, per-head tensor of a BERT encoder.

Notation (paper section 3, one layer l, one head h, sequence length n):

    E      layer input                                  (n, d)
    Q, K   E W^Q + b^Q, E W^K + b^K                      (n, d_v)
    V      E W^V + b^V   (value bias included)           (n, d_v)
    A      softmax(Q K^T / sqrt(d_v))                    (n, n)
    H      the head's d_v rows of W^O                    (d_v, d)
    T      V H = (E W^V + 1 b^V) H                       (n, d)

The attention block's dense output (before dropout, residual and LayerNorm)
is exactly ``sum_h A_h T_h + b^O``. The paper writes ``T = E W^V H`` and
leaves biases out; we fold the value bias into T so that identity holds for
*any* A. For a row-stochastic A the two differ only by the constant row
``b^V H`` (``A 1 b^V H = 1 b^V H``), and rank(T) <= d_v either way.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from transformers import BatchEncoding, PreTrainedModel

from .models import check_supported, float32_model
from .text import check_encoding, check_single_sequence


@dataclass
class Internals:
    """Every tensor of one forward pass over one unpadded sequence.

    L layers, h heads, n tokens, hidden size d, head size d_v.
    """

    input_ids: torch.Tensor  # (n,)
    x: torch.Tensor  # (n, d)  x: token + segment + position, before the embedding LayerNorm
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

    @property
    def layers(self) -> int:
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
            ("x", self.x, "input embeddings: token + segment + position"),
            ("E", self.E, "input of each layer"),
            ("Q, K", self.Q, "queries and keys per head"),
            ("V", self.V, "values per head, E W^V + b^V"),
            ("A", self.A, "attention probabilities (rows sum to 1)"),
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


def head_weights(model: PreTrainedModel, layer: int) -> dict[str, torch.Tensor]:
    """Per-head weight slices of one layer.

    Returns ``W_Q, W_K, W_V: (h, d, d_v)``, ``b_Q, b_K, b_V: (h, d_v)``,
    ``H: (h, d_v, d)`` (W^O rows, with ``x @ W^O`` convention) and ``b_O: (d,)``.
    """
    attention = model.encoder.layer[layer].attention
    heads = model.config.num_attention_heads
    d = model.config.hidden_size
    d_v = d // heads
    out = {}
    for key, linear in (("Q", attention.self.query), ("K", attention.self.key), ("V", attention.self.value)):
        # nn.Linear computes x W^T + b; W^T columns h*d_v:(h+1)*d_v belong to head h
        out[f"W_{key}"] = linear.weight.T.reshape(d, heads, d_v).permute(1, 0, 2)
        out[f"b_{key}"] = linear.bias.reshape(heads, d_v)
    out["H"] = attention.output.dense.weight.T.reshape(heads, d_v, d)
    out["b_O"] = attention.output.dense.bias
    return out


@torch.no_grad()
def capture(model: PreTrainedModel, encoding: BatchEncoding) -> Internals:
    """Run the model once on one sequence and return every tensor the chapters need.

    Args:
        model: a BERT encoder loaded with eager attention (``load_model``); models of the
            other supported families (``helpers.families``) go through ``capture_generic``.
        encoding: one unpadded sequence, input_ids ``(1, n)`` (``encode``).

    A bfloat16 / float16 model runs as a float32 copy, so every tensor is float32.

    Raises:
        UnsupportedModelError, ValueError: wrong model or encoding (``helpers.text.check_encoding``:
        padding, ids outside the vocabulary or the token types, too long).
    """
    if getattr(getattr(model, "config", None), "model_type", None) != "bert":
        return capture_generic(model, encoding)  # every other family: through the AttentionInterface
    check_supported(model)
    check_encoding(model, encoding)
    model = float32_model(model)  # the identities hold at float32 precision, not at bfloat16's
    if model.training:
        raise ValueError("The model is in training mode (dropout on); call model.eval() first.")

    dense_outputs: dict[int, torch.Tensor] = {}
    raw_embeddings: list[torch.Tensor] = []
    hooks = [model.embeddings.LayerNorm.register_forward_hook(lambda m, i, o: raw_embeddings.append(i[0]))]
    for index, layer in enumerate(model.encoder.layer):
        hooks.append(
            layer.attention.output.dense.register_forward_hook(
                lambda m, i, o, index=index: dense_outputs.__setitem__(index, o)
            )
        )
    try:
        result = model(**encoding, output_attentions=True, output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()

    hidden = torch.stack(result.hidden_states)[:, 0]  # (L+1, n, d)
    E = hidden[:-1]
    weights = [head_weights(model, layer) for layer in range(len(model.encoder.layer))]
    stacked = {key: torch.stack([w[key] for w in weights]) for key in weights[0]}

    def project(W, b):
        return torch.einsum("lnd,lhde->lhne", E, W) + b[:, :, None, :]

    Q = project(stacked["W_Q"], stacked["b_Q"])
    K = project(stacked["W_K"], stacked["b_K"])
    V = project(stacked["W_V"], stacked["b_V"])
    T = V @ stacked["H"]
    return Internals(
        input_ids=encoding["input_ids"][0],
        x=raw_embeddings[0][0],
        E=E,
        Q=Q,
        K=K,
        V=V,
        A=torch.stack(result.attentions)[:, 0],
        W_V=stacked["W_V"],
        b_V=stacked["b_V"],
        H=stacked["H"],
        b_O=stacked["b_O"],
        T=T,
        attention_output=torch.stack([dense_outputs[i][0] for i in range(len(dense_outputs))]),
        hidden_states=hidden,
    )


def attention_from_qk(Q: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d_v)) for Q, K: (..., n, d_v) -> (..., n, n)."""
    return torch.softmax(Q @ K.transpose(-1, -2) / Q.shape[-1] ** 0.5, dim=-1)


@torch.no_grad()
def finish_layer(model: PreTrainedModel, layer: int, attention_output: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """The rest of a BERT layer after the heads: residual, LayerNorm, feed-forward.

    attention_output: (n, d) the dense output ``sum_h A_h T_h + b^O``;
    E: (n, d) the layer input. Returns the layer output (n, d), i.e. the
    next hidden state. Shows that the layer sees attention only through A T.
    """
    if attention_output.shape != E.shape or E.dim() != 2:
        raise ValueError(
            f"attention_output and E must both be (n, d); got {tuple(attention_output.shape)} and {tuple(E.shape)}."
        )
    block = model.encoder.layer[layer]
    attended = block.attention.output.LayerNorm(attention_output + E)
    return block.output(block.intermediate(attended), attended)


def rebuild_hidden_states(model: PreTrainedModel, internals: Internals) -> torch.Tensor:
    """Each layer's output recomputed from the head outputs A_h T_h alone: (L, n, d).

    Layer l uses ``sum_h A_h T_h + b^O`` and the layer input E_l; compare with
    ``internals.hidden_states[1:]``.
    """
    attention = internals.reconstructed_attention_output()
    return torch.stack([finish_layer(model, i, attention[i], internals.E[i]) for i in range(internals.layers)])


# ---- The generic path: any family that computes attention through transformers' AttentionInterface ----


def _first_tensor(output) -> torch.Tensor:
    return output[0] if isinstance(output, (tuple, list)) else output


def _forward_inputs(base: PreTrainedModel, encoding: BatchEncoding) -> dict:
    """The encoding's entries the base model's forward accepts (DistilBERT takes no token_type_ids)."""
    accepted = inspect.signature(base.forward).parameters
    inputs = {key: value for key, value in encoding.items() if key in accepted}
    if "use_cache" in accepted:
        inputs["use_cache"] = False
    return inputs


@torch.no_grad()
def capture_generic(model: PreTrainedModel, encoding: BatchEncoding) -> Internals:
    """``capture`` for any supported family, through transformers' AttentionInterface.

    The model runs once with the capture attention function (``helpers.attention_capture``),
    which records Q, K, V and A per layer; hooks record each layer's input, the input its
    Q, K, V are computed from (``normed``: the normalised copy in pre-norm models) and the
    input and output of W^O. Grouped-query heads: ``V``, ``W_V`` and ``b_V`` hold one copy per
    query head (query head j uses key/value head ``j // groups``), so ``T = V H`` per query head.

    Args:
        model: a model of a family in ``helpers.families.FAMILIES`` (a task model is fine: its
            base model is run), in eval mode.
        encoding: one unpadded sequence, input_ids ``(1, n)``.

    Raises:
        UnsupportedFamilyError: unknown family, or a model whose attention bypasses the interface.
        ValueError: training mode, a batch, too many tokens.
    """
    from .attention_capture import recording, repeat_kv
    from .families import (
        UnsupportedFamilyError,
        family_of,
        layer_modules,
        output_projection,
        submodule,
        value_projection,
    )

    family = family_of(model)
    n = check_single_sequence(encoding)
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and n > limit:
        raise ValueError(f"The sequence has {n} tokens but the model takes at most {limit}; shorten it.")
    if model.training:
        raise ValueError("The model is in training mode (dropout on); call model.eval() first.")
    base = model.base_model
    layers = layer_modules(model)
    L = model.config.num_hidden_layers
    owner = {id(sub): index for index, layer in enumerate(layers) for sub in layer.modules()}

    seen: dict[str, list] = {"x": [], "block_in": [], "block_out": [], "normed": [], "out": []}

    def block_input(module, args, kwargs):
        seen["block_in"].append(args[0] if args else kwargs["hidden_states"])

    hooks = []
    for layer in layers:
        hooks.append(layer.register_forward_pre_hook(block_input, with_kwargs=True))
        hooks.append(layer.register_forward_hook(lambda m, i, o: seen["block_out"].append(_first_tensor(o))))
        hooks.append(submodule(layer, family.value).register_forward_pre_hook(lambda m, i: seen["normed"].append(i[0])))
        hooks.append(submodule(layer, family.output).register_forward_hook(lambda m, i, o: seen["out"].append(o)))
    if family.embedding_norm is not None:
        norm = submodule(base, family.embedding_norm)
        hooks.append(norm.register_forward_pre_hook(lambda m, i: seen["x"].append(i[0])))
    try:
        with recording(model) as records:
            base(**_forward_inputs(base, encoding))
    finally:
        for hook in hooks:
            hook.remove()
    if not records:
        raise UnsupportedFamilyError(
            f"{type(model).__name__} never called the attention function: it computes attention itself, "
            "bypassing transformers' AttentionInterface, so its heads cannot be captured."
        )
    counts = {
        "attention calls": len(records),
        **{key: len(seen[key]) for key in ("block_in", "block_out", "normed", "out")},
    }
    if any(count != L for count in counts.values()):
        raise UnsupportedFamilyError(
            f"Expected one call per layer ({L}); got {counts}: unexpected layout for {type(model).__name__}."
        )

    Q = torch.stack([r.Q[0] for r in records])  # (L, h, n, d_v)
    heads, d_v = Q.shape[1], Q.shape[-1]
    kv_heads = records[0].K.shape[1]
    groups = heads // kv_heads
    K = torch.stack([repeat_kv(r.K, groups)[0] for r in records])
    V = torch.stack([repeat_kv(r.V, groups)[0] for r in records])
    W_V, b_V, H, b_O = [], [], [], []
    for record in records:
        layer = layers[owner[id(record.module)]]
        w, b = value_projection(model, layer, kv_heads, d_v)
        W_V.append(w.repeat_interleave(groups, dim=0))
        b_V.append(b.repeat_interleave(groups, dim=0))
        h_rows, bias = output_projection(model, layer, heads, d_v)
        H.append(h_rows)
        b_O.append(bias)
    H = torch.stack(H)
    E = torch.stack([e[0] for e in seen["block_in"]])
    x = seen["x"][0][0] if seen["x"] else E[0]
    return Internals(
        input_ids=encoding["input_ids"][0],
        x=x,
        E=E,
        Q=Q,
        K=K,
        V=V,
        A=torch.stack([r.A[0] for r in records]),
        W_V=torch.stack(W_V),
        b_V=torch.stack(b_V),
        H=H,
        b_O=torch.stack(b_O),
        T=V @ H,
        attention_output=torch.stack([o[0] for o in seen["out"]]),
        hidden_states=torch.cat([E, seen["block_out"][-1][:1]]),
        family=family.name,
        causal=family.causal,
        kv_heads=kv_heads,
        normed=torch.stack([x_[0] for x_ in seen["normed"]]),
    )
