"""Which context-mixing measure applies to which model family, and why not where it does not.

The norm-based measures (attention norms, GlobEnc, ALTI) and value zeroing decompose a post-norm
encoder layer: attention, a residual sum and a LayerNorm, a feed-forward network, a residual sum
and a LayerNorm (``helpers.model.post_norm``: BERT, RoBERTa, ELECTRA, DistilBERT, ALBERT, MPNet).
Gradient x input and layer-local HTA push tangents through the same linearised encoder. Attention
rollout reads the captured attention of any family; HTA takes what ``hidden_token_attribution``
takes (the post-norm encoders and the Llama-family decoders).
"""

from __future__ import annotations

from transformers import PreTrainedModel

from ..model.checks import UnsupportedModelError
from ..model.families import family_of
from ..model.post_norm import POST_NORM_ENCODERS
from .attribution import check_hta_family
from .decomposition import NORM_MEASURES

__all__ = ["ENCODER_ONLY_MEASURES", "check_mixing_family"]

# the measures that decompose, or linearise, a post-norm encoder layer
ENCODER_ONLY_MEASURES = NORM_MEASURES + ("value_zeroing", "grad_input", "hta_local", "leave_one_out")


def check_mixing_family(model: PreTrainedModel, measure: str) -> None:
    """Raise ``UnsupportedModelError`` unless ``measure`` applies to ``model``'s family; the message names
    the measure, the family and why. ``measure``: a measure of ``context_mixing``, ``"hta_local"`` or
    ``"leave_one_out"``."""
    family = family_of(model).name
    if measure == "attention":
        return
    if measure == "hta":
        check_hta_family(model, f"context_mixing(measure={measure!r})")
        return
    if measure in ENCODER_ONLY_MEASURES and family not in POST_NORM_ENCODERS:
        raise UnsupportedModelError(
            f"{measure} does not apply to model_type={family!r}: it "
            + (
                "scores what a token does to a mean-pooled sentence embedding, which a causal decoder does not produce"
                if measure == "leave_one_out"
                else "follows a post-norm encoder layer (a LayerNorm after each residual sum), and this model "
                "normalises before each block"
            )
            + f". It takes {', '.join(POST_NORM_ENCODERS)}; attention rollout takes every family."
        )
