"""Exact attainable ranges of attention weights: the warm-started path vs two HiGHS LPs per weight.

One real head (layer 3, head 1) of a 64-token prefix of the first passage. Prints the
time ratio measured in this run and the largest disagreement between the two paths.
"""

import time

import torch

import helpers

torch.set_num_threads(1)  # many tiny LPs: one thread is fastest
helpers.setup_notebook(seed=0)
model, tokenizer = helpers.load_model()
passage = helpers.load_corpus("passages")[0]
encoding = helpers.model.text.prefix_encoding(helpers.encode(tokenizer, passage.text_a, model=model), 64)
internals = helpers.capture(model, encoding)
A, T = internals.A[2, 0], internals.T[2, 0]

start = time.perf_counter()
fast = helpers.attention_bounds(A, T, progress=False)
fast_seconds = time.perf_counter() - start
start = time.perf_counter()
brute = helpers.attention_bounds(A, T, solver="highs", progress=False)
brute_seconds = time.perf_counter() - start

difference = max((fast.lower - brute.lower).abs().max(), (fast.upper - brute.upper).abs().max())
print(f"LP bounds, one head, n = {internals.n} ({internals.n**2} weights, {2 * internals.n**2} LPs by brute force)")
print(f"  two HiGHS LPs per weight / warm-started exact path: time ratio {brute_seconds / fast_seconds:.1f}x")
print(f"  max |difference| between the two paths: {float(difference):.1e}")
