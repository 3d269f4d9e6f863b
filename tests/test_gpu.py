"""The helpers on CUDA: each main entry point on the GPU against the same call on the CPU (``pytest -m gpu``).

The book runs on the CPU unless the reader asks for CUDA (``BOOK_DEVICE=cuda`` or ``device="cuda"``). These
tests load the bundled encoder and the bundled decoder twice, on the CPU and on the device, and run on both a
forward capture, effective attention and the null space of one head, a token identifiability probe, Hidden
Token Attribution, one context-mixing measure, the decoder's sink reading and the decoder's attribution.
Each result must come back where the model is (or on the CPU, where the helpers say so) and agree with the CPU.

Without CUDA every test is skipped. ``BOOK_GPU_TEST_DEVICE=cpu`` runs them with the CPU as the second device,
which exercises the tests themselves (the comparisons are then exact, but every code path runs).

Tolerances: the GPU's kernels (cuBLAS, cuSOLVER) sum in another order than the CPU's, so float32 results
differ in the last digits, and the differences grow through the layers (about 1e-6 relative after the
encoder's six layers with PyTorch's default full-precision float32 matmuls). ``RTOL = 1e-3`` leaves room
for that and for TF32 matmuls where a machine enables them, and still catches a wrong device path, which
moves results by far more; ``ATOL`` covers entries near zero (attention weights of 1e-7), where a relative
tolerance means nothing.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import torch

import helpers
from helpers.drivers.identifiability import probe_layers
from helpers.methods.nullspace import simplex_null_space, validity
from helpers.methods.probes import split_by_sequence
from helpers.model.text import first_tokens

DEVICE = os.environ.get("BOOK_GPU_TEST_DEVICE", "cuda")
SKIP_REASON = "no CUDA device: the gpu tests run where one is at hand (pytest -m gpu)"
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(DEVICE.startswith("cuda") and not torch.cuda.is_available(), reason=SKIP_REASON),
]

RTOL = 1e-3
ATOL = 1e-5
TEXT = (  # 50 tokens: more than the encoder's d_v = 32, so its heads have null spaces
    "Rivers shape the land slowly: they carry sand and silt from the mountains, drop it where the current "
    "weakens, and build wide plains over thousands of years. Farmers settled on those plains because the soil "
    "was rich."
)
SHORT = "The cat sat on the mat."


def close(on_device, on_cpu, rtol: float = RTOL, atol: float = ATOL, what: str = "") -> None:
    """Assert two tensors (or arrays) agree, the first one moved to the CPU."""
    got = on_device.detach().cpu().double() if isinstance(on_device, torch.Tensor) else torch.as_tensor(on_device)
    want = on_cpu.detach().cpu().double() if isinstance(on_cpu, torch.Tensor) else torch.as_tensor(on_cpu)
    torch.testing.assert_close(got, want.to(got.dtype), rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")


def on(tensor: torch.Tensor, device: str) -> None:
    assert tensor.device.type == torch.device(device).type, f"on {tensor.device}, expected {device}"


def test_the_device_is_cpu_or_cuda():
    assert torch.device(DEVICE).type in ("cpu", "cuda"), f"BOOK_GPU_TEST_DEVICE must be cpu or cuda; got {DEVICE!r}"


# ---------------------------------------------------------------- the encoder


@pytest.fixture(scope="module")
def encoders():
    """The bundled encoder on the CPU and on the device: ``(cpu, device)``, each ``(model, tokenizer)``."""
    return helpers.load_model(device="cpu"), helpers.load_model(device=DEVICE)


@pytest.fixture(scope="module")
def captured(encoders):
    """``(internals on the CPU, internals on the device)`` of one sentence."""
    return tuple(helpers.capture(model, helpers.encode(tokenizer, TEXT, model=model)) for model, tokenizer in encoders)


def test_load_puts_the_model_on_the_device(encoders):
    (cpu_model, _), (model, _) = encoders
    assert {p.device.type for p in cpu_model.parameters()} == {"cpu"}
    assert {p.device.type for p in model.parameters()} == {torch.device(DEVICE).type}


def test_capture(captured):
    reference, internals = captured
    on(internals.A, DEVICE)
    assert internals.n == reference.n
    for name in ("x", "E", "A", "T", "attention_output", "hidden_states"):
        close(getattr(internals, name), getattr(reference, name), what=name)


def test_effective_attention_and_null_space_of_one_head(captured):
    reference, internals = captured
    split, expected = helpers.effective_attention_of(internals), helpers.effective_attention_of(reference)
    on(split.effective, DEVICE)
    close(split.effective, expected.effective, what="effective attention")
    close(split.null, expected.null, what="null part")
    layer, head = 3, 1  # numbered from 1, as in the book
    A, T = internals.A[layer - 1, head - 1], internals.T[layer - 1, head - 1]
    A_cpu, T_cpu = reference.A[layer - 1, head - 1], reference.T[layer - 1, head - 1]
    # the null space LN([T, 1]): its basis is not unique, its projector is
    N, N_cpu = simplex_null_space(T), simplex_null_space(T_cpu)
    assert N.shape == N_cpu.shape and N.shape[1] > 0
    close(N @ N.T, N_cpu @ N_cpu.T, what="null-space projector")
    family = helpers.alternative_family(A, T)  # valid alternatives with the same output, made on the device
    on(family.attentions, DEVICE)
    check = validity(family.attentions, A, T)
    assert check.min_entry > -1e-9 and check.row_sum_error < 1e-6 and check.output_error < 1e-6, check  # A: float32
    last = internals.n - 1
    bounds = helpers.attention_bounds(A, T, rows=[last], progress=False)  # LPs on the CPU, bounds on the device
    expected_bounds = helpers.attention_bounds(A_cpu, T_cpu, rows=[last], progress=False)
    on(bounds.lower, DEVICE)
    close(bounds.lower[last], expected_bounds.lower[last], atol=1e-4, what="lower bounds")
    close(bounds.upper[last], expected_bounds.upper[last], atol=1e-4, what="upper bounds")


def test_token_identifiability_probe(encoders):
    texts = [pair.text_a for pair in helpers.load_corpus("pairs")[:12]]
    tables = []
    for model, tokenizer in encoders:
        tokens = helpers.collect_hidden_tokens(model, tokenizer, texts, progress=False)
        on(tokens.hidden, "cpu")  # hidden tokens are kept on the CPU, where the maps are fit
        train, test = split_by_sequence(tokens, test_fraction=0.5, seed=0)
        L = tokens.num_layers
        probes = probe_layers(train, test, [("linear", "l2"), ("naive", "cosine")], [0, L], progress=False)
        tables.append((tokens, test, probes.table))
    (reference, _, expected), (tokens, test, table) = tables
    close(tokens.hidden, reference.hidden, what="hidden tokens")
    close(tokens.x, reference.x, what="input tokens")
    # a near tie between two input tokens may flip one token's nearest neighbour
    np.testing.assert_allclose(table["test"], expected["test"], atol=1.5 / len(test))


def test_hidden_token_attribution(encoders):
    results = [
        helpers.hidden_token_attribution(model, helpers.encode(tokenizer, SHORT, model=model), progress=False)
        for model, tokenizer in encoders
    ]
    expected, result = results
    on(result.contributions, "cpu")  # an Attribution lives on the CPU
    close(result.contributions, expected.contributions, what="contributions")
    close(result.norms, expected.norms, what="Jacobian norms")


def test_hidden_token_attribution_of_a_cpu_model_on_the_device(encoders):
    """``device=``: a model loaded on the CPU, its HTA computed on the device, equals the CPU's; the model stays."""
    (model, tokenizer), _ = encoders
    encoding = helpers.encode(tokenizer, SHORT, model=model)
    expected = helpers.hidden_token_attribution(model, encoding, progress=False)
    result = helpers.hidden_token_attribution(model, encoding, progress=False, device=DEVICE)
    on(result.norms, "cpu")
    close(result.norms, expected.norms, what="Jacobian norms computed on the device")
    assert {p.device.type for p in model.parameters()} == {"cpu"}


