"""Imports on first use (PEP 562), so that ``import helpers`` loads neither torch nor transformers.

A package's ``__init__`` hands its names to :func:`lazy_attributes` and sets the two functions it
returns as its module-level ``__getattr__`` and ``__dir__``: a submodule (``helpers.methods.probes``)
or a re-exported name (``helpers.capture``) is imported when it is first read, and is then an
ordinary attribute. ``dir()``, ``help()``, ``from helpers import *`` and attribute access behave
as if everything had been imported eagerly. Type checkers read the same names from the
package's ``if TYPE_CHECKING:`` imports (``tests/test_lazy.py`` keeps the two in step).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

__all__ = ["LazyAttributes", "OPTIONAL_PACKAGES", "installed", "lazy_attributes"]

OPTIONAL_PACKAGES = {"matplotlib": "notebooks", "seaborn": "notebooks", "ipywidgets": "notebooks"}
"""Third-party packages that modules loaded on first use need and the library install leaves out -> the extra
of ``identifiability-book`` that brings them (pyproject.toml; ``tests/test_lazy.py`` checks the two agree)."""


def installed(package: str) -> bool:
    """Whether ``package`` can be imported, without importing it (a None in ``sys.modules``, as tests set
    to hide a package, counts as not installed)."""
    if package in sys.modules:
        return sys.modules[package] is not None
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


class LazyAttributes(NamedTuple):
    """A package's module-level ``__getattr__`` (name -> object, importing on first use) and ``__dir__``."""

    getattr: Callable[[str], object]
    dir: Callable[[], list[str]]


def _missing_extra(error: ModuleNotFoundError, what: str) -> ModuleNotFoundError:
    """``error`` itself, or, for a package of an extra, the same error saying which extra to install."""
    top = (error.name or "").partition(".")[0]
    if top not in OPTIONAL_PACKAGES:
        return error
    extra = OPTIONAL_PACKAGES[top]
    return ModuleNotFoundError(
        f"{what} needs {top}, which the library install leaves out: "
        f"pip install 'identifiability-book[{extra}]' (or pip install {top}).",
        name=error.name,
    )


def lazy_attributes(
    package: str,
    path: Iterable[str] = (),
    modules: Mapping[str, str] | None = None,
    exports: Mapping[str, Iterable[str]] | None = None,
    needs: Mapping[str, Iterable[str]] | None = None,
) -> LazyAttributes:
    """``__getattr__`` and ``__dir__`` for ``package`` (its ``__name__``) that import on first use.

    Args:
        package: the package's ``__name__``.
        path: the package's ``__path__``: each submodule found there is imported when first read.
        modules: further names that are modules, name -> module (relative names start with a dot:
            ``{"paper": ".book.paper"}``).
        exports: module -> the names it gives the package (``{".model.text": ("encode", "tokens_of")}``).
        needs: name -> the optional packages it imports (``{"plots": ("matplotlib", "seaborn")}``): while one
            is not installed, ``dir()`` leaves the name out, so ``help()`` and ``inspect.getmembers`` work
            on the library install (reading the name still raises the error that names the extra).

    Returns:
        ``LazyAttributes(getattr, dir)``. A name read once is stored in the package, so later reads do
        not call ``getattr`` again. An unknown name raises AttributeError; a missing optional package
        (matplotlib, ...) raises ModuleNotFoundError naming the extra that installs it.
    """
    # name -> (module, attribute of it; None: the module itself)
    targets: dict[str, tuple[str, str | None]] = {
        found.name: (f".{found.name}", None) for found in pkgutil.iter_modules(path)
    }
    targets.update({name: (module, None) for name, module in (modules or {}).items()})
    for module, names in (exports or {}).items():
        targets.update({name: (module, name) for name in names})

    def __getattr__(name: str) -> object:
        if name not in targets:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, attribute = targets[name]
        try:
            module = importlib.import_module(module_name, package)
        except ModuleNotFoundError as error:
            raise _missing_extra(error, f"{package}.{name}") from error
        value = module if attribute is None else getattr(module, attribute)
        setattr(sys.modules[package], name, value)
        return value

    needed = {name: tuple(packages) for name, packages in (needs or {}).items()}

    def __dir__() -> list[str]:
        unavailable = {name for name, packages in needed.items() if not all(map(installed, packages))}
        return sorted(set(vars(sys.modules[package])) | (set(targets) - unavailable))

    return LazyAttributes(__getattr__, __dir__)
