"""Helpers for the book *On Identifiability in Transformers, reproduced*.

The package has four floors; imports run down only (``tests/test_architecture.py``):

* ``helpers.model``: getting at a model and its tensors (loading, families, capture, text,
  the corpus, numbering, the shared input checks);
* ``helpers.methods``: the maths, tensors in and tensors out;
* ``helpers.drivers``: run a model over a corpus and tabulate;
* ``helpers.book``: what only the chapters need (claims, the paper's numbers, notebook setup,
  which model a chapter runs on, widgets, ``plots``).

This module is the reader's surface: the few names a chapter, or a reader's own code, calls
first. Everything else is reached by its floor, e.g.
``helpers.methods.lp_bounds.attention_bounds`` or ``helpers.drivers.mixing.agreement_table``.
Each name and submodule is imported when first read (``helpers.model.lazy``), so ``import helpers``
loads neither torch nor transformers; the plots and widgets need the ``notebooks`` extra.

Every chapter: ``load_model``, ``load_decoder``, ``load_for_chapter``, ``describe``,
``encode``, ``tokens_of``, ``capture`` (-> ``Internals``), ``load_corpus``,
``setup_notebook``, ``glue``, ``residual_text``, ``Claims`` (with ``Control`` and
``bootstrap``, a 95% interval over sequences), ``paper``, ``plots``.

* 2, the rank argument: ``numerical_rank``, ``patch_attention``, ``rank_sweep``.
* 3, null spaces: ``alternative_family``, ``attention_bounds``, ``NullSpaceExplorer``.
* 4, effective attention: ``effective_attention``, ``effective_attention_of``,
  ``effective_attention_sweep``.
* 5, token identifiability: ``collect_hidden_tokens``, ``probe_layers``.
* 6, Hidden Token Attribution: ``hidden_token_attribution``, ``attribute_examples``.
* 7, context mixing: ``context_mixing``, ``context_mixing_sweep``.
* 8, fine-tuning: ``fine_tune``.
* 9, a decoder: ``causal_effective_attention``, ``sink_sweep``.

One numbering convention, everywhere a reader sees a number (tables, plot
labels, docstrings, prose), as in the paper:

* hidden states are numbered 0..L: 0 is the embedding output, l is the output
  of layer l (table column ``hidden_state``);
* layers are numbered 1..L and heads 1..h (table columns ``layer`` and
  ``head``); functions a reader calls with a layer or head
  (``patch_attention(model, layer=3, head=1, ...)``) take these numbers;
* tensors keep Python's 0-based index (``internals.A[l - 1, h - 1]`` is layer
  l, head h); only ``helpers.model.numbering`` converts.

One name per thing: the input embeddings (token + segment + position, before
the embedding LayerNorm) are ``x``; the sequence length is ``n`` (the paper's
d_s); randomness is ``seed: int``; the Hidden Token Attribution estimator's
sample count is ``samples`` (the word "probe" belongs to chapter 5's maps).
"""

from typing import TYPE_CHECKING

from .model.lazy import installed as _installed
from .model.lazy import lazy_attributes as _lazy_attributes

