"""Hidden Token Attribution (paper section 5): how much each input token feeds each hidden token.

For layer l, hidden token i and input token j,

    c^l_ij = ||J^l_ij||_F / sum_k ||J^l_ik||_F,      J^l_ij = d e^l_i / d x_j  (d x d),

with x_j the raw input embedding (token + segment + position, before the
embedding LayerNorm). The norms come from forward mode (``helpers.methods.jacobians``):
exact with d tangents per input token, or a seeded Hutchinson estimate with
``samples`` random orthonormal tangents per input token.

The summaries below turn one or many ``Attribution`` results into the
quantities of the paper's figures: the token's own share c_ii, whether its own
input is the largest contributor, context by relative distance, and what the
[CLS] token gathers on sentence pairs.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from transformers import BatchEncoding, PreTrainedModel

from ..model.batches import is_batch, sequences_of
from ..model.capture import capture
from ..model.checks import UnsupportedModelError, check_autograd, check_tensor, float32_model
from ..model.loaded import on_device
from ..model.numbering import check_count, check_integer, check_seed, layer_index
from ..model.post_norm import POST_NORM_ENCODERS, input_width
from ..model.text import check_encoding
from . import decoder_jacobians, jacobians, linearised, linearised_decoder
from .estimate_agreement import EstimateAgreement, compare_attributions  # noqa: F401 (callers read them here)

__all__ = [
    "ESTIMATORS",
    "Attribution",
    "hidden_token_attribution",
    "attribute_linearised",
    "AttributionOptions",
    "check_attribution_options",
    "check_hta_family",
    "hta_refusal",
    "contributions_from_norms",
    "self_contribution",
    "own_input_is_largest",
    "distance_groups",
    "cls_segments",
    "cls_around_separator",
]

ESTIMATORS = ("exact", "estimate")

DEFAULT_BINS = ((1, 5), (6, 10), (11, None))


@dataclass
class Attribution:
    """Hidden Token Attribution of one sequence of n tokens, for the layers in ``layer_numbers``.

    ``contributions[k, i, j]`` is c^l_ij for ``l = layer_numbers[k]`` (1-based: layer l's
    output); rows sum to 1. ``norms[k, i, j]`` is ||J^l_ij||_F. Tensors live on the CPU.
    """

    contributions: torch.Tensor  # (len(layer_numbers), n, n)
    norms: torch.Tensor  # (len(layer_numbers), n, n)
    layer_numbers: tuple[int, ...]
    num_layers: int  # depth of the model, for relative depth
    estimator: str
    samples: int | None  # None for the exact norms
    input_ids: torch.Tensor  # (n,)
    token_type_ids: torch.Tensor  # (n,)

    @property
    def n(self) -> int:
        return self.contributions.shape[-1]

    @property
    def relative_depth(self) -> np.ndarray:
        """layer / L for each entry of ``layer_numbers``."""
        return np.array(self.layer_numbers, dtype=float) / self.num_layers

    def at(self, layer: int) -> torch.Tensor:
        """c^l for one 1-based layer number: (n, n)."""
        if layer not in self.layer_numbers:
            raise ValueError(f"Layer {layer} was not computed; this result holds layers {list(self.layer_numbers)}.")
        return self.contributions[self.layer_numbers.index(layer)]


def contributions_from_norms(norms: torch.Tensor) -> torch.Tensor:
    """c_ij = norms_ij / sum_k norms_ik for norms: (..., n, n); rows sum to 1."""
    check_tensor(norms, "norms", min_dims=2)
    if norms.dim() < 2 or norms.shape[-1] != norms.shape[-2]:
        raise ValueError(f"norms must be (..., n, n); got {tuple(norms.shape)}.")
    if (norms < 0).any():
        raise ValueError("Norms must be non-negative.")
    total = norms.sum(-1, keepdim=True)
    if (total == 0).any():
        raise ValueError("A hidden token has zero Jacobian with respect to every input token.")
    return norms / total


def _check_layer_numbers(layer_numbers: int | Sequence[int] | None, depth: int) -> tuple[int, ...]:
    """None: every layer; an integer: that one layer; else a sequence of integer layer numbers 1..depth."""
    if layer_numbers is None:
        return tuple(range(1, depth + 1))
    if isinstance(layer_numbers, numbers.Integral) and not isinstance(layer_numbers, bool):
        layer_numbers = (layer_numbers,)
    if isinstance(layer_numbers, (str, bytes)) or not isinstance(
        layer_numbers, (Sequence, np.ndarray, torch.Tensor, range)
    ):
        raise TypeError(
            f"layer_numbers must be None, a layer number or a list of layer numbers (1..{depth}); got {type(layer_numbers).__name__} "
            f"{layer_numbers!r}."
        )
    if isinstance(layer_numbers, (np.ndarray, torch.Tensor)):
        layer_numbers = layer_numbers.tolist() if layer_numbers.ndim == 1 else [layer_numbers.tolist()]
    checked = []
    for layer in layer_numbers:  # integers in 1..depth; a TypeError for "12", 2.7 or None
        try:
            checked.append(layer_index(layer, depth) + 1)
        except ValueError:
            raise ValueError(f"Layers are numbered 1..{depth} (layer l's output); got {layer!r}.") from None
    checked = tuple(checked)
    if not checked:
        raise ValueError("layer_numbers is empty; pass None for every layer.")
    return checked


def hidden_token_attribution(
    model: PreTrainedModel,
    encoding: BatchEncoding,
    estimator: str = "exact",
    samples: int = 32,
    layer_numbers: Sequence[int] | None = None,
    seed: int = 0,
    chunk_size: int | None = None,
    memory_mb: float = jacobians.DEFAULT_MEMORY_MB,
    progress: bool = True,
    device: str | torch.device | None = None,
) -> Attribution | list[Attribution]:
    """Contributions c^l_ij of every input token j to every hidden token i, for each layer.

    Args:
        model: in eval mode, a post-norm encoder (BERT, RoBERTa, ELECTRA, DistilBERT, ALBERT, MPNet;
            ``load_model``) or a pre-norm decoder (Llama, Qwen2, GPT-2; ``load_decoder``). For a decoder,
            x_j is the first block's input at token j (the token embedding; GPT-2: plus its position
            vector), layer l is block l's output before the final norm (as in ``capture``), and
            c^l_ij = 0 for j > i.
        encoding: one unpadded sequence, input_ids ``(1, n)`` (``encode``); or a padded batch with its
            attention mask, which gives a list with one ``Attribution`` per sequence, each that of the
            sequence run alone.
        estimator: ``"exact"`` (d forward-mode tangents per input token) or
            ``"estimate"`` (``samples`` random orthonormal tangents per input token).
        samples: tangents per input token for the estimate, 1..d (d gives the exact values);
            unused (and not checked) by the exact estimator.
        layer_numbers: 1-based layer numbers to return (default: all), or one layer number. Only layers up to
            the deepest one requested are computed.
        seed: seed of the estimate's random tangents.
        chunk_size: tangents per batched push (default: from ``memory_mb``).
        memory_mb: rough bound on the working memory (raise it on a large GPU).
        progress: show a progress bar over chunks of tangents.
        device: where the linearised forward runs (``"cuda"``, ``"cuda:1"``, ``"cpu"``); default: the model's
            device. A model elsewhere is copied there for the call (its weights once more in that device's
            memory; the model itself does not move). The exact norms are a few large batched matrix products
            per chunk of tangents, so a GPU runs them at a large share of its matrix-product rate; raise
            ``memory_mb`` there to push more tangents per chunk.

    Returns:
        An ``Attribution`` with ``contributions`` and ``norms`` of shape (len(layer_numbers), n, n), on
        the CPU whatever the device. A bfloat16 / float16 model is linearised through a float32 copy of itself.

    Raises:
        ValueError: unknown estimator, samples out of range, a sequence longer than the
            model takes, a batch without its attention mask, token ids the model cannot embed,
            layers out of range.
        TypeError: layer_numbers, samples or seed not integers (``"12"``, ``2.7``, ``None``).
        UnsupportedModelError: a family neither linearisation follows (``check_hta_family``).
        RuntimeError: called under ``torch.inference_mode()`` (the Jacobians need autograd; ``no_grad`` is fine).
    """
    check_autograd("hidden_token_attribution")
    if is_batch(encoding):  # a padded batch: one Attribution per sequence, each run alone
        return [
            hidden_token_attribution(
                model, one, estimator, samples, layer_numbers, seed, chunk_size, memory_mb, progress, device
            )
            for one in sequences_of(encoding)
        ]
    check_hta_family(model)
    decoder = model.config.model_type in linearised_decoder.DECODER_FAMILIES
    options = check_attribution_options(
        model, estimator, samples, layer_numbers, seed, chunk_size=chunk_size, memory_mb=memory_mb, progress=progress
    )
    check_encoding(model, encoding)
    model = float32_model(model)  # bfloat16 / float16: the linearisation runs on a float32 copy
    if device is not None:
        model, encoding = on_device(model, encoding, device)
    internals = capture(model, encoding)
    linearise = linearised_decoder.linearise_decoder if decoder else linearised.linearise
    return attribute_linearised(linearise(model, internals.x, reference=internals.hidden_states), encoding, options)


def hta_refusal(model_type: str | None) -> str | None:
    """Why exact HTA does not take ``model_type`` (None where it does: a post-norm encoder or a pre-norm decoder)."""
    if model_type in POST_NORM_ENCODERS or model_type in linearised_decoder.DECODER_FAMILIES:
        return None
    return (
        f"its layers are not among those the linearised forwards follow, the post-norm encoders "
        f"({', '.join(POST_NORM_ENCODERS)}) and the pre-norm decoders ({', '.join(linearised_decoder.DECODER_FAMILIES)})"
    )


def check_hta_family(model: PreTrainedModel, method: str = "hidden_token_attribution") -> None:
    """Raise ``UnsupportedModelError`` unless exact HTA linearises ``model``'s family (``hta_refusal``).
    The message names the method, the family and why."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    why = hta_refusal(model_type)
    if why is not None:
        raise UnsupportedModelError(
            f"{method} does not take model_type={model_type!r} ({type(model).__name__}): {why}."
        )


