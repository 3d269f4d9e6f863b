"""The parts of a pre-norm decoder block, for every decoder family the capture takes.

GPT-2, Llama and Qwen2 share one block: a norm, self-attention and a residual sum, then a
norm, a feed-forward network and a residual sum,

    h' = h + attention(norm_1(h)) W^O,        h'' = h' + FFN(norm_2(h')),

with no norm on the residual path itself. They differ in the norm (GPT-2: LayerNorm; Llama,
Qwen2: RMSNorm), in the projections (GPT-2 fuses Q, K and V into one map), in the FFN
(GPT-2: act(w W^fc) W^proj; Llama, Qwen2: (act(w W^gate) * w W^up) W^down) and in position
(GPT-2 adds learned vectors to the input; Llama and Qwen2 rotate queries and keys).
:func:`pre_norm_layers` returns one :class:`PreNormLayer` per block, in order, so that the
linearised decoder (``helpers.methods.linearised_decoder``) and the decomposition behind the
norm-based context-mixing measures are one piece of code for the three.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from torch import nn
from transformers import PreTrainedModel

from .checks import UnsupportedModelError
from .families import family_of, layer_modules, submodule

__all__ = ["PRE_NORM_DECODERS", "PreNormLayer", "pre_norm_layers"]

PRE_NORM_DECODERS = ("gpt2", "llama", "qwen2")

_LLAMA_PATHS = dict(
    norm_1="input_layernorm",
    attention="self_attn",
    qkv=("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    output="self_attn.o_proj",
    norm_2="post_attention_layernorm",
    mlp="mlp",
    ffn_in=("mlp.gate_proj", "mlp.up_proj"),
    activation="mlp.act_fn",
    ffn_out="mlp.down_proj",
)
# per family: paths from one block to its modules (PreNormLayer's fields)
_LAYER_PATHS = {
    "gpt2": dict(
        norm_1="ln_1",
        attention="attn",
        qkv=("attn.c_attn",),
        output="attn.c_proj",
        norm_2="ln_2",
        mlp="mlp",
        ffn_in=("mlp.c_fc",),
        activation="mlp.act",
        ffn_out="mlp.c_proj",
    ),
    "llama": _LLAMA_PATHS,
    "qwen2": _LLAMA_PATHS,
}


class PreNormLayer(NamedTuple):
    """The modules of one pre-norm decoder block (``h'' = h' + FFN(norm_2(h'))``, ``h' = h + attn(norm_1(h)) W^O``)."""

    norm_1: nn.Module  # before attention: LayerNorm (GPT-2) or RMSNorm
    attention: nn.Module  # the attention module (its ``scaling``)
    qkv: tuple[nn.Module, ...]  # (W^Q, W^K, W^V), or GPT-2's fused one: outputs [q | k | v]
    output: nn.Module  # W^O
    norm_2: nn.Module  # before the FFN
    mlp: nn.Module  # the whole FFN: norm_2's output -> what the residual adds
    ffn_in: tuple[nn.Module, ...]  # (W^gate, W^up) of a gated FFN, or (W^fc,)
    activation: Callable
    ffn_out: nn.Module  # (f -> d)

    @property
    def gated(self) -> bool:
        return len(self.ffn_in) == 2


def pre_norm_layers(model: PreTrainedModel, method: str = "this method") -> list[PreNormLayer]:
    """One ``PreNormLayer`` per block of a pre-norm decoder, block 1 first.

    ``method`` names the caller in the error raised for any other family.
    """
    family = family_of(model).name
    if family not in _LAYER_PATHS:
        raise UnsupportedModelError(
            f"{method} follows a pre-norm decoder block by block ({', '.join(PRE_NORM_DECODERS)}); "
            f"model_type={family!r} is not one."
        )
    paths = _LAYER_PATHS[family]
    layers = []
    for module in layer_modules(model):
        parts = {
            name: tuple(submodule(module, p) for p in path) if isinstance(path, tuple) else submodule(module, path)
            for name, path in paths.items()
        }
        layers.append(PreNormLayer(**parts))
    return layers
