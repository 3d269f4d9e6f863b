"""Exact Hidden Token Attribution against the machine: BERT (the bundled model) and SmolLM2.

For each model, measured in this one run:

* the achieved arithmetic rate of the exact forward-mode norms (2 x the multiply-adds of
  the tangent pass's matrix products, forming the per-token FFN Jacobians included, over
  its time) divided by the rate of one large float32 matrix product (2048 x 2048 times
  2048 x 2048, best of 5), measured right before and right after (the larger);
* the rate of the tangent pass's dense products alone (the Q, K, V product, the output
  projection and the per-token FFN Jacobians of one dense layer, on one default chunk, with
  the layouts the pass uses), over the same large-product rate, and the ceiling of the first
  ratio it gives: that rate times (all the counted arithmetic / the part outside the attention's
  n x n products), since the n x n work and the elementwise steps can only add time;
* (the exact time is the better of two runs;) the time of ``torch.func.jacfwd`` through the model's own layers on the same input
  (one input token at a time, every token) over the exact time;
* for SmolLM2, the largest difference from a float64 ``jacfwd`` on a 7-token prompt;
* with --decoder-chunks, SmolLM2's exact time with its default chunk (at most 4096 rows on a CPU) against
  the chunk the memory budget alone sizes and one of at most 2048 rows (about 5 minutes more).

BERT: a 22-token sentence; SmolLM2: a 16-token sentence. No timed asserts.
Run from the repository root:
.venv/bin/python benchmarks/bench_hta_rates.py [--threads N] [--encoder NAME] [--decoder-chunks]
(--encoder all-mpnet-base-v2: the paper-scale encoder's rates instead of the bundled BERT's, without
jacfwd or SmolLM2; a few minutes.)
"""

from __future__ import annotations

import argparse
import math

import torch

import helpers
from bench_attribution import best_of, exact_flops
from helpers.drivers.timing import timed
from helpers.methods import decoder_jacobians, jacobians, linearised, linearised_decoder, reference

BERT_SENTENCE = "The committee approved the new budget on Tuesday, after a long and heated debate in the old hall."
DECODER_SENTENCE = "The committee approved the new budget on Tuesday, after a long and heated debate in"
SHORT_PROMPT = "The capital of France is Paris."


