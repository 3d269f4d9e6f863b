import pytest
import torch

import helpers

from .conftest import LONG_TEXT, SENTENCE, make_tiny_bert


def check_identities(model, encoding, atol):
    internals = helpers.capture(model, encoding)
    L, h = model.config.num_hidden_layers, model.config.num_attention_heads
    n = encoding["input_ids"].shape[1]
    d = model.config.hidden_size
    assert internals.A.shape == (L, h, n, n)
    assert internals.T.shape == (L, h, n, d)
    assert internals.H.shape == (L, h, d // h, d)
    # the model's own attention is the softmax of our Q K^T
    assert torch.allclose(helpers.model.internals.attention_from_qk(internals.Q, internals.K), internals.A, atol=atol)
    # sum over heads of A T (+ output bias) is the model's attention-block output
    reconstructed = internals.reconstructed_attention_output()
    assert torch.allclose(reconstructed, internals.attention_output, atol=atol)
    # T differs from the paper's E W^V H by the rank-one value-bias term 1 (b^V H)
    paper_T = internals.E[:, None] @ internals.W_V @ internals.H
    bias_row = internals.b_V[:, :, None, :] @ internals.H  # (L, h, 1, d)
    assert torch.allclose(internals.T, paper_T + bias_row, atol=atol)
    # each layer's hidden state is what the next layer reads
    assert torch.equal(internals.E, internals.hidden_states[:-1])
    return internals


def test_identities_on_tiny_random_model(tiny_model, tokenizer):
    check_identities(tiny_model, helpers.encode(tokenizer, SENTENCE, model=tiny_model), atol=1e-5)


def test_identities_on_the_real_model(real_model):
    model, tokenizer = real_model
    internals = check_identities(model, helpers.encode(tokenizer, LONG_TEXT, model=model), atol=1e-5)
    assert internals.n > 32  # long enough that d_s > d_v


def test_rank_of_T_is_at_most_d_v(tiny_model, tokenizer):
    internals = helpers.capture(tiny_model, helpers.encode(tokenizer, LONG_TEXT, model=tiny_model))
    ranks = torch.linalg.matrix_rank(internals.T)
    assert internals.n > 8
    assert int(ranks.max()) <= 8


def test_embeddings_are_token_plus_segment_plus_position(tiny_model, tokenizer):
    encoding = helpers.encode(tokenizer, SENTENCE, model=tiny_model)
    internals = helpers.capture(tiny_model, encoding)
    emb = tiny_model.embeddings
    ids = encoding["input_ids"][0]
    n = ids.shape[0]
    expected = (
        emb.word_embeddings(ids)
        + emb.token_type_embeddings(encoding["token_type_ids"][0])
        + emb.position_embeddings(torch.arange(n))
    )
    assert torch.allclose(internals.x, expected, atol=1e-6)


def test_training_mode_is_rejected(tokenizer):
    model = make_tiny_bert().train()
    with pytest.raises(ValueError, match="eval"):
        helpers.capture(model, helpers.encode(tokenizer, SENTENCE))


def test_a_batch_gives_one_capture_per_sequence_and_a_padded_single_sequence_is_rejected(tiny_model, tokenizer):
    batch = tokenizer([SENTENCE, SENTENCE], return_tensors="pt")
    captured = helpers.capture(tiny_model, batch)
    assert len(captured) == 2 and torch.equal(captured[0].A, captured[1].A)
    one = {"input_ids": batch["input_ids"][:1], "attention_mask": torch.zeros_like(batch["attention_mask"][:1])}
    one["attention_mask"][0, :3] = 1
    with pytest.raises(ValueError, match="padded"):
        helpers.capture(tiny_model, one)


def test_sdpa_model_is_rejected_by_capture(tokenizer):
    model = make_tiny_bert(attn_implementation="sdpa")
    with pytest.raises(helpers.model.checks.UnsupportedModelError):
        helpers.capture(model, helpers.encode(tokenizer, SENTENCE))


def test_finish_layer_turns_head_outputs_into_the_next_hidden_state(tiny_model, tokenizer):
    internals = helpers.capture(tiny_model, helpers.encode(tokenizer, LONG_TEXT, model=tiny_model))
    reconstructed = internals.reconstructed_attention_output()
    for layer in range(internals.num_layers):
        out = helpers.model.internals.finish_layer(tiny_model, layer + 1, reconstructed[layer], internals.E[layer])
        assert torch.allclose(out, internals.hidden_states[layer + 1], atol=1e-5)


def test_finish_layer_rejects_mismatched_shapes(tiny_model):
    with pytest.raises(ValueError, match="both be"):
        helpers.model.internals.finish_layer(tiny_model, 1, torch.zeros(3, 32), torch.zeros(4, 32))


def test_rebuild_hidden_states_on_the_real_model(real_model):
    model, tokenizer = real_model
    internals = helpers.capture(model, helpers.encode(tokenizer, SENTENCE, "A second segment follows.", model=model))
    rebuilt = helpers.model.internals.rebuild_hidden_states(model, internals)
    assert torch.allclose(rebuilt, internals.hidden_states[1:], atol=1e-4)
    names = [row["tensor"] for row in internals.shape_table()]
    assert names[:2] == ["x", "E"] and "T" in names
    assert internals.shape_table()[0]["holds"] == "input embeddings: token + segment + position"


def test_every_family_says_what_its_input_embeddings_sum():
    families = set(helpers.model.families.FAMILIES)
    assert families == set(helpers.model.internals.INPUT_PARTS), "a family without its input parts"


def test_attention_block_output_is_the_sum_over_heads_plus_the_output_bias(tiny_model, tokenizer):
    internals = helpers.capture(tiny_model, helpers.encode(tokenizer, SENTENCE, model=tiny_model))
    block = helpers.model.internals.attention_block_output(internals.A, internals.T, internals.b_O)
    assert torch.allclose(block, internals.attention_output, atol=1e-5)
    by_hand = sum(internals.A[:, k] @ internals.T[:, k] for k in range(internals.heads)) + internals.b_O[:, None, :]
    assert torch.allclose(block, by_hand, atol=1e-6)
    shifted = helpers.model.internals.attention_block_output(internals.A, internals.T, internals.b_O + 1.0)
    assert torch.allclose(shifted - block, torch.ones_like(block))  # b^O is added once to every token
    with pytest.raises(ValueError, match="same leading shape"):
        helpers.model.internals.attention_block_output(internals.A, internals.T[:, :-1], internals.b_O)
    with pytest.raises(ValueError, match="b_O"):
        helpers.model.internals.attention_block_output(internals.A, internals.T, internals.b_O[0])


def test_attention_from_qk_adds_a_position_bias_of_the_scores_shape():
    Q, K = torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    bias = torch.randn(2, 5, 5)
    expected = torch.softmax(Q @ K.transpose(-1, -2) / 2 + bias, dim=-1)
    torch.testing.assert_close(helpers.model.internals.attention_from_qk(Q, K, bias), expected)
    with pytest.raises(ValueError, match="position_bias must end in"):
        helpers.model.internals.attention_from_qk(Q, K, torch.zeros(5, 4))


def test_the_layer_by_layer_path_names_the_families_it_covers():
    from transformers import GPT2Config, GPT2Model

    model = GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16))
    with pytest.raises(ValueError, match="covers bert, mpnet"):
        helpers.model.internals.attention_parts(model, 1)


def test_input_parts_refuse_an_unknown_family_and_head_bias_reads_the_position_bias(tiny_model, tokenizer):
    import dataclasses

    internals = helpers.capture(tiny_model, helpers.encode(tokenizer, "a short text"))
    assert internals.head_bias(0, 0) is None  # BERT adds no bias
    with pytest.raises(ValueError, match="No input parts are recorded for family 'unknown'"):
        _ = dataclasses.replace(internals, family="unknown").input_parts
    biased = dataclasses.replace(internals, position_bias=torch.randn(internals.A.shape))
    assert torch.equal(biased.head_bias(1, 2), biased.position_bias[1, 2])


def test_position_parts_name_what_x_adds_to_the_word():
    position_parts = helpers.model.internals.position_parts
    assert position_parts("bert") == "position + segment embeddings"
    assert position_parts("mpnet") == "position embeddings"
    with pytest.raises(ValueError, match="nothing but the token"):
        position_parts("llama")
    with pytest.raises(ValueError, match="No input parts"):
        position_parts("t5")
