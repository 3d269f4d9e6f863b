"""Slow, obviously correct versions of the book's methods, for tests and benchmarks."""
from __future__ import annotations

# --------------------------------------------------------------------------- chapter 7: context mixing
import torch
from transformers import BatchEncoding, PreTrainedModel

from .numbering import layer_index


def _hidden_states(model: PreTrainedModel, encoding: BatchEncoding) -> torch.Tensor:
    return torch.stack(model(**encoding, output_hidden_states=True).hidden_states)[:, 0]


@torch.no_grad()
def value_zeroing_reference(model: PreTrainedModel, encoding: BatchEncoding, layer: int) -> torch.Tensor:
    """Value zeroing of layer ``layer`` (1..L) by brute force: (n, n), C_ij unnormalised.

    For each token j a forward hook zeroes row j of the value projection's output
    (every head's value vector of token j, bias included) in that layer, and the
    whole model runs again; layers before ``layer`` are unchanged, so hidden
    state ``layer`` is that one layer rerun on its original input.
    """
    index = layer_index(layer, model.config.num_hidden_layers)
    original = _hidden_states(model, encoding)[layer]
    n = original.shape[0]
    scores = torch.zeros(n, n, dtype=original.dtype)
    value = model.encoder.layer[index].attention.self.value
    for j in range(n):
        def zero_row(module, inputs, output, j=j):
            output = output.clone()
            output[:, j] = 0.0
            return output

        handle = value.register_forward_hook(zero_row)
        try:
            changed = _hidden_states(model, encoding)[layer]
        finally:
            handle.remove()
        for i in range(n):
            scores[i, j] = 1 - torch.nn.functional.cosine_similarity(original[i], changed[i], dim=0)
    return scores


@torch.no_grad()
def norm_vectors_reference(model: PreTrainedModel, encoding: BatchEncoding, layer: int) -> dict[str, torch.Tensor]:
    """The decomposed vectors of one layer with explicit loops over heads, i and j, from the raw weights.

    Returns ``attention`` and ``z`` (n, n, d) and LN1's real input and output
    (n, d), read by hooks on the model's own LayerNorm.
    """
    index = layer_index(layer, model.config.num_hidden_layers)
    block = model.encoder.layer[index]
    seen = {}
    handles = [
        block.attention.output.LayerNorm.register_forward_hook(
            lambda m, i, o: seen.update(ln1_in=i[0][0], ln1_out=o[0])),
        block.register_forward_hook(lambda m, i, o: seen.update(E=i[0][0])),
    ]
    try:
        out = model(**encoding, output_attentions=True)
    finally:
        for handle in handles:
            handle.remove()
    A = out.attentions[index][0]  # (h, n, n)
    E = seen["E"]
    h, n, _ = A.shape
    d = E.shape[1]
    d_v = d // h
    W_V, b_V = block.attention.self.value.weight, block.attention.self.value.bias  # (d, d): y = x W^T + b
    W_O = block.attention.output.dense.weight  # (d, d)
    attention = torch.zeros(n, n, d, dtype=E.dtype)
    for i in range(n):
        for j in range(n):
            for head in range(h):
                rows = slice(head * d_v, (head + 1) * d_v)
                v = E[j] @ W_V[rows].T + b_V[rows]  # (d_v,)
                f = v @ W_O[:, rows].T  # (d,)
                attention[i, j] += A[head, i, j] * f
    z = attention.clone()
    for i in range(n):
        z[i, i] += E[i]
    return {"attention": attention, "z": z, "ln1_in": seen["ln1_in"], "ln1_out": seen["ln1_out"], "E": E}


def grad_input_reference(model: PreTrainedModel, encoding: BatchEncoding) -> torch.Tensor:
    """||J^l_ij w_j|| by forward-mode autograd through the model's own forward: (L, n, n) unnormalised.

    w = the word embeddings, the model's ``inputs_embeds`` (position and segment
    embeddings are added after it), so d/dw = d/dx.
    """
    ids = encoding["input_ids"]
    token_type_ids = encoding.get("token_type_ids")
    words = model.embeddings.word_embeddings(ids).detach()
    n = words.shape[1]

    def hidden(words_in):
        out = model(inputs_embeds=words_in, token_type_ids=token_type_ids, output_hidden_states=True)
        return torch.stack(out.hidden_states[1:])[:, 0]  # (L, n, d)

    L = model.config.num_hidden_layers
    scores = torch.zeros(L, n, n, dtype=words.dtype)
    with torch.no_grad():
        for j in range(n):
            tangent = torch.zeros_like(words)
            tangent[0, j] = words[0, j]
            _, pushed = torch.func.jvp(hidden, (words,), (tangent,))
            scores[:, :, j] = pushed.norm(dim=-1)
    return scores


def local_hta_reference(model: PreTrainedModel, encoding: BatchEncoding) -> torch.Tensor:
    """||d e^l_i / d e^(l-1)_j||_F from the full Jacobian of each real BERT layer: (L, n, n) unnormalised."""
    with torch.no_grad():
        hidden = _hidden_states(model, encoding)
    out = []
    for index, block in enumerate(model.encoder.layer):
        J = torch.autograd.functional.jacobian(lambda E: block(E[None])[0], hidden[index])  # (n, d, n, d)
        out.append(J.pow(2).sum((1, 3)).sqrt())
    return torch.stack(out)
