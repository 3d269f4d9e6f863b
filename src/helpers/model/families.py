"""What the helpers know about each model family: where the pieces of an attention layer live.

Every supported family but MPNet computes attention through transformers'
``AttentionInterface`` (see :mod:`helpers.model.capture`); MPNet computes it inside
``MPNetSelfAttention`` and adds a relative-position bias to the scaled scores, so it has a
capture of its own (:mod:`helpers.model.capture_mpnet`, ``Family.own_capture``). What differs is
where the output projection W^O sits, whether the layer normalises its input
before Q, K, V (pre-norm: GPT-2, Llama) or after the residual sum (post-norm:
the BERT family), whether attention is causal, and how the layers are stored
(ALBERT reuses one layer module for every layer).

Paths are attribute paths relative to the model's base model
(``model.base_model``: the ``BertModel`` inside a ``BertForMaskedLM``, the
``LlamaModel`` inside a ``LlamaForCausalLM``) or to one layer module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from transformers import PreTrainedModel

from .checks import UnsupportedModelError

__all__ = [
    "Family",
    "FAMILIES",
    "BYPASSES_INTERFACE",
    "UnsupportedFamilyError",
    "family_of",
    "layer_modules",
    "submodule",
    "linear_weight",
    "linear_bias",
    "value_projection",
    "output_projection",
]


class UnsupportedFamilyError(UnsupportedModelError):
    """The model's family is not one the generic capture can take apart."""


@dataclass(frozen=True)
class Family:
    """Where the parts of one family's attention layer live.

    Its fields, one per attribute:

    * ``name``: the family, e.g. ``"bert"``, ``"llama"``.
    * ``blocks``: path from the base model to the layer modules (a ModuleList), or a function returning them (ALBERT: the shared layers of its groups).
    * ``value``: path from a layer to the projection that computes V; its input is the (normalised) input Q, K and V are computed from.
    * ``value_slice``: for a fused Q/K/V projection (GPT-2's ``c_attn``), which third of its outputs is V (2); ``None`` for a separate V projection.
    * ``output``: path from a layer to W^O.
    * ``embedding_norm``: path from the base model to the LayerNorm whose *input* is the input embeddings x (encoders); ``None`` where x is the first layer's input (decoders: token embeddings, plus positions for GPT-2).
    * ``pre_norm``: Q, K, V are computed from a normalised copy of the layer input, while the residual adds the raw one.
    * ``causal``: each position attends to itself and the positions before it only.
    * ``own_capture``: attention is computed inline, bypassing the AttentionInterface, and the family
      has a capture path of its own (MPNet); the generic capture refuses it.
    """

    name: str
    blocks: str | Callable[[nn.Module], list[nn.Module]]
    value: str
    output: str
    embedding_norm: str | None
    pre_norm: bool
    causal: bool
    value_slice: int | None = None
    own_capture: bool = False


def _albert_layers(base: nn.Module) -> list[nn.Module]:
    return [layer for group in base.encoder.albert_layer_groups for layer in group.albert_layers]


_BERT_LIKE = dict(
    blocks="encoder.layer",
    value="attention.self.value",
    output="attention.output.dense",
    embedding_norm="embeddings.LayerNorm",
    pre_norm=False,
    causal=False,
)
_LLAMA_LIKE = dict(
    blocks="layers",
    value="self_attn.v_proj",
    output="self_attn.o_proj",
    embedding_norm=None,
    pre_norm=True,
    causal=True,
)

FAMILIES: dict[str, Family] = {
    "bert": Family("bert", **_BERT_LIKE),
    "roberta": Family("roberta", **_BERT_LIKE),
    "electra": Family("electra", **_BERT_LIKE),
    "distilbert": Family(
        "distilbert",
        blocks="transformer.layer",
        value="attention.v_lin",
        output="attention.out_lin",
        embedding_norm="embeddings.LayerNorm",
        pre_norm=False,
        causal=False,
    ),
    "albert": Family(
        "albert",
        blocks=_albert_layers,
        value="attention.value",
        output="attention.dense",
        embedding_norm="embeddings.LayerNorm",
        pre_norm=False,
        causal=False,
    ),
    "gpt2": Family(
        "gpt2",
        blocks="h",
        value="attn.c_attn",
        value_slice=2,
        output="attn.c_proj",
        embedding_norm=None,
        pre_norm=True,
        causal=True,
    ),
    # post-norm like BERT; its attention adds MPNetEncoder.compute_position_bias to Q K^T / sqrt(d_v)
    "mpnet": Family(
        "mpnet",
        blocks="encoder.layer",
        value="attention.attn.v",
        output="attention.attn.o",
        embedding_norm="embeddings.LayerNorm",
        pre_norm=False,
        causal=False,
        own_capture=True,
    ),
    "llama": Family("llama", **_LLAMA_LIKE),
    "qwen2": Family("qwen2", **_LLAMA_LIKE),
}

