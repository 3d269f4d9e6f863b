"""Hidden Token Attribution: exact forward mode against the naive loop, the estimate, and the bound.

All on the bundled model, measured in this one run (ratios, with seconds in
brackets for scale):

1. A short input: the exact forward-mode norms (``helpers.methods.jacobians``) against
   the naive loop, one reverse-mode pass per output unit (L n d passes), and
   against generic forward mode (``vmap`` over ``torch.func.jvp`` through the
   model's own modules): time ratios and largest differences.
2. A sentence of 17 tokens: exact mode's time with chunks of at most
   ``jacobians.CPU_ROWS_PER_CHUNK`` rows (the default on a CPU) against chunks sized
   by the memory budget alone; exact mode's time against its bound, (number of
   JVPs needed, n d) x (time of one batched JVP / batch size), both measured
   here; its arithmetic rate against a plain matrix product's; and one input
   token's d JVPs against generic forward mode on the same tangents.
3. The same sentence: the estimate (k random orthonormal tangents per input
   token) against the exact values: time ratio, median and 95th percentile
   relative error of the contributions, agreement of the top contributor per
   hidden token.
4. A ~64-token sentence pair, the size of the first implementation's figures: a 32-probe estimate,
   and the exact time projected from one measured chunk.

No timed asserts: timings depend on the machine. The differences must be tiny.
Run from the repository root: .venv/bin/python benchmarks/bench_attribution.py [--threads N]
"""

from __future__ import annotations

import argparse
import contextlib
import math

import torch

import helpers
from helpers.drivers.timing import timed
from helpers.methods import jacobians, linearised
from helpers.methods import reference as jacobians_reference

SHORT = "Hi."
MEDIUM = "The committee approved the budget on Tuesday, after a long and heated debate."


def best_of(repeats: int, function, *args, **kwargs) -> float:
    return min(timed(function, *args, **kwargs)[0] for _ in range(repeats))


def gemm_rate(d: int) -> float:
    """FLOP/s of one large (4096 x d) @ (d x 3d) product, best of 3."""
    a, b = torch.randn(4096, d), torch.randn(d, 3 * d)
    a @ b
    return 2 * 4096 * d * 3 * d / best_of(3, torch.mm, a, b)


def exact_flops(n: int, d: int, f: int, layers: int) -> float:
    """Multiply-adds x 2 of the exact structured run: n d tangents, plus forming the FFN Jacobians."""
    first = 4 * n * d * d + 2 * n * n * d + 6 * d * d
    dense = 10 * n * d * d + 8 * n * n * d
    return n * d * (first + (layers - 1) * dense) + layers * 2 * n * f * d * d


@contextlib.contextmanager
def budget_sized_chunks():
    """Chunks sized by the memory budget alone: the CPU row cap lifted for the duration."""
    cap = jacobians.CPU_ROWS_PER_CHUNK
    jacobians.CPU_ROWS_PER_CHUNK = 2**62
    try:
        yield
    finally:
        jacobians.CPU_ROWS_PER_CHUNK = cap


