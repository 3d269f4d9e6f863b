"""The shared input checks: clear errors for a model or a tensor the helpers cannot take.

Every floor above calls these at its entry points; a method trusts what they checked.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable, Mapping

import torch
from transformers import PreTrainedModel

UNKNOWN_SHARE = 0.25  # more of a text's tokens than this unknown to the tokenizer: it does not fit the text
ENCODE_HINT = "helpers.encode(tokenizer, text, model=model)"

SUPPORTED_MODEL_TYPES = ("bert",)
# the post-norm encoders with a layer-by-layer path (capture, finish_layer, the linearised forward):
# BERT, and MPNet (BERT's layout plus a relative-position bias inside attention)
LINEARISED_ENCODERS = ("bert", "mpnet")


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says what works instead."""


class UnsupportedModelError(ValueError):
    """The model is not one the helpers can take apart (BERT family, eager attention)."""


class InputWarning(UserWarning):
    """Input the helpers can run, but probably not what was meant (unknown tokens, no special tokens, too few
    tokens to fit a map); filter it with ``warnings.filterwarnings("ignore", category=InputWarning)``."""


# frames a warning should not point at: the helpers' own and torch's (its no_grad wrapper)
_INTERNAL_PREFIXES = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep for path in (os.path.dirname(__file__), torch.__file__)
)


def warn_at_caller(message: str, category: type[Warning] = InputWarning) -> None:
    """``warnings.warn`` attributed to the first frame outside the helpers and torch: the user's line."""
    frame, level = sys._getframe(1), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_INTERNAL_PREFIXES):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level if frame is not None else 2)


def check_encoding_type(encoding) -> None:
    """Raise a TypeError naming ``helpers.encode`` unless ``encoding`` is a mapping whose ``input_ids`` is a
    tensor (what ``helpers.encode`` and ``tokenizer(..., return_tensors="pt")`` give); shapes are checked after.

    Catches the careless inputs that would otherwise fail deep inside: the text itself, a bare tensor or list
    of token ids, the tokenizer's plain lists (no ``return_tensors="pt"``)."""
    if isinstance(encoding, str):
        shown = encoding if len(encoding) <= 40 else encoding[:37] + "..."
        raise TypeError(
            f"Expected an encoding of the text, got the text itself ({shown!r}): encode it with {ENCODE_HINT}."
        )
    if isinstance(encoding, torch.Tensor) or not isinstance(encoding, Mapping):
        raise TypeError(
            f"Expected an encoding (a BatchEncoding with input_ids, attention_mask, ...), got a bare "
            f"{type(encoding).__name__}: encode the text with {ENCODE_HINT}, or wrap token ids (1, n) as "
            "{'input_ids': ids}."
        )
    if "input_ids" not in encoding:
        raise TypeError(
            f"The encoding has no input_ids (keys: {sorted(encoding)}); encode the text with {ENCODE_HINT}."
        )
    if not isinstance(encoding["input_ids"], torch.Tensor):
        raise TypeError(
            f"The encoding's input_ids are a {type(encoding['input_ids']).__name__}, not a tensor: call the tokenizer "
            f'with return_tensors="pt", or encode the text with {ENCODE_HINT}.'
        )


def check_autograd(what: str) -> None:
    """Raise before any work when ``what`` needs autograd and ``torch.inference_mode()`` is on.

    Inference mode switches autograd off in a way ``torch.enable_grad()`` cannot undo, so a method that
    differentiates through the model (HTA, gradient x input, a linearised pass, training) would fail deep
    inside with torch's "element 0 of tensors does not require grad". ``torch.no_grad()`` is fine.
    """
    if torch.is_inference_mode_enabled():
        raise RuntimeError(
            f"{what} differentiates through the model, which torch.inference_mode() forbids (torch.enable_grad "
            "cannot undo it): call it outside the `with torch.inference_mode():` block. torch.no_grad() is fine."
        )


def _first_set(config, names: Iterable[str]) -> int | None:
    values = [getattr(config, name, None) for name in names]
    return next((int(value) for value in values if isinstance(value, int)), None)


