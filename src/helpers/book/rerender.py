"""Re-render committed scoreboards from the records they carry, without executing the notebooks.

Every chapter's last output carries its claims record (``records.CLAIMS_MIME`` in the output's
metadata). :func:`rerender_notebook` rebuilds the scoreboard from that record exactly as
``Claims.enforce`` builds it and puts its text/plain and text/html in place of the committed
ones; the record itself is left as it is. Run after a change to how a scoreboard reads::

    python -m helpers.book.rerender book/0*.ipynb
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .records import CLAIMS_MIME
from .scoreboard import Scoreboard

__all__ = ["scoreboard_of", "rendered_outputs", "rerender_notebook", "main"]


def scoreboard_of(record: dict) -> Scoreboard:
    """The scoreboard ``Claims.enforce`` returns for the chapter whose record is ``record`` (the book's registry)."""
    return Scoreboard.of_record(record)


def rendered_outputs(record: dict) -> dict[str, list[str]]:
    """The scoreboard's text/plain and text/html as a saved notebook holds them (lists of lines)."""
    data = scoreboard_of(record)._repr_mimebundle_()[0]
    return {mime: text.splitlines(keepends=True) for mime, text in data.items()}


def scoreboard_outputs(notebook: dict) -> list[dict]:
    """The outputs of ``notebook`` (parsed JSON) that carry a claims record."""
    return [
        output
        for cell in notebook["cells"]
        for output in cell.get("outputs", [])
        if output.get("metadata", {}).get(CLAIMS_MIME)
    ]


def notebook_text(notebook: dict) -> str:
    """``notebook`` as Jupyter writes it (one-space indent, sorted keys, characters unescaped)."""
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def rerender_notebook(path: str | Path, write: bool = True) -> int:
    """Re-render every scoreboard output of the notebook at ``path``; returns how many changed.

    With ``write`` the notebook is saved again when one did (and only then)."""
    path = Path(path)
    notebook = json.loads(path.read_text(encoding="utf-8"))
    changed = 0
    for output in scoreboard_outputs(notebook):
        fresh = rendered_outputs(output["metadata"][CLAIMS_MIME])
        if any(output["data"].get(mime) != lines for mime, lines in fresh.items()):
            output["data"].update(fresh)
            changed += 1
    if changed and write:
        path.write_text(notebook_text(notebook), encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.book.rerender [--check] NOTEBOOK...``: re-render (or, with ``--check``, only
    count) the scoreboards that differ from their record's rendering; --check exits 1 when any does."""
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    notebooks = [a for a in args if a != "--check"]
    stale = 0
    for notebook in notebooks:
        changed = rerender_notebook(notebook, write=not check)
        stale += changed
        print(f"{notebook}: {changed} scoreboard output(s) {'differ' if check else 're-rendered'}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
