"""Chapter 5's trained maps, three seeds: how far the identifiability rates move with the seed.

The chapter trains each map with three seeds and averages them token by token inside
its intervals; this prints each seed's figures apart. The recipe is the chapter's on
the bundled model: the book's paraphrase pairs, the same held-out 30% of the pairs
(split seed 0), the last hidden state, the linear map with cosine loss and the MLP
(both seeded Adam on standardised hidden tokens, trained until the held-out stopping
rule stops them: 20% of the training pairs held out, patience 2, at most 40 epochs),
and the MLP's gain from half to all of the training pairs (``fraction_curve``). Only
the training seed changes (the MLP's initial weights, the batch order, the held-out
pairs and, for the gain, which pairs form the half).
For each seed: the three figures; then their spread (largest minus smallest).
No timed asserts.

Run from the repository root: .venv/bin/python benchmarks/bench_probe_seeds.py [--threads N]
"""

from __future__ import annotations

import argparse

import torch

import helpers
from helpers.drivers import identifiability
from helpers.methods import probes

SEEDS = (0, 1, 2)
FIT = dict(validation=0.2, patience=2, max_epochs=40)  # the chapter's stopping rule


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = helpers.load_model(None)
    tokens = helpers.collect_hidden_tokens(model, tokenizer, helpers.load_corpus("pairs"), progress=False)
    train, test = probes.split_by_sequence(tokens, 0.3, seed=0)
    last = tokens.num_layers
    print(f"{len(train.sequence_ids)} training pairs, {len(test.sequence_ids)} held-out pairs; hidden state {last}")
    print(f"{'seed':>4}  {'linear+cos':>10}  {'MLP+cos':>8}  {'MLP gain 0.5->1':>15}")
    figures = []
    for seed in SEEDS:
        linear = probes.evaluate_map(probes.fit_token_map(train, last, "linear", "cosine", seed=seed, **FIT), test)
        curve = identifiability.fraction_curve(
            train, test, fractions=(0.5, 1.0), kinds=("mlp",), seed=seed, progress=False, **FIT
        ).set_index("fraction")["rate"]
        figures.append((linear, float(curve[1.0]), float(curve[1.0] - curve[0.5])))
        print(f"{seed:>4}  {figures[-1][0]:10.3f}  {figures[-1][1]:8.3f}  {figures[-1][2]:15.3f}")
    spreads = [max(column) - min(column) for column in zip(*figures, strict=True)]
    print(f"spread  {spreads[0]:10.3f}  {spreads[1]:8.3f}  {spreads[2]:15.3f}")


if __name__ == "__main__":
    main()
