"""Helpers for the book *On Identifiability in Transformers, reproduced*.

Data flows one way: text -> models -> internals -> method modules -> plots.
"""
from .data import DataUnavailableError, Example, load_corpus, load_glue
from .internals import Internals, attention_from_qk, capture, finish_layer, head_weights, rebuild_hidden_states
from .linalg import left_null_space, numerical_rank
from .models import (
    BERT_BASE,
    DEFAULT_MODEL,
    PAPER_MODEL,
    Architecture,
    ModelLoadError,
    UnsupportedModelError,
    check_supported,
    describe,
    load_model,
)
from .notebook import setup_notebook
from .plots import token_heatmap
from .text import encode, tokens_of

__version__ = "0.1.0"
