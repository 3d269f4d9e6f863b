"""The generic capture on tiny random models of every supported family (helpers.model.families, helpers.model.capture)."""

from __future__ import annotations

import pytest
import torch
from transformers import BatchEncoding

import helpers
from helpers.model.capture import capture_generic

from .conftest import make_tiny_bert

N = 20  # tokens; > d_v = 8, so T is rank-deficient


def _widen(model):
    torch.manual_seed(1)
    with torch.no_grad():  # default init is small; widen it so attention is not near-uniform
        for name, parameter in model.named_parameters():
            if parameter.dim() == 2 and "norm" not in name.lower():
                parameter.normal_(0.0, 0.2)
    return model.eval()


def make_tiny(family: str, attn_implementation: str = "eager", vocab_size: int = 1000):
    """A tiny random base model of ``family``: hidden 32, 4 query heads of size 8, 2 or 3 layers.

    ``vocab_size``: the default suits random ids (``encoding``); pass a real tokenizer's size to
    encode text with it.
    """
    import transformers as tf

    torch.manual_seed(0)
    common = dict(vocab_size=vocab_size, attn_implementation=attn_implementation)
    bert_like = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        **common,
    )
    decoder_like = dict(  # Llama and Qwen2: grouped-query heads (2 key/value heads for 4 query heads)
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        **common,
    )
    builders = {
        "bert": lambda: tf.BertModel(tf.BertConfig(**bert_like), add_pooling_layer=False),
        "roberta": lambda: tf.RobertaModel(tf.RobertaConfig(**bert_like), add_pooling_layer=False),
        "electra": lambda: tf.ElectraModel(tf.ElectraConfig(embedding_size=16, **bert_like)),
        "distilbert": lambda: tf.DistilBertModel(
            tf.DistilBertConfig(dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64, **common)
        ),
        "albert": lambda: tf.AlbertModel(
            tf.AlbertConfig(embedding_size=16, **{**bert_like, "num_hidden_layers": 3}), add_pooling_layer=False
        ),
        "gpt2": lambda: tf.GPT2Model(tf.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64, **common)),
        "llama": lambda: tf.LlamaModel(tf.LlamaConfig(**decoder_like)),
        "qwen2": lambda: tf.Qwen2Model(tf.Qwen2Config(**decoder_like)),
    }
    return _widen(builders[family]())


def encoding(n: int = N, seed: int = 0) -> BatchEncoding:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 1000, (1, n), generator=generator)
    return BatchEncoding({"input_ids": ids, "attention_mask": torch.ones_like(ids)})


ALL = ["bert", "roberta", "electra", "distilbert", "albert", "gpt2", "llama", "qwen2"]


@pytest.fixture(scope="module")
def captured():
    """Each family's model and its captured internals (built once)."""
    out = {}
    for family in ALL:
        model = make_tiny(family)
        out[family] = (model, capture_generic(model, encoding()))
    return out