class AttributionOptions(NamedTuple):
    """The checked options of ``hidden_token_attribution`` (``check_attribution_options``)."""

    estimator: str
    samples: int | None  # None for the exact estimator
    layer_numbers: tuple[int, ...]
    seed: int
    chunk_size: int | None
    memory_mb: float
    progress: bool


def check_attribution_options(
    model: PreTrainedModel,
    estimator: str = "exact",
    samples: int = 32,
    layer_numbers: Sequence[int] | int | None = None,
    seed: int = 0,
    chunk_size: int | None = None,
    memory_mb: float = jacobians.DEFAULT_MEMORY_MB,
    progress: bool = False,
) -> AttributionOptions:
    """The options of ``hidden_token_attribution``, checked against ``model``, as ``AttributionOptions``."""
    if not isinstance(estimator, str) or estimator not in ESTIMATORS:
        raise ValueError(f"Unknown estimator {estimator!r}; choose one of {ESTIMATORS}.")
    if estimator == "estimate":  # the exact norms take no samples: whatever is passed is unused
        samples = check_integer(samples, "samples (d gives the exact values)", 1, input_width(model))
    if chunk_size is not None:
        chunk_size = check_count(chunk_size, "chunk_size")
    if not memory_mb > 0:
        raise ValueError(f"memory_mb must be positive; got {memory_mb}.")
    return AttributionOptions(
        estimator,
        None if estimator == "exact" else samples,
        _check_layer_numbers(layer_numbers, model.config.num_hidden_layers),
        check_seed(seed),
        chunk_size,
        memory_mb,
        bool(progress),
    )


