"""Interventions on a causal model's attention (helpers.methods.interventions, helpers.drivers.interventions)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch.nn import functional

import helpers
from helpers.drivers.interventions import _roles, intervention_losses, reading_correlations, summarise_interventions
from helpers.methods.causal import causal_effective_attention
from helpers.methods.interventions import INTERVENTIONS, PositionEdit
from helpers.model.capture import editing

from .conftest import make_tiny_bert
from .test_families import make_tiny

TEXTS = [
    "The cat sat on the mat because it was warm, and the dog slept by the door all night long.",
    "When the rain stopped, the children ran out to the field and played until the sun went down.",
    "An old map of the harbour hung in the hall, its corners brown and curled with age and damp.",
]
LENGTH = 16


class _Module:
    """Stands in for an attention module: the edits read only ``layer_idx``."""

    def __init__(self, layer_idx: int = 0):
        self.layer_idx = layer_idx


def _causal_attention(B: int, h: int, n: int, seed: int = 0) -> torch.Tensor:
    logits = torch.randn(B, h, n, n, generator=torch.Generator().manual_seed(seed))
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    return torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)


@pytest.fixture(scope="module")
def tiny_causal_llama():
    """test_families' tiny Llama, with a language-model head (the loss needs logits)."""
    import transformers as tf

    tokenizer = helpers.model.decoder.decoder_tokenizer()
    config = make_tiny("llama", vocab_size=len(tokenizer)).config
    torch.manual_seed(0)
    return tf.LlamaForCausalLM(config).eval(), tokenizer


def test_zero_value_and_median_norm_edit_one_row_per_sequence():
    A, values = _causal_attention(2, 3, 6), torch.randn(2, 3, 6, 4)
    positions = torch.tensor([0, 2])
    _, zeroed = PositionEdit("zero value", positions)(_Module(), A, values)
    assert torch.equal(zeroed[0, :, 0], torch.zeros(3, 4)) and torch.equal(zeroed[1, :, 2], torch.zeros(3, 4))
    untouched = torch.ones(2, 3, 6, dtype=torch.bool)
    untouched[0, :, 0] = untouched[1, :, 2] = False
    assert torch.equal(zeroed[untouched], values[untouched])
    _, rescaled = PositionEdit("median value norm", positions)(_Module(), A, values)
    for b, p in enumerate(positions.tolist()):
        others = [j for j in range(6) if j != p]
        median = values[b, :, others].norm(dim=-1).median(dim=-1).values  # torch's lower median, as nanmedian
        assert torch.allclose(rescaled[b, :, p].norm(dim=-1), median, atol=1e-6)
        cosine = functional.cosine_similarity(rescaled[b, :, p], values[b, :, p], dim=-1)
        assert torch.allclose(cosine, torch.ones(3), atol=1e-6)  # the direction is kept
    assert torch.equal(rescaled[untouched], values[untouched])
    late, same = PositionEdit("zero value past d_v", positions)(_Module(), A, values)  # d_v = 4
    assert same is values and torch.equal(late[0, :, 4:, 0], torch.zeros(3, 2))
    assert torch.equal(late[0, :, :4], A[0, :, :4]) and torch.equal(late[..., 1], A[..., 1])
    assert torch.allclose((late @ values)[0, :, 4:], (A @ zeroed)[0, :, 4:])  # the same rows as zero value


def test_effective_weight_edits_one_column_with_chapter_9s_split():
    n, d_v = 7, 3  # rows 3.. have a null space
    A, values = _causal_attention(1, 2, n, seed=1), torch.randn(1, 2, n, d_v, dtype=torch.float32)
    edited, same_values = PositionEdit.at("effective weight", [0])(_Module(), A, values)
    effective = causal_effective_attention(A, values).effective
    assert torch.equal(same_values, values)
    assert torch.allclose(edited[..., 0], effective[..., 0])
    assert torch.equal(edited[..., 1:], A[..., 1:])
    assert torch.equal(edited[..., :d_v, 0], A[..., :d_v, 0])  # full-rank prefixes: nothing to remove
    assert not torch.allclose(edited[..., d_v:, 0], A[..., d_v:, 0])


def test_an_edit_leaves_other_layers_alone_and_rejects_bad_input():
    A, values = _causal_attention(1, 2, 5), torch.randn(1, 2, 5, 3)
    edit = PositionEdit.at("zero value", [1], layers=[1])
    assert edit(_Module(0), A, values)[1] is values
    assert not torch.equal(edit(_Module(1), A, values)[1], values)
    with pytest.raises(ValueError, match="kind must be one of"):
        PositionEdit.at("zero key", [0])
    with pytest.raises(ValueError, match="one position per sequence"):
        PositionEdit("zero value", torch.tensor(0))
    with pytest.raises(ValueError, match="for a batch of 1"):
        PositionEdit.at("zero value", [0, 1])(_Module(), A, values)
    with pytest.raises(ValueError, match="past the sequence"):
        PositionEdit.at("zero value", [5])(_Module(), A, values)


