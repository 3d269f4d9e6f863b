"""Slow, obviously-correct versions of the book's fast methods, for tests and benchmarks.

Effective attention: ``effective_attention_loop`` (one full SVD of T per head).

Jacobian block norms (chapter 6):

All three differentiate the model's own modules (embedding LayerNorm, then
each ``BertLayer``) with respect to the raw embeddings ``x: (n, d)``:

* ``brute_force_block_norms``: the full Jacobian from
  ``torch.autograd.functional.jacobian``; tiny models only.
* ``naive_block_norms``: one reverse-mode pass per output unit (L n d of
  them), the textbook way to fill a Jacobian row by row;
  ``reverse_mode_row_norms`` batches the d rows of one hidden token.
* ``functorch_block_norms``: generic forward mode, ``torch.func.jvp`` under
  ``vmap`` with the primal shared across a chunk of tangents, with none of the
  structure ``helpers.methods.jacobians`` exploits.

Each returns ``norms: (L, n, n)`` with ``norms[l, i, j] = ||d e^{l+1}_i / d x_j||_F``.

For a Llama-family decoder, ``decoder_jacfwd_block_norms`` runs ``torch.func.jacfwd``
through the model's own decoder layers (``decoder_hidden_states``), one input token at
a time, with respect to the token embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import nn
from transformers import BatchEncoding, PreTrainedModel

from ..model.checks import check_matrix
from ..model.numbering import layer_index
from ..model.progress import progress_bar
from .effective import EffectiveAttention, check_attention, check_rtol, check_same_batch
from .linalg import DEFAULT_RTOL, left_null_space

__all__ = [
    "effective_attention_loop",
    "encoder_hidden_states",
    "brute_force_block_norms",
    "frobenius_blocks",
    "naive_block_norms",
    "functorch_block_norms",
    "reverse_mode_row_norms",
    "decoder_hidden_states",
    "decoder_jacfwd_block_norms",
    "model_block_norms",
]


def encoder_hidden_states(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Every layer's output for raw embeddings ``x: (n, d)``, differentiably: (L, n, d).

    Runs the embedding LayerNorm and each encoder layer of ``model`` (no
    attention mask: one unpadded sequence), a BERT or an MPNet encoder (its layers
    get the relative-position bias its encoder computes). The model must be in eval mode.
    """
    if model.training:
        raise ValueError("The model is in training mode (dropout on); call model.eval() first.")
    hidden = model.embeddings.LayerNorm(x)[None]
    extra = {}
    if getattr(model.config, "model_type", None) == "mpnet":
        extra["position_bias"] = model.encoder.compute_position_bias(hidden)
    states = []
    for layer in model.encoder.layer:
        hidden = layer(hidden, **extra)
        hidden = hidden[0] if isinstance(hidden, tuple) else hidden
        states.append(hidden[0])
    return torch.stack(states)


def frobenius_blocks(jacobian: torch.Tensor) -> torch.Tensor:
    """(L, n, d, n, d) -> (L, n, n) Frobenius norms of the d x d blocks."""
    return jacobian.pow(2).sum(dim=(2, 4)).sqrt()


