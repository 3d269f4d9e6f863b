"""The book's own corpus (package data) and GLUE, in one record type.

* ``load_corpus("pairs")``: sentence pairs written for this book, paraphrase
  style like MRPC (label 1 = paraphrase), 5-60 words per sentence.
* ``load_corpus("passages")``: longer passages (100-400 tokens) for the
  length sweeps.
* ``load_glue("mrpc" | "cola" | "mnli", split)``: the paper's data, from a
  folder in the original GLUE layout (``MRPC/dev.tsv``...) or, where a hub is
  reachable, through the ``datasets`` package.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import NamedTuple

from .text import text_pair_of

CORPORA = {"pairs": "pairs.jsonl", "passages": "passages.jsonl"}
GLUE_TASKS = {
    # task: (hub config, GLUE folder, first text column, second text column or None)
    "mrpc": ("mrpc", "MRPC", "sentence1", "sentence2"),
    "cola": ("cola", "CoLA", "sentence", None),
    "mnli": ("mnli", "MNLI", "premise", "hypothesis"),
}
GLUE_FILES = {
    "train": "train.tsv",
    "validation": "dev.tsv",
    "validation_matched": "dev_matched.tsv",
    "validation_mismatched": "dev_mismatched.tsv",
    "test": "test.tsv",
}


class DataUnavailableError(RuntimeError):
    """The requested data set is not on disk and cannot be fetched."""


@dataclass(frozen=True)
class Example:
    """One text or text pair. ``source`` says where it came from (shown under figures)."""

    id: str
    text_a: str
    text_b: str | None
    label: int | None
    source: str
    topic: str | None = None


class Split(NamedTuple):
    """A train / test split (of records, or of hidden tokens), disjoint by sequence."""

    train: object
    test: object


def load_corpus(kind: str = "pairs") -> list[Example]:
    """The corpus shipped with the helpers: ``"pairs"`` or ``"passages"``."""
    if kind not in CORPORA:
        raise ValueError(f"Unknown corpus {kind!r}; choose one of {sorted(CORPORA)}.")
    text = resources.files("helpers").joinpath("corpus", CORPORA[kind]).read_text(encoding="utf-8")
    examples = []
    for line in text.splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        examples.append(
            Example(
                id=row["id"],
                text_a=row.get("text_a", row.get("text")),
                text_b=row.get("text_b"),
                label=row.get("label"),
                source=f"book corpus ({kind})",
                topic=row.get("topic"),
            )
        )
    return examples


def load_glue(task: str = "mrpc", split: str = "validation", data_dir: str | Path | None = None) -> list[Example]:
    """GLUE MRPC, CoLA or MNLI as ``Example`` records.

    Args:
        task: ``"mrpc"``, ``"cola"`` or ``"mnli"``.
        split: ``"train"``, ``"validation"`` (MNLI: ``"validation_matched"``), ``"test"``.
        data_dir: a folder in the original GLUE layout (``MRPC/dev.tsv`` ...);
            if ``None``, the ``datasets`` package fetches ``nyu-mll/glue``.

    Raises:
        DataUnavailableError: no such file, or the hub cannot be reached.
    """
    task = task.lower()
    if task not in GLUE_TASKS:
        raise ValueError(f"Unknown GLUE task {task!r}; choose one of {sorted(GLUE_TASKS)}.")
    if split not in GLUE_FILES:
        raise ValueError(f"Unknown split {split!r}; choose one of {sorted(GLUE_FILES)}.")
    if data_dir is not None:
        return _read_glue_tsv(task, split, Path(data_dir))
    return _load_glue_from_hub(task, split)


def _read_glue_tsv(task: str, split: str, data_dir: Path) -> list[Example]:
    folder = GLUE_TASKS[task][1]
    path = data_dir / folder / GLUE_FILES[split]
    if not path.is_file():
        raise DataUnavailableError(
            f"No GLUE file at {path}; expected the original GLUE layout {folder}/{GLUE_FILES[split]}."
        )
    source = f"GLUE {task.upper()} ({split})"
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    examples = []
    if task == "cola":  # no header: source, label, original label, sentence
        for index, row in enumerate(rows):
            if len(row) < 4:
                raise ValueError(f"{path}, line {index + 1}: expected 4 tab-separated columns, got {len(row)}.")
            examples.append(Example(f"cola-{split}-{index}", row[3], None, int(row[1]), source))
        return examples
    header, body = rows[0], rows[1:]
    if task == "mrpc":  # Quality, #1 ID, #2 ID, #1 String, #2 String
        for index, row in enumerate(body):
            if len(row) != 5:
                raise ValueError(f"{path}, line {index + 2}: expected 5 tab-separated columns, got {len(row)}.")
            label = int(row[0]) if row[0] in ("0", "1") else None
            examples.append(Example(f"mrpc-{split}-{index}", row[3], row[4], label, source))
        return examples
    columns = {name: i for i, name in enumerate(header)}  # mnli
    for required in ("sentence1", "sentence2"):
        if required not in columns:
            raise ValueError(f"{path}: the header has no {required!r} column.")
    names = ["entailment", "neutral", "contradiction"]
    for index, row in enumerate(body):
        gold = row[columns["gold_label"]] if "gold_label" in columns else None
        examples.append(
            Example(
                f"mnli-{split}-{index}",
                row[columns["sentence1"]],
                row[columns["sentence2"]],
                names.index(gold) if gold in names else None,
                source,
            )
        )
    return examples


def _load_glue_from_hub(task: str, split: str) -> list[Example]:
    try:
        import datasets
    except ImportError as err:
        raise DataUnavailableError(
            "Loading GLUE from the hub needs the 'datasets' package: pip install datasets"
        ) from err
    config, _, first, second = GLUE_TASKS[task]
    try:
        rows = datasets.load_dataset("nyu-mll/glue", config, split=split)
    except Exception as err:  # datasets raises many types when offline
        raise DataUnavailableError(
            f"Could not fetch GLUE {task.upper()} ({split}) from the hub: {type(err).__name__}. "
            "Offline, use the book's corpus, load_corpus('pairs'), or pass data_dir= a folder "
            "with the GLUE files."
        ) from err
    return [
        Example(
            f"{task}-{split}-{row['idx']}",
            row[first],
            row[second] if second else None,
            row["label"] if row["label"] >= 0 else None,
            f"GLUE {task.upper()} ({split})",
        )
        for row in rows
    ]


def check_records(examples) -> list:
    """The records of a corpus as a list: Examples, strings or (text, text_pair) tuples; never one bare text."""
    if isinstance(examples, (str, tuple)) or hasattr(examples, "text_a"):
        raise TypeError("examples must be a list of records (Examples, strings or pairs); wrap a single one in a list.")
    records = list(examples)
    if not records:
        raise ValueError("No examples given: pass at least one record.")
    for index, record in enumerate(records):
        text_pair_of(record, index)  # a clear error for a bad record before any model runs
    return records
