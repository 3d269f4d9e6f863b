"""The shared input checks: clear errors for a model or a tensor the helpers cannot take.

Every floor above calls these at its entry points; a method trusts what they checked.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

SUPPORTED_MODEL_TYPES = ("bert",)
# the post-norm encoders with a layer-by-layer path (capture, finish_layer, the linearised forward):
# BERT, and MPNet (BERT's layout plus a relative-position bias inside attention)
LINEARISED_ENCODERS = ("bert", "mpnet")


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says what works instead."""


class UnsupportedModelError(ValueError):
    """The model is not one the helpers can take apart (BERT family, eager attention)."""


def check_supported(model: PreTrainedModel, model_types: tuple[str, ...] = SUPPORTED_MODEL_TYPES) -> None:
    """Raise a clear error unless ``model`` is a bare encoder of ``model_types`` running eager attention.

    ``model_types``: the families the caller handles; ``LINEARISED_ENCODERS`` (BERT and MPNet) for the
    functions that also take MPNet. MPNet always computes its attention inline (eagerly).
    """
    model_type = getattr(model.config, "model_type", None)
    if model_type not in model_types:
        raise UnsupportedModelError(
            f"The helpers take apart BERT-family encoders here ({', '.join(model_types)}); "
            f"got model_type={model_type!r} ({type(model).__name__})."
        )
    if not hasattr(model, "encoder") or not hasattr(model, "embeddings"):
        prefix = getattr(model, "base_model_prefix", "bert")
        raise UnsupportedModelError(
            f"Expected a bare encoder (BertModel, MPNetModel: with .embeddings and .encoder), got "
            f"{type(model).__name__}; for a task model pass its .{prefix} attribute."
        )
    implementation = getattr(model.config, "_attn_implementation", None)
    if implementation != "eager" and model_type != "mpnet":
        raise UnsupportedModelError(
            f"The model runs {implementation!r} attention, which returns no attention weights. "
            "Load it with attn_implementation='eager' (load_model does this)."
        )


def float32_model(model: PreTrainedModel) -> PreTrainedModel:
    """``model`` itself if it computes in float32 or float64, else a float32 copy of it.

    The book's identities (A_eff T = A T, rows that sum to 1, the linearised
    pass) hold to float32 precision; bfloat16 and float16 keep about 3 digits
    and CPU linear algebra does not take them. The copy has the same weights,
    device and mode, so the results are those of the model in float32.
    """
    dtype = next(model.parameters()).dtype
    if dtype in (torch.float32, torch.float64):
        return model
    if not dtype.is_floating_point:
        raise TypeError(f"The model's parameters are {dtype}; the helpers need a floating-point model (float32).")
    import copy

    return copy.deepcopy(model).float()


def check_tensor(M, name: str, dims: int | None = None, min_dims: int | None = None) -> None:
    """Raise unless ``M`` is a finite tensor with ``dims`` (or at least ``min_dims``) dimensions."""
    if not isinstance(M, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(M).__name__}.")
    if dims is not None and M.dim() != dims:
        raise ValueError(f"{name} must have {dims} dimensions; got shape {tuple(M.shape)}.")
    if min_dims is not None and M.dim() < min_dims:
        raise ValueError(f"{name} must have at least {min_dims} dimensions; got shape {tuple(M.shape)}.")
    if not torch.isfinite(M).all():
        raise ValueError(f"{name} contains NaN or infinite values.")


def check_matrix(M, name: str = "M") -> None:
    """Raise unless ``M: (..., n, m)`` is a finite tensor of matrices."""
    if isinstance(M, torch.Tensor) and M.dim() < 2:
        raise ValueError(f"{name} must have shape (..., n, m); got {tuple(M.shape)}.")
    check_tensor(M, name, min_dims=2)


def check_attention_and_values(A: torch.Tensor, T: torch.Tensor) -> None:
    """Raise unless ``A: (n, n)`` and ``T: (n, d)`` are finite and fit together."""
    check_tensor(A, "A", dims=2)
    check_tensor(T, "T", dims=2)
    n = A.shape[0]
    if A.shape != (n, n):
        raise ValueError(f"A must be square (n, n); got {tuple(A.shape)}.")
    if T.shape[0] != n:
        raise ValueError(f"A is {tuple(A.shape)} but T has {T.shape[0]} rows; T must be (n, d) with n = {n}.")


def check_attention_distribution(A: torch.Tensor, atol: float = 1e-5) -> None:
    """Raise unless every row of ``A: (..., n, n)`` is a probability distribution (to ``atol``)."""
    if float(A.min()) < -atol:
        raise ValueError(f"A has negative entries (min {float(A.min()):.3g}); attention rows must be non-negative.")
    row_error = float((A.sum(-1) - 1).abs().max())
    if row_error > atol:
        raise ValueError(f"The rows of A do not sum to 1 (max error {row_error:.3g}); pass attention probabilities.")


def is_causal_attention(A: torch.Tensor) -> bool:
    """Whether ``A: (..., n, n)`` is exactly zero above the diagonal (n > 1): a causal head's
    attention. Softmax over a full row never gives an exact zero, so a bidirectional head's is not."""
    return A.shape[-1] > 1 and bool((torch.triu(A, diagonal=1) == 0).all())


def check_not_causal(A: torch.Tensor, what: str) -> None:
    """Raise a clear ValueError when ``A`` is causal: ``what`` (e.g. "alternative_family") treats
    each row as a distribution over all n positions, and a causal row may only use 0..i."""
    if is_causal_attention(A):
        raise ValueError(
            f"A is causal (exactly zero above the diagonal), and {what} moves weight over all n "
            "positions, onto future ones a causal row cannot attend to. For a decoder, split row by "
            "row (helpers.causal_effective_attention, chapter 9), or bound row i on its prefix: "
            "helpers.attention_bounds(A[:i+1, :i+1], T[:i+1], rows=[i])."
        )
