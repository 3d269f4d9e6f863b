"""The API page (book/api.md) documents every public name of ``helpers``.

It reads the code, not a list: every module of the package is documented on
the page with ``automodule``, in the order of the floors; every name that
``helpers/__init__.py`` or ``helpers/book/plots/__init__.py`` re-exports from
a submodule must be one that autodoc renders there (in the module's ``__all__``
if it has one, defined in that module). The book's config documents undocumented
members too (``undoc-members``); the last test checks the built page itself.
"""

from __future__ import annotations

import ast
import importlib
import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
API_PAGE = ROOT / "book" / "api.md"
PACKAGES = ["helpers", "helpers.book.plots"]
FLOORS = ("model", "methods", "drivers", "book")


def documented_modules(text: str) -> dict[str, set[str]]:
    """Module name -> the automodule options given for it on the page."""
    found: dict[str, set[str]] = {}
    for match in re.finditer(r"^\.\. automodule:: (\S+)\n((?:[ \t]+:[^\n]*\n)*)", text, flags=re.M):
        options = {line.strip().split(":")[1] for line in match.group(2).splitlines() if line.strip()}
        found[match.group(1)] = options
    return found


def reexported_names(package: str) -> dict[str, str]:
    """Public name -> the submodule it is imported from, read from the package's __init__.py."""
    module = importlib.import_module(package)
    init = Path(module.__file__)
    names: dict[str, str] = {}
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                name = alias.asname or alias.name
                if not name.startswith("_") and not isinstance(getattr(module, name, None), types.ModuleType):
                    names[name] = f"{package}.{node.module}"  # a submodule (helpers.paper) has its own entry
    return names


def test_documented_modules_are_read_from_the_page():
    text = ".. automodule:: helpers.paper\n   :undoc-members:\n\n.. automodule:: helpers.model.text\n"
    assert documented_modules(text) == {"helpers.paper": {"undoc-members"}, "helpers.model.text": set()}


def test_reexported_names_read_the_code():
    names = reexported_names("helpers")
    assert names["capture"] == "helpers.model.capture"
    assert reexported_names("helpers.book.plots")["token_heatmap"] == "helpers.book.plots.heatmaps"


def _defining_module(package: str, name: str, source: str) -> str:
    """Follow re-exports (helpers -> helpers.plots -> helpers.plots.heatmaps) to the module that defines name."""
    while source in PACKAGES and source != package:
        package, source = source, reexported_names(source)[name]
    return source


def all_modules() -> list[str]:
    """Every module of the package (not the floors' __init__ files), read from the folders."""
    src = Path(importlib.import_module("helpers").__file__).parent
    return sorted(
        "helpers." + p.relative_to(src).with_suffix("").as_posix().replace("/", ".")
        for p in src.rglob("*.py")
        if p.name != "__init__.py"
    )


def test_every_module_is_on_the_api_page_floor_by_floor():
    documented = [m for m in documented_modules(API_PAGE.read_text()) if m != "helpers"]
    assert sorted(documented) == all_modules(), "book/api.md must document every module once"
    floors = [m.split(".")[1] for m in documented]
    assert floors == sorted(floors, key=FLOORS.index), "the page follows the floors: model, methods, drivers, book"


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
