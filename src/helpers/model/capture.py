"""One forward pass -> :class:`~helpers.model.internals.Internals`, on two paths.

``capture`` is the BERT fast path: the encoder's layers run one by one and every tensor of the
paper's notation is read off them; MPNet, whose attention bypasses the interface below, has a path
of its own (:mod:`helpers.model.capture_mpnet`). ``capture_generic`` takes any other supported family
(Llama, Qwen2, GPT-2, ...) through transformers' AttentionInterface:

transformers (5.x) routes self-attention of most families through
``ALL_ATTENTION_FUNCTIONS[config._attn_implementation]``. The function
registered here computes exactly what the models' eager functions compute,

    A = softmax(Q K^T * scaling + mask)        (optionally soft-capped logits)
    output = A V                               (K, V repeated for grouped-query heads)

and, inside ``recording()``, appends one ``HeadRecord`` per call. The mask
function is registered under the same name (``eager_mask``): without it the
models silently drop the causal and padding masks.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn
from transformers import BatchEncoding, PreTrainedModel

from .batches import is_batch, sequences_of
from .capture_mpnet import capture_mpnet
from .checks import UnsupportedModelError, check_encoding_type, check_special_tokens, check_supported, float32_model
from .families import (
    FAMILIES,
    UnsupportedFamilyError,
    family_of,
    layer_modules,
    output_projection,
    submodule,
    value_projection,
)
from .internals import Internals, head_weights
from .text import check_encoding, check_single_sequence

CAPTURE = "helpers_capture"


@dataclass
class HeadRecord:
    """One call of the attention function: one layer, the whole batch.

    B batch, h query heads, h_kv key/value heads, n queries, k keys, d_v head size.
    """

    module: nn.Module
    Q: torch.Tensor  # (B, h, n, d_v), as the model passed it (rotated for RoPE models)
    K: torch.Tensor  # (B, h_kv, k, d_v)
    V: torch.Tensor  # (B, h_kv, k, d_v)
    A: torch.Tensor  # (B, h, n, k)
    scaling: float


_recorders: list[list[HeadRecord]] = []
# inside ``editing()``: edit(module, A (B, h, n, k), values (B, h, k, d_v)) -> (A, values), applied before A V
_editors: list = []


def repeat_kv(X: torch.Tensor, groups: int) -> torch.Tensor:
    """(B, h_kv, k, d_v) -> (B, h_kv * groups, k, d_v): each key/value head serves ``groups`` query heads in a row."""
    if groups == 1:
        return X
    return X.repeat_interleave(groups, dim=1)


def eager_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    softcap: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The eager attention every supported family uses, recording Q, K, V, A when a recorder is active.

    query: (B, h, n, d_v); key, value: (B, h_kv, k, d_v). Returns ``(output (B, n, h, d_v), A (B, h, n, k))``.
    """
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    groups = query.shape[1] // key.shape[1]
    keys, values = repeat_kv(key, groups), repeat_kv(value, groups)
    logits = query @ keys.transpose(-1, -2) * scaling
    if softcap is not None:
        logits = torch.tanh(logits / softcap) * softcap
    if attention_mask is not None:
        mask = attention_mask[..., : keys.shape[-2]]
        if mask.dtype == torch.bool:  # True = may attend
            logits = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
        else:
            logits = logits + mask
    A = torch.softmax(logits, dim=-1, dtype=torch.float32).to(query.dtype)
    A = nn.functional.dropout(A, p=dropout, training=module.training)
    if _recorders:
        _recorders[-1].append(HeadRecord(module, query, key, value, A, float(scaling)))
    if _editors:  # after the record: a capture inside an edit sees the model's own A and V
        A, values = _editors[-1](module, A, values)
    output = A @ values
    return output.transpose(1, 2).contiguous(), A


