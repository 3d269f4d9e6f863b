"""collect_hidden_tokens on every family the capture takes: padded batches of encoders give each token the
states of an unpadded pass over its own sequence, and x is the input of the embedding LayerNorm."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers.model.post_norm import input_width

from .test_capture_mpnet import make_tiny_mpnet
from .test_families import make_tiny

TEXTS = ["The cat sat on the mat.", "It was warm by the door, and the dog slept there all night.", "Rain."]
ENCODERS = ["bert", "roberta", "electra", "distilbert", "albert", "mpnet"]
pytestmark = pytest.mark.filterwarnings("ignore::helpers.model.checks.InputWarning")


@pytest.fixture(scope="module")
def tokenizer():
    return helpers.load_model().tokenizer  # the bundled WordPiece tokenizer: any tiny model of its vocabulary


def tiny(family: str, vocab_size: int):
    return make_tiny_mpnet(vocab_size) if family == "mpnet" else make_tiny(family, vocab_size=vocab_size)


@pytest.mark.parametrize("family", ENCODERS + ["gpt2"])
def test_each_token_gets_the_states_of_its_own_unpadded_pass(tokenizer, family):
    model = tiny(family, tokenizer.vocab_size)
    tokens = helpers.collect_hidden_tokens(model, tokenizer, TEXTS, batch_size=2, progress=False)
    for s, text in enumerate(TEXTS):
        alone = helpers.capture(model, helpers.encode(tokenizer, text, model=model))
        mine = tokens.sequence == s
        torch.testing.assert_close(tokens.hidden[:, mine], alone.hidden_states.cpu(), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(tokens.x[mine], alone.x.cpu(), rtol=1e-5, atol=1e-5)
    if family != "gpt2":  # ELECTRA and ALBERT: x has the embeddings' width, narrower than the layers'
        assert tokens.x.shape[1] == input_width(model)
