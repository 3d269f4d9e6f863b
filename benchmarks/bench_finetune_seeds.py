"""Chapter 8's fine-tuning, three seeds: how far the held-out accuracy moves with the seed.

The chapter fine-tunes once (seed 0) and states "one seed"; this measures the
spread it does not show. The recipe is the chapter's: the bundled model, the
book's paraphrase pairs, the same held-out quarter (split seed 0), 5 epochs,
batches of 16, learning rate 1e-4 decaying linearly, via ``helpers.fine_tune``.
Only the training seed changes (the head's initial weights, the batch order,
dropout). For each seed: the held-out and training accuracy; then the spread
(largest minus smallest) of the held-out accuracy, and the majority-class rate
for scale. No timed asserts.

Run from the repository root: .venv/bin/python benchmarks/bench_finetune_seeds.py [--threads N]
"""

from __future__ import annotations

import argparse

import torch

import helpers
from helpers.drivers import finetuning
from helpers.drivers.timing import timed

SEEDS = (0, 1, 2)
EPOCHS, BATCH, RATE = 5, 16, 1e-4  # the chapter's recipe on the bundled model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = helpers.load_model(None)
    pairs = helpers.load_corpus("pairs")
    train, test = finetuning.split_pairs(pairs, test_fraction=0.25, seed=0)
    baseline = finetuning.majority_baseline(train, test)
    print(f"{len(train)} training pairs, {len(test)} held-out pairs; majority class (held-out): {baseline:.3f}")
    print(f"{'seed':>4}  {'held-out':>8}  {'training':>8}  {'seconds':>7}")
    held_out = []
    for seed in SEEDS:
        seconds, result = timed(
            helpers.fine_tune, model, tokenizer, train, epochs=EPOCHS, batch_size=BATCH, learning_rate=RATE, seed=seed
        )
        test_accuracy = finetuning.accuracy(result.classifier, tokenizer, test)
        train_accuracy = finetuning.accuracy(result.classifier, tokenizer, train)
        held_out.append(test_accuracy)
        print(f"{seed:>4}  {test_accuracy:8.3f}  {train_accuracy:8.3f}  {seconds:7.0f}")
    spread = max(held_out) - min(held_out)
    mean = sum(held_out) / len(held_out)
    print(
        f"held-out accuracy over seeds {', '.join(map(str, SEEDS))}: mean {mean:.3f}, "
        f"spread (max - min) {spread:.3f} = {round(spread * len(test))} of {len(test)} pairs"
    )


if __name__ == "__main__":
    main()