def attribute_linearised(
    lin: linearised.LinearisedBert | linearised_decoder.LinearisedDecoder,
    encoding: BatchEncoding,
    options: AttributionOptions,
) -> Attribution:
    """``hidden_token_attribution`` of an already linearised sequence; ``options`` are trusted.

    For callers that captured and linearised the sequence once and checked its options
    (``context_mixing``, the chapter-7 sweep).
    """
    block_norms = (
        decoder_jacobians.decoder_block_norms
        if isinstance(lin, linearised_decoder.LinearisedDecoder)
        else jacobians.block_norms
    )
    norms = block_norms(
        lin,
        samples=options.samples,
        depth=max(options.layer_numbers),
        seed=options.seed,
        chunk_size=options.chunk_size,
        memory_mb=options.memory_mb,
        progress=options.progress,
    )
    norms = norms[[layer - 1 for layer in options.layer_numbers]].float().cpu()
    token_type_ids = encoding.get("token_type_ids")
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(encoding["input_ids"])
    return Attribution(
        contributions=contributions_from_norms(norms),
        norms=norms,
        layer_numbers=options.layer_numbers,
        num_layers=lin.depth,
        estimator=options.estimator,
        samples=options.samples,
        input_ids=encoding["input_ids"][0].cpu(),
        token_type_ids=token_type_ids[0].cpu(),
    )


def self_contribution(attribution: Attribution) -> torch.Tensor:
    """c^l_ii, each hidden token's share from its own input token: (len(layer_numbers), n)."""
    return torch.diagonal(attribution.contributions, dim1=-2, dim2=-1)


def own_input_is_largest(attribution: Attribution) -> torch.Tensor:
    """True where c^l_ii is the largest contribution to hidden token i: (len(layer_numbers), n) bool."""
    c = attribution.contributions
    return self_contribution(attribution) >= c.max(dim=-1).values


def _bin_label(side: str, low: int, high: int | None) -> str:
    return f"{side} {low}+" if high is None else f"{side} {low}-{high}"


class Labelled(NamedTuple):
    """Values with a label per group (last dimension of ``values``)."""

    labels: list
    values: torch.Tensor


class SeparatorPositions(NamedTuple):
    """Where the separators of a sentence pair sit: ``first`` the first separator after sentence 1,
    ``second`` where sentence 2 starts (``first + 1`` in BERT's ``[CLS] A [SEP] B [SEP]``, ``first + 2``
    in MPNet's and RoBERTa's ``<s> A </s></s> B </s>``), ``last`` the final separator."""

    first: int
    last: int
    second: int


