"""The capture of MPNet (all-mpnet-base-v2, the paper-scale encoder), a path of its own.

``MPNetSelfAttention`` computes attention inline, never through transformers'
AttentionInterface, so the generic capture cannot see it. Per layer it computes

    A = softmax(Q K^T / sqrt(d_v) + P)        P: (h, n, n), the relative-position bias

where P comes from ``MPNetEncoder.compute_position_bias`` (32 buckets of the offset j - i,
one learnt value per bucket and head), is computed once per forward pass and is the same in
every layer. Otherwise an MPNet layer is a post-norm BERT layer: the heads' dense output
``sum_h A_h T_h + b^O``, then residual and LayerNorm, feed-forward, residual and LayerNorm.
Its embeddings are word + position (no token types) before a LayerNorm; its special tokens
are ``<s>`` and ``</s>``, a pair ``<s> A </s></s> B </s>``.
"""

from __future__ import annotations

import torch
from transformers import BatchEncoding, PreTrainedModel

from .checks import LINEARISED_ENCODERS, check_supported, float32_model
from .internals import Internals, attention_parts, head_weights
from .text import check_encoding

__all__ = ["capture_mpnet", "mpnet_position_bias"]


def mpnet_position_bias(model: PreTrainedModel, n: int) -> torch.Tensor:
    """MPNet's relative-position bias for a sequence of ``n`` tokens: P, (h, n, n).

    The model's own ``MPNetEncoder.compute_position_bias`` (it reads only the length, batch size and
    device of the hidden states it is given), so it is exactly what each layer adds to its scores.
    """
    weight = model.encoder.relative_attention_bias.weight
    probe = torch.zeros(1, n, 1, dtype=weight.dtype, device=weight.device)
    return model.encoder.compute_position_bias(probe)[0]


def _mpnet_inputs(encoding: BatchEncoding) -> dict:
    """The entries of ``encoding`` MPNet's forward reads: ``input_ids`` and ``attention_mask``.

    Raises:
        ValueError: the encoding carries a second segment's token types (MPNet has none: its
            tokenizer marks a pair by ``</s></s>``, and its forward would drop them silently).
    """
    types = encoding.get("token_type_ids")
    if types is not None and bool((types != 0).any()):
        raise ValueError(
            "The encoding has token_type_ids of a second segment, but MPNet has no token types (a pair is "
            "<s> A </s></s> B </s>): encode with the model's own tokenizer (helpers.encode)."
        )
    return {key: encoding[key] for key in ("input_ids", "attention_mask") if encoding.get(key) is not None}


@torch.no_grad()
def capture_mpnet(model: PreTrainedModel, encoding: BatchEncoding) -> Internals:
    """Run an MPNet encoder once on one sequence and return every tensor the chapters need.

    As the BERT fast path: the model runs once (with ``output_attentions``), a hook keeps each
    layer's dense output ``attention_output`` (L, n, d) and the input embeddings x (n, d); Q, K,
    V (L, h, n, d_v) and T (L, h, n, d) are computed from each layer input E and the layer's
    weights; A (L, h, n, n) is the model's own; ``position_bias`` (L, h, n, n) is P, the same in
    every layer, so that ``attention_from_qk(Q, K, position_bias)`` equals A.

    Args:
        model: a bare MPNetModel in eval mode (``load_model("all-mpnet-base-v2")``).
        encoding: one unpadded sequence, input_ids ``(1, n)`` (``encode``).

    Raises:
        UnsupportedModelError: not a bare MPNetModel.
        ValueError: training mode, a padded or batched encoding, token types of a second segment.
    """
    check_supported(model, LINEARISED_ENCODERS)
    inputs = _mpnet_inputs(encoding)  # first: another tokenizer's pair says so, not "ids outside the vocabulary"
    check_encoding(model, encoding)
    model = float32_model(model)  # the identities hold at float32 precision, not at bfloat16's
    if model.training:
        raise ValueError("The model is in training mode (dropout on); call model.eval() first.")
    L = model.config.num_hidden_layers
    dense_outputs: dict[int, torch.Tensor] = {}
    raw_embeddings: list[torch.Tensor] = []
    hooks = [model.embeddings.LayerNorm.register_forward_hook(lambda m, i, o: raw_embeddings.append(i[0]))]
    for layer in range(1, L + 1):
        hooks.append(
            attention_parts(model, layer).output.register_forward_hook(
                lambda m, i, o, index=layer - 1: dense_outputs.__setitem__(index, o)
            )
        )
    try:
        result = model(**inputs, output_attentions=True, output_hidden_states=True, return_dict=True)
    finally:
        for hook in hooks:
            hook.remove()

    hidden = torch.stack(result.hidden_states)[:, 0]  # (L+1, n, d)
    E = hidden[:-1]
    weights = [head_weights(model, layer) for layer in range(1, L + 1)]
    stacked = {key: torch.stack([getattr(w, key) for w in weights]) for key in weights[0]._fields}

    def project(W, b):
        return torch.einsum("lnd,lhde->lhne", E, W) + b[:, :, None, :]

    V = project(stacked["W_V"], stacked["b_V"])
    bias = mpnet_position_bias(model, hidden.shape[1])
    return Internals(
        input_ids=encoding["input_ids"][0],
        x=raw_embeddings[0][0],
        E=E,
        Q=project(stacked["W_Q"], stacked["b_Q"]),
        K=project(stacked["W_K"], stacked["b_K"]),
        V=V,
        A=torch.stack(result.attentions)[:, 0],
        W_V=stacked["W_V"],
        b_V=stacked["b_V"],
        H=stacked["H"],
        b_O=stacked["b_O"],
        T=V @ stacked["H"],
        attention_output=torch.stack([dense_outputs[i][0] for i in range(L)]),
        hidden_states=hidden,
        family="mpnet",
        position_bias=bias.expand(L, *bias.shape),
    )