def test_context_mixing(encoders):
    results = [
        helpers.context_mixing(model, helpers.encode(tokenizer, TEXT, model=model), "globenc", rollout=True)
        for model, tokenizer in encoders
    ]
    expected, result = results
    on(result.scores, "cpu")  # Mixing scores live on the CPU
    close(result.scores, expected.scores, what="globenc rollout")


# ---------------------------------------------------------------- the decoder


@pytest.fixture(scope="module")
def decoders():
    """The bundled decoder on the CPU and on the device: ``(cpu, device)``."""
    return helpers.load_decoder(device="cpu"), helpers.load_decoder(device=DEVICE)


def _frame_close(frame: pd.DataFrame, expected: pd.DataFrame, atol: float = ATOL) -> None:
    assert list(frame.columns) == list(expected.columns)
    numeric = expected.select_dtypes("number").columns
    for column in numeric:
        np.testing.assert_allclose(frame[column], expected[column], rtol=RTOL, atol=atol, err_msg=column)


def test_decoder_sink_reading(decoders):
    passage = helpers.load_corpus("passages")[0].text_a
    text = " ".join(passage.split()[:60])  # about 75 tokens: the rows after d_v = 64 have null spaces
    tables = [helpers.sink_sweep(model, tokenizer, [text]) for model, tokenizer in decoders]
    expected, table = tables
    assert (table["n"] > table["rows"]).all() and (table["rows"] > 0).all()
    _frame_close(table, expected)


def test_decoder_hidden_token_attribution(decoders):
    results = []
    for model, tokenizer in decoders:
        encoding = first_tokens(helpers.encode(tokenizer, TEXT, model=model), 6)
        # the estimate's tangents are drawn on the CPU with the seed, so both devices push the same ones
        results.append(
            helpers.hidden_token_attribution(model, encoding, estimator="estimate", samples=8, seed=0, progress=False)
        )
    expected, result = results
    close(result.contributions, expected.contributions, what="decoder contributions")
    assert (result.contributions.triu(1) == 0).all()  # causal: no hidden token draws on later inputs
