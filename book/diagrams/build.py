"""Draw every diagram of the book: ``make diagrams`` (or ``python book/diagrams/build.py [out_dir]``).

Each drawing is one module beside this file with ``NAME``, ``CAPTION`` and ``draw() -> Figure``;
it is written to ``<out_dir>/<NAME>.svg`` (default: this folder), the same bytes on every run.
``tests/test_diagrams.py`` redraws them into a temporary folder and fails when a committed SVG
differs (a drawing changed without ``make diagrams``).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DRAWINGS = [
    "t_per_head",
    "rank_example",
    "simplex_slice",
    "effective_projection",
    "hta_jacobian",
    "sink_null",
]


def load(name: str):
    """The drawing module ``name`` (this folder on the import path)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    return importlib.import_module(name)


def build(out_dir: Path = HERE) -> list[Path]:
    """Draw every diagram into ``out_dir``; returns the files written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in DRAWINGS:
        module = load(name)
        written.append(
            load("drawing").save(
                module.draw(), out_dir / f"{module.NAME}.svg"
            )
        )
    return written


if __name__ == "__main__":
    for path in build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(path)