def distance_masks(
    n: int, bins: Sequence[tuple[int, int | None]], device: torch.device | str | None = None
) -> Labelled:
    """Labels and (n, n, 1 + 2 len(bins)) indicators of (i, j) in each distance group, on ``device`` (default: CPU)."""
    if not bins:
        raise ValueError("bins is empty.")
    for low, high in bins:
        if low < 1 or (high is not None and high < low):
            raise ValueError(f"Each bin is (low, high) with 1 <= low <= high; got {(low, high)}.")
    offset = torch.arange(n, device=device)[None, :] - torch.arange(n, device=device)[:, None]  # offset[i, j] = j - i
    distance = offset.abs()
    masks, labels = [offset == 0], ["self"]
    for side, sign in (("left", -1), ("right", 1)):
        for low, high in bins:
            in_bin = (distance >= low) & (distance <= (high if high is not None else n))
            masks.append(in_bin & (torch.sign(offset) == sign))
            labels.append(_bin_label(side, low, high))
    return Labelled(labels, torch.stack(masks, dim=-1))


def distance_groups(attribution: Attribution, bins: Sequence[tuple[int, int | None]] = DEFAULT_BINS) -> Labelled:
    """Total contribution to each hidden token from its own input and from input tokens at
    relative distance in each bin, to the left (j < i) and to the right (j > i).

    bins: inclusive distance ranges ``(low, high)``, ``high=None`` for no upper end;
        they must be disjoint and together cover every distance >= 1 for the
        groups to add up to 1.

    Returns:
        labels ``["self", "left 1-5", ..., "right 1-5", ...]`` and
        ``groups: (len(layer_numbers), n, 1 + 2 len(bins))``; an empty group contributes 0.
    """
    c = attribution.contributions
    labels, masks = distance_masks(attribution.n, bins, device=c.device)
    return Labelled(labels, torch.einsum("lij,ijg->lig", c, masks.to(c.dtype)))


def pair_positions(attribution: Attribution) -> SeparatorPositions:
    """The separators of a sentence pair (``SeparatorPositions``): from the token types where the model has them
    (BERT), else from the ids, the final token being the separator (MPNet: ``<s> A </s></s> B </s>``)."""
    types = attribution.token_type_ids
    if bool((types == 1).any()):
        second = int(torch.nonzero(types == 1).flatten()[0])
        first = second - 1
    else:
        ids = attribution.input_ids
        separators = torch.nonzero(ids == ids[-1]).flatten().tolist()
        if len(separators) < 2:
            raise ValueError(
                "This is not a sentence pair (no second segment in the token types, and one separator only); "
                "encode text and text_pair."
            )
        first = second = separators[0]
        while second < attribution.n - 1 and int(ids[second]) == int(ids[-1]):
            second += 1
    if first < 2:
        raise ValueError("The first segment is empty.")
    return SeparatorPositions(first, attribution.n - 1, second)


CLS_SEGMENTS = ("[CLS]", "sentence 1", "first [SEP]", "sentence 2", "last [SEP]")


def cls_segments(attribution: Attribution) -> Labelled:
    """What [CLS] (hidden token 0) gathers from each part of a sentence pair.

    Returns labels ``CLS_SEGMENTS`` and ``(len(layer_numbers), 5)`` summed contributions
    (rows sum to 1), in the order [CLS], sentence 1, first [SEP], sentence 2, last [SEP]
    (MPNet: ``<s>``, sentence 1, ``</s></s>``, sentence 2, ``</s>``).
    """
    sep, last, second = pair_positions(attribution)
    row = attribution.contributions[:, 0, :]  # (L', n)
    parts = [row[:, :1], row[:, 1:sep], row[:, sep:second], row[:, second:last], row[:, last:]]
    return Labelled(list(CLS_SEGMENTS), torch.stack([p.sum(-1) for p in parts], dim=-1))


def cls_around_separator(attribution: Attribution, window: int = 3) -> Labelled:
    """c^l_{[CLS], j} for input tokens j at offsets -window..window from the first [SEP].

    Returns the offsets and ``(len(layer_numbers), 2 window + 1)``; NaN where the offset
    falls outside the sequence.
    """
    if window < 0:
        raise ValueError(f"window must be >= 0; got {window}.")
    sep = pair_positions(attribution).first
    offsets = list(range(-window, window + 1))
    row = attribution.contributions[:, 0]  # (L', n)
    out = torch.full((len(attribution.layer_numbers), len(offsets)), float("nan"), device=row.device)
    for column, offset in enumerate(offsets):
        if 0 <= sep + offset < attribution.n:
            out[:, column] = row[:, sep + offset]
    return Labelled(offsets, out)


# ---------------------------------------------------------------- corpus-level tables
