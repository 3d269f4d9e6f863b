"""The exercise tests' one reader of a chapter: its cells tagged ``exercise-solution``."""

from __future__ import annotations

from pathlib import Path

import nbformat

BOOK = Path(__file__).resolve().parents[1] / "book"


def solution_cells(chapter: str) -> list[str]:
    """The source of every code cell tagged ``exercise-solution`` in ``book/<chapter>.ipynb``."""
    cells = nbformat.read(BOOK / f"{chapter}.ipynb", as_version=4).cells
    return [c.source for c in cells if c.cell_type == "code" and "exercise-solution" in c.metadata.get("tags", [])]


def run_solution(source: str) -> dict:
    """Run one solution cell on its own (as a reader would run it) and return its namespace."""
    import helpers

    namespace = {"helpers": helpers}
    exec(compile(source, "exercise-solution", "exec"), namespace)
    return namespace