def test_editing_runs_the_edit_and_restores_the_model(tiny_causal_llama):
    model, _ = tiny_causal_llama
    ids = torch.randint(0, 1000, (2, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = model(ids).logits
        calls = []

        def identity(module, A, values):
            calls.append(module.layer_idx)
            return A, values

        with editing(model, identity):
            same = model(ids).logits
        with editing(model, PositionEdit.at("zero value", [0, 0])):
            changed = model(ids).logits
        after = model(ids).logits
    assert calls == [0, 1]
    assert torch.allclose(same, before, atol=1e-5)
    assert not torch.allclose(changed, before, atol=1e-3)
    assert torch.equal(after, before) and model.config._attn_implementation == "eager"
    with pytest.raises(TypeError, match="callable"):
        with editing(model, "zero value"):
            pass


def test_intervention_losses_on_a_tiny_llama(tiny_causal_llama):
    model, tokenizer = tiny_causal_llama
    table = intervention_losses(model, tokenizer, TEXTS, LENGTH, progress=False)
    assert len(table) == len(TEXTS) * len(INTERVENTIONS) * 3
    assert set(table["role"]) == {"sink", "position 1", "random"}
    assert table["position"][table["role"] == "random"].between(2, 7).all()  # 2..d_v - 1, d_v = 8
    assert torch.allclose(torch.tensor(table["delta"].values), torch.tensor((table["loss"] - table["clean"]).values))
    ids = torch.cat([helpers.encode(tokenizer, t, model=model)["input_ids"][:, :LENGTH] for t in TEXTS])
    with torch.no_grad():
        logits = model(ids).logits
    expected = functional.cross_entropy(logits[:, 8:-1].transpose(1, 2), ids[:, 9:], reduction="none").mean(dim=1)
    clean = table[(table["kind"] == "zero value") & (table["role"] == "sink")]["clean"].values
    assert torch.allclose(torch.tensor(clean), expected.double(), atol=1e-5)
    assert (table["delta"].abs() > 0).any()
    per_layer = intervention_losses(
        model, tokenizer, TEXTS, LENGTH, kinds=("zero value",), positions=(0,), random_position=False,
        each_layer=True, progress=False,
    )  # fmt: skip
    assert sorted(set(per_layer["layer"])) == [1, 2] and len(per_layer) == 2 * len(TEXTS)


def test_intervention_losses_say_what_they_need(tiny_causal_llama, tokenizer):
    model, decoder_tokenizer = tiny_causal_llama
    with pytest.raises(ValueError, match="fewer than"):
        intervention_losses(model, decoder_tokenizer, ["Too short."], LENGTH, progress=False)
    with pytest.raises(ValueError, match="kinds must be"):
        intervention_losses(model, decoder_tokenizer, TEXTS, LENGTH, kinds=("zero key",), progress=False)
    with pytest.raises(ValueError, match="first_row"):
        intervention_losses(model, decoder_tokenizer, TEXTS, LENGTH, first_row=LENGTH, progress=False)
    with pytest.raises(ValueError, match="before first_row"):
        intervention_losses(model, decoder_tokenizer, TEXTS, LENGTH, positions=(0, 9), progress=False)
    with pytest.raises(ValueError, match="causal models"):
        intervention_losses(make_tiny_bert(), tokenizer, TEXTS, LENGTH, progress=False)
    with pytest.raises(ValueError, match="first_row - 1"):
        _roles(2, (0,), True, 2, 0)


def _layer_table(deltas: np.ndarray, kind: str = "zero value") -> pd.DataFrame:
    """An ``each_layer`` table from (texts, layers) loss changes."""
    texts, layers = deltas.shape
    return pd.DataFrame(
        [
            {"example": t, "kind": kind, "role": "sink", "position": 0, "layer": k + 1, "delta": deltas[t, k]}
            for t in range(texts)
            for k in range(layers)
        ]
    )


def test_summaries_and_reading_correlations():
    deltas = np.array([[0.0, 0.1, 0.5, 1.0], [0.1, 0.2, 0.4, 1.2], [0.0, 0.3, 0.6, 0.9]])
    table = _layer_table(deltas)
    summary = summarise_interventions(table, by=["kind", "layer"])
    assert np.allclose(summary["delta"], deltas.mean(axis=0))
    assert (summary["low"] <= summary["delta"]).all() and (summary["delta"] <= summary["high"]).all()
    assert set(summary["texts"]) == {3}
    readings = pd.DataFrame({"layer": [1, 2, 3, 4], "rising": [0.1, 0.2, 0.3, 0.4], "falling": [4, 3, 2, 1]})
    rho = reading_correlations(table, readings).set_index("reading")
    assert rho.loc["rising", "rho"] == pytest.approx(1.0) and rho.loc["falling", "rho"] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="lack some of the edited layers"):
        reading_correlations(table, readings[readings["layer"] < 4])
    with pytest.raises(ValueError, match="one position"):
        reading_correlations(pd.concat([table, table]), readings)
    with pytest.raises(ValueError, match="lacks the columns"):
        summarise_interventions(table.drop(columns="delta"))


def test_intervention_figures_draw():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = pd.DataFrame(
        {
            "kind": ["zero value"] * 3 + ["median value norm"] * 3,
            "role": ["sink", "position 1", "random"] * 2,
            "delta": [0.4, 0.0, 0.01, 3.0, 0.0, -0.001],
            "low": [0.3, -0.01, 0.0, 2.0, -0.01, -0.002],
            "high": [0.5, 0.01, 0.02, 4.0, 0.01, 0.0],
        }
    )
    fig = helpers.plots.plot_interventions(summary)
    assert len(fig.axes[0].patches) == 6
    per_layer = summarise_interventions(_layer_table(np.random.default_rng(0).random((3, 4))), by=["kind", "layer"])
    readings = pd.DataFrame({"layer": [1, 2, 3, 4], "raw": [0.1, 0.5, 0.6, 0.2], "leverage": [0.9, 0.2, 0.1, 0.5]})
    fig_layers = helpers.plots.plot_layer_interventions(per_layer, readings)
    assert len(fig_layers.axes[1].lines) == 2
    plt.close("all")
    with pytest.raises(ValueError):
        helpers.plots.plot_interventions(summary.drop(columns="low"))


def test_the_sinks_norm_factor_scales_the_other_position_as_much_as_the_sink():
    A, values = _causal_attention(2, 3, 6), torch.randn(2, 3, 6, 4)
    values[:, :, 0] *= 0.05  # a drained sink
    _, at_sink = PositionEdit.at("sink's norm factor", [0, 0])(_Module(), A, values)
    _, median = PositionEdit.at("median value norm", [0, 0])(_Module(), A, values)
    assert torch.equal(at_sink, median)
    _, scaled = PositionEdit.at("sink's norm factor", [2, 3])(_Module(), A, values)
    for b, p in enumerate([2, 3]):
        others = values[b, :, 1:].norm(dim=-1).median(dim=-1).values  # every row but 0
        factor = others / values[b, :, 0].norm(dim=-1)
        assert torch.allclose(scaled[b, :, p], values[b, :, p] * factor[:, None], rtol=1e-5)
        assert (factor > 5).all()  # as large a change as the sink's, where the median edit barely moves a row
        kept = [j for j in range(6) if j != p]
        assert torch.equal(scaled[b, :, kept], values[b, :, kept])


def test_shuffled_null_weight_removes_the_same_amounts_at_other_rows():
    n, d_v = 12, 3
    A, values = _causal_attention(2, 2, n, seed=3), torch.randn(2, 2, n, d_v)
    effective, _ = PositionEdit.at("effective weight", [0, 0])(_Module(), A, values)
    shuffled, same = PositionEdit.at("null weight, rows shuffled", [0, 0])(_Module(), A, values)
    assert same is values and torch.equal(shuffled[..., 1:], A[..., 1:])
    removed = (A - effective)[..., 0]  # (B, h, n)
    moved = (A - shuffled)[..., 0]
    assert torch.allclose(moved[..., :d_v], removed[..., :d_v], atol=1e-6)  # rows before d_v: as the edit
    # rows d_v..: the same amounts, in another order
    assert torch.allclose(moved[..., d_v:].sort(dim=-1).values, removed[..., d_v:].sort(dim=-1).values, atol=1e-6)
    assert not torch.allclose(moved[..., d_v:], removed[..., d_v:], atol=1e-6)
    again, _ = PositionEdit.at("null weight, rows shuffled", [0, 0])(_Module(), A, values)
    assert torch.equal(again, shuffled)  # seeded


def test_per_layer_edits_resumed_at_their_layer_equal_whole_runs(tiny_causal_llama, monkeypatch):
    import helpers.drivers.interventions as driver

    model, tokenizer = tiny_causal_llama
    ids = driver._batch(model, tokenizer, TEXTS, LENGTH)
    assert driver._resumable(model, ids, 8) is not None  # the tiny Llama can resume from a middle layer
    kwargs = dict(kinds=("zero value", "effective weight"), positions=(0,), random_position=False, each_layer=True)
    resumed = intervention_losses(model, tokenizer, TEXTS, LENGTH, progress=False, **kwargs)
    monkeypatch.setattr(driver, "_resumable", lambda *args: None)  # every edit runs the whole model
    whole = intervention_losses(model, tokenizer, TEXTS, LENGTH, progress=False, **kwargs)
    assert (resumed["delta"].abs() > 1e-4).any()
    assert np.allclose(resumed["loss"], whole["loss"], rtol=0, atol=1e-6)
    assert model.base_model.layers is not None and len(model.base_model.layers) == model.config.num_hidden_layers


def test_resuming_is_refused_where_it_would_change_the_losses(tiny_causal_llama, monkeypatch):
    import helpers.drivers.interventions as driver

    model, tokenizer = tiny_causal_llama
    ids = driver._batch(model, tokenizer, TEXTS, LENGTH)
    original = driver._layer_inputs
    monkeypatch.setattr(driver, "_layer_inputs", lambda m, i: [2 * s for s in original(m, i)])  # wrong states
    assert driver._resumable(model, ids, 8) is None
