"""Run a BERT or MPNet model with one head's attention probabilities replaced.

``patch_attention(model, layer, head, A_new)`` is a context manager. Inside
it, every forward pass of the model recomputes that head's output as
``A_new V_h`` (V_h = E W^V_h + b^V_h, the head's values, from the layer's
actual input), writes it into the attention block's concatenated head
outputs, and hands the result on: the output projection, residual,
LayerNorm, feed-forward and every later layer run on the patched head. The
model's own ``attentions`` output (``output_attentions=True``) shows A_new
for that head, so ``helpers.capture`` inside the context sees the patch too.

Mechanism (BERT): a forward hook on the layer's ``BertSelfAttention`` module,
registered with ``prepend=True`` so it runs before the hook transformers
uses to record attentions. MPNet projects the heads inside its
``MPNetSelfAttention`` (``o``), so there a pre-hook on ``o`` rewrites the
head's columns of the concatenated outputs, and a forward hook on the
module shows A_new in the attentions it returns. The hooks are removed on
exit, even on error.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from .checks import LINEARISED_ENCODERS, check_supported
from .numbering import head_index, layer_index
from .progress import progress_bar
from .text import check_encoding

# the families whose attention function patch_attention replaces, and why only they
PATCHABLE_FAMILIES = LINEARISED_ENCODERS
PATCH_LIMIT = "its hooks follow BERT's and MPNet's attention modules"


@dataclass
class AttentionPatch:
    """What a running patch did: ``calls`` counts the forward passes it changed."""

    layer: int
    head: int
    attention: torch.Tensor  # (n, n) or (batch, n, n)
    calls: int = 0


def _check_patch(model: PreTrainedModel, layer: int, head: int, attention: torch.Tensor) -> None:
    check_supported(model, PATCHABLE_FAMILIES, method=f"patch_attention ({PATCH_LIMIT})")
    layer_index(layer, model.config.num_hidden_layers)
    head_index(head, model.config.num_attention_heads)
    if not isinstance(attention, torch.Tensor):
        raise TypeError(f"The replacement attention must be a torch.Tensor, got {type(attention).__name__}.")
    if attention.dim() not in (2, 3) or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"The replacement attention must be (n, n) or (batch, n, n); got {tuple(attention.shape)}.")
    if not torch.isfinite(attention).all():
        raise ValueError("The replacement attention contains NaN or infinite values.")
    if model.training:
        raise ValueError("The model is in training mode (attention dropout on); call model.eval() first.")


@contextmanager
def patch_attention(model: PreTrainedModel, layer: int, head: int, attention: torch.Tensor) -> Iterator[AttentionPatch]:
    """Replace the attention probabilities of ``(layer, head)`` by ``attention`` inside the block.

    Args:
        model: a BERT encoder with eager attention, or an MPNet encoder, in eval mode.
        layer, head: which head to patch, numbered 1..L and 1..h as in the book.
        attention: (n, n), or (batch, n, n), the replacement A. It need not
            be non-negative or row-stochastic: the patch is the product
            ``attention @ V_h``, whatever A is.

    Yields:
        An ``AttentionPatch``; its ``calls`` counts the patched forward passes.

    Raises:
        ValueError / TypeError: bad layer, head or tensor (on entry); an
        input whose length differs from n (during the forward pass).
    """
    _check_patch(model, layer, head, attention)
    k = head_index(head, model.config.num_attention_heads)
    patch = AttentionPatch(layer, head, attention)
    block = model.encoder.layer[layer_index(layer, model.config.num_hidden_layers)].attention

    def replacement(hidden: torch.Tensor, value: torch.nn.Linear, columns: slice) -> torch.Tensor:
        """A_new V_h for the layer input ``hidden`` (batch, n, d): (batch, n, d_v)."""
        n = hidden.shape[1]
        if attention.shape[-1] != n:
            raise ValueError(
                f"The patch for layer {layer}, head {head} is {attention.shape[-1]} x "
                f"{attention.shape[-1]} but the input has {n} tokens."
            )
        if attention.dim() == 3 and attention.shape[0] != hidden.shape[0]:
            raise ValueError(
                f"The patch has a batch of {attention.shape[0]} but the input a batch of {hidden.shape[0]}."
            )
        A = attention.to(device=hidden.device, dtype=hidden.dtype)
        return A @ torch.nn.functional.linear(hidden, value.weight[columns], value.bias[columns])

    def with_patched_weights(weights: torch.Tensor | None, hidden: torch.Tensor) -> torch.Tensor | None:
        if weights is None:
            return None
        weights = weights.clone()
        weights[:, k] = attention.to(device=hidden.device, dtype=weights.dtype)
        return weights

    if model.config.model_type == "mpnet":
        module = block.attn
        d_v = module.attention_head_size
        columns = slice(k * d_v, (k + 1) * d_v)
        seen: dict[str, torch.Tensor] = {}

        def keep_input(mod, args, kwargs):
            seen["hidden"] = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]

        def rewrite_heads(mod, args):
            context = args[0].clone()  # (batch, n, h * d_v), before the output projection o
            context[..., columns] = replacement(seen["hidden"], module.v, columns)
            patch.calls += 1
            return (context, *args[1:])

        def show_weights(mod, args, kwargs, output):
            if len(output) < 2:
                return output
            return (output[0], with_patched_weights(output[1], seen["hidden"]), *output[2:])

        handles = [
            module.register_forward_pre_hook(keep_input, with_kwargs=True),
            module.o.register_forward_pre_hook(rewrite_heads),
            module.register_forward_hook(show_weights, with_kwargs=True),
        ]
    else:
        module = block.self
        d_v = module.attention_head_size
        columns = slice(k * d_v, (k + 1) * d_v)

        def hook(mod, args, kwargs, output):
            hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]  # (batch, n, d)
            context, weights = output  # (batch, n, h * d_v), (batch, h, n, n)
            context = context.clone()
            context[..., columns] = replacement(hidden, mod.value, columns)
            patch.calls += 1
            return context, with_patched_weights(weights, hidden)

        handles = [module.register_forward_hook(hook, prepend=True, with_kwargs=True)]
    try:
        yield patch
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def run_patched(model: PreTrainedModel, encoding, layer: int, head: int, attention: torch.Tensor) -> torch.Tensor:
    """Hidden states ``(L + 1, n, d)`` of one sequence with one head's attention replaced.

    encoding: a batch-of-one encoding (``helpers.encode``); attention: (n, n).
    """
    check_encoding(model, encoding)
    with patch_attention(model, layer, head, attention) as patch:
        result = model(**encoding, output_hidden_states=True)
    if patch.calls != 1:
        raise RuntimeError(f"The patch ran {patch.calls} times instead of once; is layer {layer} in the forward pass?")
    return torch.stack(result.hidden_states)[:, 0]


@torch.no_grad()
def hidden_state_change(
    model: PreTrainedModel, encoding, layer: int, head: int, attentions: torch.Tensor, progress: bool = True
) -> torch.Tensor:
    """Largest change of every hidden state when one head's attention is replaced.

    attentions: (m, n, n), m replacements tried one at a time. Returns
    (m, L + 1): entry [k, l] is max |h_l(patched with attentions[k]) - h_l|
    over tokens and features, h_0 the embedding output.
    """
    if not isinstance(attentions, torch.Tensor) or attentions.dim() != 3:
        raise ValueError("attentions must be a tensor (m, n, n) of replacements, one per row of the result.")
    check_encoding(model, encoding)
    reference = torch.stack(model(**encoding, output_hidden_states=True).hidden_states)[:, 0]
    changes = [
        (run_patched(model, encoding, layer, head, replacement) - reference).abs().amax(dim=(1, 2))
        for replacement in progress_bar(attentions, "patched runs", progress)
    ]
    return torch.stack(changes)
