"""Which public function applies to which kind of model (encoders, decoders or both), and which method to which family.

``SUPPORT`` maps every name of ``helpers.__all__`` that takes a model, an encoding
of one, a capture or a head's attention to ``(applies_to, note)``: "encoder", "decoder"
or "both", and what it does with the other kind. A function that does not apply
refuses with a clear error; none returns a bidirectional answer for a causal head
without saying so. The API page shows this table; ``tests/test_support.py`` runs every
entry on a tiny random BERT and a tiny random Llama and checks it does what it says, and
``tests/test_capture_mpnet.py`` runs the encoder entries on a tiny MPNet (all-mpnet-base-v2's
family): each runs, or, where its note limits it to other families, refuses it clearly.
``family_support`` and ``family_matrix`` give the method x family table, each cell read from the family
lists and predicates the method itself checks; ``tests/test_family_matrix.py`` runs every cell.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

__all__ = ["APPLIES_TO", "SUPPORT", "family_support", "family_matrix"]

APPLIES_TO = ("encoder", "decoder", "both")

SUPPORT: dict[str, tuple[str, str]] = {
    "describe": ("both", "the architecture, causal or not"),
    "encode": ("both", "checks the tokenizer fits the model"),
    "tokens_of": ("both", "the tokenizer's own strings"),
    "capture": ("both", "Internals.causal says which; MPNet's position bias in Internals.position_bias"),
    "effective_attention_of": ("both", "bidirectional for an encoder, row by row (causal) for a decoder"),
    "effective_attention": (
        "both",
        "tensors in: the whole-sequence split; for a causal head's rows use causal_effective_attention",
    ),
    "causal_effective_attention": ("decoder", "refuses attention that is not causal"),
    "attention_bounds": ("encoder", "refuses a causal head's rows; bound row i on its prefix A[:i+1, :i+1]"),
    "alternative_family": ("encoder", "refuses causal attention (its alternatives would use future positions)"),
    "NullSpaceExplorer": ("encoder", "refuses causal attention"),
    "rank_sweep": ("both", "ranks of prefixes: what a causal row at that length sees"),
    "patch_attention": ("encoder", "BERT and MPNet; refuses other models"),
    "effective_attention_sweep": ("encoder", "refuses a decoder (one null space per row); see sink_sweep"),
    "collect_hidden_tokens": (
        "both",
        "every post-norm encoder (padded batches; ELECTRA's and ALBERT's x narrower than d) and every decoder "
        "(single texts, one capture each; x = the first block's input)",
    ),
    "probe_layers": ("both", "reads collect_hidden_tokens' output; the naive map needs x as wide as d"),
    "hidden_token_attribution": (
        "both",
        "every family the capture takes (a decoder's contributions are zero above the diagonal)",
    ),
    "attribute_examples": ("both", "a decoder: single texts (encode refuses a pair)"),
    "context_mixing": (
        "both",
        "every measure on every family the capture takes; on a decoder GlobEnc equals the residual norm (no "
        "norm sits on a pre-norm block's residual path) and ALTI splits the residual stream",
    ),
    "context_mixing_sweep": (
        "encoder",
        "every post-norm encoder (BERT, RoBERTa, ELECTRA, DistilBERT, ALBERT, MPNet); refuses a decoder, saying why",
    ),
    "fine_tune": ("encoder", "BERT and MPNet (a classifier on the start token)"),
    "sink_sweep": ("decoder", "refuses a bidirectional model"),
}


def _every_family(family: str) -> None:
    return None


def _listed(families: tuple[str, ...], what: str) -> Callable[[str], str | None]:
    def refusal(family: str) -> str | None:
        return None if family in families else f"{what}; it takes {', '.join(families)}"

    return refusal


def _kind(causal: bool, why: str) -> Callable[[str], str | None]:
    def refusal(family: str) -> str | None:
        from ..model.families import FAMILIES

        return None if FAMILIES[family].causal == causal else why

    return refusal


@functools.cache
def family_support() -> dict[str, Callable[[str], str | None]]:
    """Each method of the family matrix, with a function of a family's name that says why the method refuses
    that family (None where it takes it); each reads the family lists or predicates the method itself checks."""
    from ..drivers.finetuning import FINE_TUNE_FAMILIES, FINE_TUNE_LIMIT
    from ..methods.attribution import hta_refusal
    from ..methods.mixing import MEASURES
    from ..methods.mixing_families import mixing_refusal
    from ..model.patching import PATCH_LIMIT, PATCHABLE_FAMILIES

    return {
        "capture": _every_family,
        "effective_attention_of": _every_family,
        "hidden_token_attribution": hta_refusal,
        **{f"context_mixing: {m}": functools.partial(mixing_refusal, measure=m) for m in MEASURES},
        "local_hta": functools.partial(mixing_refusal, measure="hta_local"),
        "leave_one_out": functools.partial(mixing_refusal, measure="leave_one_out"),
        "collect_hidden_tokens": _every_family,
        "probe_layers": _every_family,
        "patch_attention": _listed(PATCHABLE_FAMILIES, PATCH_LIMIT),
        "fine_tune": _listed(FINE_TUNE_FAMILIES, FINE_TUNE_LIMIT),
        "effective_attention_sweep": _kind(
            False, "it splits each head with one null space per sequence; a causal row has its own"
        ),
        "context_mixing_sweep": _kind(
            False, "it reads sentence pairs and a mean-pooled embedding, which a decoder lacks"
        ),
        "sink_sweep": _kind(True, "it measures the attention sink of a causal model; this one is bidirectional"),
    }


def family_matrix() -> dict[str, dict[str, str | None]]:
    """Method x family: ``matrix[method][family]`` is None where the method takes the family, else why not.

    Rows are ``family_support()`` (capture, effective attention, HTA, every context-mixing measure, the
    identifiability tables, and the few methods that take some families or one kind only); columns every family the capture takes (``helpers.model.families.FAMILIES``).
    ``tests/test_family_matrix.py`` runs every cell on a tiny random model of the family.
    """
    from ..model.families import FAMILIES

    return {method: {family: refusal(family) for family in FAMILIES} for method, refusal in family_support().items()}
