"""The paper-scale edition: the encoder chapters run again on all-mpnet-base-v2 (BERT-Base's shape).

Every encoder verdict of the book rests on its bundled encoder, all-MiniLM-L6-v2 (6 layers, d_v = 32).
The edition runs each chapter whose method applies to all-mpnet-base-v2 (MPNet: 12 layers, 12 heads,
d_v = 64, the paper's BERT-Base shape) with the chapter's own code: ``python -m helpers.book.paper_scale``
writes ``book/paper_scale/<chapter>.ipynb`` from ``book/<chapter>.ipynb`` (:func:`edition_notebook`:
the model fixed in the first cell, a note under the title, labels prefixed so that the two editions of
a figure do not collide, links pointed back at the chapters), ``make paper-scale`` executes them and
stamps each with its measured time and a fingerprint of its code and of the helpers
(:func:`fingerprint`); ``tests/test_paper_scale.py`` fails while an edition is stale.

The edition runs in report mode (``BOOK_CLAIMS=report``): a check written for the bundled model that
fails on MPNet is marked in its scoreboard, and the report lists it, rather than stopping the page.

Every encoder chapter (1-8) is in the edition; a chapter whose needs (``CHAPTER_NEEDS``) MPNet did not
meet would be listed by :func:`refused_chapters` with the reason, and the report would say so.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import sys
from datetime import datetime
from pathlib import Path

from ..drivers.finetuning import FINE_TUNE_FAMILIES
from ..model.mpnet_weights import MPNET_MODEL
from .chapters import CHAPTER_NEEDS
from .remember import HEADING as REMEMBER_HEADING

__all__ = [
    "EDITION_MODEL",
    "EDITION_FOLDER",
    "MODEL_LINE",
    "edition_chapters",
    "refused_chapters",
    "edition_notebook",
    "fingerprint",
    "helpers_fingerprint",
    "code_fingerprint",
    "stamp",
    "measured_minutes",
]

EDITION_MODEL = MPNET_MODEL
EDITION_FOLDER = "paper_scale"  # under book/
# what the chapters' first cell says, and what the edition says instead
CHAPTER_MODEL_LINE = 'MODEL = os.environ.get("BOOK_MODEL")'
MODEL_LINE = (
    f'{CHAPTER_MODEL_LINE} or "{EDITION_MODEL}"  # the paper-scale edition (helpers.book.paper_scale)\n'
    "# a check that fails on this model is marked in the scoreboard, not fatal: the edition measures the model\n"
    'os.environ["BOOK_CLAIMS"] = "report"'
)
# what MPNet offers of the chapters' needs (helpers.book.chapters.NEEDS)
MPNET_OFFERS = frozenset(
    {"heads", "bidirectional", "encoder-internals"} | ({"fine-tuning"} if "mpnet" in FINE_TUNE_FAMILIES else set())
)
TIME_LINE = re.compile(r"^\*\*Time:\*\*.*?(?=\n\n|\Z)", re.S | re.M)
# the chapter's pointer to its edition, which the edition leaves out
POINTER = re.compile(r"^\*\*Paper scale:\*\*.*?(?:\n\n|\Z)", re.S | re.M)
HELPERS = Path(__file__).resolve().parents[1]


LIVE_EXPLORER = '<div class="explorer"'  # a cell holding one is left out of the edition


def edition_chapters() -> list[str]:
    """The chapters whose method applies to all-mpnet-base-v2, in book order."""
    return [c for c, needs in CHAPTER_NEEDS.items() if set(needs) <= MPNET_OFFERS]


def refused_chapters() -> dict[str, str]:
    """The encoder chapters the edition cannot run yet, each with the reason."""
    reasons = {
        "fine-tuning": f"fine_tune trains {', '.join(FINE_TUNE_FAMILIES)} only",
        "encoder-internals": "it needs a bare BERT or MPNet encoder",
    }
    return {
        c: "; ".join(reasons.get(need, need) for need in needs if need not in MPNET_OFFERS)
        for c, needs in CHAPTER_NEEDS.items()
        if "causal" not in needs and not set(needs) <= MPNET_OFFERS
    }


def _chapter_number(chapter: str) -> int:
    return int(chapter.split("_", 1)[0])


def _labels(notebook: dict, chapter: str) -> list[str]:
    """The chapter's own labels (figures, exercises): fig-<n>-..., ex-<nn>-..."""
    n = _chapter_number(chapter)
    pattern = re.compile(rf"\b(?:fig-{n}|ex-{n:02d})-[a-z0-9-]+")
    found = set()
    for cell in notebook["cells"]:
        found.update(pattern.findall("".join(cell["source"])))
        found.update(pattern.findall(json.dumps(cell.get("metadata", {}))))
    return sorted(found, key=len, reverse=True)


