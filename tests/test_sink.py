"""The sink in the literature's terms (helpers.methods.sink) and chapter 9's decoder drivers, on tiny models."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
import torch
from transformers import BatchEncoding

import helpers
from helpers.drivers import decoder as decoder_drivers
from helpers.methods import sink
from helpers.model.text import first_tokens

from .conftest import make_tiny_bert
from .test_families import make_tiny

TEXTS = [
    "The cat sat on the mat because it was warm, and the dog slept by the door all night long.",
    "When the rain stopped, the children ran out to the field and played until the sun went down.",
]


def _causal(n: int, seed: int = 0, heads: int = 2) -> torch.Tensor:
    logits = torch.randn(heads, n, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return torch.softmax(logits.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf")), dim=-1)


def test_sink_scores_follow_gu_et_al():
    A = _causal(5)
    expected = torch.stack([A[h, :, 0].sum() / 5 for h in range(2)])  # every query sees position 0
    assert torch.allclose(sink.sink_scores(A), expected)
    expected_2 = torch.stack([A[h, 2:, 2].sum() / 3 for h in range(2)])  # queries 2..4 see position 2
    assert torch.allclose(sink.sink_scores(A, position=2), expected_2)
    scores = sink.sink_scores(A)
    assert sink.sink_rate(A, epsilon=0.3) == float((scores > 0.3).double().mean())
    with pytest.raises(ValueError, match="position must be"):
        sink.sink_scores(A, position=5)
    with pytest.raises(ValueError, match="epsilon"):
        sink.sink_rate(A, epsilon=1.5)
    with pytest.raises(ValueError):
        sink.sink_scores(torch.full((3, 3), 1 / 3))  # not causal


def test_value_norm_ratio_uses_the_median_of_the_others():
    T = torch.zeros(1, 4, 2)
    T[0, :, 0] = torch.tensor([0.5, 1.0, 2.0, 10.0])
    assert torch.allclose(sink.value_norm_ratio(T), torch.tensor([0.25]))  # median of 1, 2, 10 is 2
    assert torch.allclose(sink.value_norm_ratio(T, position=3), torch.tensor([10.0]))  # median of 0.5, 1, 2


def test_largest_activations():
    h = torch.zeros(2, 3, 4)
    h[1, 0, 2] = -50.0
    h[1, 1, 1] = 3.0
    h[:, :, 3] += 1.0
    found = sink.largest_activations(h)
    assert found.largest[1].tolist() == [50.0, 3.0, 1.0]
    assert found.dimension[1, 0] == 2
    assert found.median.tolist() == [0.0, 0.0]


def _projection_reference(A: torch.Tensor, T: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row i: P_i from the SVD of T[:i+1]; effective weight on 0 and the leverage (P_i)_00."""
    n = A.shape[-1]
    effective = torch.zeros(n, dtype=T.dtype)
    leverage = torch.zeros(n, dtype=T.dtype)
    for i in range(n):
        U, S, _ = torch.linalg.svd(T[: i + 1], full_matrices=False)
        U = U[:, S > 1e-10 * S[0]]
        P = U @ U.T
        effective[i] = (P @ A[i, : i + 1])[0]
        leverage[i] = P[0, 0]
    return effective, leverage


def test_effective_and_leverage_against_a_per_row_projection():
    """Two query heads share one value head (groups = 2); rows past d_v have a null space."""
    n, d_v, d = 7, 3, 5
    generator = torch.Generator().manual_seed(4)
    V = torch.randn(1, 1, n, d_v, generator=generator, dtype=torch.float64)
    V[..., 0, :] *= 0.05  # a small value row at position 0: a drain
    H = torch.randn(1, 1, d_v, d, generator=generator, dtype=torch.float64)
    A = _causal(n, seed=5)[None]  # (1, 2, n, n)
    V2, H2 = V.expand(1, 2, n, d_v), H.expand(1, 2, d_v, d)
    split, leverage = sink.effective_and_leverage(A, V2, H2, groups=2)
    direct = helpers.causal_effective_attention(A, V=V2, H=H2, groups=2)
    assert torch.allclose(split.effective, direct.effective)
    T = (V @ H)[0, 0]
    for head in range(2):
        effective, expected = _projection_reference(A[0, head], T)
        assert torch.allclose(split.effective[0, head, :, 0], effective, atol=1e-10)
        assert torch.allclose(leverage[0, head], expected, atol=1e-10)
    assert float(leverage[0, 0, d_v:].max()) < 0.1  # the drain puts e_0 near the null space
    assert torch.allclose(sink.position_leverage(V2, H2, groups=2), leverage)

    drain = sink.drain_split(A, split.effective, leverage, from_row=d_v)
    raw = A[0, :, d_v:, 0].sum(-1)
    own = (A[0, :, d_v:, 0] * leverage[0, :, d_v:]).sum(-1)
    assert torch.allclose(drain.raw[0], raw) and torch.allclose(drain.own[0], own)
    assert torch.allclose(drain.explained[0], (raw - own) / (raw - split.effective[0, :, d_v:, 0].sum(-1)))
    with pytest.raises(ValueError, match="from_row"):
        sink.drain_split(A, split.effective, leverage, from_row=n)
    with pytest.raises(ValueError, match="leverage"):
        sink.drain_split(A, split.effective, leverage[..., 1:])


