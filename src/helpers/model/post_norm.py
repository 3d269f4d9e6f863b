"""The parts of a post-norm encoder layer, for every encoder family the capture takes.

BERT, RoBERTa, ELECTRA, DistilBERT, ALBERT and MPNet share one layer: self-attention, a
residual sum and a LayerNorm, then a two-layer feed-forward network, a residual sum and a
LayerNorm. They differ in where those modules live, in an embedding projection between the
embedding LayerNorm and the first layer (ELECTRA when its embeddings are narrower than the
layers, ALBERT always), and in how layers are stored (ALBERT reuses one module for every
layer of a group). :func:`post_norm_layers` returns one :class:`PostNormLayer` per layer, in
order (ALBERT's shared module repeated), and :func:`embedding_parts` the embedding LayerNorm
and the projection, so that the linearised forward (``helpers.methods.linearised``) is one
piece of code for all six.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from torch import nn
from transformers import PreTrainedModel

from .checks import UnsupportedModelError
from .families import family_of, submodule

__all__ = [
    "POST_NORM_ENCODERS",
    "PostNormLayer",
    "EmbeddingParts",
    "post_norm_layers",
    "embedding_parts",
    "input_width",
]

POST_NORM_ENCODERS = ("bert", "roberta", "electra", "distilbert", "albert", "mpnet")

_BERT_PATHS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "attention.output.LayerNorm",
    "intermediate.dense",
    "intermediate.intermediate_act_fn",
    "output.dense",
    "output.LayerNorm",
)
# per family: paths from one layer module to W^Q, W^K, W^V, W^O, the LayerNorm after attention's residual
# sum, the FFN's first linear map, its activation, its second linear map and the LayerNorm after its residual sum
_LAYER_PATHS = {
    "bert": _BERT_PATHS,
    "roberta": _BERT_PATHS,
    "electra": _BERT_PATHS,
    "mpnet": (
        "attention.attn.q",
        "attention.attn.k",
        "attention.attn.v",
        "attention.attn.o",
        "attention.LayerNorm",
        "intermediate.dense",
        "intermediate.intermediate_act_fn",
        "output.dense",
        "output.LayerNorm",
    ),
    "distilbert": (
        "attention.q_lin",
        "attention.k_lin",
        "attention.v_lin",
        "attention.out_lin",
        "sa_layer_norm",
        "ffn.lin1",
        "ffn.activation",
        "ffn.lin2",
        "output_layer_norm",
    ),
    "albert": (
        "attention.query",
        "attention.key",
        "attention.value",
        "attention.dense",
        "attention.LayerNorm",
        "ffn",
        "activation",
        "ffn_output",
        "full_layer_layer_norm",
    ),
}
# per family: the path from the base model to the linear map between the embedding LayerNorm and layer 1
_PROJECTIONS = {"electra": "embeddings_project", "albert": "encoder.embedding_hidden_mapping_in"}


class PostNormLayer(NamedTuple):
    """The modules of one post-norm encoder layer (``y = LN_2(F(h) + h)``, ``h = LN_1(attn(x) W^O + x)``)."""

    query: nn.Linear
    key: nn.Linear
    value: nn.Linear
    output: nn.Linear  # W^O
    norm_1: nn.LayerNorm  # after attention's residual sum
    ffn_in: nn.Linear  # (d -> f)
    activation: Callable
    ffn_out: nn.Linear  # (f -> d)
    norm_2: nn.LayerNorm  # after the FFN's residual sum


class EmbeddingParts(NamedTuple):
    """The embedding LayerNorm (its input is x) and the linear map after it (None where there is none)."""

    norm: nn.LayerNorm
    projection: nn.Linear | None


def _check_post_norm(model: PreTrainedModel, method: str) -> str:
    family = family_of(model).name
    if family not in _LAYER_PATHS:
        raise UnsupportedModelError(
            f"{method} follows a post-norm encoder layer by layer ({', '.join(POST_NORM_ENCODERS)}); "
            f"model_type={family!r} is not one."
        )
    return family


def post_norm_layers(model: PreTrainedModel, method: str = "this method") -> list[PostNormLayer]:
    """One ``PostNormLayer`` per layer of a post-norm encoder, layer 1 first (ALBERT: its shared modules repeated).

    ``method`` names the caller in the error raised for any other family.
    """
    family = _check_post_norm(model, method)
    base = model.base_model
    config = model.config
    L = config.num_hidden_layers
    if family == "albert":
        if getattr(config, "inner_group_num", 1) != 1:
            raise UnsupportedModelError(
                f"{method} follows ALBERT with one layer per group; this one has inner_group_num="
                f"{config.inner_group_num} (several layers inside each step)."
            )
        groups = [group.albert_layers[0] for group in base.encoder.albert_layer_groups]
        modules = [groups[int(i / (L / config.num_hidden_groups))] for i in range(L)]  # as AlbertTransformer
    else:
        modules = list(submodule(base, family_of(model).blocks))
    paths = _LAYER_PATHS[family]
    return [PostNormLayer(*(submodule(module, path) for path in paths)) for module in modules]


def embedding_parts(model: PreTrainedModel, method: str = "this method") -> EmbeddingParts:
    """The embedding LayerNorm of a post-norm encoder and the projection after it (ELECTRA, ALBERT) or None."""
    family = _check_post_norm(model, method)
    base = model.base_model
    norm = submodule(base, family_of(model).embedding_norm)
    path = _PROJECTIONS.get(family)
    projection = None
    if path is not None and hasattr(base, path.split(".")[0]):  # ELECTRA has none when the widths agree
        projection = submodule(base, path)
    return EmbeddingParts(norm, projection)


def input_width(model: PreTrainedModel) -> int:
    """The width of x, the input embeddings whose tangents HTA sums over: the embeddings' width for ELECTRA
    and ALBERT (narrower than the layers where a projection follows), the hidden size for every other model."""
    if getattr(model.config, "model_type", None) in _PROJECTIONS:
        return embedding_parts(model).norm.weight.shape[0]
    return model.config.hidden_size