def matmul_rate(size: int = 2048, repeats: int = 5) -> float:
    """FLOP/s of one large float32 matrix product, (size x size) @ (size x size), best of ``repeats``.

    On a shared machine this rate moves by a tenth or more from minute to minute: measure it
    right before and right after the timed work and divide by the larger (``best_rate``)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    return 2 * size**3 / best_of(repeats, torch.mm, a, b)


def best_rate(before: float) -> float:
    """The larger of a matrix-product rate measured before the timed work and one measured now."""
    return max(before, matmul_rate())


def dense_product_rate(lin: linearised.LinearisedBert, repeats: int = 5) -> float:
    """FLOP/s of one dense layer's three large products on one default chunk of B tangents, best of ``repeats``.

    The products and layouts of ``jacobians._attention_tangent`` and ``_ffn_block_tangent``:
    (3d, d) x (d, B n), then (B n, d) x (d, d), then n batched (B, d) x (d, d) with their transposes;
    10 B n d^2 multiply-adds x 2. Random operands: the rate does not depend on the values."""
    layer = lin.blocks[1]
    if layer.M is None:
        raise ValueError("the per-token FFN Jacobians are not formed: call jacobians.prepare_ffn_jacobians first.")
    n, d = lin.n, lin.d
    B = jacobians.default_chunk_size(lin)
    dE, dO = torch.randn(B, n, d), torch.randn(d, B * n)

    def products():
        torch.mm(layer.W_qkv_T, dE.view(B * n, d).t())
        dR = torch.mm(dO.t(), layer.W_o).view(B, n, d)
        torch.bmm(dR.transpose(0, 1), layer.M).transpose(0, 1).contiguous()

    products()
    return 10 * B * n * d * d / best_of(repeats, products)


def jacfwd_block_norms(hidden, x: torch.Tensor) -> torch.Tensor:
    """||d hidden(x)_i / d x_j||_F by ``torch.func.jacfwd``, one input token j at a time: (L, n, n)."""
    from torch.func import jacfwd

    columns = []
    for j in range(x.shape[0]):

        def of_row(row, j=j):
            return hidden(torch.cat([x[:j], row[None], x[j + 1 :]]))

        with torch.no_grad():
            columns.append(jacfwd(of_row)(x[j]).pow(2).sum(dim=(-2, -1)).sqrt())
    return torch.stack(columns, dim=-1)


def report(
    name: str,
    n: int,
    flops: float,
    t_exact: float,
    t_jacfwd: float | None,
    rate: float,
    difference: float | None,
    dense_rate: float | None = None,
    ceiling: float | None = None,
) -> None:
    print(f"\n{name}, {n} tokens")
    print(f"   exact forward mode                      {t_exact:8.1f} s   ({flops / 1e12:.2f} TFLOP)")
    print(f"   achieved rate / matrix-product rate     {flops / t_exact / rate:8.2f}")
    if dense_rate is not None:
        print(f"   its dense products alone / same rate    {dense_rate / rate:8.2f}")
        print(f"   so the first ratio's ceiling            {ceiling / rate:8.2f}")
    if t_jacfwd is not None:
        print(f"   torch.func.jacfwd / exact               {t_jacfwd / t_exact:8.1f} x   ({t_jacfwd:.1f} s)")
        print(f"   max |jacfwd - exact| / max norm         {difference:8.1e}")


def compare_decoder_chunks(decoder, internals, rounds: int = 2) -> None:
    """The decoder's exact norms with its default chunk (at most ``jacobians.CPU_ROWS_PER_CHUNK`` = 4096 rows
    B n on a CPU) against the chunk the memory budget alone gives and one of at most 2048 rows, interleaved,
    best of ``rounds``."""
    lin = linearised_decoder.linearise_decoder(decoder, internals.x, reference=internals.hidden_states)
    decoder_jacobians.prepare_decoder_ffn_jacobians(lin, lin.n * lin.d)
    sizes = {
        "default": decoder_jacobians.default_decoder_chunk_size(lin),
        "budget alone": decoder_jacobians.default_decoder_chunk_size(lin, cpu_row_cap=False),
        "<= 2048 rows": max(1, 2048 // lin.n),
    }
    times = {name: math.inf for name in sizes}
    first = None
    for _ in range(rounds):
        for name, size in sizes.items():
            seconds, norms = timed(decoder_jacobians.decoder_block_norms, lin, chunk_size=size, progress=False)
            times[name] = min(times[name], seconds)
            first = norms if first is None else first
            if not torch.allclose(norms, first, rtol=1e-5, atol=1e-6 * float(first.max())):
                raise AssertionError(f"chunks of {size} tangents changed the norms")
    print(f"   chunks (tangents, rows), time / the default's, best of {rounds} interleaved:")
    for name, size in sizes.items():
        print(
            f"     {name:>14} ({size:4d}, {size * lin.n:5d})  {times[name] / times['default']:6.2f}   ({times[name]:.1f} s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch CPU threads")
    parser.add_argument(
        "--decoder-chunks",
        action="store_true",
        help="also time SmolLM2's exact norms with the memory budget's chunk and one of at most 2048 rows against the default",
    )
    parser.add_argument("--encoder", default=None, help="an encoder for helpers.load_model (default: the bundled BERT)")
    args = parser.parse_args()
    helpers.setup_notebook(seed=0, threads=args.threads)
    torch.set_num_threads(args.threads)
    print(f"{args.threads} thread(s)")

    # BERT, the bundled model (or --encoder)
    model, tokenizer = helpers.load_model(args.encoder) if args.encoder else helpers.load_model()
    arch = helpers.describe(model)
    encoding = helpers.encode(tokenizer, BERT_SENTENCE, model=model)
    n = encoding["input_ids"].shape[1]
    rate = matmul_rate()
    print(f"{arch.name}: a large float32 matrix product runs at {rate / 1e9:.0f} GFLOP/s")
    t_exact, exact = timed(helpers.hidden_token_attribution, model, encoding, progress=False)
    t_exact = min(t_exact, timed(helpers.hidden_token_attribution, model, encoding, progress=False)[0])
    internals = helpers.capture(model, encoding)
    x = internals.x
    lin = linearised.linearise(model, x, reference=internals.hidden_states)
    jacobians.prepare_ffn_jacobians(lin, n * arch.d)
    dense_rate = dense_product_rate(lin)
    del lin
    rate = best_rate(rate)
    flops = exact_flops(n, arch.d, model.config.intermediate_size, arch.num_layers)
    n_by_n = n * arch.d * (2 * n * n * arch.d + (arch.num_layers - 1) * 8 * n * n * arch.d)  # as exact_flops counts
    ceiling = dense_rate * flops / (flops - n_by_n)
    if args.encoder:  # the rates only: jacfwd on a paper-scale encoder would take an hour
        report(arch.name, n, flops, t_exact, None, rate, None, dense_rate, ceiling)
        return
    t_jacfwd, expected = timed(jacfwd_block_norms, lambda inputs: reference.encoder_hidden_states(model, inputs), x)
    difference = float((expected - exact.norms).abs().max() / expected.max())
    report(arch.name, n, flops, t_exact, t_jacfwd, rate, difference, dense_rate, ceiling)

    # SmolLM2
    loaded = helpers.load_decoder(device="cpu")
    decoder, decoder_tokenizer = loaded.model, loaded.tokenizer
    arch = helpers.describe(decoder)
    rate = matmul_rate()
    print(f"\n{arch.name}: a large float32 matrix product runs at {rate / 1e9:.0f} GFLOP/s")
    encoding = helpers.encode(decoder_tokenizer, DECODER_SENTENCE, model=decoder)
    n = encoding["input_ids"].shape[1]
    internals = helpers.capture(decoder, encoding)
    macs: list[int] = []

    def exact_decoder():
        lin = linearised_decoder.linearise_decoder(decoder, internals.x, reference=internals.hidden_states)
        return decoder_jacobians.decoder_block_norms(lin, progress=False, macs=macs)

    t_exact, norms = timed(exact_decoder)
    t_exact = min(t_exact, timed(exact_decoder)[0])
    rate = best_rate(rate)
    del macs[len(macs) // 2 :]  # one run's multiply-adds
    t_jacfwd, expected = timed(
        jacfwd_block_norms, lambda inputs: reference.decoder_hidden_states(decoder, inputs), internals.x
    )
    difference = float((expected - norms).abs().max() / expected.max())
    report(arch.name, n, 2 * sum(macs), t_exact, t_jacfwd, rate, difference)
    if args.decoder_chunks:
        compare_decoder_chunks(decoder, internals)

    # the acceptance check: 7 tokens, against float64 jacfwd
    encoding = helpers.encode(decoder_tokenizer, SHORT_PROMPT, model=decoder)
    result = helpers.hidden_token_attribution(decoder, encoding, progress=False)
    x = helpers.capture(decoder, encoding).x
    expected = reference.decoder_jacfwd_block_norms(decoder.double(), x.double(), progress=False)
    difference = float((result.norms.double() - expected).abs().max() / expected.max())
    above = float(result.norms.triu(1).abs().max())
    print(f"\n{arch.name}, {x.shape[0]} tokens: exact (float32) against float64 jacfwd, every block's output")
    print(f"   max |difference| / max norm             {difference:8.1e}")
    print(f"   largest norm above the diagonal         {above:8.1e}")


if __name__ == "__main__":
    main()