@pytest.mark.parametrize("family", ALL)
def test_head_outputs_rebuild_the_attention_block_output(captured, family, one_thread):
    _, internals = captured[family]
    assert internals.family == family
    torch.testing.assert_close(
        internals.reconstructed_attention_output(), internals.attention_output, atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("family", ALL)
def test_values_come_from_the_normalised_input(captured, family):
    _, internals = captured[family]
    V = torch.einsum("lnd,lhde->lhne", internals.qkv_input, internals.W_V) + internals.b_V[:, :, None, :]
    torch.testing.assert_close(V, internals.V, atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", ALL)
def test_capture_leaves_the_model_output_unchanged(captured, family):
    model, internals = captured[family]
    before = model.config._attn_implementation
    with torch.no_grad():
        out = model(**encoding(), output_hidden_states=True)
    assert model.config._attn_implementation == before == "eager"
    hidden = torch.stack(out.hidden_states)[:, 0]
    # hidden_states[1..L-1] are layer outputs in every family (the first and last may be projected or normed)
    torch.testing.assert_close(internals.hidden_states[1:-1], hidden[1:-1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", ALL)
def test_attention_is_causal_exactly_in_decoders(captured, family):
    _, internals = captured[family]
    upper = torch.triu(torch.ones(N, N, dtype=torch.bool), diagonal=1)
    future = internals.A[..., upper].abs().max()
    assert internals.causal == (family in ("gpt2", "llama", "qwen2"))
    if internals.causal:
        assert future == 0  # the mask reached the capture function
    else:
        assert future > 1e-3
    torch.testing.assert_close(internals.A.sum(-1), torch.ones(internals.A.shape[:-1]), atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_capture_works_from_a_model_loaded_with_sdpa(family):
    model = make_tiny(family, attn_implementation="sdpa")
    internals = capture_generic(model, encoding())
    assert model.config._attn_implementation == "sdpa"  # restored
    torch.testing.assert_close(
        internals.reconstructed_attention_output(), internals.attention_output, atol=1e-5, rtol=0
    )


def test_generic_path_matches_the_bert_fast_path(one_thread):
    model = make_tiny_bert()
    enc = encoding()
    enc["token_type_ids"] = torch.zeros_like(enc["input_ids"])
    fast, generic = helpers.capture(model, enc), capture_generic(model, enc)
    for name in ("x", "E", "Q", "K", "V", "A", "W_V", "b_V", "H", "b_O", "T", "attention_output", "hidden_states"):
        torch.testing.assert_close(getattr(generic, name), getattr(fast, name), atol=1e-5, rtol=0, msg=name)


def test_grouped_query_heads_share_values(captured):
    _, internals = captured["llama"]
    assert internals.kv_heads == 2 and internals.groups == 2
    torch.testing.assert_close(internals.V[:, 0], internals.V[:, 1], atol=0, rtol=0)
    assert (internals.V[:, 1] - internals.V[:, 2]).abs().max() > 1e-3
    assert (internals.A[:, 0] - internals.A[:, 1]).abs().max() > 1e-3  # own queries, shared values


def test_albert_counts_calls_of_its_shared_layer(captured):
    model, internals = captured["albert"]
    assert len(helpers.model.families.layer_modules(model)) == 1 and internals.num_layers == 3


def test_capture_dispatches_non_bert_models_to_the_generic_path(captured):
    model, _ = captured["gpt2"]
    assert helpers.capture(model, encoding()).family == "gpt2"


def test_task_model_is_captured_through_its_base_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=1,
        intermediate_size=64,
        vocab_size=100,
        attn_implementation="eager",
    )
    internals = capture_generic(LlamaForCausalLM(config).eval(), BatchEncoding({"input_ids": torch.arange(1, 7)[None]}))
    assert internals.kv_heads == 1 and internals.groups == 4


def test_deberta_is_a_clear_error():
    from transformers import DebertaV2Config, DebertaV2Model

    model = DebertaV2Model(
        DebertaV2Config(
            vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64
        )
    ).eval()
    with pytest.raises(helpers.model.families.UnsupportedFamilyError, match="bypassing"):
        capture_generic(model, encoding(n=6))


def test_a_model_that_never_calls_the_interface_is_a_clear_error(monkeypatch):
    model = make_tiny("gpt2")
    monkeypatch.setattr(model, "set_attn_implementation", lambda name: None)  # keeps running its own eager code
    with pytest.raises(helpers.model.families.UnsupportedFamilyError, match="never called"):
        capture_generic(model, encoding())


def test_unknown_family_is_a_clear_error():
    from transformers import T5Config, T5EncoderModel

    model = T5EncoderModel(T5Config(vocab_size=100, d_model=16, d_kv=4, num_heads=4, num_layers=1, d_ff=32)).eval()
    with pytest.raises(helpers.model.families.UnsupportedFamilyError, match="families"):
        capture_generic(model, encoding(n=6))
    with pytest.raises(TypeError):
        helpers.model.families.family_of(torch.nn.Linear(2, 2))


def test_training_mode_and_batches_are_rejected():
    model = make_tiny("llama").train()
    with pytest.raises(ValueError, match="eval"):
        capture_generic(model, encoding())
    model.eval()
    batch = BatchEncoding({"input_ids": torch.ones(2, 5, dtype=torch.long)})
    with pytest.raises(ValueError, match="one sequence"):
        capture_generic(model, batch)


def test_capture_function_matches_eager_with_a_boolean_mask():
    module = torch.nn.Module().eval()
    q, k, v = (torch.randn(1, 4, 5, 8) for _ in range(3))
    mask = torch.tril(torch.ones(5, 5, dtype=torch.bool))[None, None]
    out, A = helpers.model.capture.eager_attention(module, q, k[:, :2], v[:, :2], mask, scaling=0.3)
    assert torch.all(A[..., ~mask[0, 0]] == 0)
    expected = A @ v[:, :2].repeat_interleave(2, dim=1)
    torch.testing.assert_close(out, expected.transpose(1, 2))


def test_chapter_applies_says_why_not(captured, capsys):
    gpt2, _ = captured["gpt2"]
    bert = make_tiny_bert()
    assert helpers.book.chapters.chapter_applies(bert, "04_effective_attention")
    assert not helpers.book.chapters.chapter_applies(gpt2, "04_effective_attention")
    assert "bidirectional" in capsys.readouterr().out
    assert not helpers.book.chapters.chapter_applies(bert, "09_decoder_llm")
    assert helpers.book.chapters.chapter_applies(gpt2, ("heads", "causal"))
    assert not helpers.book.chapters.chapter_applies(captured["roberta"][0], "01_anatomy_of_a_head", show=False)
    with pytest.raises(ValueError, match="Unknown needs"):
        helpers.book.chapters.chapter_applies(bert, "no-such-need")


def test_load_for_chapter_falls_back_to_the_chapters_own_default(captured, monkeypatch, capsys):
    gpt2, _ = captured["gpt2"]
    bert = make_tiny_bert()
    bundled = {
        helpers.model.loading.DEFAULT_MODEL: bert,
        helpers.model.decoder.DECODER_MODEL: gpt2,
        "my-bert": bert,
        "my-gpt2": gpt2,
    }
    loaded = []

    def fake_load_model(name=None):  # no weights read: which model each call asks for is what counts
        loaded.append(name)
        return bundled[name], "tokenizer"

    monkeypatch.setattr(helpers.book.chapters, "load_model", fake_load_model)
    assert helpers.book.chapters.chapter_default_model("01_anatomy_of_a_head") == helpers.model.loading.DEFAULT_MODEL
    assert helpers.book.chapters.chapter_default_model("09_decoder_llm") == helpers.model.decoder.DECODER_MODEL
    assert helpers.book.chapters.load_for_chapter(None, "04_effective_attention")[0] is bert and loaded == [
        helpers.model.loading.DEFAULT_MODEL
    ]
    assert (
        helpers.book.chapters.load_for_chapter("my-bert", "04_effective_attention")[0] is bert
        and capsys.readouterr().out == ""
    )
    loaded.clear()
    assert (
        helpers.book.chapters.load_for_chapter("my-gpt2", "04_effective_attention")[0] is bert
    )  # a decoder: the encoder default
    assert loaded == ["my-gpt2", helpers.model.loading.DEFAULT_MODEL]
    out = capsys.readouterr().out
    assert "bidirectional" in out and f"Running on the bundled {helpers.model.loading.DEFAULT_MODEL} instead" in out
    assert (
        helpers.book.chapters.load_for_chapter("my-bert", "09_decoder_llm")[0] is gpt2
    )  # an encoder: the decoder default
    assert helpers.book.chapters.load_for_chapter(None, "09_decoder_llm")[0] is gpt2
    with pytest.raises(ValueError, match="Unknown chapter"):
        helpers.book.chapters.chapter_default_model("10_no_such_chapter")


def test_work_scale_is_layers_times_width_squared_relative_to_the_default(real_model):
    from helpers.book.chapters import work_scale

    assert work_scale(real_model[0]) == 1.0
    # BERT-Base: 12 layers of d = 768 against the default's 6 of 384
    base = make_tiny_bert(num_layers=12, heads=12, hidden=768)
    assert work_scale(base) == pytest.approx(8.0)
    assert work_scale(base, power=3) == pytest.approx(16.0)
    with pytest.raises(ValueError, match="power"):
        work_scale(base, power=4)
    with pytest.raises(ValueError, match="hidden_size"):
        work_scale(torch.nn.Linear(2, 2))
