"""Imports on first use (helpers.model.lazy): ``import helpers`` stays light, and everything behaves as if eager.

What ``import helpers`` loads is checked in a fresh interpreter (not timed: benchmarks/bench_import.py
prints the times); the surface's table of lazy names is checked against its ``if TYPE_CHECKING:`` imports,
which type checkers and readers see.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement

import helpers
from helpers.model.lazy import OPTIONAL_PACKAGES, lazy_attributes

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(helpers.__file__).parent
# Heavy libraries, and transformers' model code (transformers.modeling_utils: PreTrainedModel)
HEAVY = (
    "torch",
    "transformers",
    "transformers.modeling_utils",
    "scipy",
    "pandas",
    "matplotlib",
    "seaborn",
    "ipywidgets",
)
PLOTTING = ("matplotlib", "seaborn", "ipywidgets")


def fresh(code: str) -> str:
    """stdout of ``code`` run in a fresh interpreter (its own sys.modules)."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def loaded_after(statement: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` are in sys.modules after ``statement``, in a fresh interpreter."""
    return json.loads(
        fresh(f"import json, sys\n{statement}\nprint(json.dumps([m for m in {modules!r} if m in sys.modules]))")
    )


def test_import_helpers_loads_no_heavy_library():
    assert loaded_after("import helpers", HEAVY) == []
    assert loaded_after("import helpers", ("helpers.model.capture", "helpers.methods", "helpers.book")) == []


def test_first_use_loads_what_it_needs_and_no_plotting_library():
    statement = "import helpers\nhelpers.capture, helpers.effective_attention, helpers.methods.probes.fit_map"
    assert loaded_after(statement, ("torch", "transformers.modeling_utils")) == ["torch", "transformers.modeling_utils"]
    assert loaded_after(statement, PLOTTING) == []


def test_a_plot_loads_matplotlib():
    assert loaded_after("import helpers\nhelpers.plots.token_heatmap", ("matplotlib",)) == ["matplotlib"]


def _surface_imports() -> dict[str, str]:
    """Name -> what it is, read from ``helpers/__init__.py``'s ``if TYPE_CHECKING:`` block: the module
    it comes from (``helpers.model.text``), or ``module`` for a name that is itself a module."""
    tree = ast.parse((SRC / "__init__.py").read_text())
    (block,) = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    found = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1, ast.unparse(node)
        base = ".".join(filter(None, ("helpers", node.module)))
        for alias in node.names:
            where = SRC.joinpath(*f"{base}.{alias.name}".split(".")[1:])
            is_module = where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()
            found[alias.asname or alias.name] = "module" if is_module else base
    return found


def _surface_table() -> dict[str, str]:
    """The same, read from the tables the lazy ``__getattr__`` uses."""
    table = {name: "module" for name in helpers._MODULES}
    for module, names in helpers._EXPORTS.items():
        table.update({name: "helpers" + module for name in names})
    return table


def test_the_lazy_table_is_what_type_checkers_see():
    assert _surface_table() == _surface_imports()
    assert set(_surface_table()) == set(helpers.__all__), "every public name, and only those, is in the lazy table"


@pytest.mark.parametrize("name", helpers.__all__)
def test_every_public_name_is_the_object_of_its_module(name):
    value = getattr(helpers, name)
    kind = _surface_table()[name]
    if kind == "module":
        assert isinstance(value, types.ModuleType)
        assert value is importlib.import_module(helpers._MODULES[name], "helpers")
    else:
        assert value is getattr(importlib.import_module(kind), name)


def test_dir_lists_every_public_name_and_submodule():
    assert set(helpers.__all__) <= set(dir(helpers))
    for floor in ("model", "methods", "drivers", "book"):
        package = getattr(helpers, floor)
        modules = {p.stem for p in (SRC / floor).glob("*.py") if p.stem != "__init__"}
        assert modules <= set(dir(package)), f"helpers.{floor}: {sorted(modules - set(dir(package)))}"
        for module in sorted(modules)[:3]:
            assert getattr(package, module) is importlib.import_module(f"helpers.{floor}.{module}")


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'helpers' has no attribute 'load_modle'"):
        helpers.load_modle  # noqa: B018
    with pytest.raises(AttributeError, match="'helpers.methods' has no attribute 'nope'"):
        helpers.methods.nope  # noqa: B018
    assert not hasattr(helpers.book, "nope")


def test_lazy_attributes_import_once_and_store_the_value():
    package = types.ModuleType("lazy_demo")
    sys.modules["lazy_demo"] = package
    try:
        package.__getattr__, package.__dir__ = lazy_attributes(
            "lazy_demo", modules={"text": "textwrap"}, exports={"json": ("dumps",)}
        )
        assert package.dumps is json.dumps and "dumps" in vars(package)  # stored: read once
        assert package.text is textwrap
        assert {"dumps", "text"} <= set(dir(package))
    finally:
        del sys.modules["lazy_demo"]


def test_a_missing_plotting_library_names_the_extra_that_installs_it():
    message = fresh(
        """
        import sys
        sys.modules["matplotlib"] = None  # as if not installed
        import helpers
        try:
            helpers.plots
        except ModuleNotFoundError as error:
            print(error)
        """
    )
    assert "helpers.plots needs matplotlib" in message and "identifiability-book[notebooks]" in message


def test_the_optional_packages_are_in_the_extras_they_name():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    core = {Requirement(spec).name for spec in pyproject["project"]["dependencies"]}
    for package, extra in OPTIONAL_PACKAGES.items():
        assert package in {Requirement(spec).name for spec in extras[extra]}, f"{package} is not in [{extra}]"
        assert package not in core, f"{package} is a core dependency: no extra needed"


def test_without_the_plotting_libraries_help_and_the_star_import_work():
    names = fresh(
        """
        import io, json, pydoc, sys
        for hidden in ("matplotlib", "seaborn", "ipywidgets"):
            sys.modules[hidden] = None  # as if not installed: the library install
        import helpers
        text = pydoc.render_doc(helpers, renderer=pydoc.plaintext)
        namespace = {}
        exec("from helpers import *", namespace)
        print(json.dumps([
            "plots" in dir(helpers), "plots" in helpers.__all__, "capture" in namespace,
            "hidden_token_attribution" in dir(helpers), "Helpers for the book" in text,
        ]))
        """
    )
    assert json.loads(names) == [False, False, True, True, True]


def test_with_the_plotting_libraries_the_plots_are_on_the_surface():
    assert "plots" in dir(helpers) and "plots" in helpers.__all__ and "NullSpaceExplorer" in helpers.__all__