# What this surface gives, by the module that defines it: imported on first use, so ``import helpers`` loads
# neither torch, transformers, scipy nor matplotlib. The ``if TYPE_CHECKING:`` block below names the same
# things for type checkers and readers (tests/test_lazy.py keeps the two in step).
_MODULES = {
    "model": ".model",
    "methods": ".methods",
    "drivers": ".drivers",
    "book": ".book",
    "paper": ".book.paper",
    "plots": ".book.plots",  # matplotlib and seaborn load with the first plot
}
_EXPORTS = {
    ".book.chapters": ("load_for_chapter",),
    ".book.claims": ("Claims",),
    ".book.controls": ("Control",),
    ".book.notebook": ("glue", "residual_text", "setup_notebook"),
    ".book.widgets": ("NullSpaceExplorer",),  # ipywidgets loads with the first explorer
    ".drivers.attribution": ("attribute_examples",),
    ".drivers.decoder": ("sink_sweep",),
    ".drivers.effective": ("effective_attention_sweep",),
    ".drivers.finetuning": ("fine_tune",),
    ".drivers.identifiability": ("collect_hidden_tokens", "probe_layers"),
    ".drivers.mixing": ("context_mixing_sweep",),
    ".drivers.ranks": ("rank_sweep",),
    ".methods.attribution": ("hidden_token_attribution",),
    ".methods.captured": ("effective_attention_of",),
    ".methods.causal": ("causal_effective_attention",),
    ".methods.effective": ("effective_attention",),
    ".methods.intervals": ("bootstrap",),
    ".methods.linalg": ("numerical_rank",),
    ".methods.lp_bounds": ("attention_bounds",),
    ".methods.mixing": ("context_mixing",),
    ".methods.nullspace": ("alternative_family",),
    ".model.capture": ("capture",),
    ".model.corpus": ("load_corpus",),
    ".model.decoder": ("load_decoder",),
    ".model.internals": ("Internals",),
    ".model.loading": ("describe", "load_model"),
    ".model.patching": ("patch_attention",),
    ".model.text": ("encode", "tokens_of"),
}

if TYPE_CHECKING:
    from . import book, drivers, methods, model
    from .book import paper, plots
    from .book.chapters import load_for_chapter
    from .book.claims import Claims
    from .book.controls import Control
    from .book.notebook import glue, residual_text, setup_notebook
    from .book.widgets import NullSpaceExplorer
    from .drivers.attribution import attribute_examples
    from .drivers.decoder import sink_sweep
    from .drivers.effective import effective_attention_sweep
    from .drivers.finetuning import fine_tune
    from .drivers.identifiability import collect_hidden_tokens, probe_layers
    from .drivers.mixing import context_mixing_sweep
    from .drivers.ranks import rank_sweep
    from .methods.attribution import hidden_token_attribution
    from .methods.captured import effective_attention_of
    from .methods.causal import causal_effective_attention
    from .methods.effective import effective_attention
    from .methods.intervals import bootstrap
    from .methods.linalg import numerical_rank
    from .methods.lp_bounds import attention_bounds
    from .methods.mixing import context_mixing
    from .methods.nullspace import alternative_family
    from .model.capture import capture
    from .model.corpus import load_corpus
    from .model.decoder import load_decoder
    from .model.internals import Internals
    from .model.loading import describe, load_model
    from .model.patching import patch_attention
    from .model.text import encode, tokens_of

__version__ = "0.1.0"

__all__ = [
    # the floors
    "model",
    "methods",
    "drivers",
    "book",
    # every chapter
    "load_model",
    "load_decoder",
    "load_for_chapter",
    "describe",
    "encode",
    "tokens_of",
    "capture",
    "Internals",
    "load_corpus",
    "setup_notebook",
    "glue",
    "residual_text",
    "Claims",
    "Control",
    "bootstrap",
    "paper",
    "plots",
    # chapter 2
    "numerical_rank",
    "patch_attention",
    "rank_sweep",
    # chapter 3
    "alternative_family",
    "attention_bounds",
    "NullSpaceExplorer",
    # chapter 4
    "effective_attention",
    "effective_attention_of",
    "effective_attention_sweep",
    # chapter 5
    "collect_hidden_tokens",
    "probe_layers",
    # chapter 6
    "hidden_token_attribution",
    "attribute_examples",
    # chapter 7
    "context_mixing",
    "context_mixing_sweep",
    # chapter 8
    "fine_tune",
    # chapter 9
    "causal_effective_attention",
    "sink_sweep",
]

# The names that need the ``notebooks`` extra: left out of dir() and __all__ while it is not installed, so
# help(helpers) and ``from helpers import *`` work on the library install.
_NEEDS = {"plots": ("matplotlib", "seaborn"), "NullSpaceExplorer": ("matplotlib",)}
__all__ = [name for name in __all__ if all(map(_installed, _NEEDS.get(name, ())))]

__getattr__, __dir__ = _lazy_attributes(__name__, modules=_MODULES, exports=_EXPORTS, needs=_NEEDS)
del TYPE_CHECKING, _lazy_attributes, _installed
