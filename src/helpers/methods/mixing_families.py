"""Which context-mixing measure applies to which model family, and why not where it does not.

The norm-based measures (attention norms, GlobEnc, ALTI) and value zeroing decompose a layer:
a post-norm encoder layer (``helpers.model.post_norm``: BERT, RoBERTa, ELECTRA, DistilBERT, ALBERT,
MPNet) or a pre-norm decoder block (``helpers.model.pre_norm``: GPT-2, Llama, Qwen2; what each
measure reads there is in ``helpers.methods.decomposition``). Gradient x input and layer-local HTA
push tangents through the linearised model of either kind. Attention rollout reads the captured
attention of any family; HTA takes what ``hidden_token_attribution`` takes. Leave-one-out scores
what a token does to a mean-pooled sentence embedding, so it takes the encoders only.
"""

from __future__ import annotations

from transformers import PreTrainedModel

from ..model.checks import UnsupportedModelError
from ..model.families import family_of
from ..model.post_norm import POST_NORM_ENCODERS
from ..model.pre_norm import PRE_NORM_DECODERS
from .attribution import hta_refusal
from .decomposition import NORM_MEASURES

__all__ = ["DECOMPOSED_FAMILIES", "LAYER_MEASURES", "check_mixing_family", "mixing_refusal"]

# the measures that decompose, or linearise, a layer of a post-norm encoder or a pre-norm decoder
LAYER_MEASURES = NORM_MEASURES + ("value_zeroing", "grad_input", "hta_local")
DECOMPOSED_FAMILIES = POST_NORM_ENCODERS + PRE_NORM_DECODERS


def mixing_refusal(model_type: str, measure: str) -> str | None:
    """Why ``measure`` does not apply to the family ``model_type`` (None where it does). ``measure``: a
    measure of ``context_mixing``, ``"hta_local"`` or ``"leave_one_out"``."""
    if measure == "attention":
        return None
    if measure == "hta":
        return hta_refusal(model_type)
    if measure == "leave_one_out" and model_type not in POST_NORM_ENCODERS:
        return (
            "it scores what a token does to a mean-pooled sentence embedding, which a causal decoder does not "
            f"produce; it takes {', '.join(POST_NORM_ENCODERS)}"
        )
    if measure in LAYER_MEASURES and model_type not in DECOMPOSED_FAMILIES:
        return (
            "it decomposes a post-norm encoder layer or a pre-norm decoder block, and this model's layers are "
            f"neither; it takes {', '.join(DECOMPOSED_FAMILIES)}, and attention rollout takes every family"
        )
    return None


def check_mixing_family(model: PreTrainedModel, measure: str) -> None:
    """Raise ``UnsupportedModelError`` unless ``measure`` applies to ``model``'s family (``mixing_refusal``);
    the message names the measure, the family and why."""
    family = family_of(model).name
    why = mixing_refusal(family, measure)
    if why is not None:
        method = f"context_mixing(measure={measure!r})" if measure == "hta" else measure
        raise UnsupportedModelError(f"{method} does not apply to model_type={family!r}: {why}.")
