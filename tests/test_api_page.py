"""The API page (book/api.md) documents every public name of ``helpers``.

It reads the code, not a list: every name that ``helpers/__init__.py`` or
``helpers/plots/__init__.py`` re-exports from a submodule must live in a
module the page documents with ``automodule`` (autodoc then renders it from
the code), and must be one that autodoc renders there (in the module's ``__all__`` if it
has one, defined in that module). The book's config documents undocumented
members too (``undoc-members``); the last test checks the built page itself.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
API_PAGE = ROOT / "book" / "api.md"
PACKAGES = ["helpers", "helpers.plots"]


def documented_modules(text: str) -> dict[str, set[str]]:
    """Module name -> the automodule options given for it on the page."""
    found: dict[str, set[str]] = {}
    for match in re.finditer(r"^\.\. automodule:: (\S+)\n((?:[ \t]+:[^\n]*\n)*)", text, flags=re.M):
        options = {line.strip().split(":")[1] for line in match.group(2).splitlines() if line.strip()}
        found[match.group(1)] = options
    return found


def reexported_names(package: str) -> dict[str, str]:
    """Public name -> the submodule it is imported from, read from the package's __init__.py."""
    init = Path(importlib.import_module(package).__file__)
    names: dict[str, str] = {}
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                name = alias.asname or alias.name
                if not name.startswith("_"):
                    names[name] = f"{package}.{node.module}"
    return names


def test_documented_modules_are_read_from_the_page():
    text = ".. automodule:: helpers.paper\n   :undoc-members:\n\n.. automodule:: helpers.text\n"
    assert documented_modules(text) == {"helpers.paper": {"undoc-members"}, "helpers.text": set()}


def test_reexported_names_read_the_code():
    names = reexported_names("helpers")
    assert names["capture"] == "helpers.internals"
    assert names["token_heatmap"] == "helpers.plots"  # re-exported again from helpers.plots.heatmaps
    assert reexported_names("helpers.plots")["token_heatmap"] == "helpers.plots.heatmaps"


def _defining_module(package: str, name: str, source: str) -> str:
    """Follow re-exports (helpers -> helpers.plots -> helpers.plots.heatmaps) to the module that defines name."""
    while source in PACKAGES and source != package:
        package, source = source, reexported_names(source)[name]
    return source


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_is_on_the_api_page(package):
    modules = documented_modules(API_PAGE.read_text())
    assert modules, "book/api.md documents no module"
    missing, hidden = [], []
    for name, source in sorted(reexported_names(package).items()):
        source = _defining_module(package, name, source)
        if source not in modules:
            missing.append(f"{package}.{name} (from {source})")
            continue
        module = importlib.import_module(source)
        public = getattr(module, "__all__", None)
        if public is not None and name not in public:
            hidden.append(f"{source}.{name} is not in {source}.__all__")
            continue
        obj = getattr(module, name)
        if callable(obj) and getattr(obj, "__module__", source) != source:
            hidden.append(f"{source}.{name} is defined in {obj.__module__}, which autodoc skips as imported")
            continue
    assert not missing, "add an automodule for these modules to book/api.md: " + ", ".join(missing)
    assert not hidden, "; ".join(hidden)


def test_built_api_page_lists_every_public_name():
    """When the book has been built, every public name has an entry (an anchor) on the rendered page."""
    html = ROOT / "_build" / "html" / "book" / "api.html"
    if not html.exists():
        pytest.skip("no _build/html/book/api.html: run `make book` first")
    anchors = set(re.findall(r'id="(helpers\.[\w.]+)"', html.read_text()))
    absent = []
    for package in PACKAGES:
        for name, source in reexported_names(package).items():
            source = _defining_module(package, name, source)
            if f"{source}.{name}" not in anchors:
                absent.append(f"{source}.{name}")
    assert not absent, "not on the built API page: " + ", ".join(sorted(absent))
