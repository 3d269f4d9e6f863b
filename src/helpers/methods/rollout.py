"""Rollout: composing per-layer context-mixing scores into input -> layer scores (chapter 7).

Tensors in, tensors out. For local scores M^l (L, n, n) of layers 1..L, the
rollout is G^1 = M^1, G^l = M^l G^(l-1). Authors differ in when the rows are
normalised, and the order changes the result, because a layer's row sums
differ from token to token:

* ``plain_rollout`` of normalised rows (``normalise_rows`` first), and
  ``attention_rollout``, Abnar & Zuidema's for raw attention (0.5 A + 0.5 I);
* ``unnormalised_rollout``: the product of the unnormalised scores, rows
  normalised once at the end (the GlobEnc code).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..model.numbering import check_count

__all__ = [
    "AGGREGATIONS",
    "ROLLOUT_AGGREGATION",
    "check_aggregation",
    "rollout_label",
    "REWRITE_SUFFIX",
    "rewrite_suffix",
    "MEASURE_NAMES",
    "measure_name",
    "MeasureParts",
    "measure_parts",
    "normalise_rows",
    "plain_rollout",
    "attention_rollout",
    "unnormalised_rollout",
    "positional_prior",
]

AGGREGATIONS = ("normalise_first", "normalise_last")
# each local measure's rollout in its authors' order (``helpers.methods.mixing`` names the measures)
ROLLOUT_AGGREGATION = {
    "attention": "normalise_first",  # Abnar & Zuidema 2020 (0.5 A + 0.5 I, rows renormalised)
    "attention_norm": "normalise_first",  # Mohebbi et al.'s toolkit
    "norm_residual": "normalise_first",
    "norm_residual_ln": "normalise_first",
    "globenc": "normalise_last",  # the GlobEnc code (its normalisation lines are commented out)
    "alti": "normalise_first",  # ALTI's code
    "value_zeroing": "normalise_first",  # value zeroing's code
}


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
    eye = torch.eye(A_mean.shape[-1], dtype=A_mean.dtype, device=A_mean.device)
    return plain_rollout(normalise_rows(0.5 * A_mean + 0.5 * eye))


def unnormalised_rollout(local: torch.Tensor) -> torch.Tensor:
    """GlobEnc's rollout: the product of unnormalised scores, each G^l's rows normalised at the end.

    local: (L, n, n) non-negative, rows not normalised -> (L, n, n) in local's dtype, rows sum to 1.
    The product runs in float64 and is rescaled by one number per layer (which
    changes no row's proportions) so that twelve layers of norms cannot overflow.
    """
    if local.dim() != 3 or local.shape[-1] != local.shape[-2]:
        raise ValueError(f"local scores must be (L, n, n); got {tuple(local.shape)}.")
    dtype, local = local.dtype, local.double()
    out = [local[0] / local[0].max()]
    for M in local[1:]:
        G = M @ out[-1]
        out.append(G / G.max())
    return normalise_rows(torch.stack(out)).to(dtype)


# the label suffix of a measure read on a rewrite of A (``helpers.methods.decomposition.REWRITES``)
REWRITE_SUFFIX = {False: "", True: "+eff", "effective": "+eff", "null_doubled": "+2null", "null_random": "+rnull"}


def rewrite_suffix(effective: bool | str) -> str:
    """ "" for raw attention, "+eff" for effective attention, "+2null" for A + A_null, "+rnull" for a
    random null-space move of the same size."""
    return REWRITE_SUFFIX[effective]


def rollout_label(measure: str, aggregation: str | None = None, effective: bool | str = False) -> str:
    """The table label of a local measure's rollout: "globenc rollout", "norm_residual rollout (normalise last)".

    The order is named only where it is not the measure's authors' (``ROLLOUT_AGGREGATION``).
    ``effective``: True (or "effective") adds "+eff"; another rewrite of A its own suffix
    (``REWRITE_SUFFIX``).
    """
    name = measure + rewrite_suffix(effective) + " rollout"
    if aggregation in (None, ROLLOUT_AGGREGATION.get(measure)):
        return name
    return f"{name} ({aggregation.replace('_', ' ')})"


# What a reader calls each measure (the names of the papers that define it); the sweep's labels use the ids.
MEASURE_NAMES = {
    "attention": "attention",
    "attention_norm": "attention norm",
    "norm_residual": "norm with residual",
    "norm_residual_ln": "norm with residual and LayerNorm",
    "globenc": "GlobEnc",
    "alti": "ALTI",
    "value_zeroing": "value zeroing",
    "grad_input": "gradient × input",
    "hta": "HTA",
    "positional prior": "positional prior",
}


class MeasureParts(NamedTuple):
    """A sweep label's parts: the measure's id, whether it runs on effective attention, whether it is rolled
    out, and the rollout order where the label names one ("normalise first", "normalise last")."""

    measure: str
    effective: bool
    rollout: bool
    order: str | None


def measure_parts(label: str) -> MeasureParts:
    """A sweep label's parts (``MeasureParts``).

    ``"globenc+eff rollout (normalise first)"`` -> ``("globenc", True, True, "normalise first")``.
    """
    if not isinstance(label, str):
        raise TypeError(f"a measure label is a string; got {type(label).__name__}.")
    if label in MEASURE_NAMES:
        return MeasureParts(label, False, False, None)
    rest, order = label, None
    if rest.endswith(")") and " (" in rest:
        rest, order = rest[:-1].split(" (", 1)
    rolled = rest.endswith(" rollout")
    rest = rest.removesuffix(" rollout")
    effective = rest.endswith("+eff")
    measure = rest.removesuffix("+eff")
    if measure not in MEASURE_NAMES or (order is not None and order.replace(" ", "_") not in AGGREGATIONS):
        raise ValueError(f"Unknown measure label {label!r}; measures: {sorted(MEASURE_NAMES)}.")
    return MeasureParts(measure, effective, rolled, order)


def measure_name(label: str) -> str:
    """A sweep label as a reader names it: ``"alti rollout"`` -> ``"ALTI rollout"``,
    ``"norm_residual+eff rollout (normalise last)"`` ->
    ``"norm with residual rollout (effective attention, normalised last)"``."""
    if isinstance(label, str) and label.startswith("hta ("):  # the cost table's "hta (exact)", "hta (estimate, ...)"
        return "HTA " + label[len("hta ") :]
    measure, effective, rolled, order = measure_parts(label)
    name = MEASURE_NAMES[measure] + (" rollout" if rolled else "")
    extras = (["effective attention"] if effective else []) + (
        [order.replace("normalise", "normalised")] if order else []
    )
    return f"{name} ({', '.join(extras)})" if extras else name


def check_aggregation(measure: str, aggregation: str | None) -> str:
    """The rollout order of ``measure``: ``aggregation`` checked, or its authors' (``ROLLOUT_AGGREGATION``)."""
    if aggregation is None:
        return ROLLOUT_AGGREGATION[measure]
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"Unknown aggregation {aggregation!r}; choose one of {AGGREGATIONS}.")
    if measure == "attention" and aggregation != "normalise_first":
        raise ValueError(
            "Raw attention's rows already sum to 1; its rollout is Abnar & Zuidema's (aggregation='normalise_first')."
        )
    return aggregation


def positional_prior(n: int, num_layers: int = 1, decay: float = 0.5) -> torch.Tensor:
    """A positional baseline for context mixing: w_ij = decay^|i - j|, rows normalised: (num_layers, n, n).

    Each hidden token draws most on its own input, then on its neighbours, less with
    every token of distance, the same at every layer and whatever the text. Any
    strictly decreasing decay ranks the inputs of a row the same way, so a Spearman
    correlation with it does not depend on ``decay`` (0 < decay < 1). Float64.
    """
    check_count(n, "n")
    check_count(num_layers, "num_layers")
    if not 0 < float(decay) < 1:
        raise ValueError(f"decay must lie strictly between 0 and 1 (a weight that falls with distance); got {decay}.")
    position = torch.arange(n, dtype=torch.float64)  # cpu: made from n alone, beside Mixing scores (on the CPU)
    weights = float(decay) ** (position[:, None] - position[None, :]).abs()
    return normalise_rows(weights).expand(num_layers, n, n).clone()
