"""Encoder interventions scored by the sentence embedding (helpers.drivers.embedding_edits, chapter 4)."""

from __future__ import annotations

import pytest
import torch

from helpers.drivers.embedding_edits import EMBEDDING_ROLES, effective_rows, embedding_changes, mean_embedding
from helpers.model.text import encode

from .conftest import SENTENCE, make_tiny_bert

PAIR = ("The river rose after a week of rain.", "Farmers moved their animals to higher ground.")


def test_whole_effective_rows_move_nothing_and_zero_values_move_the_embedding(tokenizer):
    model = make_tiny_bert()  # d_v = 8: every text here has a null space
    table = embedding_changes(model, tokenizer, [SENTENCE, PAIR], ordinary=3, progress=False)
    assert len(table) == 2 * (1 + 2 + 3)
    check = table[table.kind == "effective rows"]
    assert (check.n > 8).all() and float(check.distance.abs().max()) < 1e-6
    zeroed = table[table.kind == "zero value"]
    assert set(zeroed.role) == set(EMBEDDING_ROLES) and float(zeroed.distance.min()) > 1e-6
    pair = zeroed[zeroed.example == 1].set_index("role").position
    ids = encode(tokenizer, *PAIR, model=model)["input_ids"][0].tolist()
    assert pair["[CLS]"] == 0 and ids[pair["[SEP]"]] == tokenizer.sep_token_id
    assert ids.index(tokenizer.sep_token_id) == pair["[SEP]"]
    ordinary = zeroed[(zeroed.example == 1) & (zeroed.role == "ordinary token")].position.tolist()
    assert len(set(ordinary)) == 3, "drawn without replacement"
    assert all(ids[p] not in (tokenizer.cls_token_id, tokenizer.sep_token_id) for p in ordinary)
    again = embedding_changes(model, tokenizer, [SENTENCE, PAIR], ordinary=3, progress=False)
    assert again.equals(table), "the ordinary tokens are seeded"
    every = embedding_changes(model, tokenizer, [SENTENCE], ordinary=10_000, progress=False)
    specials = (tokenizer.cls_token_id, tokenizer.sep_token_id)
    sentence_ids = encode(tokenizer, SENTENCE, model=model)["input_ids"][0].tolist()
    assert (every.role == "ordinary token").sum() == sum(t not in specials for t in sentence_ids)


def test_zero_value_equals_zeroing_the_value_projections_output(tokenizer):
    """The edit against an independent route: a hook that zeroes row p of every layer's V = x W_V + b_V."""
    model = make_tiny_bert()
    encoding = encode(tokenizer, SENTENCE, model=model)
    table = embedding_changes(model, tokenizer, [SENTENCE], ordinary=1, progress=False)
    position = int(table[table.role == "ordinary token"].position.iloc[0])

    def zero_row(module, args, output):
        output = output.clone()
        output[:, position] = 0.0
        return output

    hooks = [layer.attention.self.value.register_forward_hook(zero_row) for layer in model.encoder.layer]
    try:
        hooked = mean_embedding(model, encoding)
    finally:
        for hook in hooks:
            hook.remove()
    clean = mean_embedding(model, encoding)
    expected = 1.0 - float(torch.nn.functional.cosine_similarity(hooked, clean, dim=0))
    assert abs(float(table[table.role == "ordinary token"].distance.iloc[0]) - expected) < 1e-9


def test_embedding_changes_say_what_they_need(tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    with pytest.raises(Exception, match="causal"):
        embedding_changes(LlamaForCausalLM(config).eval(), tokenizer, [SENTENCE], progress=False)
    with pytest.raises(ValueError, match="ordinary"):
        embedding_changes(make_tiny_bert(), tokenizer, [SENTENCE], ordinary=0, progress=False)
    model = make_tiny_bert().train()
    with pytest.raises(ValueError, match="training mode"):
        embedding_changes(model, tokenizer, [SENTENCE], progress=False)


def test_effective_rows_remove_the_null_part_and_keep_what_the_head_writes():
    generator = torch.Generator().manual_seed(0)
    A = torch.softmax(torch.randn(2, 3, 12, 12, generator=generator), dim=-1)
    values = torch.randn(2, 3, 12, 4, generator=generator, dtype=torch.float32)
    edited, same = effective_rows(None, A, values)
    assert same is values
    assert float((edited - A).abs().max()) > 0.05, "n = 12 > d_v = 4: a null part to remove"
    assert torch.allclose(edited @ values, A @ values, atol=1e-5)


def test_the_cosine_distance_is_one_minus_cos_and_never_negative():
    from helpers.drivers.embedding_edits import cosine_distance

    a = torch.tensor([1.0, 2.0, 3.0])
    b = torch.tensor([2.0, -1.0, 0.5])
    assert cosine_distance(a, b) == pytest.approx(1 - float(torch.nn.functional.cosine_similarity(a, b, dim=0)))
    nearly = a + 1e-7 * torch.tensor([1.0, -1.0, 1.0])  # float32 1 - cos can round below zero here
    assert 0.0 <= cosine_distance(a, nearly) < 1e-12
    assert cosine_distance(a, 3.0 * a) == pytest.approx(0.0, abs=1e-15)
