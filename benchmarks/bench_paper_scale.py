"""The paper-scale model against the bundled one: the chapters' heaviest steps on both, measured in one run.

For all-MiniLM-L6-v2 (the bundled encoder) and all-mpnet-base-v2 (the paper-scale edition's, BERT-Base's
shape), on the same inputs:

* exact Hidden Token Attribution of one 22-token sentence: its time and its achieved arithmetic rate over
  the rate of one large float32 matrix product measured right before and right after, the larger
  (chapter 6's reference);
* the effective-attention sweep over 4 sentence pairs (chapter 4's);
* every context-mixing measure of one pair from one capture (chapter 7's, HTA estimated with 8 tangents);
* one fine-tuning step (forward and backward of a batch of 8 pairs through the encoder and a head on its
  first token; chapter 8's unit of work), best of 3.

Each line prints MPNet's time over MiniLM's and, for comparison, the ratio of their per-token cost L d^2
(8; exact HTA scales with L d^3: 16). No timed asserts.
Run from the repository root: .venv/bin/python benchmarks/bench_paper_scale.py [--threads N]
"""

from __future__ import annotations

import argparse

import torch

import helpers
from bench_attribution import best_of, exact_flops
from bench_hta_rates import BERT_SENTENCE, best_rate, matmul_rate
from helpers.book.chapters import work_scale
from helpers.drivers.finetuning import PairClassifier, _batch
from helpers.drivers.timing import timed
from helpers.model.mpnet_weights import MPNET_MODEL

MEASURES = ["attention", "attention_norm", "globenc", "alti", "value_zeroing", "grad_input", "hta"]


def steps(name: str) -> dict:
    """Seconds of each heavy step, and the HTA rate over the matrix-product rate, for model ``name``."""
    model, tokenizer = helpers.load_model(name)
    arch = helpers.describe(model)
    pairs = helpers.load_corpus("pairs")
    encoding = helpers.encode(tokenizer, BERT_SENTENCE, model=model)
    n = encoding["input_ids"].shape[1]
    rate = matmul_rate()
    t_hta = min(timed(helpers.hidden_token_attribution, model, encoding, progress=False)[0] for _ in range(2))
    rate = best_rate(rate)
    flops = exact_flops(n, arch.d, model.config.intermediate_size, arch.num_layers)
    t_sweep = timed(helpers.effective_attention_sweep, model, tokenizer, pairs[:4], progress=False)[0]
    pair = helpers.encode(tokenizer, pairs[0].text_a, pairs[0].text_b, model=model)
    options = [
        m if m != "hta" else ("hta", {"estimator": "estimate", "samples": 8, "progress": False}) for m in MEASURES
    ]
    t_mixing = timed(helpers.context_mixing, model, pair, options)[0]
    classifier = PairClassifier(model, 2).train()
    batch = _batch(tokenizer, pairs[:8], "cpu")
    targets = torch.tensor([int(e.label) for e in pairs[:8]])

    def step():
        classifier.zero_grad()
        torch.nn.functional.cross_entropy(classifier(**batch), targets).backward()

    t_step = best_of(3, step)
    return {
        "model": model,
        "exact HTA, 22 tokens": t_hta,
        "rate": flops / t_hta / rate,
        "effective-attention sweep, 4 pairs": t_sweep,
        "every mixing measure, 1 pair": t_mixing,
        "fine-tuning step, 8 pairs": t_step,
        "tokens": n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch CPU threads")
    args = parser.parse_args()
    helpers.setup_notebook(seed=0, threads=args.threads)
    torch.set_num_threads(args.threads)
    small, large = steps(helpers.model.loading.DEFAULT_MODEL), steps(MPNET_MODEL)
    cost, cost_hta = work_scale(large["model"]), work_scale(large["model"], power=3)
    print(f"{args.threads} thread(s); MPNet over MiniLM per token: L d^2 x{cost:.0f}, L d^3 x{cost_hta:.0f}\n")
    print(f"{'step':38s} {'MiniLM':>9s} {'MPNet':>9s} {'ratio':>7s}")
    for key in ("exact HTA, 22 tokens", "effective-attention sweep, 4 pairs", "every mixing measure, 1 pair"):
        print(f"{key:38s} {small[key]:8.2f}s {large[key]:8.2f}s {large[key] / small[key]:6.1f}x")
    key = "fine-tuning step, 8 pairs"
    print(f"{key:38s} {small[key]:8.2f}s {large[key]:8.2f}s {large[key] / small[key]:6.1f}x")
    print(
        f"\nexact HTA, achieved rate / matrix-product rate: MiniLM {small['rate']:.2f}, MPNet {large['rate']:.2f} "
        f"(MPNet over MiniLM: {large['rate'] / small['rate']:.2f})"
    )


if __name__ == "__main__":
    main()
