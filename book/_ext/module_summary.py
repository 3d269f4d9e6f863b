"""``.. module-summary:: helpers.methods.mixing``: one line per public name, linked to its entry.

The API page puts this table before each module's ``automodule``, so a reader
scans the names and their one-line summaries first and opens the docstring they
need. The names are the module's ``__all__`` (its defined public names when it
has none); the line is the first line of each docstring (its first paragraph when a
literal runs on).
"""

from __future__ import annotations

import importlib
import inspect

from docutils.parsers.rst import Directive
from docutils.statemachine import StringList


def summary_line(obj) -> str:
    """The first line of ``obj``'s own docstring (not one inherited from a type), or ""."""
    if inspect.ismodule(obj) or not (
        callable(obj) or inspect.isclass(obj)
    ):
        return ""
    doc = (inspect.getdoc(obj) or "").strip()
    if not doc:
        return ""
    first = doc.splitlines()[0].strip()
    if first.count("``") % 2 == 0:
        return first
    return " ".join(
        line.strip() for line in doc.split("\n\n")[0].splitlines()
    )  # a literal spans lines


def public_names(module) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n
            for n, v in vars(module).items()
            if not n.startswith("_")
            and getattr(v, "__module__", None) == module.__name__
        ]
    return list(names)


class ModuleSummary(Directive):
    required_arguments = 1

    def run(self):
        module = importlib.import_module(self.arguments[0])
        lines = [
            ".. list-table::",
            "   :widths: 32 68",
            "   :class: module-summary",
            "",
        ]
        for name in public_names(module):
            obj = getattr(module, name, None)
            role = (
                "py:class"
                if inspect.isclass(obj)
                else "py:func"
                if callable(obj)
                else "py:data"
            )
            text = summary_line(obj).replace("|", "\\|") or " "
            lines += [
                f"   * - :{role}:`~{module.__name__}.{name}`",
                f"     - {text}",
            ]
        if len(lines) == 4:
            return []
        container = StringList(lines, source=self.arguments[0])
        from docutils import nodes

        holder = nodes.section()
        holder.document = self.state.document
        self.state.nested_parse(container, 0, holder)
        return holder.children


DASH = "\u2014"


class SupportTable(Directive):
    """``.. support-table::``: ``helpers.book.support.SUPPORT`` as a table, each name linked to its entry."""

    def run(self):
        import helpers
        from helpers.book.support import SUPPORT

        lines = [
            ".. list-table::",
            "   :header-rows: 1",
            "   :widths: 30 14 56",
            "   :class: module-summary",
            "",
        ]
        lines += [
            "   * - function",
            "     - applies to",
            "     - with the other kind",
        ]
        for name, (applies, note) in SUPPORT.items():
            obj = getattr(helpers, name)
            role = "class" if inspect.isclass(obj) else "func"
            lines += [
                f"   * - :py:{role}:`helpers.{name} <{obj.__module__}.{name}>`",
                f"     - {applies}",
                f"     - {note or DASH}",
            ]
        from docutils import nodes

        holder = nodes.section()
        holder.document = self.state.document
        self.state.nested_parse(
            StringList(lines, source="helpers.book.support"), 0, holder
        )
        return holder.children


class FamilyTable(Directive):
    """``.. family-table::``: ``helpers.book.support.family_matrix()``, a row per method, a column per family
    (the encoders first, then the decoders), each method named by the path it is imported from."""

    def run(self):
        from docutils import nodes

        import helpers
        from helpers.book.support import family_matrix
        from helpers.model.families import FAMILIES

        matrix = family_matrix()
        families = sorted(
            next(iter(matrix.values())), key=lambda f: FAMILIES[f].causal
        )  # stable: encoders first
        lines = [
            ".. list-table::",
            "   :header-rows: 1",
            f"   :widths: 24 {' '.join(['5'] * len(families))} 31",
            "   :class: module-summary family-table",
            "",
            "   * - method",
            *[
                f"     - {family}{' (decoder)' if FAMILIES[family].causal else ''}"
                for family in families
            ],
            "     - where it refuses, why",
        ]
        for method, row in matrix.items():
            reasons = sorted(
                {why for why in row.values() if why is not None}
            )
            lines.append(f"   * - ``{_import_path(helpers, method)}``")
            lines += [
                f"     - {'✓' if row[family] is None else DASH}"
                for family in families
            ]
            lines.append(
                f"     - {'; '.join(reasons) if reasons else 'takes every family'}"
            )
        holder = nodes.section()
        holder.document = self.state.document
        self.state.nested_parse(
            StringList(lines, source="helpers.book.support"), 0, holder
        )
        return holder.children


def _import_path(helpers, method: str) -> str:
    """How a reader calls a row's method: ``helpers.name``, or the module it lives in where the package
    does not export it; a context-mixing row as the call with its measure."""
    if method.startswith("context_mixing: "):
        return (
            f'helpers.context_mixing(..., "{method.split(": ", 1)[1]}")'
        )
    if method in getattr(helpers, "__all__", ()):
        return f"helpers.{method}"
    from helpers.methods import mixing

    if hasattr(mixing, method):
        return f"helpers.methods.mixing.{method}"
    raise ValueError(f"family-table: no import path for {method!r}")


def setup(app):
    app.add_directive("module-summary", ModuleSummary)
    app.add_directive("support-table", SupportTable)
    app.add_directive("family-table", FamilyTable)
    return {"parallel_read_safe": True}
