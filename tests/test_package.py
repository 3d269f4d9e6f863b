"""The helpers package as Colab gets it: built, checked, installed from the wheel, imported away from the repo.

One slow-ish test (about half a minute): it builds the sdist and, from the sdist, the wheel, runs
`twine check`, installs the wheel into a fresh virtual environment and there imports `helpers`, loads the
bundled model and reads the corpus. The fresh environment borrows this environment's third-party packages
through one `.pth` line naming this site-packages folder: a plain path line does not run that folder's own
`.pth` files, so the editable install of the repository stays invisible and `helpers` can only come from
the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "helpers"
BUILD_INPUTS = ["pyproject.toml", "README.md"]


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        command = " ".join(map(str, args))
        raise AssertionError(f"{command} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout


def _package_files() -> set[str]:
    """Every file of src/helpers a user needs, as wheel paths: modules and package data (no caches)."""
    files = set()
    for path in PACKAGE.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in {".pyc", ".pyo"}:
            files.add(path.relative_to(PACKAGE.parent).as_posix())
    return files


def _clean_env() -> dict[str, str]:
    """The environment without anything that would put the repository on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INDEX"] = "1"
    return env


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """sdist and wheel built from a copy of the sources (the checkout stays free of build/ and egg-info)."""
    source = tmp_path_factory.mktemp("source")
    for name in BUILD_INPUTS:
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    out = tmp_path_factory.mktemp("dist")
    # No flags: build the sdist, then the wheel from the unpacked sdist, so a file missing from either fails.
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)], cwd=source)
    return out


def test_sources_list_the_package():
    """The comparison below is only meaningful if the source tree has modules and data to compare."""
    files = _package_files()
    assert "helpers/__init__.py" in files
    assert any(name.startswith("helpers/corpus/") for name in files)


def test_wheel_and_sdist_hold_every_module_and_data_file(dist):
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    expected = _package_files()
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = {name for name in archive.namelist() if name.startswith("helpers/")}
    assert sorted(expected - in_wheel) == [], "files of src/helpers missing from the wheel (see package-data)"
    assert sorted(in_wheel - expected) == [], "the wheel holds files that are not in src/helpers"
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/src/helpers/" in name}
    missing = sorted(f"src/{name}" for name in expected if f"src/{name}" not in in_sdist)
    assert missing == [], "files of src/helpers missing from the sdist"


def test_twine_check_passes(dist):
    output = _run([sys.executable, "-m", "twine", "check", "--strict", *map(str, sorted(dist.iterdir()))], cwd=dist)
    assert output.count("PASSED") == 2, output


def test_wheel_works_in_a_fresh_environment(dist, tmp_path):
    (wheel,) = dist.glob("*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
    new_site = Path(_run([str(python), "-I", "-c", purelib], cwd=tmp_path).strip())
    # Third-party packages (torch, transformers, the weights package) come from this environment.
    (new_site / "borrowed-site-packages.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    # --target ignores what is installed elsewhere (the borrowed editable install of the same version).
    _run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(new_site), str(wheel)],
        cwd=tmp_path,
        env=_clean_env(),
    )
    probe = textwrap.dedent(
        """
        import json
        import helpers
        model, tokenizer = helpers.load_model()
        arch = helpers.describe(model)
        pairs = helpers.load_corpus("pairs")
        passages = helpers.load_corpus("passages")
        print(json.dumps({"file": helpers.__file__, "layers": arch.num_layers, "pairs": len(pairs),
                          "passages": len(passages)}))
        """
    )
    # -I: no PYTHONPATH, no user site, and the working directory is not put on the path.
    output = _run([str(python), "-I", "-c", probe], cwd=tmp_path, env=_clean_env())
    report = json.loads(output.strip().splitlines()[-1])
    installed = Path(report["file"]).resolve()
    assert installed.is_relative_to(env_dir.resolve()), f"helpers was imported from {installed}, not the new venv"
    assert not installed.is_relative_to(REPO)
    assert report["layers"] > 0
    assert report["pairs"] > 0 and report["passages"] > 0


# Colab: the helpers install beside Colab's preinstalled packages ([tool.book.colab] in pyproject.toml).


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _requirements(specs: list[str]) -> dict[str, Requirement]:
    return {canonicalize_name(Requirement(s).name): Requirement(s) for s in specs}


