"""Architectural rules of the helpers, derived from the folders and checked on the parsed source (``ast``).

* Four floors, imports running down only: ``book`` may import ``drivers``, ``methods`` and
  ``model``; ``drivers`` may import ``methods`` and ``model``; ``methods`` may import ``model``;
  ``model`` imports none of them. The order is the one list below; which module sits on which
  floor is read from the folders.
* No import cycle between modules.
* A method takes tensors and returns tensors: it imports no plotting or widget library and
  calls no model or corpus loader.
* No module imports another module's private (underscored) names; none passes 450 lines.
* The reader's surface, ``helpers.__all__``, holds at most 40 names, and ``import helpers``
  loads neither seaborn nor ipywidgets.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import helpers

SRC = Path(helpers.__file__).parent
FLOORS = ("model", "methods", "drivers", "book")  # bottom to top
FORBIDDEN_IMPORTS = ("matplotlib", "seaborn", "ipywidgets", "IPython", "helpers.book")
FORBIDDEN_CALLS = ("load_model", "load_corpus", "load_glue", "from_pretrained")
MAX_LINES = 450


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(("helpers", *parts[:-1])) if parts[-1] == "__init__" else ".".join(("helpers", *parts))


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def floor_of(module: str) -> str | None:
    """The floor a module lives on, read from its folder (None: the package's own __init__)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FLOORS else None


def parse(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))


def imported_modules(tree: ast.Module, module: str = "helpers") -> set[str]:
    """Absolute names of every module a file imports (relative imports resolved against ``module``)."""
    is_package = module in MODULES and MODULES[module].name == "__init__.py"
    package = module if is_package else module.rsplit(".", 1)[0]
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


def helpers_imports(module: str) -> set[str]:
    """The helpers modules ``module`` imports (a name imported from a package that is a module counts as it)."""
    found = set()
    for name in imported_modules(parse(module), module):
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name.startswith("helpers") and name != module:
            found.add(name)
    return found


def allowed(source: str, target: str) -> bool:
    """Whether a module on ``source``'s floor may import ``target``: same floor or a lower one."""
    below, above = floor_of(target), floor_of(source)
    if above is None:  # the package's __init__: the surface, may import every floor
        return True
    if below is None:
        return False  # nothing below the surface imports the surface
    return FLOORS.index(below) <= FLOORS.index(above)


def called_names(tree: ast.Module) -> set[str]:
    calls = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            calls.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return calls


def forbidden_imports(tree: ast.Module, module: str = "helpers.methods.x") -> list[str]:
    return sorted(
        name
        for name in imported_modules(tree, module)
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


def test_every_module_lives_on_a_floor():
    stray = [m for m in MODULES if m != "helpers" and floor_of(m) is None]
    assert not stray, f"modules outside the four floors {FLOORS}: {stray}"
    assert all((SRC / floor).is_dir() for floor in FLOORS)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_run_down_only(module):
    upward = sorted(target for target in helpers_imports(module) if not allowed(module, target))
    assert not upward, f"{module} (floor {floor_of(module)}) imports a floor above it: {upward}"


def test_no_import_cycle():
    graph = {m: {t for t in helpers_imports(m) if not MODULES[t].name == "__init__.py"} for m in MODULES}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(nxt) :] + [nxt]))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("module", sorted(m for m in MODULES if floor_of(m) == "methods"))