def check_special_tokens(encoding, config, causal: bool) -> None:
    """Warn (:class:`InputWarning`) when an encoder's encoding lacks the special tokens its tokenizer adds
    (``[CLS] ... [SEP]``, ``<s> ... </s>``); raise when it holds nothing else (``tokenizer("")``).

    ``encoding``: one sequence, input_ids ``(1, n)``. A fast tokenizer's encoding records which tokens it
    added (``special_tokens_mask``); otherwise the first and last ids are compared with the config's
    ``bos_token_id`` / ``eos_token_id`` where it has them (RoBERTa, MPNet, ALBERT; BERT's config names none,
    so a hand-made BERT encoding is not checked). Decoders (``causal``) are not checked: many add no
    beginning-of-sequence token.
    """
    if causal:
        return
    made = getattr(encoding, "encodings", None)
    if made:
        special = made[0].special_tokens_mask
        if special and all(special):
            raise ValueError(
                f"The encoding holds only special tokens: the text was empty. Encode words with {ENCODE_HINT}."
            )
        missing = not any(special)
    else:
        ids = encoding["input_ids"].reshape(-1)
        start, end = (
            _first_set(config, ("cls_token_id", "bos_token_id")),
            _first_set(config, ("sep_token_id", "eos_token_id")),
        )
        if start is None or end is None or len(ids) == 0:
            return
        missing = int(ids[0]) != start or int(ids[-1]) != end
    if missing:
        warn_at_caller(
            f"The encoding lacks the special tokens the model was trained with (e.g. [CLS] ... [SEP] or <s> ... </s>; "
            f"tokenized with add_special_tokens=False?): every hidden state differs from the model's usual input. "
            f"Encode with {ENCODE_HINT}.",
        )


def check_unknown_tokens(input_ids: torch.Tensor, unk_token_id: int | None, special_ids: Iterable[int] = ()) -> None:
    """Warn (:class:`InputWarning`) when over ``UNKNOWN_SHARE`` of a text's tokens are the tokenizer's unknown
    token: a tokenizer that does not fit the text or the model (e.g. a cased tokenizer on an uncased model).

    input_ids: ``(..., n)``; ``special_ids``: the tokenizer's special ids, left out of the count
    (``tokenizer.all_special_ids``); ``unk_token_id`` None: the tokenizer has no unknown token, nothing to check.
    """
    if unk_token_id is None:
        return
    ids = input_ids.reshape(-1)
    others = torch.tensor(sorted(set(special_ids) - {unk_token_id}), dtype=ids.dtype, device=ids.device)
    text = ids[~torch.isin(ids, others)]
    unknown = int((text == unk_token_id).sum())
    if len(text) and unknown > UNKNOWN_SHARE * len(text):
        warn_at_caller(
            f"{unknown} of the text's {len(text)} tokens are the tokenizer's unknown token (id {unk_token_id}): the "
            "model sees none of those words. Is it the model's own tokenizer (a cased one on an uncased model?), "
            "the one load_model returns?",
        )


def check_enough_tokens(tokens: int, dimensions: int, what: str) -> None:
    """Warn (:class:`InputWarning`) when ``what`` is fitted on fewer ``tokens`` (rows) than ``dimensions``:
    the least-squares fit is underdetermined and generalises poorly (a trained map can then score below the
    naive one)."""
    if tokens < dimensions:
        warn_at_caller(
            f"{what} is fitted on {tokens} tokens, fewer than their {dimensions} dimensions: the fit is "
            "underdetermined and generalises poorly (it can score below the naive map). Train on more sequences.",
        )


def check_supported(
    model: PreTrainedModel, model_types: tuple[str, ...] = SUPPORTED_MODEL_TYPES, method: str | None = None
) -> None:
    """Raise a clear error unless ``model`` is a bare encoder of ``model_types`` running eager attention.

    ``model_types``: the families the caller handles; ``LINEARISED_ENCODERS`` (BERT and MPNet) for the
    functions that also take MPNet. MPNet always computes its attention inline (eagerly). ``method``
    names the caller (and why it is limited) in the message.
    """
    model_type = getattr(model.config, "model_type", None)
    if model_type not in model_types:
        raise UnsupportedModelError(
            f"{method or 'This function'} takes the encoder families {', '.join(model_types)} only; "
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
