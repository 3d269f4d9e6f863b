"""Context-mixing measures: cost of each against exact HTA, and whether the HTA estimate can be the reference.

On the bundled model and the first book-corpus pair of 40-60 tokens, measured in this one run:

1. Exact HTA (seconds), then the Hutchinson estimate with k = 2 .. 32 random orthonormal
   samples per input token: its cost as a fraction of exact, the median relative error of
   the contributions c_ij, and the median Spearman correlation of its rows with exact rows.
   The book's target: at most 1% median relative error at no more than 10% of
   the exact cost. The script says whether it is reached; it does not assert it.
2. Seconds per sentence for every measure (local and rollout), with the ratio to exact HTA,
   next to GlobEnc's reported ~28 s per example for its Jacobian measure (2 h / 256 examples).

Exact HTA of a 40-60 token pair takes minutes on 2 CPU cores.
Run from the repository root: .venv/bin/python benchmarks/bench_mixing.py [--threads N] [--device cuda]
"""

from __future__ import annotations

import argparse

import torch

import helpers
from helpers.book import paper
from helpers.drivers.timing import timed

SAMPLES = (2, 4, 8, 16, 32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = helpers.load_model()
    model.to(args.device)
    pair = next(p for p in helpers.load_corpus("pairs") if 40 <= len(tokenizer(p.text_a, p.text_b)["input_ids"]) <= 60)
    encoding = helpers.encode(tokenizer, pair.text_a, pair.text_b, model=model)
    n = encoding["input_ids"].shape[1]
    print(f"pair {pair.id}, n = {n} tokens, device {args.device}, {torch.get_num_threads()} threads")

    exact_seconds, exact = timed(helpers.methods.mixing.context_mixing, model, encoding, "hta")
    print(f"\n1. exact HTA: {exact_seconds:.1f} s")
    print(
        f"{'samples':>8} {'cost / exact':>13} {'median rel. error':>18} {'p95 rel. error':>15} {'median row Spearman':>20}"
    )
    reached = []
    for k in SAMPLES:
        seconds, estimate = timed(
            helpers.methods.mixing.context_mixing, model, encoding, "hta", estimator="estimate", samples=k, seed=0
        )
        relative = ((estimate.scores - exact.scores).abs() / exact.scores).flatten()
        median, p95 = relative.median().item(), relative.quantile(0.95).item()
        rho = helpers.methods.linalg.row_spearman(estimate.scores, exact.scores).median().item()
        ratio = seconds / exact_seconds
        target = helpers.methods.mixing.ESTIMATE_TARGET
        reached.append(median <= target["median_relative_error"] and ratio <= target["cost_fraction"])
        print(f"{k:>8} {ratio:>13.3f} {median:>18.2%} {p95:>15.1%} {rho:>20.3f}")
    verdict = "reached" if any(reached) else "NOT reached"
    print(f"target (median relative error <= 1% at <= 10% of the exact cost): {verdict} with plain orthonormal samples")

    print("\n2. seconds per sentence (this pair), ratio to exact HTA")
    globenc_seconds = paper.globenc_seconds_per_example("jacobian")
    rows = [("hta (exact)", exact_seconds)]
    for k in (4, 32):
        rows.append(
            (
                f"hta (estimate, {k} samples)",
                timed(helpers.methods.mixing.context_mixing, model, encoding, "hta", estimator="estimate", samples=k)[
                    0
                ],
            )
        )
    rows.append(
        ("hta_local (estimate, 8 samples)", timed(helpers.methods.mixing.local_hta, model, encoding, samples=8)[0])
    )
    for measure in helpers.methods.mixing.LOCAL_MEASURES:
        rows.append(
            (
                f"{measure} rollout",
                timed(helpers.methods.mixing.context_mixing, model, encoding, measure, rollout=True)[0],
            )
        )
        if measure in helpers.methods.decomposition.NORM_MEASURES:
            rows.append(
                (
                    f"{measure}+eff rollout",
                    timed(
                        helpers.methods.mixing.context_mixing, model, encoding, measure, rollout=True, effective=True
                    )[0],
                )
            )
    rows.append(("grad_input", timed(helpers.methods.mixing.context_mixing, model, encoding, "grad_input")[0]))
    for name, seconds in rows:
        print(f"{name:>34}: {seconds:8.3f} s  ({seconds / exact_seconds:.4f} x exact HTA)")
    print(
        f"{'GlobEnc reported, its Jacobian':>34}: {globenc_seconds:8.1f} s per example (BERT-Base, SST-2, their hardware)"
    )


if __name__ == "__main__":
    main()
