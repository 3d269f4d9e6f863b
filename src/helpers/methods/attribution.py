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

from ..model.capture import capture
from ..model.checks import check_supported, check_tensor, float32_model
from ..model.numbering import check_seed, layer_index
from ..model.text import check_encoding
from . import jacobians

__all__ = [
    "METHODS",
    "Attribution",
    "hidden_token_attribution",
    "contributions_from_norms",
    "self_contribution",
    "own_input_is_largest",
    "distance_groups",
    "cls_segments",
    "cls_around_separator",
    "compare_attributions",
    "EstimateAgreement",
]

METHODS = ("exact", "estimate")

DEFAULT_BINS = ((1, 5), (6, 10), (11, None))


@dataclass
class Attribution:
    """Hidden Token Attribution of one sequence of n tokens, for the layers in ``layers``.

    ``contributions[k, i, j]`` is c^l_ij for ``l = layers[k]`` (1-based: layer l's
    output); rows sum to 1. ``norms[k, i, j]`` is ||J^l_ij||_F. Tensors live on the CPU.
    """

    contributions: torch.Tensor  # (len(layers), n, n)
    norms: torch.Tensor  # (len(layers), n, n)
    layers: tuple[int, ...]
    num_layers: int  # depth of the model, for relative depth
    method: str
    samples: int | None  # None for the exact norms
    input_ids: torch.Tensor  # (n,)
    token_type_ids: torch.Tensor  # (n,)

    @property
    def n(self) -> int:
        return self.contributions.shape[-1]

    @property
    def relative_depth(self) -> np.ndarray:
        """layer / L for each entry of ``layers``."""
        return np.array(self.layers, dtype=float) / self.num_layers

    def at(self, layer: int) -> torch.Tensor:
        """c^l for one 1-based layer number: (n, n)."""
        if layer not in self.layers:
            raise ValueError(f"Layer {layer} was not computed; this result holds layers {list(self.layers)}.")
        return self.contributions[self.layers.index(layer)]


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


def _check_layers(layers: int | Sequence[int] | None, depth: int) -> tuple[int, ...]:
    """None: every layer; an integer: that one layer; else a sequence of integer layer numbers 1..depth."""
    if layers is None:
        return tuple(range(1, depth + 1))
    if isinstance(layers, numbers.Integral) and not isinstance(layers, bool):
        layers = (layers,)
    if isinstance(layers, (str, bytes)) or not isinstance(layers, (Sequence, np.ndarray, torch.Tensor, range)):
        raise TypeError(
            f"layers must be None, a layer number or a list of layer numbers (1..{depth}); got {type(layers).__name__} "
            f"{layers!r}."
        )
    if isinstance(layers, (np.ndarray, torch.Tensor)):
        layers = layers.tolist() if layers.ndim == 1 else [layers.tolist()]
    checked = []
    for layer in layers:  # integers in 1..depth; a TypeError for "12", 2.7 or None
        try:
            checked.append(layer_index(layer, depth) + 1)
        except ValueError:
            raise ValueError(f"Layers are numbered 1..{depth} (layer l's output); got {layer!r}.") from None
    checked = tuple(checked)
    if not checked:
        raise ValueError("layers is empty; pass None for every layer.")
    return checked


