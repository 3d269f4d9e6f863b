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

import torch

from ..model.numbering import check_count

__all__ = [
    "AGGREGATIONS",
    "ROLLOUT_AGGREGATION",
    "check_aggregation",
    "rollout_label",
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


def rollout_label(measure: str, aggregation: str | None = None, effective: bool = False) -> str:
    """The table label of a local measure's rollout: "globenc rollout", "norm_residual rollout (normalise last)".

    The order is named only where it is not the measure's authors' (``ROLLOUT_AGGREGATION``).
    """
    name = measure + ("+eff" if effective else "") + " rollout"
    if aggregation in (None, ROLLOUT_AGGREGATION.get(measure)):
        return name
    return f"{name} ({aggregation.replace('_', ' ')})"


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
