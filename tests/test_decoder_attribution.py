"""Exact Hidden Token Attribution on Llama-family decoders, against torch.func.jacfwd.

Tiny random Llama and Qwen2 models (grouped-query heads, RoPE, RMSNorm, SwiGLU; Qwen2 with
random projection biases and norm weights, so that no term can hide behind a zero or a one),
then the bundled SmolLM2 on a 7-token prompt in float64, the acceptance check of the method.
The models' eager attention takes its softmax in float32 even in a float64 model (as transformers'
own does), so float64 runs agree to about 1e-7, not to float64's last digits.
"""

from __future__ import annotations

import pytest
import torch
from transformers import BatchEncoding

import helpers
from helpers.methods import decoder_jacobians, linearised_decoder, reference
from helpers.methods.jacobians import CPU_ROWS_PER_CHUNK
from helpers.model.checks import UnsupportedModelError

from .conftest import make_tiny_bert
from .test_families import make_tiny


def _randomised(family: str) -> torch.nn.Module:
    model = make_tiny(family).double().eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias") or "norm" in name:  # biases zero and norm weights one by default
                parameter.copy_(
                    torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype) * 0.5 + ("norm" in name)
                )
    return model


def _encoding(n: int = 7) -> BatchEncoding:
    ids = torch.randint(0, 1000, (1, n), generator=torch.Generator().manual_seed(2))
    return BatchEncoding({"input_ids": ids, "attention_mask": torch.ones_like(ids)})


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def tiny(request):
    model = _randomised(request.param)
    internals = helpers.capture(model, _encoding())
    lin = linearised_decoder.linearise_decoder(model, internals.x, reference=internals.hidden_states, atol=1e-6)
    expected = reference.decoder_jacfwd_block_norms(model, internals.x, progress=False)
    return model, internals, lin, expected


@pytest.mark.parametrize("explicit_ffn", [True, False])
@pytest.mark.parametrize("chunk_size", [None, 5])  # 5: chunks that straddle two input tokens
def test_exact_norms_equal_jacfwd(tiny, explicit_ffn, chunk_size):
    _, _, lin, expected = tiny
    norms = decoder_jacobians.decoder_block_norms(lin, explicit_ffn=explicit_ffn, chunk_size=chunk_size, progress=False)
    assert norms.shape == expected.shape
    assert float((norms - expected).abs().max() / expected.max()) < 1e-6
    assert torch.equal(norms.triu(1), torch.zeros_like(norms))  # zero above the diagonal, exactly
    assert bool((norms.diagonal(dim1=-2, dim2=-1) > 0).all())


def test_jacfwd_reference_is_causal(tiny):
    """The reference sees future tokens if it wants to: its zeros above the diagonal are the model's own."""
    *_, expected = tiny
    assert float(expected.triu(1).abs().max()) == 0.0
    below = torch.ones(expected.shape[-2:], dtype=torch.bool).tril(-1)
    assert float(expected[:, below].min()) > 0.0


def test_estimate_with_every_direction_is_exact(tiny):
    _, _, lin, expected = tiny
    full = decoder_jacobians.decoder_block_norms(lin, samples=lin.d, seed=3, progress=False)
    assert float((full - expected).abs().max() / expected.max()) < 1e-6
    few = decoder_jacobians.decoder_block_norms(lin, samples=4, seed=3, progress=False)
    assert few.triu(1).abs().max() == 0
    assert not torch.allclose(few, expected)  # 4 of 32 directions: an estimate, not the exact values


def test_depth_stops_early(tiny):
    _, _, lin, expected = tiny
    assert torch.allclose(decoder_jacobians.decoder_block_norms(lin, depth=1, progress=False), expected[:1])


