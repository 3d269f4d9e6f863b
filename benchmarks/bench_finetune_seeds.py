"""Chapter 8's fine-tuning, three seeds: how far the held-out accuracy moves with the seed.

The chapter fine-tunes with seeds 0, 1 and 2 and reads every finding over them;
this re-runs its recipe with more seeds to show the spread. The recipe is the
chapter's: the bundled model, the book's paraphrase pairs, the same held-out
quarter (split seed 0), a fifth of the training pairs as validation pairs that
pick the epoch to keep, at most 5 epochs, batches of 16, a peak learning rate
of 5e-5 reached over the first tenth of the steps and then decaying linearly,
via ``helpers.fine_tune``. Only the training seed changes (the head's initial
weights, the batch order, dropout). For each seed: the kept epoch, the
validation and held-out accuracy; then the spread (largest minus smallest) of
the held-out accuracy, and the majority-class rate for scale. No timed asserts.

Run from the repository root: .venv/bin/python benchmarks/bench_finetune_seeds.py [--threads N]
"""

from __future__ import annotations

import argparse

import torch

import helpers
from helpers.drivers import finetuning
from helpers.drivers.timing import timed

SEEDS = (0, 1, 2, 3, 4)
EPOCHS, BATCH, RATE, WARMUP = 5, 16, 5e-5, 0.1  # the chapter's recipe on the bundled model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = helpers.load_model(None)
    pairs = helpers.load_corpus("pairs")
    train, test = finetuning.split_pairs(pairs, test_fraction=0.25, seed=0)
    fit, validation = finetuning.split_pairs(train, test_fraction=0.2, seed=0)
    baseline = finetuning.majority_baseline(train, test)
    print(f"{len(train)} training pairs, {len(test)} held-out pairs; majority class (held-out): {baseline:.3f}")
    print(f"{'seed':>4}  {'epoch':>5}  {'valid.':>6}  {'held-out':>8}  {'seconds':>7}")
    held_out = []
    for seed in SEEDS:
        seconds, result = timed(
            helpers.fine_tune,
            model,
            tokenizer,
            fit,
            epochs=EPOCHS,
            batch_size=BATCH,
            learning_rate=RATE,
            warmup=WARMUP,
            seed=seed,
            validation=validation,
        )
        test_accuracy = finetuning.accuracy(result.classifier, tokenizer, test)
        kept = result.validation.set_index("epoch").accuracy[result.best_epoch]
        held_out.append(test_accuracy)
        print(f"{seed:>4}  {result.best_epoch:>5}  {kept:6.3f}  {test_accuracy:8.3f}  {seconds:7.0f}")
    spread = max(held_out) - min(held_out)
    mean = sum(held_out) / len(held_out)
    print(
        f"held-out accuracy over seeds {', '.join(map(str, SEEDS))}: mean {mean:.3f}, "
        f"spread (max - min) {spread:.3f} = {round(spread * len(test))} of {len(test)} pairs"
    )


if __name__ == "__main__":
    main()
