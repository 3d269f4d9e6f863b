"""The logit lens (helpers.methods.logit_lens, helpers.drivers.decoder.lens_identifiability) on a tiny Llama."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers.drivers.decoder import lens_identifiability, logit_lens
from helpers.methods.logit_lens import lens_hits

from .conftest import LONG_TEXT, SENTENCE
from .test_families import _widen

TEXTS = [LONG_TEXT, SENTENCE + " " + SENTENCE]


def tiny_llama(vocab_size: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        vocab_size=vocab_size,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        attn_implementation="eager",
    )
    return _widen(LlamaForCausalLM(config))


def test_the_lens_at_the_last_hidden_state_is_the_models_own_prediction(tokenizer, one_thread):
    model = tiny_llama(len(tokenizer))
    tokens = helpers.collect_hidden_tokens(model, tokenizer, TEXTS, progress=False)
    L = tokens.num_layers
    found = lens_identifiability(model, tokens, L, offset=1, among="vocabulary")
    in_sequence = lens_identifiability(model, tokens, L, offset=1, among="sequence")
    expected, expected_in_sequence = [], []
    for text in TEXTS:
        ids = helpers.encode(tokenizer, text, model=model)["input_ids"]
        with torch.no_grad():
            logits = model(ids).logits[0]  # (n, V): the final norm and the tied head
        expected.append(logits[:-1].argmax(-1) == ids[0, 1:])
        allowed = torch.full_like(logits, float("-inf"))
        allowed[:, ids[0]] = 0.0
        expected_in_sequence.append((logits + allowed)[:-1].argmax(-1) == ids[0, 1:])
    assert torch.equal(found.targets, torch.cat(expected))
    assert torch.equal(in_sequence.targets, torch.cat(expected_in_sequence))
    # every token but the last of each sequence has a next token
    assert len(found.sources) == len(tokens) - len(TEXTS)
    assert torch.equal(tokens.sequence[found.sources], tokens.sequence[found.sources + 1])
    # the readout is the final norm and the tied embeddings: logit of t = norm(e) . E[t]
    e = tokens.hidden[L, :3]
    torch.testing.assert_close(
        logit_lens(model)(e), model.model.norm(e) @ model.model.embed_tokens.weight.T, atol=1e-5, rtol=1e-5
    )


def test_candidates_are_the_ids_of_the_sequence_and_copies_count_as_one():
    V = 10

    def readout(hidden):  # names the id in the first entry; ties lean to the larger id
        logits = 0.01 * torch.arange(V, dtype=torch.float32).repeat(hidden.shape[0], 1)
        logits[torch.arange(hidden.shape[0]), hidden[:, 0].long()] = 1.0
        return logits

    ids = torch.tensor([3, 4, 5, 4, 7, 8, 2])
    sequence = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    position = torch.tensor([0, 1, 2, 3, 0, 1, 2])
    named = torch.tensor([4, 5, 4, 9, 8, 9, 7])
    hidden = named[:, None].float().repeat(1, 2)
    found = lens_hits(readout, hidden, ids, sequence, position, offset=1, chunk=2)
    # row 0 names 4 = x_1 (hit); row 1 names 5 = x_2 (hit); row 2 names 4, whose second copy is x_3 (hit);
    # row 4 names 8 = x_5 (hit); row 5 names 9, not in its sequence: the largest candidate, 8, is not x_6 (miss)
    assert found.sources.tolist() == [0, 1, 2, 4, 5]
    assert found.targets.tolist() == [True, True, True, True, False]
    whole = lens_hits(readout, hidden, ids, sequence, position, offset=1, among="vocabulary")
    assert whole.targets.tolist() == [True, True, True, True, False]
    # offset 0 scores x_i itself; row 5 names 9, outside its sequence, and the largest candidate is its own 8
    own = lens_hits(readout, hidden, ids, sequence, position, offset=0)
    assert own.sources.tolist() == list(range(7))
    assert own.targets.tolist() == [False, False, False, False, False, True, False]
    # row 3 names 9 (outside sequence 0): among the sequence the largest candidate is 5, among the vocabulary 9
    ids_once = torch.tensor([3, 4, 5, 5])
    hits = lens_hits(readout, hidden[:4], ids_once, sequence[:4], position[:4], offset=0)
    assert hits.targets.tolist() == [False, False, False, True]
    hits = lens_hits(readout, hidden[:4], ids_once, sequence[:4], position[:4], offset=0, among="vocabulary")
    assert hits.targets.tolist() == [False, False, False, False]


def test_the_lens_says_what_it_needs(tokenizer):
    ids = torch.tensor([1, 2])
    with pytest.raises(ValueError, match="among"):
        lens_hits(lambda h: torch.zeros(2, 5), torch.zeros(2, 3), ids, torch.zeros(2), torch.arange(2), among="all")
    with pytest.raises(ValueError, match="neighbour"):
        lens_hits(lambda h: torch.zeros(1, 5), torch.zeros(1, 3), ids[:1], torch.zeros(1), torch.zeros(1), offset=1)
    with pytest.raises(ValueError, match="logits"):
        lens_hits(lambda h: torch.zeros(5), torch.zeros(2, 3), ids, torch.zeros(2), torch.arange(2), offset=0)
    from transformers import LlamaConfig, LlamaModel

    base = LlamaModel(
        LlamaConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, vocab_size=50)
    )
    with pytest.raises(ValueError, match="output head"):
        logit_lens(base)
