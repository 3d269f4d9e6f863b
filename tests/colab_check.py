"""The Colab-like check (``make colab-check``): each Colab edition run alone, as a reader runs it on Colab.

It simulates a fresh Colab runtime: Python 3.12 with Colab's preinstalled packages (``[tool.book.colab] stack``
in pyproject.toml), the edition copied alone into an empty folder, empty caches, and its install cell pointed at
a fresh clone of this repository's main branch (``git clone --no-local``, no tag or other ref added by hand): in
the copy, the install's ``git+https://<repository>@<commit>`` URL becomes ``git+file://<clone>@<commit>``, so
pip installs the pinned commit as Colab would, and fails where the clone lacks it. Each edition runs top to bottom with nbclient (1200 s per cell, stopping at
the first error, as Colab's "Run all" does). Per edition it prints the time, the error, the pip conflict lines
seen in the outputs and the MyST markup left in markdown cells; it exits 1 if it found any.

    make colab-check                                        every edition in colab/
    make colab-check NB=colab/book/01_anatomy_of_a_head.ipynb

The simulated Colab is a virtual environment in ``$COLAB_VENV`` (default:
``~/.cache/identifiability-book/colab-check/venv``), made on first use with ``$COLAB_PYTHON`` (default
``python3.12``); torch comes from PyPI (a CUDA build: about 3 GB to download, run on the CPU). Before each
edition the environment is set back to the packages it had when it was made.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import tomllib
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

REPO = Path(__file__).resolve().parents[1]
CELL_TIMEOUT = 1200
BASELINE = "colab-baseline.txt"  # the venv's packages as made: what every edition starts from
# The install cell's source of the helpers: "identifiability-book @ git+https://github.com/org/repo@<commit>"
GIT_URL = re.compile(r"git\+https?://[^\s\"'@]+(?=@)")
# The report's edition reads the chapters' committed records from GitHub's raw server at a commit
RAW_URL = re.compile(r"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/(?P<revision>[0-9a-f]{40})/")
# pip's conflict report ("ERROR: pip's dependency resolver ...", "... which is incompatible.")
CONFLICT = re.compile(r"^.*(?:\bERROR:|\bincompatible\b|dependency resolver).*$", re.M)
# MyST that Colab shows raw: roles ({glue:text}`x`, {doc}`...`), directives (```{exercise}, :::{note}), targets
MYST = re.compile(r"\{[a-z][\w:.-]*\}`[^`]*`|^\s*(?:`{3,}|:{3,})\s*\{[\w:.-]+\}.*$|^\([\w.:-]+\)=\s*$", re.M)


def colab_tool() -> dict:
    """``[tool.book.colab]`` of pyproject.toml: ``stack`` (Colab's packages) and ``install``."""
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["book"]["colab"]


def pip(venv: Path, *args: str, capture: bool = False) -> str:
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", *args], check=True, text=True, capture_output=capture
    )
    return result.stdout if capture else ""


def by_name(lines: list[str]) -> dict[str, str]:
    """``pip freeze`` lines by normalised package name (``huggingface_hub`` and ``huggingface-hub`` are one)."""
    found = {}
    for line in lines:
        if line and not line.startswith("#"):
            found[re.sub(r"[-_.]+", "-", re.split(r"==| @ ", line, maxsplit=1)[0]).lower()] = line
    return found


def installed(venv: Path) -> dict[str, str]:
    """Every package in the venv: name -> its ``pip freeze`` line."""
    return by_name(pip(venv, "freeze", "--all", capture=True).splitlines())


def make_venv(venv: Path) -> None:
    """A Python 3.12 venv with Colab's packages; their freeze is saved as the baseline."""
    python = os.environ.get("COLAB_PYTHON", "python3.12")
    print(f"Making the simulated Colab in {venv} with {python} (once; torch is a 3 GB download)", flush=True)
    try:
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        sys.exit(f"colab-check needs Python 3.12 (Colab's): set COLAB_PYTHON to its interpreter ({err})")
    stack = colab_tool()["stack"]
    pip(venv, "install", "--quiet", *[s for s in stack if s.startswith("pip=")])  # Colab's pip first
    pip(venv, "install", "--quiet", *[s for s in stack if not s.startswith("pip=")])
    (venv / BASELINE).write_text("\n".join(installed(venv).values()) + "\n")


def reset_venv(venv: Path) -> None:
    """Back to the baseline: remove what an edition installed, put back the versions it changed."""
    baseline = by_name((venv / BASELINE).read_text().splitlines())
    now = installed(venv)
    added = sorted(set(now) - set(baseline) - {"pip"})
    if added:
        pip(venv, "uninstall", "--quiet", "--yes", *added)
    changed = [line for name, line in baseline.items() if now.get(name) != line and name != "pip"]
    if changed:
        pip(venv, "install", "--quiet", "--no-deps", *changed)


def fresh_clone(out: Path, branch: str = "main") -> Path:
    """A fresh clone of this repository's ``branch`` (its committed history only, no working-tree change)."""
    clone = out / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-local", "--branch", branch, str(REPO), str(clone)], check=True)
    return clone


