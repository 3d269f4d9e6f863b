"""Causal effective attention: the nested-prefix Gram route against one SVD per prefix.

Random causal heads (float64, so the difference shows the routes, not float32 rounding) shaped like the bundled decoder's (head size 64, 3 key/value heads
shared by 9 query heads), at several sequence lengths:

* svd:  for every row i, a batched reduced SVD of the prefix V[:i+1] (n SVDs of up to n x d_v)
* gram: the d_v x d_v Gram matrix of the prefix grows by one rank-one term per row; one
        eigendecomposition per row, and V[:i+1]^T a_i = (A V)[i] for all rows at once

Prints the speed-up of gram over svd (best of a few repeats, in this one run) and the largest
absolute difference between their results. No timed asserts.

Run from the repository root: .venv/bin/python benchmarks/bench_causal.py [--threads N]
"""

from __future__ import annotations

import argparse

import torch

from helpers.drivers.timing import best_time
from helpers.methods.causal import causal_effective_attention


def causal_heads(n: int, kv_heads: int = 3, groups: int = 3, d_v: int = 64, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(kv_heads * groups, n, n, generator=g, dtype=torch.float64)
    logits = logits.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    V = torch.randn(kv_heads, n, d_v, generator=g, dtype=torch.float64).repeat_interleave(groups, dim=0)
    H = torch.randn(kv_heads * groups, d_v, 9 * d_v, generator=g, dtype=torch.float64)
    return torch.softmax(logits, dim=-1), V, H, groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{'n':>5} {'gram vs svd speed-up':>22} {'max |difference|':>18}")
    for n in (96, 192, 384):
        A, V, H, groups = causal_heads(n)
        results = {}
        times = {}
        for method in ("svd", "gram"):

            def run(method=method, A=A, V=V, H=H, groups=groups, results=results):
                return results.__setitem__(
                    method, causal_effective_attention(A, V=V, H=H, groups=groups, algorithm=method)
                )

            times[method] = best_time(run, args.repeats)
        difference = float((results["gram"].effective - results["svd"].effective).abs().max())
        print(f"{n:>5} {times['svd'] / times['gram']:>21.1f}x {difference:>18.1e}")


if __name__ == "__main__":
    main()
