"""Write the data of the book's live explorers: ``make explorers`` (or ``python book/explorers/build.py [out_dir]``).

The pages of chapters 3 and 4 draw these files in the browser (``_static/explorer.js``), without
a kernel. They are computed here with the bundled model through the helpers
(:mod:`helpers.book.explorers`) and committed under ``_static/explorers/`` (default ``out_dir``);
``tests/test_explorers.py`` recomputes them into a temporary folder and fails when a committed
file differs by more than rounding.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import helpers
from helpers.book import explorers

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "_static" / "explorers"
EFFECTIVE = "effective_attention.json"  # the index: which texts, and the file of each
EFFECTIVE_TEXT = "effective_attention_{k}.json"  # one text's maps (k = 1, 2, ...), loaded when chosen
NULL_SPACE = "null_space.json"
# chapter 4's exercise sentence (shorter than d_v: no null space), then prefixes longer than d_v
SHORT_TEXT = "The dog slept by the warm fire all afternoon."
PREFIX_LENGTHS = (40, 48)


def effective_attention_data(model, tokenizer) -> list[dict]:
    """Chapter 4: one sentence shorter than d_v and the first tokens of two passages longer than it,
    one record each (:func:`helpers.book.explorers.attention_split_record`)."""
    d_v = helpers.describe(model).d_v
    passages = helpers.load_corpus("passages")
    encodings = {
        p.id: helpers.encode(tokenizer, p.text_a, model=model)
        for p in passages
    }
    # chapter 4's passage (the shortest longer than 3 d_v tokens) and chapter 3's (the first one)
    long_enough = [
        p
        for p in passages
        if encodings[p.id]["input_ids"].shape[1] > 3 * d_v
    ]
    chosen = [
        min(
            long_enough,
            key=lambda p: encodings[p.id]["input_ids"].shape[1],
        ),
        long_enough[0],
    ]
    texts = [
        (
            "{n} tokens: a sentence shorter than d_v",
            helpers.encode(tokenizer, SHORT_TEXT, model=model),
        )
    ]
    for passage, length in zip(chosen, PREFIX_LENGTHS, strict=True):
        encoding = helpers.model.text.prefix_encoding(
            encodings[passage.id], length
        )
        texts.append(
            (f"the first {{n}} tokens of {passage.id}", encoding)
        )
    return [
        explorers.attention_split_record(
            model,
            tokenizer,
            encoding,
            label.format(n=encoding["input_ids"].shape[1]),
        )
        for label, encoding in texts
    ]


def null_space_data(model, tokenizer) -> dict:
    """Chapter 3: head 1 of the middle layer on the first 3 d_v tokens of the first long passage,
    the chapter's explorer (two directions, seed 0), and the two rows that move most."""
    architecture = helpers.describe(model)
    d_v, L, h = (
        architecture.d_v,
        architecture.num_layers,
        architecture.heads,
    )
    n_input = 3 * d_v
    passages = helpers.load_corpus("passages")
    encodings = [
        helpers.encode(tokenizer, p.text_a, model=model) for p in passages
    ]
    chosen = next(
        k
        for k, enc in enumerate(encodings)
        if enc["input_ids"].shape[-1] > n_input
    )
    encoding = helpers.model.text.prefix_encoding(
        encodings[chosen], n_input
    )
    tokens = helpers.tokens_of(tokenizer, encoding)
    internals = helpers.capture(model, encoding)
    layer, head = (L + 1) // 2, 1
    li, hi = (
        helpers.model.numbering.layer_index(layer, L),
        helpers.model.numbering.head_index(head, h),
    )
    explorer = helpers.NullSpaceExplorer(
        internals.A[li, hi],
        internals.T[li, hi],
        tokens,
        directions=2,
        seed=0,
    )
    # how far each row moves with both sliders at their right ends
    moved = (
        (
            explorer.alternative([s.max for s in explorer.sliders])
            - explorer.A
        )
        .abs()
        .amax(dim=1)
    )
    rows = sorted(torch.topk(moved, 2).indices.tolist())
    label = f"layer {layer}, head {head}, on the first {n_input} tokens of {passages[chosen].id}"
    return {
        "model": architecture.name,
        **explorers.null_space_rows_record(explorer, rows, tokens, label),
    }


def build(out_dir: Path = OUT_DIR) -> list[Path]:
    """Compute both explorers' data and write it into ``out_dir``; returns the files written."""
    # small per-head matrix operations: one thread is fastest
    torch.set_num_threads(1)
    model, tokenizer = helpers.load_model()
    out_dir = Path(out_dir)
    records = effective_attention_data(model, tokenizer)
    files = [
        EFFECTIVE_TEXT.format(k=k) for k in range(1, len(records) + 1)
    ]
    index = {
        "model": helpers.describe(model).name,
        "d_v": helpers.describe(model).d_v,
        "scale": explorers.SCALE,
        "texts": [
            {"label": r["label"], "n": len(r["tokens"]), "file": f}
            for r, f in zip(records, files, strict=True)
        ],
    }
    written = [explorers.write_json(index, out_dir / EFFECTIVE)]
    written += [
        explorers.write_json(r, out_dir / f)
        for r, f in zip(records, files, strict=True)
    ]
    return written + [
        explorers.write_json(
            null_space_data(model, tokenizer), out_dir / NULL_SPACE
        )
    ]


if __name__ == "__main__":
    for path in build(
        Path(sys.argv[1]) if len(sys.argv) > 1 else OUT_DIR
    ):
        print(f"{path} ({path.stat().st_size / 1e3:.0f} kB)")
