"""Shared fixtures: tiny random BERT models built in code, and the bundled real model."""

from __future__ import annotations

import os

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel

import helpers

# The committed outputs hold no progress bars (helpers.model.progress): the notebook kernels pytest starts inherit
# this, so the notebook check compares like with like; a test of the bars sets the variable itself.
os.environ.setdefault("BOOK_PROGRESS", "0")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs two pytest-xdist workers on two cores: one thread each, for this
    # process and for the notebook kernels it starts (they inherit the environment).
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    """The tests marked slow first: the workers take the notebooks (most cells first), then these, and end on
    the many short tests, so that neither waits alone on a long one at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist: a notebook's cells (nbval items) go to one worker, in order; every
    other test is scheduled on its own, so the slow second-model runs spread over both workers."""
    from xdist.scheduler import LoadScopeScheduling

    class NotebookScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path.endswith(".ipynb") else nodeid

    return NotebookScheduling(config, log)


def make_tiny_bert(
    num_layers: int = 2,
    heads: int = 4,
    hidden: int = 32,
    max_positions: int = 128,
    seed: int = 0,
    attn_implementation: str = "eager",
) -> BertModel:
    """A randomly initialised BertModel sharing the real tokenizer's vocabulary.

    d_v = hidden / heads (8 by default), so sequences longer than 8 tokens
    already make attention non-identifiable.
    """
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=hidden,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        max_position_embeddings=max_positions,
        attn_implementation=attn_implementation,
    )
    model = BertModel(config, add_pooling_layer=False)
    with torch.no_grad():  # default init is small; widen it so attention is not near-uniform
        for name, parameter in model.named_parameters():
            if "LayerNorm" not in name and parameter.dim() == 2:
                parameter.normal_(0.0, 0.2)
    return model.eval()


@pytest.fixture
def one_thread():
    """Many tiny matrix operations run fastest on one thread, also on a busy CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tokenizer():
    return AutoTokenizer.from_pretrained(helpers.model.loading.bundled_model_dir())


@pytest.fixture
def tiny_model():
    return make_tiny_bert()


@pytest.fixture(scope="session")
def real_model():
    model, tokenizer = helpers.load_model()
    return model, tokenizer


SENTENCE = "The committee approved the budget on Tuesday, after a long and heated debate."
LONG_TEXT = (
    "Rivers shape the land slowly: they carry sand and silt from the mountains, drop it where the "
    "current weakens, and build wide plains over thousands of years. Farmers settled on those plains "
    "because the soil was rich, yet the same water that fed their fields flooded their homes every "
    "few decades, so towns learned to build on higher ground."
)