def _relabel(text: str, labels: list[str]) -> str:
    for label in labels:
        text = re.sub(rf"(?<![\w-]){re.escape(label)}(?![\w-])", f"ps-{label}", text)
    return text


def _relink(text: str) -> str:
    """Links to other pages point at the chapters (one folder up); drawings too."""
    text = re.sub(r"\{doc\}`([^`<]*?)<(?!\.\./)([^`>]+)>`", r"{doc}`\1<../\2>`", text)
    text = re.sub(r"\{doc\}`(?!\.\./)([^`<]+)`", r"{doc}`../\1`", text)
    return re.sub(r"(```\{figure\} )(diagrams/)", r"\1../\2", text)


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def edition_notebook(chapter_notebook: dict, chapter: str) -> dict:
    """The edition of one chapter (a notebook dict): the same cells, on all-mpnet-base-v2.

    Code cells keep their source but for the first cell's model line; markdown gets the relabelled
    figures and exercises, links one folder up, a note under the title, and a time line that
    :func:`stamp` fills in after the run. Outputs are dropped (``make paper-scale`` executes it).
    """
    if chapter not in edition_chapters():
        why = refused_chapters().get(chapter, "the edition runs the encoder chapters")
        raise ValueError(f"{chapter} is not in the paper-scale edition: {why}")
    notebook = copy.deepcopy(chapter_notebook)
    # a live explorer draws the bundled model's precomputed numbers (book/explorers/): not this edition's model
    notebook["cells"] = [
        c for c in notebook["cells"] if c["cell_type"] != "markdown" or LIVE_EXPLORER not in "".join(c["source"])
    ]
    labels = _labels(notebook, chapter)
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    first = "".join(code[0]["source"])
    if first.count(CHAPTER_MODEL_LINE) != 1:
        raise ValueError(f"{chapter}: the first code cell has no line {CHAPTER_MODEL_LINE!r} to fix the model in")
    first = re.sub(r"# None: the chapter's bundled default[^\n]*\n(?=" + re.escape(CHAPTER_MODEL_LINE) + ")", "", first)
    code[0]["source"] = _lines(first.replace(CHAPTER_MODEL_LINE, MODEL_LINE))
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            cell["metadata"] = json.loads(_relabel(json.dumps(cell.get("metadata", {})), labels))
            cell["metadata"].pop("execution", None)
        else:
            cell["source"] = _lines(_relink(_relabel("".join(cell["source"]), labels)))
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown" and REMEMBER_HEADING in "".join(cell["source"]):
            cell["source"] = _lines(_remember_pointer("".join(cell["source"]), chapter))
    title_cell = next(c for c in notebook["cells"] if c["cell_type"] == "markdown")
    text = "".join(title_cell["source"])
    title, _, rest = text.partition("\n")
    if not title.startswith("# "):
        raise ValueError(f"{chapter}: the first markdown cell does not open with the chapter's title")
    note = (
        f"\n```{{note}}\nThe paper-scale edition of {{doc}}`../{chapter}`: the chapter's code and prose, run on "
        f"{EDITION_MODEL} (MPNet: 12 layers, 12 heads of size $d_v = 64$, BERT-Base's shape) instead of the "
        "bundled all-MiniLM-L6-v2. Every number, figure and verdict on this page is this model's, computed "
        "and glued in by this run; sentences that name the bundled model describe that model, not this one. "
        "The reproduction report sets the two verdicts of each claim side by side. MPNet adds a relative-position "
        "bias to its attention logits before the softmax; it is fixed (the same whatever the queries and keys), "
        "so the keys tests of chapters 3 and 4 subtract it before taking the rank of the centred log, and the "
        "search for producible alternatives adds it to the logits it builds.\n```\n"
    )
    text = f"{title} (paper scale)\n{note}{POINTER.sub('', rest)}"
    text = TIME_LINE.sub("**Time:** not yet measured (make paper-scale stamps it).", text, count=1)
    title_cell["source"] = _lines(text)
    notebook.setdefault("metadata", {})["book"] = {"edition": "paper-scale", "chapter": chapter, "model": EDITION_MODEL}
    return notebook