def test_method_module_neither_draws_nor_loads(module):
    tree = parse(module)
    assert forbidden_imports(tree, module) == [], f"{module} imports a plotting or widget library"
    assert called_names(tree) & set(FORBIDDEN_CALLS) == set(), f"{module} calls a model or corpus loader"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_private_names(module):
    assert private_imports(parse(module)) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_passes_450_lines(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines; split it by concern"


def test_the_surface_is_small_and_light():
    assert len(helpers.__all__) <= 40 and len(set(helpers.__all__)) == len(helpers.__all__)
    assert all(hasattr(helpers, name) for name in helpers.__all__)
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, helpers; print(sorted({'seaborn', 'ipywidgets', 'matplotlib'} & set(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loaded == "[]", f"import helpers loads {loaded}"


def test_the_rules_catch_what_they_forbid():
    bad = ast.parse(
        "import matplotlib.pyplot as plt\nfrom ..book.plots import token_heatmap\n"
        "from .linalg import _check\nmodel = load_model()\nAutoModel.from_pretrained('x')\n"
    )
    assert forbidden_imports(bad, "helpers.methods.x") == [
        "helpers.book.plots",
        "helpers.book.plots.token_heatmap",
        "matplotlib.pyplot",
    ]
    assert called_names(bad) >= {"load_model", "from_pretrained"}
    assert private_imports(bad) == ["linalg._check"]
    assert not allowed("helpers.model.capture", "helpers.methods.linalg")
    assert not allowed("helpers.methods.mixing", "helpers.drivers.mixing")
    assert allowed("helpers.book.plots.mixing", "helpers.drivers.mixing")
    assert allowed("helpers.drivers.mixing", "helpers.model.capture")


# Public functions that return a mapping or a tuple on purpose, each with its reason.
BARE_RETURNS = {
    "helpers.model.capture.eager_attention": "transformers' AttentionInterface contract: (output, weights)",
    "helpers.book.claims.Claims.record": "the JSON record the report reads",
    "helpers.model.loading.Architecture.as_row": "one row of a DataFrame",
    "helpers.book.widgets.NullSpaceExplorer.steps": "a sequence of slider positions",
    "helpers.methods.tokens.token_classes": "one mask per class name, keyed by the caller's classes",
    "helpers.methods.nullspace.ranks_of": "one rank tensor per matrix name the caller asked for",
    "helpers.book.sections.claim_sections": "one section anchor per claim id, keyed by the chapter's own ids",
    "helpers.book.rerender.rendered_outputs": "a notebook output's data, keyed by MIME type as nbformat keeps it",
    "helpers.book.paper.published_mixing": "one published value per table that reports the measure (often none)",
    "helpers.drivers.embedding_edits.effective_rows": "helpers.model.capture.editing's contract: (A, values)",
    "helpers.book.colab_text.glossary_anchors": "one anchor per term, keyed by the glossary's own terms",
    "helpers.book.records.committed_record": "the JSON record the report reads, as Claims.record writes it",
    "helpers.book.plots.panels.panel_layout": "the JSON object a figure's PNG carries for book.js to read",
    "helpers.book.plots.panels.read_panels": "that JSON object, read back from the PNG",
    "helpers.book.paper_scale.refused_chapters": "one reason per chapter, keyed by the book's chapter names",
    "helpers.book.paper_scale.edition_notebook": "a notebook in nbformat's JSON, written to a .ipynb file",
    "helpers.book.paper_scale.stamp": "a notebook in nbformat's JSON, written to a .ipynb file",
    "helpers.book.paper_scale.fingerprint": "the JSON the edition's notebook metadata carries",
    "helpers.book.explorers.attention_split_record": "the JSON a page's live explorer reads (_static/explorer.js)",
    "helpers.book.explorers.null_space_rows_record": "the JSON a page's live explorer reads (_static/explorer.js)",
    "helpers.book.support.family_matrix": "one row per method, one reason (or None) per family, keyed by their names",
    "helpers.book.support.family_support": "one refusal function per method, keyed by the method's name",
    "helpers.book.registry.Registry.carried": "one carried claim per carrying claim, keyed by (chapter, id)",
    "helpers.model.token_names.special_token_names": "a renaming: the model's name keyed by BERT's, as text uses it",
    "helpers.model.token_names.names_if_not_bert": "the same renaming, or None where it renames nothing",
    "helpers.book.notebook.name_special_tokens": "the same renaming (special_token_names)",
}


def bare_returns() -> list[str]:
    """Public functions and methods annotated to return ``dict`` or ``tuple``, by qualified name."""
    found = []
    for module in sorted(MODULES):
        tree = parse(module)
        for node in tree.body:
            functions = [(node.name, node)] if isinstance(node, ast.FunctionDef) else []
            if isinstance(node, ast.ClassDef):
                functions = [(f"{node.name}.{f.name}", f) for f in node.body if isinstance(f, ast.FunctionDef)]
            for name, function in functions:
                if name.split(".")[-1].startswith("_") or function.returns is None:
                    continue
                annotation = ast.unparse(function.returns)
                if annotation.startswith(("dict", "tuple", "Dict", "Tuple")):
                    found.append(f"{module}.{name}")
    return found


def test_results_are_named():
    unnamed = sorted(set(bare_returns()) - set(BARE_RETURNS))
    assert not unnamed, f"return a NamedTuple or dataclass with named fields instead of a bare dict or tuple: {unnamed}"
    stale = sorted(set(BARE_RETURNS) - set(bare_returns()))
    assert not stale, f"no longer bare, drop from BARE_RETURNS: {stale}"
