"""Every entry of helpers.book.support.SUPPORT, run on a tiny random BERT and a tiny random Llama.

"both" must run on both; "encoder" must run on BERT and refuse the decoder with a clear error
(a ValueError, UnsupportedModelError included, never a silent answer); "decoder" the reverse.
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

import helpers
from helpers.book.support import APPLIES_TO, SUPPORT
from helpers.methods.causal import future_mass
from helpers.methods.probes import split_by_sequence
from helpers.model.corpus import Example

from .conftest import make_tiny_bert
from .test_families import make_tiny

TEXT = "The cat sat on the mat because it was warm, and the dog slept by the door all night."
PAIRS = [
    Example(id=f"e{k}", text_a="The cat sat on the mat.", text_b="It was warm.", label=k % 2, source="t", topic="t")
    for k in range(2)
]
SINGLES = ["The cat sat on the mat.", "It was warm by the door."]
# not applied to a model, an encoding, a capture or a head's attention
NOT_MODEL_FUNCTIONS = {
    "load_model",
    "load_decoder",
    "load_for_chapter",
    "load_corpus",
    "setup_notebook",
    "glue",
    "residual_text",
    "numerical_rank",
    "Claims",
    "Control",
    "bootstrap",
    "Internals",
}


@pytest.fixture(scope="module")
def kinds():
    """(model, tokenizer, encoding, capture) for a tiny BERT and a tiny Llama (grouped-query heads)."""
    bert_tokenizer = AutoTokenizer.from_pretrained(helpers.model.loading.bundled_model_dir())
    bert = make_tiny_bert()
    decoder_tokenizer = helpers.model.decoder.decoder_tokenizer()
    llama = make_tiny("llama", vocab_size=len(decoder_tokenizer)).eval()
    out = {}
    for kind, model, tokenizer in (("encoder", bert, bert_tokenizer), ("decoder", llama, decoder_tokenizer)):
        encoding = helpers.encode(tokenizer, TEXT, model=model)
        out[kind] = (model, tokenizer, encoding, helpers.capture(model, encoding))
    return out


def _first_head(internals):
    return internals.A[0, 0], internals.T[0, 0]


RECIPES = {
    "describe": lambda m, t, e, i: helpers.describe(m),
    "encode": lambda m, t, e, i: helpers.encode(t, TEXT, model=m),
    "tokens_of": lambda m, t, e, i: helpers.tokens_of(t, e),
    "capture": lambda m, t, e, i: helpers.capture(m, e),
    "effective_attention_of": lambda m, t, e, i: helpers.effective_attention_of(i),
    "effective_attention": lambda m, t, e, i: helpers.effective_attention(i.A, V=i.V, H=i.H),
    "causal_effective_attention": lambda m, t, e, i: helpers.causal_effective_attention(
        i.A, V=i.V, H=i.H, groups=i.groups
    ),
    "attention_bounds": lambda m, t, e, i: helpers.attention_bounds(*_first_head(i), rows=[0], progress=False),
    "alternative_family": lambda m, t, e, i: helpers.alternative_family(*_first_head(i), [0.0, 0.5]),
    "NullSpaceExplorer": lambda m, t, e, i: helpers.NullSpaceExplorer(*_first_head(i)),
    "rank_sweep": lambda m, t, e, i: helpers.rank_sweep(m, [e], lengths=[4, 6], progress=False),
    "patch_attention": lambda m, t, e, i: helpers.patch_attention(m, 1, 1, torch.eye(i.n)).__enter__(),
    "effective_attention_sweep": lambda m, t, e, i: helpers.effective_attention_sweep(m, t, PAIRS, progress=False),
    "collect_hidden_tokens": lambda m, t, e, i: helpers.collect_hidden_tokens(m, t, SINGLES, progress=False),
    "probe_layers": lambda m, t, e, i: helpers.probe_layers(
        *split_by_sequence(helpers.collect_hidden_tokens(m, t, SINGLES, progress=False), 0.5),
        combinations=[("naive", "cosine")],
        progress=False,
    ),
    "hidden_token_attribution": lambda m, t, e, i: helpers.hidden_token_attribution(
        m, e, estimator="estimate", samples=2, progress=False
    ),
    "attribute_examples": lambda m, t, e, i: helpers.attribute_examples(
        m, t, SINGLES[:1], "estimate", 2, progress=False
    ),
    "context_mixing": lambda m, t, e, i: helpers.context_mixing(m, e, "attention"),
    "context_mixing_sweep": lambda m, t, e, i: helpers.context_mixing_sweep(
        m,
        t,
        PAIRS[:1],
        measures=[("attention", {})],
        hta_options={"estimator": "estimate", "samples": 2},
        local_samples=2,
        progress=False,
    ),
    "fine_tune": lambda m, t, e, i: helpers.fine_tune(m, t, PAIRS, epochs=1, batch_size=2),
    "sink_sweep": lambda m, t, e, i: helpers.sink_sweep(m, t, [TEXT], progress=False),
}


def test_the_table_covers_every_public_function_that_takes_a_model():
    surface = {
        name
        for name in helpers.__all__
        if callable(getattr(helpers, name)) and not isinstance(getattr(helpers, name), type(helpers))
    }
    assert set(SUPPORT) == surface - NOT_MODEL_FUNCTIONS
    assert set(RECIPES) == set(SUPPORT)
    assert {applies for applies, _ in SUPPORT.values()} <= set(APPLIES_TO)


@pytest.mark.parametrize("name", sorted(SUPPORT))
def test_each_function_does_what_the_table_says(name, kinds, one_thread):
    applies, _ = SUPPORT[name]
    for kind in ("encoder", "decoder"):
        model, tokenizer, encoding, internals = kinds[kind]
        if applies in (kind, "both"):
            RECIPES[name](model, tokenizer, encoding, internals)
        else:
            with pytest.raises(ValueError):  # UnsupportedModelError is a ValueError
                RECIPES[name](model, tokenizer, encoding, internals)


def test_the_decoder_gets_causal_effective_attention(kinds):
    _, _, _, internals = kinds["decoder"]
    assert internals.causal
    split = helpers.effective_attention_of(internals)
    assert future_mass(split.effective.abs()).max() == 0
