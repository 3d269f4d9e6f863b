"""Progress bars (helpers.model.progress): on by default, off with BOOK_PROGRESS=0, and every bar goes through it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from tqdm.auto import tqdm

from helpers.model import progress

HELPERS = Path(progress.__file__).resolve().parents[1]
# model/decoder.py silences transformers' own tqdm while it reads the GGUF file: not a bar of ours
TQDM_ALLOWED = {"model/progress.py", "model/decoder.py"}


def test_a_bar_by_default(monkeypatch):
    monkeypatch.delenv(progress.ENVIRONMENT_VARIABLE, raising=False)
    bar = progress.progress_bar(range(3), "counting")
    assert isinstance(bar, tqdm) and bar.desc.startswith("counting")
    assert list(bar) == [0, 1, 2]


@pytest.mark.parametrize("value, asked, shown", [("0", True, False), ("1", True, True), ("1", False, False)])
def test_the_variable_and_the_argument_turn_bars_off(monkeypatch, value, asked, shown):
    monkeypatch.setenv(progress.ENVIRONMENT_VARIABLE, value)
    items = [1, 2]
    bar = progress.progress_bar(items, "items", asked)
    assert progress.bars_on(asked) is shown
    assert (bar is items) is not shown
    assert list(bar) == items


def test_the_book_runs_without_bars():
    # tests/conftest.py sets it for the notebook kernels pytest starts (the committed outputs hold no bars)
    import os

    assert os.environ.get(progress.ENVIRONMENT_VARIABLE) == "0"


def test_every_bar_of_the_helpers_goes_through_progress_bar():
    direct = []
    for path in sorted(HELPERS.rglob("*.py")):
        name = path.relative_to(HELPERS).as_posix()
        if name in TQDM_ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tqdm"):
                direct.append(f"{name}:{node.lineno}")
            elif isinstance(node, ast.Import) and any(a.name.startswith("tqdm") for a in node.names):
                direct.append(f"{name}:{node.lineno}")
    assert not direct, f"tqdm imported outside helpers.model.progress (a bar BOOK_PROGRESS=0 cannot turn off): {direct}"


def test_a_step_bar_counts_and_turns_off(monkeypatch):
    monkeypatch.delenv(progress.ENVIRONMENT_VARIABLE, raising=False)
    bar = progress.step_bar(4, "steps")
    bar.update(3)
    assert bar.n == 3 and bar.total == 4
    bar.close()
    monkeypatch.setenv(progress.ENVIRONMENT_VARIABLE, "0")
    assert progress.step_bar(4, "steps") is None


BOOK = HELPERS.parents[1] / "book"
BAR_TEXT = ("it/s]", "s/it]", "%|")


@pytest.mark.parametrize(
    "notebook", sorted(BOOK.glob("*.ipynb")) + sorted(BOOK.glob("paper_scale/*.ipynb")), ids=lambda p: p.stem
)
def test_no_committed_output_holds_a_progress_bar(notebook):
    """A bar saved into a page (ours, or transformers' weight-loading bar) is noise before the reader's first figure."""
    import json

    for cell in json.loads(notebook.read_text())["cells"]:
        for output in cell.get("outputs", []):
            text = "".join(output.get("text", "")) + "".join(output.get("data", {}).get("text/plain", ""))
            assert not any(mark in text for mark in BAR_TEXT), (
                f"{notebook.name}: a progress bar in an output: {text[:80]!r}"
            )
