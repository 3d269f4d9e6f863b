"""Effective attention: the V fast path against the per-head T-SVD loop.

For passages of increasing length from the book corpus, all layers and heads
of the bundled model at once:

* loop:   one full SVD of T (n x d) per head, A_null = A U_n U_n^T  (the paper's recipe, literally)
* T:      one batched reduced SVD of every T (n x d)
* V:      one batched reduced SVD of every V (n x d_v), valid because each H has full row rank

Prints the speed-up of V over the other two (best of a few repeats, measured in
this one run) and the largest absolute difference between the results. No
timed asserts: timings depend on the machine; the differences must be tiny.

Run from the repository root: .venv/bin/python benchmarks/bench_effective.py [--threads N]
"""

from __future__ import annotations

import argparse

import torch

import helpers
from helpers.drivers.timing import best_time
from helpers.methods.effective import effective_attention
from helpers.methods.reference import effective_attention_loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: steadier ratios)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    helpers.setup_notebook(seed=0, threads=args.threads)

    model, tokenizer = helpers.load_model()
    texts = [(e.text_a, e.text_b) for e in helpers.load_corpus("pairs")] + [
        (e.text_a, None) for e in helpers.load_corpus("passages")
    ]
    lengths = {len(tokenizer(a, b)["input_ids"]): (a, b) for a, b in texts}
    targets = (40, 100, 200, 380)
    chosen = sorted({min(lengths, key=lambda n: abs(n - t)) for t in targets})

    arch = helpers.describe(model)
    print(
        f"model {arch.name}: {arch.num_layers} layers x {arch.heads} heads, d = {arch.d}, d_v = {arch.d_v}; "
        f"{args.threads} thread(s), best of {args.repeats}"
    )
    print(f"{'n':>5} {'loop / V':>10} {'T / V':>8} {'max|loop - V|':>15} {'max|T - V|':>12}")
    for n in chosen:
        a, b = lengths[n]
        internals = helpers.capture(model, helpers.encode(tokenizer, a, b, model=model))
        A, T, V, H = internals.A, internals.T, internals.V, internals.H
        fast = effective_attention(A, V=V, H=H)
        loop = effective_attention_loop(A, T)
        direct = effective_attention(A, T)
        t_fast = best_time(lambda A=A, V=V, H=H: effective_attention(A, V=V, H=H), args.repeats)
        t_loop = best_time(lambda A=A, T=T: effective_attention_loop(A, T), max(1, args.repeats - 1))
        t_direct = best_time(lambda A=A, T=T: effective_attention(A, T), args.repeats)
        diff_loop = float((loop.effective - fast.effective).abs().max())
        diff_direct = float((direct.effective - fast.effective).abs().max())
        print(f"{n:>5} {t_loop / t_fast:>9.1f}x {t_direct / t_fast:>7.1f}x {diff_loop:>15.1e} {diff_direct:>12.1e}")


if __name__ == "__main__":
    main()