def test_leverage_before_the_position_is_undefined():
    n, d_v, d = 5, 2, 3
    generator = torch.Generator().manual_seed(6)
    V = torch.randn(1, 1, n, d_v, generator=generator, dtype=torch.float64)
    H = torch.randn(1, 1, d_v, d, generator=generator, dtype=torch.float64)
    leverage = sink.position_leverage(V, H, position=2)
    assert torch.isnan(leverage[..., :2]).all() and not torch.isnan(leverage[..., 2:]).any()


@pytest.fixture(scope="module")
def tiny_llama():
    tokenizer = helpers.model.decoder.decoder_tokenizer()
    return make_tiny("llama", vocab_size=len(tokenizer)).eval(), tokenizer


def test_sink_profile_and_sweep_on_a_tiny_llama(tiny_llama):
    model, tokenizer = tiny_llama
    heads, activations = decoder_drivers.sink_profile(model, tokenizer, TEXTS, length=12)
    assert len(heads) == len(TEXTS) * 2 * 4  # texts x layers x heads
    assert heads["sink_score"].between(0, 1).all()
    assert len(activations) == len(TEXTS) * 3  # hidden states 0..L
    assert (activations["at_position"] >= activations["median"]).all()
    internals = helpers.capture(model, first_tokens(helpers.encode(tokenizer, TEXTS[0], model=model), 12))
    assert torch.allclose(
        torch.tensor(heads.loc[heads["example"] == 0, "sink_score"].to_numpy()),
        sink.sink_scores(internals.A).flatten().double(),
    )
    table = helpers.sink_sweep(model, tokenizer, TEXTS, from_row=4)
    assert {"own", "leverage", "sink_score", "value_norm_ratio"} <= set(table.columns)
    assert table["leverage"].between(0, 1 + 1e-9).all()
    from transformers import AutoTokenizer

    bert_tokenizer = AutoTokenizer.from_pretrained(helpers.model.loading.bundled_model_dir())
    with pytest.raises(ValueError, match="causal"):
        decoder_drivers.sink_profile(make_tiny_bert(), bert_tokenizer, TEXTS, length=8)
    with pytest.raises(ValueError, match="fewer than"):
        decoder_drivers.sink_profile(model, tokenizer, ["Too short."], length=12)