def hidden_token_attribution(
    model: PreTrainedModel,
    encoding: BatchEncoding,
    method: str = "exact",
    samples: int = 32,
    layers: Sequence[int] | None = None,
    seed: int = 0,
    chunk_size: int | None = None,
    memory_mb: float = jacobians.DEFAULT_MEMORY_MB,
    progress: bool = True,
) -> Attribution:
    """Contributions c^l_ij of every input token j to every hidden token i, for each layer.

    Args:
        model: a BERT encoder with eager attention, in eval mode (``load_model``).
        encoding: one unpadded sequence, input_ids ``(1, n)`` (``encode``).
        method: ``"exact"`` (d forward-mode tangents per input token) or
            ``"estimate"`` (``samples`` random orthonormal tangents per input token).
        samples: tangents per input token for the estimate, 1..d (d gives the exact values);
            unused (and not checked) by the exact method.
        layers: 1-based layer numbers to return (default: all), or one layer number. Only layers up to
            the deepest one requested are computed.
        seed: seed of the estimate's random tangents.
        chunk_size: tangents per batched push (default: from ``memory_mb``).
        memory_mb: rough bound on the working memory (raise it on a large GPU).
        progress: show a progress bar over chunks of tangents.

    Returns:
        An ``Attribution`` with ``contributions`` and ``norms`` of shape (len(layers), n, n).
        A bfloat16 / float16 model is linearised through a float32 copy of itself.

    Raises:
        ValueError: unknown method, samples out of range, a sequence longer than the
            model takes, a padded or batched encoding, token ids the model cannot embed,
            layers out of range.
        TypeError: layers, samples or seed not integers (``"12"``, ``2.7``, ``None``).
        UnsupportedModelError: not a BERT encoder with eager attention.
    """
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"Unknown method {method!r}; choose one of {METHODS}.")
    check_supported(model)
    d = model.config.hidden_size
    if method == "estimate":  # the exact norms take no samples: whatever is passed is unused
        if isinstance(samples, bool) or not isinstance(samples, numbers.Integral):
            raise TypeError(f"samples must be an integer, got {type(samples).__name__}.")
        if not 1 <= samples <= d:
            raise ValueError(f"samples must be between 1 and d = {d} (d gives the exact values); got {samples}.")
    seed = check_seed(seed)
    check_encoding(model, encoding)
    layers = _check_layers(layers, model.config.num_hidden_layers)
    model = float32_model(model)  # bfloat16 / float16: the linearisation runs on a float32 copy

    internals = capture(model, encoding)
    lin = jacobians.linearise(model, internals.x, reference=internals.hidden_states)
    norms = jacobians.block_norms(
        lin,
        samples=None if method == "exact" else int(samples),
        depth=max(layers),
        seed=seed,
        chunk_size=chunk_size,
        memory_mb=memory_mb,
        progress=progress,
    )
    norms = norms[[layer - 1 for layer in layers]].float().cpu()
    token_type_ids = encoding.get("token_type_ids")
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(encoding["input_ids"])
    return Attribution(
        contributions=contributions_from_norms(norms),
        norms=norms,
        layers=layers,
        num_layers=model.config.num_hidden_layers,
        method=method,
        samples=None if method == "exact" else int(samples),
        input_ids=encoding["input_ids"][0].cpu(),
        token_type_ids=token_type_ids[0].cpu(),
    )


# ---------------------------------------------------------------- per-sequence summaries


def self_contribution(attribution: Attribution) -> torch.Tensor:
    """c^l_ii, each hidden token's share from its own input token: (len(layers), n)."""
    return torch.diagonal(attribution.contributions, dim1=-2, dim2=-1)


def own_input_is_largest(attribution: Attribution) -> torch.Tensor:
    """True where c^l_ii is the largest contribution to hidden token i: (len(layers), n) bool."""
    c = attribution.contributions
    return self_contribution(attribution) >= c.max(dim=-1).values


def _bin_label(side: str, low: int, high: int | None) -> str:
    return f"{side} {low}+" if high is None else f"{side} {low}-{high}"


class Labelled(NamedTuple):
    """Values with a label per group (last dimension of ``values``)."""

    labels: list
    values: torch.Tensor


class SeparatorPositions(NamedTuple):
    """Where the two [SEP] tokens of a sentence pair sit."""

    first: int
    last: int


