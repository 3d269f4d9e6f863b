"""Which chapters apply to which model, and the model a chapter runs on.

Each chapter's first cell calls ``load_for_chapter(MODEL, chapter)``: the reader's model where
the chapter's method applies to it, else a printed note saying why and the chapter's bundled
default.
"""

from __future__ import annotations

from typing import NamedTuple

from transformers import AutoConfig, PreTrainedModel

from ..drivers.finetuning import FINE_TUNE_FAMILIES
from ..model.checks import LINEARISED_ENCODERS
from ..model.decoder import DECODER_MODEL
from ..model.families import UnsupportedFamilyError, family_of
from ..model.loaded import LoadedModel
from ..model.loading import DEFAULT_MODEL, bundled_model_dir, load_model

__all__ = [
    "CHAPTER_NEEDS",
    "NEEDS",
    "chapter_applies",
    "chapter_default_model",
    "layers_and_width",
    "load_for_chapter",
    "work_scale",
]


# What each chapter's method needs from the model:
#   "encoder-internals": a bare BERT or MPNet encoder (``LINEARISED_ENCODERS``): the layer-by-layer rebuild
#                      (finish_layer), patching, and the drivers of the token maps, HTA and context mixing
#   "fine-tuning":    a family ``fine_tune`` trains a classifier on (``FINE_TUNE_FAMILIES``)
#   "heads":          only per-head tensors A, V, H, T (any supported family)
#   "bidirectional":  full (non-causal) attention, as in the paper's encoder
#   "causal":         causal attention (a decoder)
CHAPTER_NEEDS: dict[str, tuple[str, ...]] = {
    "01_anatomy_of_a_head": ("encoder-internals",),
    "02_rank_argument": ("heads",),
    "03_simplex_null_spaces": ("heads", "bidirectional"),
    "04_effective_attention": ("heads", "bidirectional"),
    "05_token_identifiability": ("encoder-internals",),
    "06_hidden_token_attribution": ("encoder-internals",),
    "07_context_mixing": ("encoder-internals",),
    "08_fine_tuning": ("encoder-internals", "fine-tuning"),
    "09_decoder_llm": ("heads", "causal"),
}
NEEDS = ("encoder-internals", "fine-tuning", "heads", "bidirectional", "causal")


def chapter_applies(model: PreTrainedModel, needs: str | tuple[str, ...] | list[str], show: bool = True) -> bool:
    """Whether a chapter's method applies to ``model``; prints a clear note when it does not.

    Args:
        model: the loaded model.
        needs: a chapter name from ``CHAPTER_NEEDS`` (e.g. ``"04_effective_attention"``), or the
            needs themselves: any of ``NEEDS``.
        show: print the note (in a notebook it appears at the top of the chapter).

    Returns:
        ``True`` when every need is met; ``False`` (with the note) otherwise.
    """
    if isinstance(needs, str):
        if needs in CHAPTER_NEEDS:
            needs = CHAPTER_NEEDS[needs]
        else:
            needs = (needs,)
    unknown = [need for need in needs if need not in NEEDS]
    if unknown:
        raise ValueError(f"Unknown needs {unknown}; use chapter names {sorted(CHAPTER_NEEDS)} or needs {list(NEEDS)}.")
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    try:
        family = family_of(model)
    except UnsupportedFamilyError as err:
        missing = [f"its family is not supported ({err})"]
    else:
        missing = []
        if "encoder-internals" in needs and not (family.name in LINEARISED_ENCODERS and hasattr(model, "encoder")):
            missing.append(
                "the internals of a bare BERT or MPNet encoder (finish_layer, patching, the token maps' and HTA drivers)"
            )
        if "fine-tuning" in needs and family.name not in FINE_TUNE_FAMILIES:
            missing.append(f"a family fine_tune trains ({', '.join(FINE_TUNE_FAMILIES)})")
        if "bidirectional" in needs and family.causal:
            missing.append("bidirectional attention (this model is causal: see the decoder chapter)")
        if "causal" in needs and not family.causal:
            missing.append("causal attention (this model is a bidirectional encoder)")
    if missing and show:
        print(
            f"Note: this chapter's method does not apply to {type(model).__name__} (model_type={model_type!r}): "
            f"it needs {'; and '.join(missing)}."
        )
    return not missing


def chapter_default_model(chapter: str) -> str:
    """The bundled model a chapter runs on when ``BOOK_MODEL`` is unset or its method does not
    apply to it: the decoder for a chapter that needs causal attention, the default encoder otherwise."""
    if chapter not in CHAPTER_NEEDS:
        raise ValueError(f"Unknown chapter {chapter!r}; known: {sorted(CHAPTER_NEEDS)}.")
    return DECODER_MODEL if "causal" in CHAPTER_NEEDS[chapter] else DEFAULT_MODEL


def load_for_chapter(name: str | None, chapter: str) -> LoadedModel:
    """``load_model`` for a chapter's first cell: ``name`` (``None``: the chapter's bundled default),
    or, where the chapter's method does not apply to that model, a printed note saying why and
    the chapter's bundled default instead.

    Returns:
        ``LoadedModel(model, tokenizer)``.
    """
    default = chapter_default_model(chapter)
    model, tokenizer = load_model(name or default)
    if not chapter_applies(model, chapter):
        print(f"Running on the bundled {default} instead.")
        model, tokenizer = load_model(default)
    return LoadedModel(model, tokenizer)


class ModelShape(NamedTuple):
    """What a model's cost scales with: its number of layers L and its hidden size d."""

    num_layers: int
    d: int


def layers_and_width(model: PreTrainedModel) -> ModelShape:
    """``ModelShape(L, d)`` from the model's config (``num_hidden_layers``, ``hidden_size``)."""
    config = getattr(model, "config", None)
    layers, d = getattr(config, "num_hidden_layers", None), getattr(config, "hidden_size", None)
    if not layers or not d:
        raise ValueError(f"{type(model).__name__} has no num_hidden_layers / hidden_size in its config.")
    return ModelShape(layers, d)


def work_scale(model: PreTrainedModel, power: int = 2) -> float:
    """How much more work ``model`` costs than the bundled default encoder: L d^power / (L_0 d_0^power).

    A forward pass, a training step or one tangent through the network costs about
    L d^2 multiply-adds per token (``power=2``); exact HTA pushes d tangents per token,
    L d^3 (``power=3``). Chapters 7 and 8 divide their work by this ratio (fewer pairs,
    shorter exact references, fewer epochs) so that a model of BERT-Base's shape
    (8 times the default's L d^2, 16 times its L d^3) stays within the chapter budget.
    """
    if power not in (2, 3):
        raise ValueError(f"power must be 2 (per token) or 3 (exact HTA); got {power!r}.")
    layers, d = layers_and_width(model)
    default = AutoConfig.from_pretrained(bundled_model_dir())
    return layers * d**power / (default.num_hidden_layers * default.hidden_size**power)