def test_first_tokens():
    ids = torch.arange(6)[None]
    encoding = BatchEncoding({"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    assert first_tokens(encoding, 4)["input_ids"].tolist() == [[0, 1, 2, 3]]
    with pytest.raises(ValueError, match="fewer than the 7"):
        first_tokens(encoding, 7)


def test_decoder_hidden_tokens_and_pairs(tiny_llama):
    model, tokenizer = tiny_llama
    tokens = helpers.collect_hidden_tokens(model, tokenizer, TEXTS, progress=False, max_tokens=10)
    assert tokens.lengths.tolist() == [10, 10]
    internals = helpers.capture(model, first_tokens(helpers.encode(tokenizer, TEXTS[1], model=model), 10))
    assert torch.allclose(tokens.select([1]).hidden, internals.hidden_states)
    assert torch.equal(tokens.hidden[0], tokens.x)  # hidden state 0 of a decoder is its input
    with pytest.raises(ValueError, match="not sentence pairs"):
        helpers.collect_hidden_tokens(model, tokenizer, [("A cat.", "A dog.")], progress=False)
    with pytest.raises(ValueError, match="is a decoder"):
        helpers.encode(tokenizer, "A cat.", "A dog.", model=model)
    bert = make_tiny_bert()
    with pytest.raises(ValueError, match="max_tokens is for decoders"):
        helpers.collect_hidden_tokens(bert, tokenizer, TEXTS, progress=False, max_tokens=5)


def test_decoder_figures_draw():
    import pandas as pd

    layers = list(range(1, 5))
    fig = helpers.plots.plot_decoder_attribution(
        pd.DataFrame({"layer": layers, "own_exact": 0.5, "own_estimate": 0.4, "feeds": 0.2, "receives": 0.6})
    )
    assert len(fig.axes) == 2
    fig = helpers.plots.plot_sink_literature(
        pd.DataFrame({"layer": layers, "sink_rate": 0.5}),
        pd.DataFrame({"layer": [0, *layers], "at_position": 100.0, "elsewhere": 10.0, "median": 1.0}),
        0.3,
    )
    assert len(fig.axes) == 2
    per_head = pd.DataFrame(
        {
            "value_norm_ratio": [0.1, 1.0],
            "leverage": [0.05, 0.9],
            "sink_score": [0.8, 0.1],
            "gap": [0.5, 0.0],
            "predicted": [0.5, 0.01],
        }
    )
    assert len(helpers.plots.plot_value_drain(per_head, 0.3).axes) == 3  # two panels and a colour bar
    with pytest.raises(ValueError, match="lacks the columns"):
        helpers.plots.plot_value_drain(per_head.drop(columns="gap"), 0.3)
    import matplotlib.pyplot as plt

    plt.close("all")


def test_position_terms_match_the_split_and_its_bound():
    n, d_v, d, kv, groups = 9, 3, 5, 2, 2
    generator = torch.Generator().manual_seed(11)
    V = torch.randn(2, kv, n, d_v, generator=generator, dtype=torch.float64).repeat_interleave(groups, dim=1)
    V[0, :, 4] = V[0, :, 1]  # a repeated value row: a prefix of lower rank
    H = torch.randn(2, kv * groups, d_v, d, generator=generator, dtype=torch.float64)
    A = torch.stack([_causal(n, seed=s, heads=kv * groups) for s in (1, 2)])
    terms = sink.position_terms(A, V, positions=(0, 2), groups=groups, from_row=d_v + 1)
    assert terms.raw.shape == (2, kv * groups, 2)
    for p, k in enumerate((0, 2)):
        split, leverage = sink.effective_and_leverage(A, V, H, groups=groups, position=k)
        drain = sink.drain_split(A, split.effective, leverage, position=k, from_row=d_v + 1)
        assert torch.allclose(terms.raw[..., p], drain.raw)
        assert torch.allclose(terms.effective[..., p], drain.effective, atol=1e-9)
        assert torch.allclose(terms.own[..., p], drain.own, atol=1e-9)
        assert torch.allclose(terms.leverage[..., p], drain.leverage, atol=1e-9)
    # the part the position's own leverage leaves unexplained stays within the bound
    assert ((terms.effective - terms.own).abs() <= terms.bound + 1e-9).all()
    # a random space of full rank d_v keeps d_v / (i + 1) of a weight on average (layer 2: no repeats)
    rows = torch.arange(d_v + 1, n)
    expected = (A[1, :, d_v + 1 :, 0] * d_v / (rows + 1)).sum(-1)
    assert torch.allclose(terms.expected[1, :, 0], expected)
    with pytest.raises(ValueError, match="before from_row"):
        sink.position_terms(A, V, positions=(d_v + 1,), groups=groups, from_row=d_v + 1)
    with pytest.raises(ValueError, match="from_row"):
        sink.position_terms(A, V, from_row=n)


def test_sink_positions_on_a_tiny_llama(tiny_llama):
    model, tokenizer = tiny_llama
    table = decoder_drivers.sink_positions(model, tokenizer, TEXTS, from_row=4)
    assert set(table["role"]) == {"sink", "position 1", "random"}
    assert len(table) == len(TEXTS) * 3 * 2 * 4  # texts x roles x layers x heads
    assert table.loc[table["role"] == "random", "position"].between(2, 3).all()
    sweep = helpers.sink_sweep(model, tokenizer, TEXTS, from_row=4)
    sinks = table[table["role"] == "sink"].reset_index(drop=True)
    for column in ("raw", "effective", "own", "leverage", "sink_score", "value_norm_ratio"):
        assert sinks[column].to_numpy() == pytest.approx(sweep[column].to_numpy(), abs=1e-6)
    assert ((table["effective"] - table["own"]).abs() <= table["bound"] + 1e-6).all()
    cut = decoder_drivers.sink_positions(model, tokenizer, TEXTS, positions=(0,), random_position=False, length=12)
    assert set(cut["n"]) == {12} and set(cut["rows"]) == {12 - model.config.head_dim}
    with pytest.raises(ValueError, match="fewer than"):
        decoder_drivers.sink_positions(model, tokenizer, TEXTS, length=10_000)
    heads, _ = decoder_drivers.sink_profile(model, tokenizer, TEXTS, length=12, control_position=1)
    assert heads["control_score"].between(0, 1).all() and (heads["control_value_norm_ratio"] > 0).all()