def drain(generator) -> None:
    for _ in generator:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: steadier ratios)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    helpers.setup_notebook(seed=0, threads=args.threads)
    model, tokenizer = helpers.load_model()
    arch = helpers.describe(model)
    d, L, f = arch.d, arch.num_layers, model.config.intermediate_size
    rate = gemm_rate(d)
    print(
        f"model {arch.name}: {L} layers, d = {d}; {args.threads} thread(s); "
        f"plain matrix product: {rate / 1e9:.0f} GFLOP/s"
    )

    # 1. exact against the naive loop and generic forward mode, on a short input
    encoding = helpers.encode(tokenizer, SHORT, model=model)
    x = helpers.capture(model, encoding).x
    n = x.shape[0]
    t_exact, exact = timed(helpers.methods.attribution.hidden_token_attribution, model, encoding, progress=False)
    t_generic, generic = timed(jacobians_reference.functorch_block_norms, model, x, progress=False)
    t_naive, naive = timed(jacobians_reference.naive_block_norms, model, x, progress=False)
    scale = float(naive.max())
    print(f"\n1. {SHORT!r} ({n} tokens): {L * n * d} reverse passes vs {n * d} forward tangents")
    print(f"   naive loop / exact forward mode      {t_naive / t_exact:8.1f} x   ({t_naive:.1f} s / {t_exact:.2f} s)")
    print(f"   generic vmap-jvp / exact forward mode {t_generic / t_exact:7.1f} x   ({t_generic:.1f} s)")
    print(f"   max |naive - exact| / max norm        {float((naive - exact.norms).abs().max()) / scale:.1e}")
    print(f"   max |generic - exact| / max norm      {float((generic - exact.norms).abs().max()) / scale:.1e}")
    print(
        f"   max |contribution difference|         "
        f"{float((helpers.methods.attribution.contributions_from_norms(naive) - exact.contributions).abs().max()):.1e}"
    )

    # 2. exact on a medium sentence, and right after it, one batched JVP of each kind
    encoding = helpers.encode(tokenizer, MEDIUM, model=model)
    n = encoding["input_ids"].shape[1]
    t_exact, exact = timed(helpers.methods.attribution.hidden_token_attribution, model, encoding, progress=False)
    internals = helpers.capture(model, encoding)
    x = internals.x
    lin = linearised.linearise(model, x, reference=internals.hidden_states)
    t_prepare, _ = timed(jacobians.prepare_ffn_jacobians, lin, n * d)
    B = jacobians.default_chunk_size(lin)
    with budget_sized_chunks():
        B_budget = jacobians.default_chunk_size(lin)
        t_budget = timed(helpers.methods.attribution.hidden_token_attribution, model, encoding, progress=False)[0]
    token = torch.arange(B) // d % n
    t_chunk = best_of(2, lambda: drain(jacobians.push_tangents(lin, token, torch.eye(d)[torch.arange(B) % d])))
    # one input token's d basis tangents, ours against generic vmap-jvp through the model's own modules
    from torch.func import jvp, vmap

    basis = torch.zeros(d, n, d)
    basis[:, 1] = torch.eye(d)
    generic_push = vmap(
        lambda t: jvp(lambda inputs: jacobians_reference.encoder_hidden_states(model, inputs), (x,), (t,))[1]
    )

    def ours_push():
        return drain(jacobians.push_tangents(lin, torch.ones(d, dtype=torch.long), torch.eye(d)))

    with torch.no_grad():
        t_ours_token, t_generic_token = math.inf, math.inf
        for _ in range(2):  # interleaved, so both see the same load
            t_ours_token = min(t_ours_token, timed(ours_push)[0])
            t_generic_token = min(t_generic_token, timed(generic_push, basis)[0])
    bound = n * d / B * t_chunk
    flops = exact_flops(n, d, f, L)
    print(f"\n2. exact mode on a {n}-token sentence ({t_exact:.1f} s): {n * d} JVPs in chunks of {B}")
    print(f"   bound (n d x one batched JVP) / exact time           {bound / t_exact:6.1%}")
    print(
        f"   chunks of {B_budget * n} rows (budget alone) / of {B * n} (capped)  {t_budget / t_exact:6.2f} x"
        f"   ({t_budget:.1f} s)"
    )
    print(f"   forming the per-token FFN Jacobians / exact time     {t_prepare / t_exact:6.1%}")
    print(
        f"   arithmetic rate / plain matrix product               {flops / t_exact / rate:6.1%}"
        f"   ({flops / 1e12:.2f} TFLOP)"
    )
    print(f"   one token's {d} JVPs, generic vmap-jvp / ours        {t_generic_token / t_ours_token:6.1f} x")

    # 3. estimate against exact on the same sentence
    print("\n3. the estimate on the same sentence")
    print(f"   {'probes':>6} {'time / exact':>13} {'median rel. err':>16} {'p95 rel. err':>13} {'same top input':>15}")
    for probes in (8, 32, 128):
        t_estimate, estimate = timed(
            helpers.methods.attribution.hidden_token_attribution,
            model,
            encoding,
            method="estimate",
            samples=probes,
            progress=False,
        )
        c = helpers.methods.attribution.compare_attributions(estimate, exact)
        print(
            f"   {probes:>6} {t_estimate / t_exact:>13.3f} {c.median_relative_error:>16.2%} "
            f"{c.p95_relative_error:>13.2%} {c.top_agreement:>15.1%}"
        )

    # 4. the reference size of the first implementation's figures: ~64 tokens
    pairs = helpers.load_corpus("pairs")
    lengths = {len(tokenizer(e.text_a, e.text_b)["input_ids"]): e for e in pairs}
    example = lengths[min(lengths, key=lambda m: (abs(m - 64), m))]
    encoding = helpers.encode(tokenizer, example.text_a, example.text_b, model=model)
    n = encoding["input_ids"].shape[1]
    t_estimate, _ = timed(
        helpers.methods.attribution.hidden_token_attribution,
        model,
        encoding,
        method="estimate",
        samples=32,
        progress=False,
    )
    internals = helpers.capture(model, encoding)
    lin = linearised.linearise(model, internals.x, reference=internals.hidden_states)
    t_prepare, _ = timed(jacobians.prepare_ffn_jacobians, lin, n * d)
    B = jacobians.default_chunk_size(lin)
    token = torch.arange(B) // d % n
    directions = torch.eye(d)[torch.arange(B) % d]
    t_chunk = best_of(2, lambda: drain(jacobians.push_tangents(lin, token, directions)))
    projected = t_prepare + math.ceil(n * d / B) * t_chunk
    print(
        f"\n4. a {n}-token sentence pair (the first implementation, at 64 tokens: exact ~12 min, naive ~30 min, "
        f"32-probe estimate ~35 s)"
    )
    print(f"   32-probe estimate            {t_estimate:7.1f} s")
    print(
        f"   exact, projected from one chunk of {B} tangents: {projected:7.1f} s  "
        f"(= {projected / 60:.1f} min; estimate / exact {t_estimate / projected:.3f})"
    )


if __name__ == "__main__":
    main()
