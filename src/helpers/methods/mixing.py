"""Context-mixing measures (chapter 7): every later measure of "how much input j feeds hidden token i" in one API.

``context_mixing(model, encoding, measure, rollout=False)`` returns a ``Mixing``
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
                        when token j's value vectors are zeroed in every head (Mohebbi et al. 2023),
                        computed without cancellation, so float32 keeps distances of 1e-8.

Global measures (input embeddings x -> hidden state l), comparable with HTA:

* ``grad_input``  || J^l_ij w_j ||, w_j token j's word embedding: the Jacobian-times-input norm
                  (the first-order change of e^l_i when the word is removed).
* ``hta``         Hidden Token Attribution (chapter 6), exact or estimated.

``rollout=True`` makes a local measure global: G^1 = M^1, G^l = M^l G^(l-1), in
one of two orders (``aggregation``), each the one some authors use:

* ``"normalise_first"``: each layer's rows normalised to 1, then the product
  (Abnar & Zuidema 2020, with 0.5 A + 0.5 I for raw attention; ALTI's code;
  value zeroing's; Mohebbi et al.'s context-mixing toolkit for the norm measures).
* ``"normalise_last"``: the unnormalised scores (the norms themselves) multiplied
  out, each row of G^l normalised once at the end for the book's tables (the
  GlobEnc code: its normalisation lines are commented out, in its rollout and in
  its in-model aggregation; GlobEnc's Table 1 scores every norm measure this way).

The default is the measure's authors' order (``rollout.ROLLOUT_AGGREGATION``): ``globenc``
normalises last, every other measure first. Since the row sums of a layer differ
from token to token (up to 15x in layer 1 of the bundled model), the two orders
weight the paths through the layers differently and give different scores.
``effective=True``
replaces A by effective attention (chapter 4) in the norm-based measures; since
A_eff T = A T, every decomposition above still sums to the layer's real output.
``effective="null_doubled"`` or ``"null_random"`` reads another same-output rewrite
of A instead (``decomposition.rewrite_attention``): the controls of that swap.
The function ``local_hta`` (not a measure) gives the layer-local reference: ||d e^l_i / d e^(l-1)_j||_F.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import BatchEncoding, PreTrainedModel

from ..model.batches import is_batch, sequences_of
from ..model.capture import capture
from ..model.checks import check_autograd, float32_model
from ..model.internals import Internals
from ..model.numbering import check_integer, layer_index
from ..model.text import check_encoding
from . import jacobians, linearised
from .attribution import AttributionOptions, attribute_linearised, check_attribution_options
from .decoder_jacobians import decoder_local_norms
from .decomposition import (
    NORM_MEASURES,
    REWRITES,
    LayerDecomposition,
    decompose_layer,
    norm_scores,
    value_zeroing_scores,
)
from .linearised_decoder import LinearisedDecoder
from .mixing_families import check_mixing_family
from .rollout import (
    attention_rollout,
    check_aggregation,
    normalise_rows,
    plain_rollout,
    rewrite_suffix,
    rollout_label,
    unnormalised_rollout,
)
from .token_effects import grad_input_scores, leave_one_out, linearise_captured

__all__ = [
    "MEASURES",
    "ESTIMATE_TARGET",
    "LOCAL_MEASURES",
    "GLOBAL_MEASURES",
    "NORM_MEASURES",
    "Mixing",
    "context_mixing",
    "local_measures",
    "rolled_out",
    "value_zeroing_scores",
    "grad_input_scores",
    "local_hta",
    "local_hta_linearised",
    "check_hta_options",
    "hta_mixing",
    "leave_one_out",
    "several_measures",
]

LOCAL_MEASURES = (
    "attention",
    "attention_norm",
    "norm_residual",
    "norm_residual_ln",
    "globenc",
    "alti",
    "value_zeroing",
)
GLOBAL_MEASURES = ("grad_input", "hta")
MEASURES = LOCAL_MEASURES + GLOBAL_MEASURES

# The book's target for an HTA estimate good enough to replace exact HTA as the reference:
# median relative error of the contributions c_ij at most this, at most this fraction of exact HTA's time.
ESTIMATE_TARGET = {"median_relative_error": 0.01, "cost_fraction": 0.10}


@dataclass
class Mixing:
    """Context-mixing scores of one sequence: ``scores[l - 1][i, j]`` for layer l, hidden token i, input j.

    ``scores: (L, n, n)``, rows sum to 1, on the CPU. ``rollout`` tells whether a
    local measure was composed across layers, and ``aggregation`` in which order
    (``AGGREGATIONS``; None without rollout); ``is_global`` whether row i describes
    input embeddings -> hidden state l (rollout, or a global measure). A local
    measure keeps ``totals: (L, n)``, each row's sum before it was normalised, so
    that its rollout can multiply the unnormalised scores.
    """

    scores: torch.Tensor  # (L, n, n)
    measure: str
    rollout: bool
    effective: bool | str = False  # True, or a name of decomposition.REWRITES: A replaced
    aggregation: str | None = None
    totals: torch.Tensor | None = None  # (L, n)

    @property
    def num_layers(self) -> int:
        return self.scores.shape[0]

    @property
    def n(self) -> int:
        return self.scores.shape[-1]

    @property
    def is_global(self) -> bool:
        return self.rollout or self.measure in GLOBAL_MEASURES

    @property
    def name(self) -> str:
        """A label for tables: the measure, with ``+eff`` and ``rollout`` where used.

        A rollout in another order than its authors' says so: "norm_residual rollout
        (normalise last)", "globenc rollout (normalise first)".
        """
        if not self.rollout:
            return self.measure + rewrite_suffix(self.effective)
        return rollout_label(self.measure, self.aggregation, self.effective)

    def at(self, layer: int) -> torch.Tensor:
        """Scores of one layer (1..L): (n, n)."""
        return self.scores[layer_index(layer, self.num_layers)]


def rolled_out(local: Mixing, aggregation: str | None = None) -> Mixing:
    """The global version of a local ``Mixing``, in the order ``aggregation`` (default: its authors').

    ``"normalise_first"`` multiplies the normalised rows (``attention_rollout`` for raw
    attention); ``"normalise_last"`` multiplies the unnormalised scores (``local.totals``
    restores them) and normalises each layer's rows at the end (``unnormalised_rollout``).
    """
    if local.rollout or local.measure in GLOBAL_MEASURES or local.measure not in LOCAL_MEASURES:
        raise ValueError(f"{local.name!r} is not a local measure; rollout is not defined for it.")
    aggregation = check_aggregation(local.measure, aggregation)
    if local.measure == "attention":
        scores = attention_rollout(local.scores)
    elif aggregation == "normalise_first":
        scores = plain_rollout(local.scores)
    else:
        if local.totals is None:
            raise ValueError(f"{local.name!r} has lost its row sums (totals); it cannot be rolled out unnormalised.")
        scores = unnormalised_rollout(local.scores * local.totals[..., None])
    return Mixing(
        scores=scores, measure=local.measure, rollout=True, effective=local.effective, aggregation=aggregation
    )


@torch.no_grad()
def local_hta(
    model: PreTrainedModel,
    encoding: BatchEncoding,
    samples: int | None = None,
    seed: int = 0,
    chunk_size: int | None = None,
) -> Mixing:
    """Layer-local HTA: c^l_ij = ||d e^l_i / d e^(l-1)_j||_F, rows normalised: Mixing of (L, n, n).

    The reference for the local measures (the setting of GlobEnc's figure 4, with
    input-to-output blocks of one layer). ``samples=None``: exact, d tangents per input token and
    layer; k: the Hutchinson estimate with k random orthonormal tangents per token, through the
    same linearised layers as HTA, one layer (a decoder: one block) at a time.
    """
    check_autograd("local_hta")
    check_mixing_family(model, "hta_local")
    check_encoding(model, encoding)
    if samples is not None:
        check_integer(samples, "samples (None: exact)", 1, model.config.hidden_size)
    model = float32_model(model)
    internals = capture(model, encoding)
    lin = linearise_captured(model, internals)
    if isinstance(lin, LinearisedDecoder):
        norms = decoder_local_norms(lin, samples, seed, chunk_size)
        return Mixing(scores=normalise_rows(norms.float().cpu()), measure="hta_local", rollout=False)
    return local_hta_linearised(lin, samples, seed, chunk_size)


@torch.no_grad()
def local_hta_linearised(
    lin: linearised.LinearisedBert, samples: int | None = None, seed: int = 0, chunk_size: int | None = None
) -> Mixing:
    """``local_hta`` of an already linearised sequence (arguments trusted): Mixing of (L, n, n)."""
    n, d = lin.n, lin.d
    k = d if samples is None else int(samples)
    jacobians.prepare_ffn_jacobians(lin, n * k)
    chunk_size = chunk_size or jacobians.default_chunk_size(lin)
    device = lin.xhat_0.device
    squares = torch.zeros(lin.depth, n, n, dtype=torch.float64, device=device)  # [l, j, i]
    for token, u in jacobians.direction_chunks(n, d, samples, seed, chunk_size, lin.xhat_0.dtype, device):
        for index in range(lin.depth):
            dE = jacobians.layer_tangents(lin, index + 1, token, u)  # (B, n, d)
            squares[index].index_add_(0, token, dE.pow(2).sum(-1).double())
    norms = (squares * (d / k)).sqrt().transpose(1, 2)
    return Mixing(scores=normalise_rows(norms.float().cpu()), measure="hta_local", rollout=False)


def check_hta_options(model: PreTrainedModel, options: dict) -> AttributionOptions:
    """The options of the ``hta`` measure (those of ``hidden_token_attribution``), checked, with defaults."""
    if "method" in options:
        raise ValueError("Pass HTA's exact/estimate choice as estimator=..., not method=....")
    known = set(AttributionOptions._fields) - {"layer_numbers"}  # a Mixing holds every layer
    unknown = set(options) - known
    if unknown:
        raise ValueError(f"Unknown options {sorted(unknown)} for 'hta'; it takes {sorted(known)}.")
    return check_attribution_options(model, **{"progress": False, **options})


def hta_mixing(lin: linearised.LinearisedBert, encoding: BatchEncoding, options: AttributionOptions) -> Mixing:
    """HTA as a ``Mixing`` (L', n, n) of an already linearised sequence; ``options`` from ``check_hta_options``."""
    attribution = attribute_linearised(lin, encoding, options)
    return Mixing(scores=attribution.contributions, measure="hta", rollout=False)


_OPTIONS = {"effective"}


def context_mixing(
    model: PreTrainedModel,
    encoding: BatchEncoding,
    measure: str | Sequence,
    rollout: bool = False,
    aggregation: str | None = None,
    **options,
) -> Mixing | list:
    """Context-mixing scores ``Mixing.scores`` (L, n, n), rows sum to 1; a list for several measures or a batch.

    Args:
        model: in eval mode: a post-norm encoder (BERT, RoBERTa, ELECTRA, DistilBERT, ALBERT, MPNet) or
            a pre-norm decoder (GPT-2, Llama, Qwen2); every measure of ``MEASURES`` takes both (the
            function ``leave_one_out`` takes encoders only: ``mixing_families.mixing_refusal``).
        encoding: one unpadded sequence (``encode``); or a padded batch with its attention mask, which
            gives a list with one result per sequence, each that of the sequence run alone.
        measure: one of ``MEASURES`` (see the module docstring); or a list of names and (name, options)
            pairs, which gives a list of ``Mixing`` from one forward pass (``mixing_many``).
        rollout: compose a local measure across layers (global scores); not defined
            for ``grad_input`` and ``hta``, which are global already.
        aggregation: with ``rollout``, ``"normalise_first"`` or ``"normalise_last"``
            (module docstring); None: the measure's authors' order (``rollout.ROLLOUT_AGGREGATION``:
            GlobEnc's code normalises last, the others first).
        **options: ``effective=True`` for the norm-based methods (A -> effective attention);
            for ``hta`` ``estimator="exact"`` (default) or ``"estimate"`` and the other options
            of ``hidden_token_attribution`` (sample count, seed, ...; not ``layer_numbers``).

    Raises:
        ValueError: unknown measure or option, rollout where undefined, a sequence too long for the model.
        UnsupportedModelError: a measure that does not apply to the model's family (the message says why).
        RuntimeError: ``hta`` or ``grad_input`` under ``torch.inference_mode()`` (they need autograd).
    """
    if is_batch(encoding):  # a padded batch: one result per sequence, each run alone
        return [context_mixing(model, one, measure, rollout, aggregation, **options) for one in sequences_of(encoding)]
    if not isinstance(measure, str):  # several measures, one capture; each its options as (name, options)
        if aggregation is None and not options:
            return several_measures(model, encoding, measure, rollout)
        raise ValueError("with several measures, give each its options as (name, options); no aggregation")
    if measure not in MEASURES:
        raise ValueError(f"Unknown measure {measure!r}; choose one of {MEASURES}.")
    if not isinstance(rollout, bool):
        raise TypeError(f"rollout must be True or False, got {rollout!r}.")
    if rollout and measure in GLOBAL_MEASURES:
        raise ValueError(
            f"{measure!r} already describes input embeddings -> hidden state l; rollout is not defined for it."
        )
    if aggregation is not None and not rollout:
        raise ValueError("aggregation orders a rollout; pass rollout=True with it.")
    if rollout:
        aggregation = check_aggregation(measure, aggregation)
    check_mixing_family(model, measure)
    check_encoding(model, encoding)
    if measure in GLOBAL_MEASURES:  # linearised through the model: autograd, so not under inference_mode
        check_autograd(f"context_mixing(measure={measure!r})")
    if measure == "hta":
        hta = check_hta_options(model, options)
    elif measure == "grad_input" and options:
        raise ValueError(f"grad_input takes no options; got {sorted(options)}.")
    elif measure in LOCAL_MEASURES:
        _measure_options(measure, options)  # before the forward pass: bad options fail fast
    model = float32_model(model)
    internals = capture(model, encoding)  # the one forward pass; everything below reads it
    if measure in LOCAL_MEASURES:
        result = local_measures(model, internals, [(measure, options)])[0]
        return rolled_out(result, aggregation) if rollout else result
    lin = linearise_captured(model, internals)
    if measure == "hta":
        return hta_mixing(lin, encoding, hta)
    return Mixing(scores=normalise_rows(grad_input_scores(model, internals, lin)), measure=measure, rollout=False)


def _measure_options(measure: str, options: dict) -> bool | str:
    """Check one (measure, options) pair of ``local_measures``; returns ``effective`` (False, True or a
    name of ``REWRITES``)."""
    if measure not in LOCAL_MEASURES:
        raise ValueError(f"{measure!r} is not a local measure; choose one of {LOCAL_MEASURES}.")
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ValueError(
            f"Unknown options {sorted(unknown)} for {measure!r}; only {sorted(_OPTIONS)} (norm-based measures)."
        )
    effective = options.get("effective", False)
    if effective == "effective":
        effective = True
    if not isinstance(effective, bool) and effective not in REWRITES:
        raise TypeError(f"effective must be True, False or a same-output rewrite {REWRITES}, got {effective!r}.")
    if effective and measure not in NORM_MEASURES:
        raise ValueError(f"effective=True applies to the norm-based measures {NORM_MEASURES}, not {measure!r}.")
    return effective


def local_measures(model: PreTrainedModel, internals: Internals, measures: Sequence[tuple[str, dict]]) -> list[Mixing]:
    """Several local measures of one captured sequence at once: one ``Mixing`` (L, n, n) per measure.

    ``measures`` holds (measure, options) pairs as ``context_mixing`` takes them, e.g.
    ``[("globenc", {}), ("globenc", {"effective": True})]``. Each layer is decomposed once
    per attention kind (raw, effective) and every norm-based measure reads that one
    decomposition, so a list of measures costs little more than its most expensive
    member. The results equal ``context_mixing(model, encoding, measure, **options)``.
    """
    checked = [(measure, _measure_options(measure, dict(options))) for measure, options in measures]
    L = internals.num_layers
    # one decomposition per layer and attention kind, read by every norm measure, then dropped
    # (a layer's vectors take n^2 d floats: all layers at once would not fit for long inputs)
    norm_scores_of: dict[tuple[str, bool | str], list[torch.Tensor]] = {
        (m, e): [] for m, e in checked if m in NORM_MEASURES
    }
    for kind in sorted({e for _, e in norm_scores_of}, key=str):
        for layer in range(1, L + 1):
            parts: LayerDecomposition = decompose_layer(model, internals, layer, kind)
            for measure, effective in norm_scores_of:
                if effective == kind:
                    norm_scores_of[(measure, effective)].append(norm_scores(parts, measure))
            del parts
    results = []
    for measure, effective in checked:
        if measure == "attention":
            local = internals.A.mean(1)
        elif measure == "value_zeroing":
            local = torch.stack([value_zeroing_scores(model, internals, layer) for layer in range(1, L + 1)])
        else:
            local = torch.stack(norm_scores_of[(measure, effective)])
        local = local.float().cpu()
        results.append(
            Mixing(
                scores=normalise_rows(local),
                measure=measure,
                rollout=False,
                effective=effective,
                totals=local.sum(-1),
            )
        )
    return results


def _specs(measures: Sequence) -> list[tuple[str, dict]]:
    """(name, options) pairs from names and (name, options) pairs, checked."""
    if isinstance(measures, str) or not isinstance(measures, Sequence) or not measures:
        raise ValueError("several measures: a non-empty list of names or (name, options) pairs")
    specs = [(item, {}) if isinstance(item, str) else (item[0], dict(item[1])) for item in measures]
    for name, options in specs:
        if name not in MEASURES or (options and name == "grad_input"):
            raise ValueError(f"Unknown measure {name!r} (one of {MEASURES}), or options for grad_input")
    return specs


def several_measures(
    model: PreTrainedModel, encoding: BatchEncoding, measures: Sequence, rollout: bool = False
) -> list[Mixing]:
    """One ``Mixing`` per measure of ``measures``, in order, from one capture of one sequence.

    ``measures``: names of ``MEASURES`` or (name, options) pairs, e.g. ``["attention", ("globenc",
    {"effective": True}), ("hta", {"estimator": "estimate"})]``. ``rollout`` composes the local measures
    across layers, each in its authors' order; gradient x input and HTA are global already.
    """
    specs = _specs(measures)
    for name, _ in specs:
        check_mixing_family(model, name)
    check_encoding(model, encoding)
    if any(name in GLOBAL_MEASURES for name, _ in specs):
        check_autograd("context_mixing (gradient x input, HTA)")
    hta = {i: check_hta_options(model, options) for i, (name, options) in enumerate(specs) if name == "hta"}
    model = float32_model(model)
    internals = capture(model, encoding)
    local = iter(local_measures(model, internals, [s for s in specs if s[0] in LOCAL_MEASURES]))
    linear = None
    results = []
    for i, (name, _) in enumerate(specs):
        if name in LOCAL_MEASURES:
            result = next(local)
            results.append(rolled_out(result, check_aggregation(name, None)) if rollout else result)
            continue
        if linear is None:
            linear = linearise_captured(model, internals)
        if name == "hta":
            results.append(hta_mixing(linear, encoding, hta[i]))
        else:
            scores = normalise_rows(grad_input_scores(model, internals, linear))
            results.append(Mixing(scores=scores, measure=name, rollout=False))
    return results