def register() -> str:
    """Register the function and its mask under ``CAPTURE`` (idempotent); returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(CAPTURE, eager_attention)
    AttentionMaskInterface.register(CAPTURE, eager_mask)
    return CAPTURE


# families whose attention never goes through transformers' AttentionInterface
INLINE_ATTENTION = ("mpnet",)


@contextlib.contextmanager
def _attention_function(model: nn.Module) -> Iterator[None]:
    """Within the block, ``model`` runs this module's attention function; its own is restored afterwards.

    Raises UnsupportedModelError for a model that computes attention inline instead of through
    transformers' AttentionInterface (MPNet): the function would never be called, and a recording
    would silently hold nothing (``editing`` takes MPNet through :func:`_mpnet_attention`).
    """
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type in INLINE_ATTENTION:
        raise UnsupportedModelError(
            f"{type(model).__name__} ({model_type}) computes its attention inside its own self-attention module, "
            "not through transformers' AttentionInterface, so a recording cannot reach it "
            "(helpers.model.capture.recording); capture works on it through its own path."
        )
    register()
    previous = model.config._attn_implementation
    try:
        model.set_attn_implementation(CAPTURE)
        yield
    finally:
        model.set_attn_implementation(previous)


@contextlib.contextmanager
def _mpnet_attention(model: nn.Module) -> Iterator[None]:
    """Within the block, each MPNetSelfAttention of ``model`` computes its attention as transformers does
    (scaled scores plus the relative-position bias, softmax) and then applies the innermost edit to
    ``A`` and the values before the product and the output projection. Its own forward is restored after."""
    import math
    import types

    modules = [layer.attention.attn for layer in model.encoder.layer]

    def forward(self, hidden_states, attention_mask=None, position_bias=None, output_attentions=False, **kwargs):
        shape = (*hidden_states.shape[:-1], -1, self.attention_head_size)
        q = self.q(hidden_states).view(shape).transpose(1, 2)  # (B, h, n, d_v)
        k = self.k(hidden_states).view(shape).transpose(1, 2)
        v = self.v(hidden_states).view(shape).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.attention_head_size)
        if position_bias is not None:
            scores = scores + position_bias
        if attention_mask is not None:
            scores = scores + attention_mask
        A = self.dropout(torch.softmax(scores, dim=-1))
        if _editors:
            A, v = _editors[-1](self, A, v)
        c = (A @ v).permute(0, 2, 1, 3).reshape(*hidden_states.shape[:-1], self.all_head_size)
        o = self.o(c)
        return (o, A) if output_attentions else (o,)

    for index, module in enumerate(modules):
        module.layer_idx = index  # what an edit reads to know its layer, as on the other families
        module.forward = types.MethodType(forward, module)
    try:
        yield
    finally:
        for module in modules:
            del module.forward  # back to the class's own


@contextlib.contextmanager
def editing(model: nn.Module, edit) -> Iterator[None]:
    """Within the block, every attention call of ``model`` outputs ``A' V'`` with ``(A', V') = edit(module, A, V)``.

    ``edit(module, A, values)`` gets the calling attention module (``module.layer_idx`` is its 0-based
    layer), ``A``: (B, h, n, k) and ``values``: (B, h, k, d_v) (already repeated for grouped heads),
    and returns the two tensors to multiply, of the same shapes. Edits do not nest: the innermost applies.
    """
    if not callable(edit):
        raise TypeError(f"edit must be callable (module, A, values) -> (A, values); got {type(edit).__name__}.")
    _editors.append(edit)
    try:
        if getattr(getattr(model, "config", None), "model_type", None) == "mpnet":
            with _mpnet_attention(model):
                yield
        else:
            with _attention_function(model):
                yield
    finally:
        _editors.pop()


@contextlib.contextmanager
def recording(model: nn.Module) -> Iterator[list[HeadRecord]]:
    """Within the block, ``model`` runs the capture function and every call is appended to the yielded list.

    The model's attention implementation is restored afterwards.
    """
    records: list[HeadRecord] = []
    _recorders.append(records)
    try:
        with _attention_function(model):
            yield records
    finally:
        _recorders.pop()


@torch.no_grad()
def capture(model: PreTrainedModel, encoding: BatchEncoding) -> Internals | list[Internals]:
    """Run the model once on one sequence and return every tensor the chapters need.

    Args:
        model: a BERT encoder loaded with eager attention (``load_model``); MPNet goes through
            its own path (``helpers.model.capture_mpnet``: Internals.position_bias holds its bias),
            the other supported families (``helpers.model.families``) through ``capture_generic``.
        encoding: one unpadded sequence, input_ids ``(1, n)`` (``encode``); or a padded batch
            ``(B, n)`` with its attention mask (``tokenizer(texts, padding=True, return_tensors="pt")``),
            which gives a list of B ``Internals``, each that of its sequence run alone
            (``helpers.model.batches.sequences_of``).

    A bfloat16 / float16 model runs as a float32 copy, so every tensor is float32.

    Raises:
        TypeError: ``encoding`` is not an encoding (the text itself, a bare tensor): use ``helpers.encode``.
        UnsupportedModelError, ValueError: wrong model or encoding (``helpers.model.text.check_encoding``:
        padding, ids outside the vocabulary or the token types, too long).

    Warns:
        InputWarning: an encoder's encoding without the special tokens its tokenizer adds ([CLS] ... [SEP]).
    """
    check_encoding_type(encoding)
    if is_batch(encoding):
        return [capture(model, sequence) for sequence in sequences_of(encoding)]
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    family = FAMILIES.get(model_type)
    check_special_tokens(encoding, getattr(model, "config", None), causal=family is not None and family.causal)
    if model_type == "mpnet":
        return capture_mpnet(model, encoding)  # attention computed inline, with a position bias
    if model_type != "bert":
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
    weights = [head_weights(model, layer) for layer in range(1, len(model.encoder.layer) + 1)]
    stacked = {key: torch.stack([getattr(w, key) for w in weights]) for key in weights[0]._fields}

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

    The model runs once with the capture attention function (``eager_attention`` above),
    which records Q, K, V and A per layer; hooks record each layer's input, the input its
    Q, K, V are computed from (``normed``: the normalised copy in pre-norm models) and the
    input and output of W^O. Grouped-query heads: ``V``, ``W_V`` and ``b_V`` hold one copy per
    query head (query head j uses key/value head ``j // groups``), so ``T = V H`` per query head.

    Args:
        model: a model of a family in ``helpers.model.families.FAMILIES`` (a task model is fine: its
            base model is run), in eval mode.
        encoding: one unpadded sequence, input_ids ``(1, n)``.

    Raises:
        UnsupportedFamilyError: unknown family, or a model whose attention bypasses the interface.
        ValueError: training mode, a batch, too many tokens.
    """
    family = family_of(model)
    if family.own_capture:  # MPNet: its attention never reaches the AttentionInterface
        return capture_mpnet(model, encoding)
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