# Families whose attention never goes through the AttentionInterface.
BYPASSES_INTERFACE = {
    "deberta": "DeBERTa computes its disentangled attention itself, bypassing transformers' AttentionInterface",
    "deberta-v2": "DeBERTa-v2 computes its disentangled attention itself, bypassing transformers' AttentionInterface",
}


def family_of(model: PreTrainedModel) -> Family:
    """The family record of ``model`` (by ``config.model_type``), or a clear error."""
    if not isinstance(model, PreTrainedModel):
        raise TypeError(f"Expected a transformers PreTrainedModel, got {type(model).__name__}.")
    model_type = getattr(model.config, "model_type", None)
    if model_type in BYPASSES_INTERFACE:
        raise UnsupportedFamilyError(
            f"{BYPASSES_INTERFACE[model_type]}, so the helpers cannot capture its heads "
            f"(model_type={model_type!r}). Supported families: {', '.join(FAMILIES)}."
        )
    if model_type not in FAMILIES:
        raise UnsupportedFamilyError(
            f"The helpers take apart these families: {', '.join(FAMILIES)}; got model_type={model_type!r} "
            f"({type(model).__name__})."
        )
    return FAMILIES[model_type]


def submodule(root: nn.Module, path: str) -> nn.Module:
    """``root.a.b.c`` for ``path = "a.b.c"``, with a clear error naming the missing part."""
    module = root
    for part in path.split("."):
        if not hasattr(module, part):
            raise UnsupportedFamilyError(
                f"{type(root).__name__} has no {path!r} (missing {part!r}); this model does not have the "
                "layout its model_type promises."
            )
        module = getattr(module, part)
    return module


def layer_modules(model: PreTrainedModel) -> list[nn.Module]:
    """The distinct layer modules of the base model, in order (ALBERT: fewer than its layer count)."""
    family = family_of(model)
    base = model.base_model
    if callable(family.blocks):
        return list(family.blocks(base))
    return list(submodule(base, family.blocks))


def _is_conv1d(module: nn.Module) -> bool:
    return type(module).__name__ == "Conv1D"  # GPT-2's transposed linear: x @ W + b, W: (in, out)


def linear_weight(module: nn.Module) -> torch.Tensor:
    """W with the ``x @ W`` convention, ``(in, out)``, for nn.Linear and GPT-2's Conv1D."""
    return module.weight if _is_conv1d(module) else module.weight.T


def linear_bias(module: nn.Module) -> torch.Tensor:
    """The bias ``(out,)``, zeros where the layer has none (Llama's projections)."""
    if getattr(module, "bias", None) is not None:
        return module.bias
    return torch.zeros(linear_weight(module).shape[1], dtype=module.weight.dtype, device=module.weight.device)


class Projection(NamedTuple):
    """A layer's weights per head and their bias (shapes in each function's docstring)."""

    weight: torch.Tensor
    bias: torch.Tensor


def value_projection(model: PreTrainedModel, layer: nn.Module, kv_heads: int, d_v: int) -> Projection:
    """W_V: (kv_heads, d, d_v) and b_V: (kv_heads, d_v), so that V = X W_V + b_V per key/value head.

    X is the (normalised) input Q, K and V are computed from.
    """
    family = family_of(model)
    module = submodule(layer, family.value)
    W, b = linear_weight(module), linear_bias(module)
    if family.value_slice is not None:
        width = W.shape[1] // 3
        part = slice(family.value_slice * width, (family.value_slice + 1) * width)
        W, b = W[:, part], b[part]
    d = W.shape[0]
    return Projection(W.reshape(d, kv_heads, d_v).permute(1, 0, 2), b.reshape(kv_heads, d_v))


def output_projection(model: PreTrainedModel, layer: nn.Module, heads: int, d_v: int) -> Projection:
    """H: (heads, d_v, d), the rows of W^O that belong to each head, and b^O: (d,) (zeros if absent)."""
    module = submodule(layer, family_of(model).output)
    W = linear_weight(module)
    return Projection(W.reshape(heads, d_v, W.shape[1]), linear_bias(module))