def _pinned_version(requirement: Requirement) -> str | None:
    """The version an ``==`` pin names (``==3.10.*`` -> ``3.10``); None for an unpinned name."""
    pins = [s.version.removesuffix(".*") for s in requirement.specifier if s.operator == "=="]
    return pins[0] if pins else None


def _extra(pyproject: dict, name: str) -> list[str]:
    extras = pyproject["project"]["optional-dependencies"]
    assert name in extras, f"pyproject.toml has no extra {name!r} (extras: {sorted(extras)})"
    return extras[name]


def test_the_library_install_leaves_the_book_toolchain_to_extras():
    """`pip install .` gives what the helpers need at run time; plots, widgets and the book's toolchain come
    with the ``notebooks`` and ``book`` extras, and ``book`` includes ``notebooks``."""
    pyproject = _pyproject()
    core = set(_requirements(pyproject["project"]["dependencies"]))
    assert core == {"torch", "transformers", "numpy", "scipy", "pandas", "tqdm"}, sorted(core)
    notebooks = set(_requirements(_extra(pyproject, "notebooks")))
    assert {"matplotlib", "seaborn", "ipywidgets"} <= notebooks
    book = _extra(pyproject, "book")
    assert any(
        canonicalize_name(Requirement(spec).name) == canonicalize_name(pyproject["project"]["name"])
        and "notebooks" in Requirement(spec).extras
        for spec in book
    ), f"the book extra should include the notebooks extra: {book}"
    assert not {"jupyter-book", "myst-nb", "nbval"} & (core | notebooks)
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["helpers"]
    assert (PACKAGE / "py.typed").is_file()


def test_the_colab_install_names_extras_the_package_has():
    from helpers.book.colab_install import DISTRIBUTION, helpers_requirement

    pyproject = _pyproject()
    assert DISTRIBUTION == pyproject["project"]["name"]
    for decoder in (False, True):
        requirement = Requirement(helpers_requirement(decoder))
        assert requirement.name == DISTRIBUTION and "notebooks" in requirement.extras
        assert ("decoder" in requirement.extras) == decoder
        for extra in requirement.extras:
            _extra(pyproject, extra)


def test_dependencies_accept_colabs_packages_unless_the_colab_install_upgrades_them():
    """Colab's pip must change only what the setup cell names: each dependency (and each of the notebooks
    extra, which the Colab editions install too) accepts the version Colab ships (the stack `make colab-check`
    simulates), or the Colab install upgrades that package on purpose."""
    pyproject = _pyproject()
    colab = pyproject["tool"]["book"]["colab"]
    stack = _requirements(colab["stack"])
    upgraded = set(_requirements(colab["install"]))
    rejected = []
    installed = pyproject["project"]["dependencies"] + _extra(pyproject, "notebooks")
    for name, requirement in _requirements(installed).items():
        assert name in stack, f"{name} is a dependency but not in [tool.book.colab] stack: what does Colab ship?"
        version = _pinned_version(stack[name])
        if name not in upgraded and version is not None and not requirement.specifier.contains(version):
            rejected.append(f"{requirement} rejects Colab's {name} {version}")
    assert rejected == [], "pip would replace Colab's packages: lower the floor or add them to the Colab install"


def test_the_colab_install_upgrades_colab_packages_to_the_tested_transformers():
    """The Colab install names only packages Colab ships (what it changes, the setup cell reports), with an upper
    bound each, and transformers pinned to the release requirements.txt tests."""
    colab = _pyproject()["tool"]["book"]["colab"]
    stack = _requirements(colab["stack"])
    install = _requirements(colab["install"])
    assert set(install) <= set(stack), "the Colab install names a package that Colab does not ship"
    assert all(any(s.operator in ("<", "==") for s in r.specifier) for r in install.values()), install
    pins = _requirements(
        [line for line in (REPO / "requirements.txt").read_text().splitlines() if line and line[0] != "#"]
    )
    assert "transformers" in install, "Colab ships transformers 4, the helpers need 5: the install must upgrade it"
    assert install["transformers"].specifier == pins["transformers"].specifier
    # Colab's sentence-transformers and gradio pin these: the install must keep them working
    assert not install["huggingface-hub"].specifier.contains("2.0")
    assert not install["sentence-transformers"].specifier.contains(_pinned_version(stack["sentence-transformers"]))