def distance_masks(n: int, bins: Sequence[tuple[int, int | None]]) -> Labelled:
    """Labels and (n, n, 1 + 2 len(bins)) indicators of (i, j) in each distance group."""
    if not bins:
        raise ValueError("bins is empty.")
    for low, high in bins:
        if low < 1 or (high is not None and high < low):
            raise ValueError(f"Each bin is (low, high) with 1 <= low <= high; got {(low, high)}.")
    offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # offset[i, j] = j - i
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
        ``groups: (len(layers), n, 1 + 2 len(bins))``; an empty group contributes 0.
    """
    labels, masks = distance_masks(attribution.n, bins)
    return Labelled(
        labels, torch.einsum("lij,ijg->lig", attribution.contributions, masks.to(attribution.contributions.dtype))
    )


def pair_positions(attribution: Attribution) -> SeparatorPositions:
    """(position of the first [SEP], position of the last [SEP]) of a sentence pair."""
    types = attribution.token_type_ids
    second = torch.nonzero(types == 1).flatten()
    if len(second) == 0:
        raise ValueError("This is not a sentence pair (no token_type_ids == 1); encode text and text_pair.")
    first_sep = int(second[0]) - 1
    if first_sep < 2:
        raise ValueError("The first segment is empty.")
    return SeparatorPositions(first_sep, attribution.n - 1)


CLS_SEGMENTS = ("[CLS]", "sentence 1", "first [SEP]", "sentence 2", "last [SEP]")


def cls_segments(attribution: Attribution) -> Labelled:
    """What [CLS] (hidden token 0) gathers from each part of a sentence pair.

    Returns labels ``CLS_SEGMENTS`` and ``(len(layers), 5)`` summed contributions
    (rows sum to 1), in the order [CLS], sentence 1, first [SEP], sentence 2, last [SEP].
    """
    sep, last = pair_positions(attribution)
    row = attribution.contributions[:, 0, :]  # (L', n)
    parts = [row[:, :1], row[:, 1:sep], row[:, sep : sep + 1], row[:, sep + 1 : last], row[:, last:]]
    return Labelled(list(CLS_SEGMENTS), torch.stack([p.sum(-1) for p in parts], dim=-1))


def cls_around_separator(attribution: Attribution, window: int = 3) -> Labelled:
    """c^l_{[CLS], j} for input tokens j at offsets -window..window from the first [SEP].

    Returns the offsets and ``(len(layers), 2 window + 1)``; NaN where the offset
    falls outside the sequence.
    """
    if window < 0:
        raise ValueError(f"window must be >= 0; got {window}.")
    sep, _ = pair_positions(attribution)
    offsets = list(range(-window, window + 1))
    out = torch.full((len(attribution.layers), len(offsets)), float("nan"))
    for column, offset in enumerate(offsets):
        if 0 <= sep + offset < attribution.n:
            out[:, column] = attribution.contributions[:, 0, sep + offset]
    return Labelled(offsets, out)


class EstimateAgreement(NamedTuple):
    """How close an estimated attribution is to the exact one (``compare_attributions``)."""

    median_relative_error: float  # median of |c_est - c| / c over every (layer, i, j)
    p95_relative_error: float  # its 95th percentile
    max_abs_error: float  # max |c_est - c|
    top_agreement: float  # share of (layer, hidden token) with the same largest contributor


def compare_attributions(estimate: Attribution, exact: Attribution) -> EstimateAgreement:
    """How close an estimate is to the exact contributions of the same sequence."""
    if estimate.contributions.shape != exact.contributions.shape or estimate.layers != exact.layers:
        raise ValueError("The two attributions cover different sequences or layers.")
    c_est, c = estimate.contributions.double(), exact.contributions.double()
    relative = ((c_est - c).abs() / c.clamp_min(1e-12)).flatten()
    return EstimateAgreement(
        median_relative_error=float(relative.median()),
        p95_relative_error=float(torch.quantile(relative, 0.95)),
        max_abs_error=float((c_est - c).abs().max()),
        top_agreement=float((c_est.argmax(-1) == c.argmax(-1)).double().mean()),
    )


# ---------------------------------------------------------------- corpus-level tables