def _remember_pointer(text: str, chapter: str) -> str:
    """``text`` with its "What to remember" bullets replaced by a pointer: they state the bundled model's
    verdicts (``helpers.book.remember``), which this model need not share."""
    head, _, section = text.partition(REMEMBER_HEADING)
    following = re.search(r"^#{1,6} ", section, re.M)
    rest = section[following.start() :] if following else ""
    pointer = (
        f"{REMEMBER_HEADING}\n\nThe chapter's summary ({{doc}}`../{chapter}`, its last section) states the "
        f"verdicts of the bundled all-MiniLM-L6-v2. This model's verdicts are in the scoreboard below, and the "
        "reproduction report sets the two side by side.\n"
    )
    return head + pointer + ("\n" + rest if rest else "")


def code_fingerprint(notebook: dict) -> str:
    """sha256 of a notebook's code cells' sources, in order (what a run computes from)."""
    digest = hashlib.sha256()
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            digest.update("".join(cell["source"]).encode() + b"\0")
    return digest.hexdigest()


NOT_IMPORTED_BY_A_RUN = ("book/colab.py", "book/colab_install.py", "book/colab_text.py")
"""The writers of the Colab editions: no chapter imports them, so a change to them leaves a run's results as
they were and does not stale an edition page."""


def helpers_fingerprint(root: Path = HELPERS) -> str:
    """sha256 of the helpers a run imports: every .py, .yaml, .jsonl and .txt file under ``root`` by path
    (but ``NOT_IMPORTED_BY_A_RUN``)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".yaml", ".jsonl", ".txt")):
        if "__pycache__" in path.parts or path.relative_to(root).as_posix() in NOT_IMPORTED_BY_A_RUN:
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def fingerprint(notebook: dict) -> dict:
    """What an executed edition records: its model, its code's and the helpers' fingerprints."""
    return {"model": EDITION_MODEL, "code": code_fingerprint(notebook), "helpers": helpers_fingerprint()}


def measured_minutes(notebook: dict) -> float:
    """Minutes from the first cell's start to the last cell's end, from the cells' execution timestamps."""
    starts, ends = [], []
    for cell in notebook["cells"]:
        stamps = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in stamps:
            starts.append(stamps["iopub.execute_input"])
        if "shell.execute_reply" in stamps:
            ends.append(stamps["shell.execute_reply"])
    if not starts or not ends:
        raise ValueError("the notebook has no execution timestamps: execute it first")

    def moment(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    return (moment(max(ends)) - moment(min(starts))).total_seconds() / 60


def stamp(notebook: dict) -> dict:
    """An executed edition with its measured time in the title cell and its fingerprint in its metadata."""
    minutes = max(1, round(measured_minutes(notebook)))
    title_cell = next(c for c in notebook["cells"] if c["cell_type"] == "markdown")
    text = "".join(title_cell["source"])
    line = (
        f"**Time:** about {minutes} minute{'s' if minutes > 1 else ''} on 2 CPU cores for this edition (the "
        "committed run, from its cells' timestamps)."
    )
    text, count = TIME_LINE.subn(line, text, count=1)
    if count != 1:
        raise ValueError("the edition's title cell has no time line to stamp")
    title_cell["source"] = _lines(text)
    notebook["metadata"]["book"] = {**notebook["metadata"].get("book", {}), **fingerprint(notebook)}
    return notebook


def write_editions(book: Path) -> list[Path]:
    """Write book/paper_scale/<chapter>.ipynb for every edition chapter (unexecuted)."""
    folder = book / EDITION_FOLDER
    folder.mkdir(exist_ok=True)
    written = []
    for chapter in edition_chapters():
        source = json.loads((book / f"{chapter}.ipynb").read_text())
        path = folder / f"{chapter}.ipynb"
        path.write_text(json.dumps(edition_notebook(source, chapter), indent=1, ensure_ascii=False) + "\n")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.book.paper_scale [write|stamp NOTEBOOK...]``, run from the repository root."""
    argv = sys.argv[1:] if argv is None else argv
    book = Path("book")
    if not argv or argv[0] == "write":
        for path in write_editions(book):
            print(f"wrote {path}")
        return 0
    if argv[0] == "stamp":
        for name in argv[1:]:
            path = Path(name)
            notebook = stamp(json.loads(path.read_text()))
            path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
            print(f"stamped {path}: {measured_minutes(notebook):.1f} minutes")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
