"""Every cell of the method x family matrix (helpers.book.support.family_matrix) run on a tiny random model.

A cell that says the method takes the family must run on it; a cell with a reason must raise a ValueError
(UnsupportedModelError is one) that names the family. The matrix is read from the code that refuses
(the family lists and predicates each method checks), so a method that starts or stops taking a family
changes the table on the API page and this test together.
"""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers.book.support import family_matrix, family_support
from helpers.methods.probes import split_by_sequence
from helpers.model.corpus import Example
from helpers.model.families import FAMILIES

from .test_capture_mpnet import make_mpnet_tokenizer, make_tiny_mpnet
from .test_families import make_tiny

TEXT = "The cat sat on the mat because it was warm."
SINGLES = ["The cat sat on the mat.", "It was warm by the door."]
PAIRS = [
    Example(id=f"e{k}", text_a="The cat sat on the mat.", text_b="It was warm.", label=k % 2, source="t", topic="t")
    for k in range(2)
]
pytestmark = pytest.mark.filterwarnings("ignore::helpers.model.checks.InputWarning")


def _mixing(measure):
    options = {"estimator": "estimate", "samples": 2, "progress": False} if measure == "hta" else {}
    return lambda m, t, e: helpers.context_mixing(m, e, measure, **options)


def _patched(model, encoding):
    with helpers.patch_attention(model, 1, 1, torch.eye(encoding["input_ids"].shape[1])):
        pass


RUNS = {
    "capture": lambda m, t, e: helpers.capture(m, e),
    "effective_attention_of": lambda m, t, e: helpers.effective_attention_of(helpers.capture(m, e)),
    "hidden_token_attribution": lambda m, t, e: helpers.hidden_token_attribution(m, e, progress=False),
    **{f"context_mixing: {measure}": _mixing(measure) for measure in helpers.methods.mixing.MEASURES},
    "local_hta": lambda m, t, e: helpers.methods.mixing.local_hta(m, e, samples=2),
    "leave_one_out": lambda m, t, e: helpers.methods.mixing.leave_one_out(m, e, mask_token_id=0),
    "collect_hidden_tokens": lambda m, t, e: helpers.collect_hidden_tokens(m, t, SINGLES, progress=False),
    "probe_layers": lambda m, t, e: helpers.probe_layers(
        *split_by_sequence(helpers.collect_hidden_tokens(m, t, SINGLES, progress=False), 0.5),
        combinations=[("linear", "l2")],  # the naive map needs x as wide as d: not ELECTRA or ALBERT
        progress=False,
    ),
    "patch_attention": lambda m, t, e: _patched(m, e),
    "fine_tune": lambda m, t, e: helpers.fine_tune(m, t, PAIRS, epochs=1, batch_size=2),
    "effective_attention_sweep": lambda m, t, e: helpers.effective_attention_sweep(m, t, PAIRS, progress=False),
    "context_mixing_sweep": lambda m, t, e: helpers.context_mixing_sweep(
        m,
        t,
        PAIRS[:1],
        measures=[("attention", {})],
        hta_options={"estimator": "estimate", "samples": 2},
        local_samples=2,
        progress=False,
    ),
    "sink_sweep": lambda m, t, e: helpers.sink_sweep(m, t, [TEXT], progress=False),
}


@pytest.fixture(scope="module")
def models():
    """(model, tokenizer, encoding) per family: the bundled WordPiece vocabulary, MPNet with its own special tokens."""
    wordpiece = helpers.load_model().tokenizer
    out = {}
    for family in FAMILIES:
        if family == "mpnet":
            tokenizer = make_mpnet_tokenizer()
            model = make_tiny_mpnet(len(tokenizer))
        else:
            tokenizer, model = wordpiece, make_tiny(family, vocab_size=wordpiece.vocab_size)
        out[family] = (model.eval(), tokenizer, helpers.encode(tokenizer, TEXT, model=model))
    return out


def test_the_matrix_covers_every_family_and_every_method_it_lists():
    matrix = family_matrix()
    assert set(matrix) == set(family_support()) == set(RUNS)
    assert all(list(row) == list(FAMILIES) for row in matrix.values())
    # the library's promise: every context-mixing measure and HTA on every family the capture takes
    for method, row in matrix.items():
        if method.startswith("context_mixing: ") or method in ("hidden_token_attribution", "capture", "local_hta"):
            assert all(why is None for why in row.values()), method


@pytest.mark.parametrize("method", sorted(RUNS))
def test_each_cell_does_what_the_matrix_says(method, models):
    for family, why in family_matrix()[method].items():
        model, tokenizer, encoding = models[family]
        if why is None:
            RUNS[method](model, tokenizer, encoding)
        else:
            with pytest.raises(ValueError) as refusal:
                RUNS[method](model, tokenizer, encoding)
            message = str(refusal.value)
            # the refusal is the method's own: it names the family, or the kind the matrix gives as the reason
            assert family in message or any(word in message for word in ("causal", "bidirectional")), message
