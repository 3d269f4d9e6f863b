"""Slow, obviously-correct references for the decoder methods, through each decoder's own modules.

Each runs the model's own forward (GPT-2, Llama or Qwen2, eval mode) and reads block outputs
with forward hooks, so nothing of the book's linearisation or decomposition is reused:

* ``decoder_model_jacobian``: d h^l_i / d x_j for every block l by ``torch.autograd.functional.jacobian``,
  with respect to the model's ``inputs_embeds`` (GPT-2 adds its position vectors after them, a
  constant shift, so the derivative is the one with respect to x). Tiny models only.
* ``decoder_layer_jacobian``: d h^l_i / d h^(l-1)_j of one block, its input replaced by a pre-hook.
* ``decoder_value_zeroing_reference``: value zeroing by rerunning the model with token j's value
  vectors zeroed in the value projection's output, once per j.

Run them on a float64 copy of the model for a float64 reference.
"""

from __future__ import annotations

import torch
from transformers import BatchEncoding, PreTrainedModel

from ..model.families import family_of, layer_modules, submodule
from ..model.numbering import layer_index

__all__ = ["decoder_model_jacobian", "decoder_layer_jacobian", "decoder_value_zeroing_reference"]


def _first(output) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def _block_outputs(model: PreTrainedModel, run) -> torch.Tensor:
    """Every block's output (before the final norm) while ``run()`` runs the model: (L, n, d)."""
    seen = []
    handles = [block.register_forward_hook(lambda m, i, o: seen.append(_first(o)[0])) for block in layer_modules(model)]
    try:
        run()
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack(seen)


def _check_eval(model: PreTrainedModel) -> None:
    if model.training:
        raise ValueError("The model is in training mode (dropout on); call model.eval() first.")


def decoder_model_jacobian(model: PreTrainedModel, encoding: BatchEncoding) -> torch.Tensor:
    """The full Jacobian of every block's output with respect to the input embeddings: (L, n, d, n, d)."""
    _check_eval(model)
    base = model.base_model
    embeddings = model.get_input_embeddings()(encoding["input_ids"])[0].detach()

    def hidden(inputs: torch.Tensor) -> torch.Tensor:
        return _block_outputs(model, lambda: base(inputs_embeds=inputs[None]))

    return torch.autograd.functional.jacobian(hidden, embeddings)


def decoder_layer_jacobian(model: PreTrainedModel, encoding: BatchEncoding, layer: int) -> torch.Tensor:
    """d h^l_i / d h^(l-1)_j of block ``layer`` (1..L), through that block's own module: (n, d, n, d)."""
    _check_eval(model)
    blocks = layer_modules(model)
    block = blocks[layer_index(layer, len(blocks))]
    base = model.base_model
    with torch.no_grad():
        inputs = _block_outputs(model, lambda: base(**encoding))
        start = model.get_input_embeddings()(encoding["input_ids"])[0]
        if family_of(model).name == "gpt2":  # its first block reads words + positions
            start = start + base.wpe(torch.arange(start.shape[0], device=start.device))
        inputs = torch.cat([start[None], inputs])

    def output_of(h: torch.Tensor) -> torch.Tensor:
        def replace(module, args, kwargs):
            if args:
                return (h[None], *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": h[None]}

        handle = block.register_forward_pre_hook(replace, with_kwargs=True)
        try:
            return _block_outputs(model, lambda: base(**encoding))[layer - 1]
        finally:
            handle.remove()

    return torch.autograd.functional.jacobian(output_of, inputs[layer - 1].detach())


@torch.no_grad()
def decoder_value_zeroing_reference(model: PreTrainedModel, encoding: BatchEncoding, layer: int) -> torch.Tensor:
    """Value zeroing of block ``layer`` (1..L) by brute force: (n, n), C_ij = 1 - cos, unnormalised."""
    _check_eval(model)
    family = family_of(model)
    blocks = layer_modules(model)
    index = layer_index(layer, len(blocks))
    value = submodule(blocks[index], family.value)
    base = model.base_model
    original = _block_outputs(model, lambda: base(**encoding))[index]
    n = original.shape[0]
    scores = torch.zeros(n, n, dtype=original.dtype, device=original.device)
    for j in range(n):

        def zero_row(module, inputs, output, j=j):
            output = output.clone()
            if family.value_slice is None:
                output[:, j] = 0.0
            else:  # a fused projection: zero only its value third
                width = output.shape[-1] // 3
                output[:, j, family.value_slice * width : (family.value_slice + 1) * width] = 0.0
            return output

        handle = value.register_forward_hook(zero_row)
        try:
            changed = _block_outputs(model, lambda: base(**encoding))[index]
        finally:
            handle.remove()
        scores[:, j] = 1 - torch.nn.functional.cosine_similarity(original, changed, dim=-1)
    return scores
