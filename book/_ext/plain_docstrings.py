"""Let autodoc read the helpers' plain-text docstrings without reStructuredText surprises.

The helpers' docstrings are written for ``help()`` and an editor: they use
``|x|`` for absolute values and norms, and indent formulas under a sentence
ending with a colon. Read as reStructuredText, the first is a substitution
reference and the second a block quote, and both are warnings (errors under
``--warningiserror``). Before napoleon reads a docstring, this extension

* escapes every ``|`` outside backtick spans, so ``|A T|`` stays text;
* turns a line ending in ``:`` that introduces an indented block into one
  ending in ``::``, so the block is shown verbatim (napoleon section headers
  such as ``Args:`` are left alone).

It also lets autodoc show module constants such as ``DEFAULT_MODEL``.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from sphinx.ext.autodoc import DataDocumenter, ModuleDocumenter

NAPOLEON_SECTIONS = {
    "args",
    "arguments",
    "attention",
    "attributes",
    "caution",
    "danger",
    "error",
    "example",
    "examples",
    "hint",
    "important",
    "keyword args",
    "keyword arguments",
    "kwargs",
    "methods",
    "note",
    "notes",
    "other parameters",
    "parameters",
    "receive",
    "receives",
    "return",
    "returns",
    "raise",
    "raises",
    "references",
    "see also",
    "tip",
    "todo",
    "warning",
    "warnings",
    "warn",
    "warns",
    "yield",
    "yields",
}

_BACKTICK_SPAN = re.compile(r"(``.*?``|`[^`]*`)")


def escape_bars(line: str) -> str:
    """Escape ``|`` outside backtick spans: ``|x|`` -> ``\\|x\\|``."""
    parts = _BACKTICK_SPAN.split(line)
    return "".join(
        part if i % 2 else part.replace("|", r"\|")
        for i, part in enumerate(parts)
    )


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def literal_blocks(lines: list[str]) -> list[str]:
    """End with ``::`` every prose line that a more indented block follows (after blank lines)."""
    out = list(lines)
    for i, line in enumerate(lines):
        text = line.strip()
        if (
            not text.endswith(":")
            or text.endswith("::")
            or text.lower().rstrip(":") in NAPOLEON_SECTIONS
        ):
            continue
        if text.startswith(":") or text.startswith(
            ".."
        ):  # a field list or directive, already RST
            continue
        following = [
            j for j in range(i + 1, len(lines)) if lines[j].strip()
        ]
        if not following or following[0] == i + 1:
            continue  # no blank line before the next text: not a block
        if _indent(lines[following[0]]) > _indent(line):
            out[i] = line + ":"
    return out


def process_docstring(
    app, what, name, obj, options, lines: list[str]
) -> None:
    fixed = literal_blocks(lines)
    in_literal = False
    block_indent = 0
    for i, line in enumerate(fixed):
        if in_literal and line.strip() and _indent(line) <= block_indent:
            in_literal = False
        if not in_literal:
            fixed[i] = escape_bars(line)
        if line.rstrip().endswith("::"):
            in_literal, block_indent = True, _indent(line)
    lines[:] = fixed


@functools.cache
def _assigned_at_top_level(modname: str) -> frozenset[str]:
    import ast
    import importlib

    source = Path(importlib.import_module(modname).__file__).read_text()
    names: set[str] = set()
    for node in ast.parse(source).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


class ModuleDataDocumenter(DataDocumenter):
    """Module constants (``DEFAULT_MODEL = "..."``) assigned in the module itself are its own.

    Autodoc's own check compares ``value.__module__`` with the module, which for
    a ``str`` or ``tuple`` is ``builtins``, and it only takes data that has a
    doc comment, so undocumented constants never show.
    """

    priority = DataDocumenter.priority + 1

    @classmethod
    def can_document_member(
        cls, member, membername, isattr, parent
    ) -> bool:
        if not isinstance(parent, ModuleDocumenter):
            return False
        try:
            return isattr or membername in _assigned_at_top_level(
                parent.modname
            )
        except Exception:
            return isattr

    def get_doc(self) -> list[list[str]] | None:
        # An undocumented constant would otherwise show its type's docstring (dict, tuple ...).
        if (
            not self.get_module_comment(self.objpath[-1])
            and self.object.__doc__ == type(self.object).__doc__
        ):
            return []
        return super().get_doc()

    def check_module(self) -> bool:
        try:
            return self.objpath[-1] in _assigned_at_top_level(
                self.modname
            )
        except Exception:
            return super().check_module()


def setup(app):
    # Priority below napoleon's default (500): run on the docstring as written.
    app.connect(
        "autodoc-process-docstring", process_docstring, priority=400
    )
    app.add_autodocumenter(ModuleDataDocumenter, override=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
