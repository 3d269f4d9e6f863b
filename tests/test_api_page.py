"""The API pages document every public name of ``helpers``.

``book/api.md`` is the quickstart and the package's docstring; ``book/api/<floor>.md``
documents one floor each (model, methods, drivers, book). The test reads the code, not
a list: every module of the package is documented once with ``automodule``, on its
floor's page; every name that
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
FLOOR_PAGES = {floor: ROOT / "book" / "api" / f"{floor}.md" for floor in FLOORS}


def api_text() -> str:
    """The quickstart page, then the floor pages in the order of the floors."""
    return "\n".join(p.read_text() for p in [API_PAGE, *FLOOR_PAGES.values()] if p.exists())


def documented_modules(text: str) -> dict[str, set[str]]:
    """Module name -> the automodule options given for it on the page."""
    found: dict[str, set[str]] = {}
    for match in re.finditer(r"^\.\. automodule:: (\S+)\n((?:[ \t]+:[^\n]*\n)*)", text, flags=re.M):
        options = {line.strip().split(":")[1] for line in match.group(2).splitlines() if line.strip()}
        found[match.group(1)] = options
    return found


def import_statements(tree: ast.Module) -> list[ast.stmt]:
    """The module's top-level statements, with those of its ``if TYPE_CHECKING:`` blocks in their place
    (``helpers/__init__.py`` imports its names on first use and states them there)."""
    statements = []
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            statements += node.body
        else:
            statements.append(node)
    return statements


def reexported_names(package: str) -> dict[str, str]:
    """Public name -> the submodule it is imported from, read from the package's __init__.py."""
    module = importlib.import_module(package)
    init = Path(module.__file__)
    names: dict[str, str] = {}
    for node in import_statements(ast.parse(init.read_text())):
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


def test_every_module_is_on_its_floors_api_page():
    """Lists what is missing: a new module needs an automodule on its floor's page (book/api/<floor>.md)."""
    assert "helpers" in documented_modules(API_PAGE.read_text()), "book/api.md documents the package itself"
    problems = []
    seen: list[str] = []
    for floor, page in FLOOR_PAGES.items():
        assert page.exists(), f"no API page for the {floor} floor: {page.relative_to(ROOT)}"
        for module in documented_modules(page.read_text()):
            seen.append(module)
            if module.split(".")[1] != floor:
                problems.append(f"{module} is on {page.relative_to(ROOT)}, not on its floor's page")
    expected = all_modules()
    missing = [m for m in expected if m not in seen]
    problems += [f"add `.. automodule:: {m}` to book/api/{m.split('.')[1]}.md" for m in missing]
    problems += [f"{m} is documented but is not a module of the package" for m in seen if m not in expected]
    problems += [f"{m} is documented {seen.count(m)} times" for m in sorted(set(seen)) if seen.count(m) > 1]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_is_on_the_api_page(package):
    modules = documented_modules(api_text())
    assert modules, "the API pages document no module"
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
    assert not missing, "add an automodule for these modules to their floor's page, book/api/<floor>.md: " + ", ".join(
        missing
    )
    assert not hidden, "; ".join(hidden)


def test_built_api_page_lists_every_public_name():
    """When the book has been built, every public name has an entry (an anchor) on a rendered API page,
    and each entry has its [source] link (sphinx.ext.viewcode)."""
    built = ROOT / "_build" / "html" / "book"
    pages = [built / "api.html", *(built / "api" / f"{floor}.html" for floor in FLOORS)]
    if not all(p.exists() for p in pages):
        pytest.skip("the API pages are not built: run `make book` first")
    html = "\n".join(p.read_text() for p in pages)
    anchors = set(re.findall(r'id="(helpers\.[\w.]+)"', html))
    assert html.count('class="viewcode-link"') >= len(anchors) // 2, "the API entries have no [source] links"
    absent = []
    for package in PACKAGES:
        for name, source in reexported_names(package).items():
            source = _defining_module(package, name, source)
            if f"{source}.{name}" not in anchors:
                absent.append(f"{source}.{name}")
    assert not absent, "not on the built API page: " + ", ".join(sorted(absent))
