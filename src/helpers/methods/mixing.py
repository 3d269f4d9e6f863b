"""Context-mixing measures (chapter 7): every later measure of "how much input j feeds hidden token i" in one API.

``context_mixing(model, encoding, method, rollout=False)`` returns a ``Mixing``
whose ``scores[l - 1][i, j]`` scores input token j for hidden token i at layer
l (rows sum to 1). Notation of one layer (``helpers.model.internals``): E the layer
input (n, d), A^h the attention of head h, T^h = (E W_V^h + b_V^h) H^h the
value vectors mapped through the head's rows of W^O, b^O the output bias.
The attention block, the residual and the first LayerNorm decompose exactly
into one vector per (i, j):

    z_ij = sum_h A^h_ij T^h_j + [i = j] E_i,         sum_j z_ij + b^O = r_i (LN1's input)
    g1(v) = (v - mean(v)) * gamma_1 / sigma_1(r_i)    (LN1 split linearly, beta_1 left over)

Local measures (one layer, input of layer l -> its output), each as its authors define it:

* ``attention``         mean over heads of A (Abnar & Zuidema 2020).
* ``attention_norm``    || sum_h A^h_ij T^h_j ||  (Kobayashi et al. 2020).
* ``norm_residual``     || z_ij ||  (Kobayashi et al. 2021).
* ``norm_residual_ln``  || g1(z_ij) ||  (Kobayashi et al. 2021).
* ``globenc``           || g2(g1(z_ij)) ||, g2 the second LayerNorm split with the standard
                        deviation of its real input (the feed-forward block enters only
                        through it; Modarressi et al. 2022).
* ``alti``              max(0, ||y_i||_1 - ||y_i - g1(z_ij)||_1), y_i LN1's real output
                        (Ferrando et al. 2022).
* ``value_zeroing``     cosine distance between layer l's output of token i and the output
                        when token j's value vectors are zeroed in every head (Mohebbi et al. 2023).

Global measures (input embeddings x -> hidden state l), comparable with HTA:

* ``grad_input``  || J^l_ij w_j ||, w_j token j's word embedding: the Jacobian-times-input norm
                  (the first-order change of e^l_i when the word is removed).
* ``hta``         Hidden Token Attribution (chapter 6), exact or estimated.

``rollout=True`` makes a local measure global: M^l_global = M^l M^(l-1)_global,
with 0.5 A + 0.5 I (rows renormalised) for raw attention. ``effective=True``
replaces A by effective attention (chapter 4) in the norm-based measures; since
A_eff T = A T, every decomposition above still sums to the layer's real output.
``local_hta`` gives the layer-local reference: ||d e^l_i / d e^(l-1)_j||_F.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from transformers import BatchEncoding, PreTrainedModel

from ..model.capture import capture
from ..model.checks import check_supported
from ..model.internals import Internals
from ..model.numbering import layer_index
from ..model.text import check_single_sequence
from . import jacobians
from .attribution import hidden_token_attribution
from .decomposition import NORM_METHODS, LayerDecomposition, decompose_layer, norm_scores
from .linalg import orthonormal_samples

__all__ = [
    "METHODS",
    "ESTIMATE_TARGET",
    "LOCAL_METHODS",
    "GLOBAL_METHODS",
    "NORM_METHODS",
    "Mixing",
    "context_mixing",
    "local_measures",
    "plain_rollout",
    "attention_rollout",
    "rolled_out",
    "normalise_rows",
    "value_zeroing_scores",
    "grad_input_scores",
    "local_hta",
    "leave_one_out",
]

LOCAL_METHODS = ("attention", "attention_norm", "norm_residual", "norm_residual_ln", "globenc", "alti", "value_zeroing")
GLOBAL_METHODS = ("grad_input", "hta")
METHODS = LOCAL_METHODS + GLOBAL_METHODS

# The book's target for an HTA estimate good enough to replace exact HTA as the reference:
# median relative error of the contributions c_ij at most this, at most this fraction of exact HTA's time.
ESTIMATE_TARGET = {"median_relative_error": 0.01, "cost_fraction": 0.10}


@dataclass
class Mixing:
    """Context-mixing scores of one sequence: ``scores[l - 1][i, j]`` for layer l, hidden token i, input j.

    ``scores: (L, n, n)``, rows sum to 1, on the CPU. ``rollout`` tells whether a
    local measure was composed across layers; ``is_global`` whether row i
    describes input embeddings -> hidden state l (rollout, or a global method).
    """

    scores: torch.Tensor  # (L, n, n)
    method: str
    rollout: bool
    effective: bool = False

    @property
    def layers(self) -> int:
        return self.scores.shape[0]

    @property
    def n(self) -> int:
        return self.scores.shape[-1]

    @property
    def is_global(self) -> bool:
        return self.rollout or self.method in GLOBAL_METHODS

    @property
    def name(self) -> str:
        """A label for tables: the method, with ``+eff`` and ``rollout`` where used."""
        name = self.method + ("+eff" if self.effective else "")
        return f"{name} rollout" if self.rollout else name

    def at(self, layer: int) -> torch.Tensor:
        """Scores of one layer (1..L): (n, n)."""
        return self.scores[layer_index(layer, self.layers)]


def normalise_rows(M: torch.Tensor) -> torch.Tensor:
    """M / M.sum(-1) for non-negative M: (..., n, n); a zero row raises."""
    if M.dim() < 2:
        raise ValueError(f"Expected (..., n, n) scores; got {tuple(M.shape)}.")
    if (M < 0).any():
        raise ValueError("Scores must be non-negative before rows are normalised.")
    total = M.sum(-1, keepdim=True)
    if (total == 0).any():
        raise ValueError("A row of scores is all zero; it cannot be normalised.")
    return M / total


def plain_rollout(local: torch.Tensor) -> torch.Tensor:
    """Plain rollout: G^1 = M^1, G^l = M^l G^(l-1), for local: (L, n, n) -> (L, n, n)."""
    if local.dim() != 3 or local.shape[-1] != local.shape[-2]:
        raise ValueError(f"local scores must be (L, n, n); got {tuple(local.shape)}.")
    out = [local[0]]
    for M in local[1:]:
        out.append(M @ out[-1])
    return torch.stack(out)


def attention_rollout(A_mean: torch.Tensor) -> torch.Tensor:
    """Abnar & Zuidema's rollout: 0.5 A + 0.5 I per layer, rows renormalised, then the product.

    A_mean: (L, n, n) head-averaged attention -> (L, n, n).
    """
    eye = torch.eye(A_mean.shape[-1], dtype=A_mean.dtype)
    return plain_rollout(normalise_rows(0.5 * A_mean + 0.5 * eye))


def rolled_out(local: Mixing) -> Mixing:
    """The global version of a local ``Mixing``: the rollout its authors use (see ``context_mixing``)."""
    if local.rollout or local.method in GLOBAL_METHODS or local.method not in LOCAL_METHODS:
        raise ValueError(f"{local.name!r} is not a local measure; rollout is not defined for it.")
    scores = attention_rollout(local.scores) if local.method == "attention" else plain_rollout(local.scores)
    return Mixing(scores=scores, method=local.method, rollout=True, effective=local.effective)


@torch.no_grad()
def value_zeroing_scores(model: PreTrainedModel, internals: Internals, layer: int) -> torch.Tensor:
    """Unnormalised value-zeroing scores of one layer (1..L): (n, n).

    C_ij = 1 - cos(e_i, e_i^(-j)), e^(-j) the layer's output recomputed from its
    original input with token j's value vectors zeroed in every head. Only the
    values change, so the new head outputs are A V - A[:, j] V_j; all n variants
    run through the rest of the layer as one batch.
    """
    index = layer_index(layer, internals.layers)
    block = model.encoder.layer[index]
    E, A, V = internals.E[index], internals.A[index], internals.V[index]  # (n, d), (h, n, n), (h, n, d_v)
    h, n, d_v = V.shape
    heads = A @ V  # (h, n, d_v)
    # variant j: heads - A[:, :, j, None] * V[:, j]  -> (j, h, i, d_v)
    variants = heads[None] - A.permute(2, 0, 1)[..., None] * V.permute(1, 0, 2)[:, :, None, :]
    context = variants.permute(0, 2, 1, 3).reshape(n, n, h * d_v)  # (j, i, d)
    dense = block.attention.output.dense(context)
    y = block.attention.output.LayerNorm(dense + E[None])
    out = block.output(block.intermediate(y), y)  # (j, i, d)
    original = internals.hidden_states[index + 1]
    distance = 1 - torch.nn.functional.cosine_similarity(out, original[None], dim=-1)  # (j, i)
    return distance.T.clamp_min(0)


@torch.no_grad()
def grad_input_scores(model: PreTrainedModel, internals: Internals) -> torch.Tensor:
    """||J^l_ij w_j|| for every layer: (L, n, n), unnormalised; w_j the word embedding of token j.

    The first-order change of e^l_i when token j's word embedding is removed
    (position and segment kept): the input that gradient x input multiplies in
    the literature (the model's ``inputs_embeds``). Not x_j itself: the embedding
    LayerNorm is scale invariant, so J_ij x_j vanishes up to its epsilon. One
    forward-mode tangent per input token gives every layer at once.
    """
    lin = jacobians.linearise(model, internals.x, reference=internals.hidden_states)
    words = model.embeddings.word_embeddings(internals.input_ids.to(internals.x.device))  # (n, d)
    tokens = torch.arange(lin.n, device=words.device)
    pushed = torch.stack(list(jacobians.push_tangents(lin, tokens, words)))  # (L, j, i, d)
    return pushed.norm(dim=-1).transpose(1, 2).float().cpu()


def _layer_function(block, heads: int):
    """One BERT layer as a pure function E: (n, d) -> (n, d), for torch.func."""
    sa, out = block.attention.self, block.attention.output
    F = torch.nn.functional

    def forward(E: torch.Tensor) -> torch.Tensor:
        n, d = E.shape
        d_v = d // heads

        def split(t):
            return t.view(n, heads, d_v).transpose(0, 1)

        Q, K, V = (
            split(F.linear(E, sa.query.weight, sa.query.bias)),
            split(F.linear(E, sa.key.weight, sa.key.bias)),
            split(F.linear(E, sa.value.weight, sa.value.bias)),
        )
        A = torch.softmax(Q @ K.transpose(-1, -2) / d_v**0.5, dim=-1)
        context = (A @ V).transpose(0, 1).reshape(n, d)
        y = F.layer_norm(
            F.linear(context, out.dense.weight, out.dense.bias) + E,
            (d,),
            out.LayerNorm.weight,
            out.LayerNorm.bias,
            out.LayerNorm.eps,
        )
        hidden = block.intermediate.intermediate_act_fn(
            F.linear(y, block.intermediate.dense.weight, block.intermediate.dense.bias)
        )
        ln = block.output.LayerNorm
        return F.layer_norm(
            F.linear(hidden, block.output.dense.weight, block.output.dense.bias) + y, (d,), ln.weight, ln.bias, ln.eps
        )

    return forward


@torch.no_grad()
def local_hta(
    model: PreTrainedModel,
    encoding: BatchEncoding,
    samples: int | None = None,
    seed: int = 0,
    chunk_size: int = 256,
) -> Mixing:
    """Layer-local HTA: c^l_ij = ||d e^l_i / d e^(l-1)_j||_F, rows normalised: Mixing of (L, n, n).

    The reference for the local measures (the setting of GlobEnc's figure 4, with
    input-to-output blocks of one layer). ``samples=None``: exact, d tangents per
    input token and layer; k: the Hutchinson estimate with k random orthonormal
    tangents per token (``helpers.methods.linalg.orthonormal_samples``).
    """
    check_supported(model)
    internals = capture(model, encoding)
    n, d = internals.n, internals.E.shape[-1]
    if samples is not None and (
        isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or not 1 <= samples <= d
    ):
        raise ValueError(f"samples must be None (exact) or an integer in 1..{d}; got {samples!r}.")
    k = d if samples is None else int(samples)
    if samples is None:
        directions = torch.eye(d, dtype=internals.E.dtype).expand(n, d, d)
    else:
        directions = orthonormal_samples(n, d, k, seed=seed, dtype=internals.E.dtype)  # (n, k, d)
    token = torch.arange(n).repeat_interleave(k)
    flat = directions.reshape(n * k, d)
    norms = []
    for index, block in enumerate(model.encoder.layer):
        forward = _layer_function(block, model.config.num_attention_heads)
        E = internals.E[index]
        check = forward(E)
        if not torch.allclose(check, internals.hidden_states[index + 1], atol=1e-4 * float(check.abs().max())):
            raise ValueError("The layer function does not reproduce this model's layer; not a post-LN BERT layer.")
        squares = torch.zeros(n, n, dtype=torch.float64)  # [j, i]
        push = torch.func.vmap(lambda t, forward=forward, E=E: torch.func.jvp(forward, (E,), (t,))[1])
        for start in range(0, n * k, chunk_size):
            stop = min(n * k, start + chunk_size)
            tangents = torch.zeros(stop - start, n, d, dtype=E.dtype)
            tangents[torch.arange(stop - start), token[start:stop]] = flat[start:stop].to(E.device)
            out = push(tangents)  # (B, n, d)
            squares.index_add_(0, token[start:stop], out.pow(2).sum(-1).double().cpu())
        norms.append((squares * (d / k)).sqrt().T)
    scores = normalise_rows(torch.stack(norms).float())
    return Mixing(scores=scores, method="hta_local", rollout=False)


_OPTIONS = {"effective"}


def context_mixing(
    model: PreTrainedModel,
    encoding: BatchEncoding,
    method: str,
    rollout: bool = False,
    **options,
) -> Mixing:
    """Context-mixing scores of one sequence by one measure: ``Mixing.scores`` (L, n, n), rows sum to 1.

    Args:
        model: a BERT encoder with eager attention, in eval mode (``load_model``).
        encoding: one unpadded sequence (``encode``).
        method: one of ``METHODS`` (see the module docstring).
        rollout: compose a local measure across layers (global scores); not defined
            for ``grad_input`` and ``hta``, which are global already.
        **options: ``effective=True`` for the norm-based methods (A -> effective attention);
            for ``hta`` ``estimator="exact"`` (default) or ``"estimate"`` and the other options
            of ``hidden_token_attribution`` (its sample count, seed, ...).

    Raises:
        ValueError: unknown method or option, rollout where undefined, a padded or batched
            encoding, a sequence too long for the model.
        UnsupportedModelError: not a BERT encoder with eager attention.
    """
    if method not in METHODS:
        raise ValueError(f"Unknown method {method!r}; choose one of {METHODS}.")
    if not isinstance(rollout, bool):
        raise TypeError(f"rollout must be True or False, got {rollout!r}.")
    if rollout and method in GLOBAL_METHODS:
        raise ValueError(
            f"{method!r} already describes input embeddings -> hidden state l; rollout is not defined for it."
        )
    check_supported(model)
    check_single_sequence(encoding)
    if method == "hta":
        options = {"progress": False, **options}
        if "method" in options:
            raise ValueError("Pass HTA's exact/estimate choice as estimator=..., not method=....")
        options["method"] = options.pop("estimator", "exact")
        attribution = hidden_token_attribution(model, encoding, **options)
        return Mixing(scores=attribution.contributions, method="hta", rollout=False)
    if method == "grad_input":
        if options:
            raise ValueError(f"grad_input takes no options; got {sorted(options)}.")
        internals = capture(model, encoding)
        return Mixing(scores=normalise_rows(grad_input_scores(model, internals)), method=method, rollout=False)
    _measure_options(method, options)  # before the forward pass: bad options fail fast
    internals = capture(model, encoding)
    result = local_measures(model, internals, [(method, options)])[0]
    return rolled_out(result) if rollout else result


def _measure_options(method: str, options: dict) -> bool:
    """Check one (method, options) pair of ``local_measures``; returns ``effective``."""
    if method not in LOCAL_METHODS:
        raise ValueError(f"{method!r} is not a local measure; choose one of {LOCAL_METHODS}.")
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ValueError(
            f"Unknown options {sorted(unknown)} for {method!r}; only {sorted(_OPTIONS)} (norm-based methods)."
        )
    effective = options.get("effective", False)
    if not isinstance(effective, bool):
        raise TypeError(f"effective must be True or False, got {effective!r}.")
    if effective and method not in NORM_METHODS:
        raise ValueError(f"effective=True applies to the norm-based methods {NORM_METHODS}, not {method!r}.")
    return effective


def local_measures(model: PreTrainedModel, internals: Internals, measures: Sequence[tuple[str, dict]]) -> list[Mixing]:
    """Several local measures of one captured sequence at once: one ``Mixing`` (L, n, n) per measure.

    ``measures`` holds (method, options) pairs as ``context_mixing`` takes them, e.g.
    ``[("globenc", {}), ("globenc", {"effective": True})]``. Each layer is decomposed once
    per attention kind (raw, effective) and every norm-based method reads that one
    decomposition, so a list of measures costs little more than its most expensive
    member. The results equal ``context_mixing(model, encoding, method, **options)``.
    """
    checked = [(method, _measure_options(method, dict(options))) for method, options in measures]
    L = internals.layers
    decompositions: dict[bool, list[LayerDecomposition]] = {}
    for method, effective in checked:
        if method in NORM_METHODS and effective not in decompositions:
            decompositions[effective] = [
                decompose_layer(model, internals, layer, effective) for layer in range(1, L + 1)
            ]
    results = []
    for method, effective in checked:
        if method == "attention":
            local = internals.A.mean(1)
        elif method == "value_zeroing":
            local = torch.stack([value_zeroing_scores(model, internals, layer) for layer in range(1, L + 1)])
        else:
            local = torch.stack([norm_scores(parts, method) for parts in decompositions[effective]])
        results.append(
            Mixing(scores=normalise_rows(local.float().cpu()), method=method, rollout=False, effective=effective)
        )
    return results


@torch.no_grad()
def leave_one_out(model: PreTrainedModel, encoding: BatchEncoding, mask_token_id: int) -> torch.Tensor:
    """1 - cos(mean-pooled embedding, the same with input token j replaced by ``mask_token_id``): (n,).

    The mean over every token of the last hidden state is the sentence embedding
    the default model was trained to produce (sentence-transformers' mean pooling).
    """
    check_supported(model)
    n = check_single_sequence(encoding)
    if (
        isinstance(mask_token_id, bool)
        or not isinstance(mask_token_id, (int, np.integer))
        or not 0 <= mask_token_id < model.config.vocab_size
    ):
        raise ValueError(f"mask_token_id must be a token id of the model's vocabulary; got {mask_token_id!r}.")
    ids = encoding["input_ids"]
    variants = ids.repeat(n + 1, 1)
    variants[torch.arange(1, n + 1), torch.arange(n)] = int(mask_token_id)
    batch = {"input_ids": variants}
    if encoding.get("token_type_ids") is not None:
        batch["token_type_ids"] = encoding["token_type_ids"].repeat(n + 1, 1)
    pooled = model(**batch).last_hidden_state.mean(1)  # (n + 1, d)
    return (1 - torch.nn.functional.cosine_similarity(pooled[1:], pooled[:1], dim=-1)).cpu()