def test_a_cpu_chunk_spans_at_most_the_cache_sized_row_count(tiny):
    _, _, lin, _ = tiny
    size = decoder_jacobians.default_decoder_chunk_size(lin)
    budget = decoder_jacobians.default_decoder_chunk_size(lin, cpu_row_cap=False)
    assert size * lin.n <= CPU_ROWS_PER_CHUNK < (size + 1) * lin.n  # the cap binds for a tiny model
    assert budget > size
    assert decoder_jacobians.default_decoder_chunk_size(lin, memory_mb=1e-3) == 1


def test_hidden_token_attribution_on_a_decoder(tiny):
    model, internals, _, expected = tiny
    encoding = _encoding()
    result = helpers.hidden_token_attribution(model, encoding, progress=False)
    assert result.layer_numbers == (1, 2)
    assert torch.allclose(result.norms.double(), expected, rtol=1e-5)
    assert torch.allclose(result.contributions.sum(-1), torch.ones(2, internals.n))
    assert float(result.contributions.triu(1).abs().max()) == 0.0
    estimate = helpers.hidden_token_attribution(model, encoding, estimator="estimate", samples=8, progress=False)
    assert estimate.contributions.shape == result.contributions.shape


def test_macs_are_counted(tiny):
    _, _, lin, _ = tiny
    macs: list[int] = []
    decoder_jacobians.decoder_block_norms(lin, explicit_ffn=True, progress=False, macs=macs)
    block = lin.blocks[0]
    assert macs[0] == lin.depth * lin.n * 2 * block.f * lin.d**2  # forming the FFN Jacobians
    assert len(macs) == 1 + lin.depth * len(decoder_jacobians.direction_chunks(lin.n, lin.d, None, 0, 1000, None, None))
    assert all(count > 0 for count in macs)


def test_refusals():
    bert = make_tiny_bert()
    with pytest.raises(UnsupportedModelError, match="covers llama, qwen2"):
        linearised_decoder.linearise_decoder(bert, torch.zeros(3, 32))
    model = make_tiny("llama").eval()
    internals = helpers.capture(model, _encoding())
    with pytest.raises(ValueError, match=r"\(n, 32\)"):
        linearised_decoder.linearise_decoder(model, internals.x[:, :5])
    with pytest.raises(ValueError, match="does not reproduce"):
        linearised_decoder.linearise_decoder(model, internals.x, reference=internals.hidden_states + 1.0)
    lin = linearised_decoder.linearise_decoder(model, internals.x)
    with pytest.raises(ValueError, match="samples must be between 1 and d = 32"):
        decoder_jacobians.decoder_block_norms(lin, samples=33, progress=False)
    with pytest.raises(ValueError, match="depth must be between 1 and 2"):
        decoder_jacobians.decoder_block_norms(lin, depth=3, progress=False)


@pytest.mark.slow
def test_smollm2_seven_tokens_equal_float64_jacfwd():
    """The bundled decoder, 30 blocks: exact HTA (float32) against jacfwd (float64), every block's output,
    for input token 0, which feeds every position and carries the massive activations. Each jacfwd column
    costs about 10 s here and over a minute under make test's single-threaded generic kernels, so the test
    takes one of the seven; the tiny decoders above compare every column, and ``benchmarks/bench_hta_rates.py`` compares all seven on this model."""
    loaded = helpers.load_decoder(device="cpu")
    encoding = helpers.encode(loaded.tokenizer, "The capital of France is Paris.", model=loaded.model)
    assert encoding["input_ids"].shape[1] == 7
    result = helpers.hidden_token_attribution(loaded.model, encoding, progress=False)
    internals = helpers.capture(loaded.model, encoding)
    columns = [0]
    expected = reference.decoder_jacfwd_block_norms(
        loaded.model.double(), internals.x.double(), tokens=columns, progress=False
    )
    assert result.norms.shape == (30, 7, 7)
    relative = (result.norms[..., columns].double() - expected).abs().max() / expected.max()
    assert float(relative) < 1e-4
    assert float(result.norms.triu(1).abs().max()) == 0.0
