"""Causal effective attention (helpers.methods.causal) against a slow per-row reference, and its properties."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers.methods.causal import causal_effective_attention, causal_null_dimensions, check_causal, future_mass
from helpers.methods.reference import causal_effective_attention_reference


def causal_head(n: int = 14, d_v: int = 4, d: int = 10, heads: int = 1, seed: int = 0):
    """Random causal A (heads, n, n), V (heads, n, d_v), H (heads, d_v, d)."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(heads, n, n, generator=g, dtype=torch.float64) * 2
    logits = logits.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    A = torch.softmax(logits, dim=-1)
    V = torch.randn(heads, n, d_v, generator=g, dtype=torch.float64)
    H = torch.randn(heads, d_v, d, generator=g, dtype=torch.float64)
    return A, V, H


def test_matches_the_per_row_reference(one_thread):
    A, V, H = causal_head(heads=3)
    T = V @ H
    fast = causal_effective_attention(A, T).effective
    for h in range(3):
        torch.testing.assert_close(fast[h], causal_effective_attention_reference(A[h], T[h]), atol=1e-10, rtol=0)
    via_V = causal_effective_attention(A, V=V, H=H).effective
    torch.testing.assert_close(via_V, fast, atol=1e-10, rtol=0)


def test_effective_part_keeps_every_row_output_and_stays_causal():
    A, V, H = causal_head()
    T = V @ H
    eff, null = causal_effective_attention(A, T)
    torch.testing.assert_close(eff @ T, A @ T, atol=1e-10, rtol=0)
    torch.testing.assert_close(eff + null, A)
    assert future_mass(eff).abs().max() == 0 and future_mass(null).abs().max() == 0
    for i in range(A.shape[-1]):  # each null row lies in LN(T[:i+1])
        assert (null[0, i, : i + 1] @ T[0, : i + 1]).abs().max() < 1e-10


def test_rows_within_d_v_tokens_are_identifiable_and_later_ones_are_not():
    A, V, H = causal_head(n=14, d_v=4)
    eff, null = causal_effective_attention(A, V=V, H=H)
    d_v = V.shape[-1]
    assert null[0, :d_v].abs().max() == 0  # rows 0..d_v-1: the prefix has full row rank
    assert null[0, d_v:].abs().amax(dim=-1).min() > 1e-6
    dims = causal_null_dimensions(V)[0]
    assert dims.tolist() == [max(0, i + 1 - d_v) for i in range(14)]  # grows by one per token past d_v


def test_the_whole_sequence_null_space_leaks_onto_the_future():
    A, V, H = causal_head()
    whole = helpers.effective_attention(A, T=V @ H).effective
    assert future_mass(whole).abs().max() > 1e-3  # what per-row projection avoids
    row = causal_effective_attention(A, T=V @ H).effective
    assert (whole - row).abs().max() > 1e-3


def test_grouped_heads_share_null_spaces():
    A, V, H = causal_head(heads=4)
    V_shared = V[:2].repeat_interleave(2, dim=0)  # heads 0,1 share; 2,3 share
    H_shared = H[:2].repeat_interleave(2, dim=0)
    T = V_shared @ H_shared
    grouped = causal_effective_attention(A, T, groups=2)
    separate = causal_effective_attention(A, T)
    torch.testing.assert_close(grouped.effective, separate.effective, atol=1e-12, rtol=0)
    dims = causal_null_dimensions(T)
    assert torch.equal(dims[0], dims[1]) and torch.equal(dims[2], dims[3])
    with pytest.raises(ValueError, match="do not share"):
        causal_effective_attention(A, V @ H, groups=2)


def test_rank_deficient_H_falls_back_to_T():
    A, V, H = causal_head(d_v=4, d=10)
    H[:, -1] = H[:, 0]  # rank(H) = 3 < d_v
    via_V = causal_effective_attention(A, V=V, H=H).effective
    via_T = causal_effective_attention(A, V @ H).effective
    torch.testing.assert_close(via_V, via_T, atol=1e-10, rtol=0)


def test_bad_inputs_are_clear_errors():
    A, V, H = causal_head()
    T = V @ H
    with pytest.raises(ValueError, match="not a causal head"):
        causal_effective_attention(A.transpose(-1, -2), T)
    with pytest.raises(ValueError, match="either T"):
        causal_effective_attention(A)
    with pytest.raises(ValueError, match="needs H"):
        causal_effective_attention(A, V=V)
    with pytest.raises(ValueError, match="leading dimensions"):
        causal_effective_attention(A, T[:, :-1])
    with pytest.raises(ValueError, match="groups"):
        causal_effective_attention(A, T, groups=0)
    with pytest.raises(TypeError):
        check_causal([[1.0]])
    with pytest.raises(ValueError, match="NaN"):
        causal_effective_attention(A, T * float("nan"))
    with pytest.raises(ValueError, match="rtol"):
        causal_effective_attention(A, T, rtol=2.0)


def test_on_a_captured_tiny_llama_with_grouped_heads(one_thread):
    from helpers.model.capture import capture_generic

    from .test_families import encoding, make_tiny

    internals = capture_generic(make_tiny("llama"), encoding(n=20))
    eff = causal_effective_attention(internals.A, V=internals.V, H=internals.H, groups=internals.groups).effective
    torch.testing.assert_close(eff @ internals.T, internals.A @ internals.T, atol=1e-5, rtol=0)
    reference = causal_effective_attention_reference(internals.A[1, 2], internals.T[1, 2])
    torch.testing.assert_close(eff[1, 2].double(), reference, atol=1e-5, rtol=0)


