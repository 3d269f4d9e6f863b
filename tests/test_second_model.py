"""Every chapter runs top to bottom on a second model of another shape.

The book promises that a reader who points ``BOOK_MODEL`` at another BERT gets
a book whose cells still run and whose prose is still computed. This test
executes each chapter on a randomly initialised BERT with 4 layers, 3 heads
and d = 144 (so d_v = 48, where the bundled model has 32), saved to a temporary folder with
the bundled tokenizer (the decoder chapter: a random 4-layer Llama with
grouped-query heads of 48 and the bundled decoder's tokenizer), in report mode: claims may fail on random
weights (that is only reported), but no cell may raise. The chapters pick inputs longer than d_v, so their cost
grows with d_v (chapters 3 and 7 as its cube and square); that the corpus holds inputs for BERT-Base's
d_v = 64 is checked without running them (tests/test_budgets.py).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import torch
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from transformers import AutoTokenizer, BertConfig, BertModel

import helpers

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
SECOND_SHAPE = dict(num_hidden_layers=4, num_attention_heads=3, hidden_size=144, intermediate_size=288)


def save_random_llama(folder: Path, seed: int = 1) -> Path:
    """A randomly initialised Llama decoder (grouped-query heads: 4 query heads sharing 2
    key/value heads, head size 48), saved with the bundled decoder's tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = helpers.model.decoder.decoder_tokenizer()
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=192,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=48,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_random_bert(folder: Path, seed: int = 1, **shape) -> Path:
    """A randomly initialised BertModel of the given shape, saved with the bundled tokenizer."""
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=30522, max_position_embeddings=512, **{**SECOND_SHAPE, **shape})
    BertModel(config, add_pooling_layer=False).save_pretrained(folder)
    AutoTokenizer.from_pretrained(helpers.model.loading.bundled_model_dir()).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def second_model(tmp_path_factory) -> Path:
    return save_random_bert(tmp_path_factory.mktemp("second-bert"))


@pytest.fixture(scope="module")
def second_decoder(tmp_path_factory) -> Path:
    return save_random_llama(tmp_path_factory.mktemp("second-llama"))


def test_the_second_decoder_has_another_shape(second_decoder):
    model, _ = helpers.load_model(str(second_decoder))
    arch = helpers.describe(model)
    assert (arch.num_layers, arch.heads, arch.kv_heads, arch.d_v, arch.causal) == (4, 4, 2, 48, True)
    assert hasattr(model, "lm_head"), "a decoder loads with its language-model head"


def test_the_second_model_has_another_shape(second_model):
    model, _ = helpers.load_model(str(second_model))
    second, default = helpers.describe(model), helpers.describe(helpers.load_model()[0])
    assert (second.num_layers, second.heads, second.d, second.d_v) == (4, 3, 144, 48)
    assert (second.num_layers, second.d_v) != (default.num_layers, default.d_v)


@pytest.mark.slow
@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_runs_on_the_second_model(notebook, request, tmp_path, monkeypatch):
    # a chapter about decoders runs on the random decoder, every other chapter on the random BERT
    causal = "causal" in helpers.book.chapters.CHAPTER_NEEDS[notebook.stem]
    second_model = request.getfixturevalue("second_decoder" if causal else "second_model")
    monkeypatch.setenv("BOOK_MODEL", str(second_model))
    monkeypatch.setenv("BOOK_CLAIMS", "report")
    monkeypatch.setenv("BOOK_CLAIMS_DIR", str(tmp_path / "claims"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(BOOK)}})
    try:
        client.execute()
    except CellExecutionError as err:  # the message holds the cell and its traceback
        pytest.fail(f"{notebook.name} failed on the second model ({second_model.name}):\n{err}")
    records = helpers.book.claims.load_records(tmp_path / "claims")
    assert [r["chapter"] for r in records] == [notebook.stem], "the chapter must end with claims.enforce()"
    assert records[0]["mode"] == "report" and records[0]["claims"], "report mode, at least one claim"