def brute_force_block_norms(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The full Jacobian (L, n, d, n, d) with ``torch.autograd.functional.jacobian``, reduced to block norms."""
    jacobian = torch.autograd.functional.jacobian(
        lambda inputs: encoder_hidden_states(model, inputs), x, vectorize=True
    )
    return frobenius_blocks(jacobian)


def reverse_mode_row_norms(model: nn.Module, x: torch.Tensor, layer: int, token: int) -> torch.Tensor:
    """||d e^layer_token / d x_j||_F for every input token j, from the d rows of that
    hidden token's Jacobian in one batched reverse-mode pass: (n,).

    ``layer`` is 1-based (layer l's output), ``token`` the hidden token's position.
    """
    L = model.config.num_hidden_layers
    if not 1 <= layer <= L:
        raise ValueError(f"layer must be in 1..{L}; got {layer}.")
    if not 0 <= token < x.shape[0]:
        raise ValueError(f"token must be in 0..{x.shape[0] - 1}; got {token}.")
    x = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        state = encoder_hidden_states(model, x)[layer - 1, token]  # (d,)
        eye = torch.eye(state.shape[0], dtype=x.dtype, device=x.device)
        (rows,) = torch.autograd.grad(state, x, grad_outputs=eye, is_grads_batched=True)  # (d, n, d)
    return rows.pow(2).sum(dim=(0, 2)).sqrt()


def naive_block_norms(model: nn.Module, x: torch.Tensor, progress: bool = True) -> torch.Tensor:
    """One backward pass per output unit e^l_{i,a}: L n d passes, each giving a row of the Jacobian."""
    x = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        hidden = encoder_hidden_states(model, x)  # (L, n, d)
    L, n, d = hidden.shape
    squares = torch.zeros(L, n, n, dtype=x.dtype, device=x.device)
    units = [(layer, i, a) for layer in range(L) for i in range(n) for a in range(d)]
    units = progress_bar(units, "output units", progress, unit="unit", mininterval=1.0)
    for layer, i, a in units:
        (row,) = torch.autograd.grad(hidden[layer, i, a], x, retain_graph=True)  # (n, d) = d e_ia / d x
        squares[layer, i] += row.pow(2).sum(-1)
    return squares.sqrt()


def functorch_block_norms(
    model: nn.Module, x: torch.Tensor, chunk_size: int | None = None, progress: bool = True
) -> torch.Tensor:
    """Generic forward mode: ``vmap(jvp)`` over the basis tangents of each input token.

    chunk_size: tangents per vmap call (default d, one input token per call).
    """
    from torch.func import jvp, vmap

    x = x.detach()
    n, d = x.shape
    B = chunk_size or d
    push = vmap(lambda t: jvp(lambda inputs: encoder_hidden_states(model, inputs), (x,), (t,))[1])
    L = model.config.num_hidden_layers
    squares = torch.zeros(L, n, n, dtype=x.dtype, device=x.device)
    basis = [(j, a) for j in range(n) for a in range(d)]
    starts = range(0, len(basis), B)
    starts = progress_bar(starts, "Jacobian blocks (vmap-jvp)", progress, unit="chunk")
    for start in starts:
        chunk = basis[start : start + B]
        token = torch.tensor([j for j, _ in chunk], device=x.device)
        unit = torch.tensor([a for _, a in chunk], device=x.device)
        tangents = torch.zeros(len(chunk), n, d, dtype=x.dtype, device=x.device)
        tangents[torch.arange(len(chunk), device=x.device), token, unit] = 1.0
        with torch.no_grad():
            out = push(tangents)  # (B, L, n, d)
        for layer in range(L):
            squares[layer].index_add_(1, token, out[:, layer].pow(2).sum(-1).T)
    return squares.sqrt()


def effective_attention_loop(A: torch.Tensor, T: torch.Tensor, rtol: float = DEFAULT_RTOL) -> EffectiveAttention:
    """Reference implementation: one full SVD of T per head, ``A_null = A U_n U_n^T``.

    The paper's formula taken literally (U_n: the left singular vectors of T
    past its numerical rank, from ``helpers.methods.linalg.left_null_space``), looped over the
    leading dimensions. Slow; kept for tests and the benchmark.
    A: (..., n, n), T: (..., n, d) -> effective and null parts (..., n, n).
    """
    check_rtol(rtol)
    check_attention(A)
    check_matrix(T, "T")
    check_same_batch(A, T, "T")
    batch = A.shape[:-2]
    flat_A, flat_T = A.reshape(-1, *A.shape[-2:]), T.reshape(-1, *T.shape[-2:])
    nulls = []
    for a, t in zip(flat_A, flat_T, strict=True):
        U_n = left_null_space(t.double(), rtol)  # (n, n - rank)
        nulls.append(a.double() @ U_n @ U_n.T)
    null = torch.stack(nulls).reshape(*batch, *A.shape[-2:])
    return EffectiveAttention((A.double() - null).to(A.dtype), null.to(A.dtype))


# --------------------------------------------------------------------------- chapter 7: context mixing


__all__ += [
    "value_zeroing_reference",
    "NormVectors",
    "norm_vectors_reference",
    "grad_input_reference",
    "local_hta_reference",
]


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
    scores = torch.zeros(n, n, dtype=original.dtype, device=original.device)
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


class NormVectors(NamedTuple):
    """The decomposed vectors of one layer (``norm_vectors_reference``)."""

    attention: torch.Tensor  # (n, n, d)  sum_h A^h_ij T^h_j
    z: torch.Tensor  # (n, n, d)  attention plus the residual on the diagonal
    ln1_in: torch.Tensor  # (n, d)  LN1's real input, read by a hook
    ln1_out: torch.Tensor  # (n, d)  LN1's real output
    E: torch.Tensor  # (n, d)  the layer input


@torch.no_grad()
def norm_vectors_reference(model: PreTrainedModel, encoding: BatchEncoding, layer: int) -> NormVectors:
    """The decomposed vectors of one layer with explicit loops over heads, i and j, from the raw weights.

    Returns a ``NormVectors``; LN1's input and output are read by hooks on the model's own LayerNorm.
    """
    from ..model.post_norm import post_norm_layers

    index = layer_index(layer, model.config.num_hidden_layers)
    block = model.encoder.layer[index]
    parts = post_norm_layers(model, "norm_vectors_reference")[index]  # where W^V, W^O and LN1 live (BERT, MPNet)
    seen = {}
    handles = [
        parts.norm_1.register_forward_hook(lambda m, i, o: seen.update(ln1_in=i[0][0], ln1_out=o[0])),
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
    W_V, b_V = parts.value.weight, parts.value.bias  # (d, d): y = x W^T + b
    W_O = parts.output.weight  # (d, d)
    attention = torch.zeros(n, n, d, dtype=E.dtype, device=E.device)
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
    return NormVectors(attention, z, seen["ln1_in"], seen["ln1_out"], E)


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
    scores = torch.zeros(L, n, n, dtype=words.dtype, device=words.device)
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
        J = torch.autograd.functional.jacobian(lambda E, block=block: block(E[None])[0], hidden[index])  # (n, d, n, d)
        out.append(J.pow(2).sum((1, 3)).sqrt())
    return torch.stack(out)


# ---- Causal effective attention (helpers.methods.causal), one row and one head at a time ----

__all__ += ["causal_effective_attention_reference"]


def causal_effective_attention_reference(A: torch.Tensor, T: torch.Tensor, rtol: float = 1e-5) -> torch.Tensor:
    """Effective part of one causal head, row by row: A (n, n), T (n, d) -> (n, n), float64.

    Row i: remove from ``A[i, :i+1]`` its component in the left null space of
    ``T[:i+1]`` (a basis from the full SVD of that prefix: the left singular
    vectors past its numerical rank).
    """
    n = A.shape[-1]
    A = A.double()
    effective = torch.zeros_like(A)
    for i in range(n):
        prefix = T[: i + 1].double()
        U, S, _ = torch.linalg.svd(prefix, full_matrices=True)
        rank = int((S > rtol * S.max()).sum())
        null_basis = U[:, rank:]  # (i+1, i+1-rank)
        row = A[i, : i + 1]
        effective[i, : i + 1] = row - null_basis @ (null_basis.T @ row)
    return effective


def decoder_hidden_states(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Every decoder block's output (before the final norm) for token embeddings ``x: (n, d)``: (L, n, d).

    Runs the model's own rotary embedding, causal mask and decoder layers, differentiably.
    """
    from transformers.masking_utils import create_causal_mask

    if model.training:
        raise ValueError("The model is in training mode (dropout on); call model.eval() first.")
    base = model.base_model
    hidden = x[None]
    positions = torch.arange(x.shape[0], device=x.device)[None]
    rotary = base.rotary_emb(hidden, positions)
    mask = create_causal_mask(
        config=base.config,
        inputs_embeds=hidden,
        attention_mask=torch.ones(1, x.shape[0], dtype=torch.long, device=x.device),
        cache=None,
        position_ids=positions,
    )
    states = []
    for layer in base.layers:
        hidden = layer(hidden, attention_mask=mask, position_embeddings=rotary, position_ids=positions)
        hidden = hidden[0] if isinstance(hidden, tuple) else hidden
        states.append(hidden[0])
    return torch.stack(states)


def decoder_jacfwd_block_norms(
    model: nn.Module, x: torch.Tensor, tokens: Sequence[int] | None = None, progress: bool = True
) -> torch.Tensor:
    """``torch.func.jacfwd`` of ``decoder_hidden_states`` with respect to each x_j in turn: (L, n, len(tokens)).

    One call per input token j in ``tokens`` (default: all n; a (L, n, d, d) Jacobian at a time);
    run it on a float64 model for a reference.
    """
    from torch.func import jacfwd

    x = x.detach()
    n, d = x.shape
    columns = []
    tokens = range(n) if tokens is None else list(tokens)
    if any(isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < n for j in tokens):
        raise ValueError(f"tokens must be positions in 0..{n - 1}; got {tokens}.")
    tokens = progress_bar(tokens, "Jacobian blocks (jacfwd)", progress, unit="token")
    for j in tokens:

        def hidden_of_row(row, j=j):
            return decoder_hidden_states(model, torch.cat([x[:j], row[None], x[j + 1 :]]))

        with torch.no_grad():
            jacobian = jacfwd(hidden_of_row)(x[j])  # (L, n, d, d)
        columns.append(jacobian.pow(2).sum(dim=(-2, -1)).sqrt())  # (L, n)
    return torch.stack(columns, dim=-1)


def model_block_norms(model: PreTrainedModel, encoding: BatchEncoding, x: torch.Tensor) -> torch.Tensor:
    """||d e^l_i / d x_j||_F through the model's own forward, for any post-norm encoder: (L, n, n).

    ``x: (n, d_x)`` replaces the input of the embedding LayerNorm (a forward pre-hook), so the
    model's own code runs everything after it: the projection of ELECTRA and ALBERT, ALBERT's
    shared layers, MPNet's position bias. The full Jacobian of ``torch.autograd.functional.jacobian``:
    tiny models only. The model must be in eval mode; pass a float64 copy for a float64 reference.
    """
    from ..model.post_norm import embedding_parts

    if model.training:
        raise ValueError("The model is in training mode (dropout on); call model.eval() first.")
    norm = embedding_parts(model, "model_block_norms").norm
    base = model.base_model

    def hidden(inputs: torch.Tensor) -> torch.Tensor:
        handle = norm.register_forward_pre_hook(lambda module, args: (inputs[None],))
        try:
            out = base(**encoding, output_hidden_states=True)
        finally:
            handle.remove()
        return torch.stack(out.hidden_states[1:])[:, 0]  # (L, n, d)

    jacobian = torch.autograd.functional.jacobian(hidden, x.detach(), vectorize=False)  # (L, n, d, n, d_x)
    return frobenius_blocks(jacobian)