def test_effective_attention_of_a_decoder_capture_is_causal(one_thread):
    """No silent bidirectional split on a decoder: the capture's own causality decides."""
    from helpers.model.capture import capture_generic

    from .test_families import encoding, make_tiny

    internals = capture_generic(make_tiny("llama"), encoding(n=20))
    assert internals.causal and internals.n > internals.V.shape[-1]  # a null space to get wrong
    split = helpers.effective_attention_of(internals)
    assert future_mass(split.effective.abs()).max() == 0
    expected = causal_effective_attention(internals.A, V=internals.V, H=internals.H, groups=internals.groups)
    torch.testing.assert_close(split.effective, expected.effective)
    # the bidirectional split of the same capture would move mass onto future positions
    wrong = helpers.effective_attention(internals.A, V=internals.V, H=internals.H).effective
    assert future_mass(wrong.abs()).max() > 1e-3


def test_attention_on_position_sums_the_rows_from_from_row():
    A, V, H = causal_head(heads=2)
    eff = causal_effective_attention(A, V=V, H=H).effective
    raw, effective = helpers.methods.causal.attention_on_position(A, eff, position=0, from_row=4)
    torch.testing.assert_close(raw, A[:, 4:, 0].sum(-1))
    torch.testing.assert_close(effective, eff[:, 4:, 0].sum(-1))
    with pytest.raises(ValueError, match="position"):
        helpers.methods.causal.attention_on_position(A, eff, position=14)
    with pytest.raises(ValueError, match="shape"):
        helpers.methods.causal.attention_on_position(A, eff[:1])


def test_sink_sweep_on_a_tiny_decoder(tokenizer, one_thread):
    from transformers import LlamaConfig, LlamaModel

    from .conftest import LONG_TEXT, SENTENCE, make_tiny_bert
    from .test_families import _widen

    model = _widen(
        LlamaModel(
            LlamaConfig(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                intermediate_size=64,
                vocab_size=30522,
                max_position_embeddings=256,
                attn_implementation="eager",
            )
        )
    )
    table = helpers.sink_sweep(model, tokenizer, [LONG_TEXT, SENTENCE + " " + SENTENCE])
    assert len(table) == 2 * 2 * 4 and set(table["layer"]) == {1, 2} and set(table["head"]) == {1, 2, 3, 4}
    assert set(table["kv_head"]) == {1, 2}
    internals = helpers.capture(model, helpers.encode(tokenizer, LONG_TEXT))
    assert float(
        table.loc[(table["example"] == 0) & (table["layer"] == 2) & (table["head"] == 3), "raw"].iloc[0]
    ) == pytest.approx(float(internals.A[1, 2, 8:, 0].sum()), abs=1e-6)
    by_layer = helpers.drivers.decoder.summarise_sink(table, by=["layer"])
    assert list(by_layer["layer"]) == [1, 2]
    first = table[table.layer == 1]
    assert by_layer["raw"].iloc[0] == pytest.approx(first["raw"].sum() / first["rows"].sum())
    with pytest.raises(ValueError, match="bidirectional"):
        helpers.sink_sweep(make_tiny_bert(), tokenizer, [LONG_TEXT])
    with pytest.raises(ValueError, match="non-empty"):
        helpers.sink_sweep(model, tokenizer, [])
    with pytest.raises(ValueError, match="columns"):
        helpers.drivers.decoder.summarise_sink(table.drop(columns="rows"))

    # the chapter's figures draw from these tables and a tensor of null dimensions
    import matplotlib.pyplot as plt

    by_head = helpers.drivers.decoder.summarise_sink(table)
    fig = helpers.plots.plot_sink(by_head, by_layer)
    assert len(fig.axes) >= 3
    dims = causal_null_dimensions(internals.V[-1, 0])  # (n,) from a tensor
    d_v = internals.V.shape[-1]
    ax = helpers.plots.plot_causal_null_dimensions(dims, d_v)
    assert len(ax.lines) == 3  # bound, dimensions, d_v marker
    with pytest.raises(ValueError, match="one head"):
        helpers.plots.plot_causal_null_dimensions(dims[None], d_v)
    with pytest.raises(ValueError, match="summarise_sink"):
        helpers.plots.plot_sink(by_layer, by_layer)
    plt.close("all")


@pytest.mark.parametrize("groups", [1, 2])
def test_gram_and_svd_routes_agree(groups, one_thread):
    A, V, H = causal_head(n=30, d_v=6, heads=4, seed=3)
    V = V[::groups].repeat_interleave(groups, dim=0)
    gram = causal_effective_attention(A, V=V, H=H, groups=groups, algorithm="gram")
    svd = causal_effective_attention(A, V=V, H=H, groups=groups, algorithm="svd")
    torch.testing.assert_close(gram.effective, svd.effective, atol=1e-9, rtol=0)
    assert torch.equal(gram.null[:, :6], torch.zeros_like(gram.null[:, :6]))
    with pytest.raises(ValueError, match="algorithm"):
        causal_effective_attention(A, V=V, H=H, algorithm="qr")
