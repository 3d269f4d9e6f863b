"""What one input token does to the model: the two context-mixing measures that read it from the model's
response rather than from a decomposition of its layers.

``grad_input_scores``: gradient x input, one forward-mode tangent per input token through the linearised
encoder (``helpers.methods.linearised``); ``leave_one_out``: the change of the mean-pooled sentence
embedding when a token is masked. ``helpers.methods.mixing`` turns them into ``Mixing`` results.
"""

from __future__ import annotations

import torch
from transformers import BatchEncoding, PreTrainedModel

from ..model.internals import Internals
from ..model.numbering import check_integer
from ..model.text import check_single_sequence
from . import jacobians, linearised
from .decoder_jacobians import push_decoder_tangents
from .linalg import cosine_distance
from .linearised_decoder import DECODER_FAMILIES, LinearisedDecoder, linearise_decoder
from .mixing_families import check_mixing_family

__all__ = ["grad_input_scores", "leave_one_out", "linearise_captured"]


def linearise_captured(model: PreTrainedModel, internals: Internals):
    """The captured sequence's linearised model: ``LinearisedDecoder`` for a decoder, ``LinearisedBert`` else."""
    linearise = linearise_decoder if model.config.model_type in DECODER_FAMILIES else linearised.linearise
    return linearise(model, internals.x, reference=internals.hidden_states)


@torch.no_grad()
def grad_input_scores(
    model: PreTrainedModel, internals: Internals, lin: linearised.LinearisedBert | None = None
) -> torch.Tensor:
    """||J^l_ij w_j|| for every layer: (L, n, n), unnormalised; w_j the word embedding of token j.

    The first-order change of e^l_i when token j's word embedding is removed
    (position and segment kept): the input that gradient x input multiplies in
    the literature (the model's ``inputs_embeds``). Not x_j itself: the embedding
    LayerNorm is scale invariant, so J_ij x_j vanishes up to its epsilon. One
    forward-mode tangent per input token gives every layer at once. ``lin``: the
    sequence's linearised model if the caller has it (else it is linearised here). On a
    decoder w_j is token j's input embedding: all of x_j
    for Llama and Qwen2, x_j less its position vector for GPT-2.
    """
    if lin is None:
        lin = linearise_captured(model, internals)
    if isinstance(lin, LinearisedDecoder):  # x = words (+ positions in GPT-2); tangent j reaches rows >= j
        words = model.get_input_embeddings()(internals.input_ids.to(internals.x.device))  # (n, d)
        tokens = torch.arange(lin.n, device=words.device)
        pushed = [dh for _, dh in push_decoder_tangents(lin, tokens, words)]  # each (i, j, d): start 0
        return torch.stack(pushed).norm(dim=-1).float().cpu()
    words = model.base_model.embeddings.word_embeddings(internals.input_ids.to(internals.x.device))  # (n, d_x)
    tokens = torch.arange(lin.n, device=words.device)
    pushed = torch.stack(list(jacobians.push_tangents(lin, tokens, words)))  # (L, j, i, d)
    return pushed.norm(dim=-1).transpose(1, 2).float().cpu()


@torch.no_grad()
def leave_one_out(model: PreTrainedModel, encoding: BatchEncoding, mask_token_id: int) -> torch.Tensor:
    """1 - cos(mean-pooled embedding, the same with input token j replaced by ``mask_token_id``): (n,).

    The mean over every token of the last hidden state is the sentence embedding
    the default model was trained to produce (sentence-transformers' mean pooling).
    """
    check_mixing_family(model, "leave_one_out")
    n = check_single_sequence(encoding)
    mask_token_id = check_integer(mask_token_id, "mask_token_id (a vocabulary id)", 0, model.config.vocab_size - 1)
    ids = encoding["input_ids"]
    variants = ids.repeat(n + 1, 1)
    variants[torch.arange(1, n + 1, device=ids.device), torch.arange(n, device=ids.device)] = int(mask_token_id)
    batch = {"input_ids": variants}
    if encoding.get("token_type_ids") is not None:
        batch["token_type_ids"] = encoding["token_type_ids"].repeat(n + 1, 1)
    pooled = model(**batch).last_hidden_state.mean(1)  # (n + 1, d)
    return cosine_distance(pooled[1:], pooled[:1].expand_as(pooled[1:])).cpu()