def kernelspec(venv: Path, root: Path) -> str:
    """A kernel of the venv's Python with empty caches; ``root`` goes on JUPYTER_PATH. Returns its name."""
    cache = root / "cache"
    env = {"XDG_CACHE_HOME": str(cache), "HF_HOME": str(cache / "huggingface"), "MPLCONFIGDIR": str(cache / "mpl")}
    spec = {
        "argv": [str(venv / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Simulated Colab",
        "language": "python",
        "env": env,
    }
    folder = root / "kernels" / "colab-check"
    folder.mkdir(parents=True)
    (folder / "kernel.json").write_text(json.dumps(spec))
    os.environ["JUPYTER_PATH"] = str(root)
    return "colab-check"


def stream_text(notebook) -> str:
    return "\n".join(
        "".join(output.get("text", ""))
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("output_type") == "stream"
    )


def checkout_at(clone: Path, revision: str) -> Path:
    """The clone's files at ``revision`` (a detached worktree beside it, made once)."""
    tree = clone.parent / f"{clone.name}-at-{revision[:12]}"
    if not tree.is_dir():
        subprocess.run(["git", "-C", str(clone), "worktree", "add", "--detach", str(tree), revision], check=True,
                       capture_output=True)  # fmt: skip
    return tree


def check(edition: Path, venv: Path, clone: Path) -> list[str]:
    """Run one edition alone in the simulated Colab; print its line and return its problems."""
    notebook = nbformat.read(edition, as_version=4)
    problems = [
        f"MyST markup in markdown cell {k}: {found!r}"
        for k, cell in enumerate(notebook.cells)
        if cell.cell_type == "markdown"
        for found in MYST.findall(cell.source)
    ]
    urls = 0
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.source, n = GIT_URL.subn("git+" + clone.as_uri(), cell.source)
            urls += n
    if urls == 0:
        problems.append("no git+https install URL found to point at this checkout")
    for cell in notebook.cells:  # the raw server's files at a commit: the clone's, checked out there
        if cell.cell_type == "code":
            cell.source = RAW_URL.sub(lambda m: checkout_at(clone, m["revision"]).as_uri() + "/", cell.source)
    reset_venv(venv)
    with tempfile.TemporaryDirectory(prefix="colab-check-") as tmp:
        content = Path(tmp) / "content"
        content.mkdir()
        nbformat.write(notebook, content / edition.name)  # alone in an empty folder, as in /content
        client = NotebookClient(
            notebook,
            timeout=CELL_TIMEOUT,
            kernel_name=kernelspec(venv, Path(tmp)),
            resources={"metadata": {"path": str(content)}},
        )
        log = Path(tmp) / "kernel.log"  # what the kernel process itself prints (pip, run as a subprocess)
        start = time.monotonic()
        try:
            with log.open("w") as out:
                client.execute(stdout=out, stderr=subprocess.STDOUT)
        except CellExecutionError as err:
            problems.append(f"error: {err.ename}: {err.evalue}")
        except (CellTimeoutError, DeadKernelError) as err:
            problems.append(f"error: {type(err).__name__}: {str(err).strip().splitlines()[-1]}")
        seconds = time.monotonic() - start
        printed = stream_text(notebook) + "\n" + log.read_text(errors="replace")
    conflicts = list(dict.fromkeys(line.strip() for line in CONFLICT.findall(printed)))
    problems += [f"pip: {line}" for line in conflicts]
    errors = sum(p.startswith("error") for p in problems)
    markup = sum(p.startswith("MyST") for p in problems)
    print(
        f"== {edition.relative_to(REPO) if edition.is_relative_to(REPO) else edition}: {seconds:.0f} s, {errors} error, {len(conflicts)} pip conflict lines, "
        f"{markup} MyST markup",
        flush=True,
    )
    for problem in problems:
        print(f"   {problem}")
    return problems


def main(args: list[str]) -> int:
    editions = [Path(a).resolve() for a in args] or sorted((REPO / "colab").rglob("*.ipynb"))
    if not editions:
        print("colab-check: no Colab edition in colab/ (make colab writes them)")
        return 1
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "identifiability-book/colab-check"
    venv = Path(os.environ.get("COLAB_VENV") or default / "venv")
    for name in [k for k in os.environ if k.startswith("BOOK_") or k in ("PYTHONPATH", "VIRTUAL_ENV")]:
        del os.environ[name]  # a reader's Colab has none of these: the chapters' defaults apply
    if not (venv / BASELINE).is_file():
        make_venv(venv)
    wanted = [s for s in colab_tool()["stack"] if s.startswith("pip=")]
    if wanted and installed(venv).get("pip") != wanted[0]:
        print(f"The simulated Colab's pip is not Colab's: installing {wanted[0]}", flush=True)
        pip(venv, "install", "--quiet", wanted[0])
    with tempfile.TemporaryDirectory(prefix="colab-check-clone-") as tmp:
        clone = fresh_clone(Path(tmp), os.environ.get("COLAB_CHECK_BRANCH", "main"))
        failed = [e for e in editions if check(e, venv, clone)]
    print(f"colab-check: {len(editions) - len(failed)} of {len(editions)} editions ran clean")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
