"""Architectural rules of the helpers, checked on the parsed source (``ast``), not on text.

* A method module takes tensors and returns tensors: it imports no plotting or
  widget library and calls no model or corpus loader.
* No module imports another module's private (underscored) names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import helpers

SRC = Path(helpers.__file__).parent
METHOD_MODULES = (
    "linalg",
    "nullspace",
    "lp_bounds",
    "effective",
    "tokens",
    "attribution",
    "jacobians",
    "probes",
    "numbering",
    "paper",
    "reference",
)
FORBIDDEN_IMPORTS = ("matplotlib", "seaborn", "ipywidgets", "IPython", "helpers.plots", "helpers.widgets")
FORBIDDEN_CALLS = ("load_model", "load_corpus", "load_glue", "from_pretrained")


def parse(module: str) -> ast.Module:
    return ast.parse((SRC / f"{module.replace('.', '/')}.py").read_text(), filename=f"{module}.py")


def imported_modules(tree: ast.Module, package: str = "helpers") -> set[str]:
    """Absolute names of every module a file imports (relative imports resolved against ``package``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return names


def called_names(tree: ast.Module) -> set[str]:
    calls = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            calls.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return calls


def forbidden_imports(tree: ast.Module) -> list[str]:
    return sorted(
        name
        for name in imported_modules(tree)
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN_IMPORTS)
    )


def private_imports(tree: ast.Module) -> list[str]:
    return sorted(
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name.startswith("_") and node.module != "__future__"
    )


@pytest.mark.parametrize("module", METHOD_MODULES)
def test_method_module_neither_draws_nor_loads(module):
    tree = parse(module)
    assert forbidden_imports(tree) == [], f"{module} imports a plotting or widget library"
    assert called_names(tree) & set(FORBIDDEN_CALLS) == set(), f"{module} calls a model or corpus loader"


@pytest.mark.parametrize("path", sorted(p.relative_to(SRC).with_suffix("").as_posix() for p in SRC.rglob("*.py")))
def test_no_module_imports_private_names(path):
    assert private_imports(parse(path)) == []


def test_the_rules_catch_what_they_forbid():
    bad = ast.parse(
        "import matplotlib.pyplot as plt\nfrom .plots import token_heatmap\n"
        "from .linalg import _check\nmodel = load_model()\nAutoModel.from_pretrained('x')\n"
    )
    assert forbidden_imports(bad) == ["helpers.plots", "helpers.plots.token_heatmap", "matplotlib.pyplot"]
    assert called_names(bad) >= {"load_model", "from_pretrained"}
    assert private_imports(bad) == ["linalg._check"]
