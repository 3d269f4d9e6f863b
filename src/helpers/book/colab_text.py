"""The Colab edition's prose: MyST roles and directives turned into plain Markdown.

Colab renders neither MyST roles nor directives. ``markdown_text`` rewrites one markdown cell's
roles: ``{glue:text}`` becomes the glued value written in (formatted as myst-nb formats it),
``{doc}`` and ``{numref}`` links to the online pages, ``{term}`` a link to the term on the glossary
page, ``{py:func}`` and its kin code text linking to the API page of the object's floor
(``book/api/methods.html``), ``{cite}`` / ``{cite:t}`` author-year text linking to the references
page, and a repository-only command (``make bench``) or path (``benchmarks/bench_mixing.py``) a link
to the repository at the edition's commit. ``exercise_cells`` rewrites the directives of a whole
notebook, since a solution may span cells: exercises and solutions, admonitions, and a ``{figure}`` of
a drawing in ``book/diagrams/``, shown from the repository at the edition's commit and captioned with
its number. Both raise ``ValueError`` on markup they do not know, so nothing unrendered reaches Colab.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from ast import literal_eval
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "Reference",
    "NumberedLabel",
    "BookLinks",
    "DIAGRAMS",
    "GLOSSARY",
    "API_FLOORS",
    "glue_text",
    "escape_markdown",
    "cite_text",
    "term_anchor",
    "glossary_anchors",
    "api_page",
    "figure_names",
    "markdown_text",
    "exercise_cells",
]

ROLE = re.compile(r"\{(?P<name>[a-z]+(?::[a-z]+)?)\}`(?P<content>[^`]*)`")
FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w-]+)\}[ \t]*(?P<argument>.*)$")
OPTION = re.compile(r"^:(?P<key>[\w-]+):[ \t]*(?P<value>.*)$")
EXPLICIT = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^<>]+)>$")
# Repository-only commands and files, as code text in the prose: `make bench`, `benchmarks/bench_x.py`.
REPOSITORY_ONLY = re.compile(r"(?<!\[)`(?P<item>make [\w-]+|(?:benchmarks|tests|src|docs)/[\w./-]*)`(?!\])")
# A live explorer of the book's pages (_static/explorer.js): it draws in the browser and cannot run in Colab.
EXPLORER = re.compile(r'<div class="explorer"(?P<attributes>[^>]*)>\s*</div>')
EXPLORER_ATTRIBUTE = re.compile(r'(?P<key>id|data-explorer)="(?P<value>[^"]*)"')
# what Colab offers in its stead, by the explorer's kind (data-explorer)
EXPLORER_IN_COLAB = {
    "null-space": "here the widget of the next code cell (`helpers.NullSpaceExplorer`) moves the whole matrix",
    "attention-split": "here the code cells compute the same split for any text, layer and head",
}
MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>$|])")
ADMONITIONS = ("note", "tip", "important", "warning", "caution", "attention", "hint", "seealso")
DIAGRAMS = "book/diagrams"
"""The drawings of the book: the only figures of a markdown cell that an edition shows."""
GLOSSARY = "book/glossary"
"""The glossary page (its ``{glossary}`` terms are what a ``{term}`` role names)."""
API_FLOORS = ("model", "methods", "drivers", "book")
"""The floors of the helpers, one API page each: ``helpers.<floor>.x`` is on ``book/api/<floor>``."""


class Reference(NamedTuple):
    """One entry of ``references.bib`` as the text cites it: ``authors`` ("Brunner et al."), ``year``."""

    authors: str
    year: str


class NumberedLabel(NamedTuple):
    """Where a numbered label lives (``docname``, e.g. ``book/03_simplex_null_spaces``), its number ("3.4")
    and what it numbers (``kind``: "Exercise" or "Figure", the word a reference to it starts with)."""

    docname: str
    number: str
    kind: str = "Exercise"


@dataclass(frozen=True)
class BookLinks:
    """What the edition's prose links to: the online book, the repository at a commit, and what it names.

    ``url`` is the online book (ending in ``/``); ``repository`` the repository's URL; ``revision`` the
    commit the edition pins (``helpers.book.colab_install.helpers_revision``); ``titles`` each page's title by
    docname; ``labels`` each exercise's and figure's label, with its place and number; ``references`` each
    bibliography key's author-year; ``glossary`` each glossary term, lowercased, with its anchor on the glossary
    page (:func:`glossary_anchors`); ``root`` the repository checkout (a repository path the prose names must
    exist there).
    """

    url: str
    repository: str
    revision: str
    titles: dict[str, str] = field(default_factory=dict)
    labels: dict[str, NumberedLabel] = field(default_factory=dict)
    references: dict[str, Reference] = field(default_factory=dict)
    glossary: dict[str, str] = field(default_factory=dict)
    root: Path | None = None

    def page(self, docname: str, anchor: str = "") -> str:
        """The online page of ``docname`` (``book/api``), at ``anchor`` when given."""
        return f"{self.url}{docname}.html" + (f"#{anchor}" if anchor else "")

    def blob(self, path: str) -> str:
        """The repository's file (or folder, ending in ``/``) ``path`` at the edition's commit."""
        kind = "tree" if path.endswith("/") else "blob"
        return f"{self.repository}/{kind}/{self.revision}/{path.rstrip('/')}"

    def image(self, path: str) -> str:
        """The online book's copy of the drawing ``path`` (Sphinx copies a figure's file to ``_images/``
        under its own name). GitHub's raw address would serve an SVG as plain text, which Colab does not show."""
        return f"{self.url}_images/{path.rsplit('/', 1)[-1]}"


def glue_text(raw: str, spec: str = "") -> str:
    """A glued ``text/plain`` value as ``{glue:text}`name:spec``` shows it (myst-nb's rule).

    The saved text is a repr ("'0.75'", "12"): it is read back with ``literal_eval`` where it can be;
    ``spec`` (``.2f``, ``.0%``, ``d``) then converts it by its last character and formats it.
    """
    try:
        value = literal_eval(raw)
    except (SyntaxError, ValueError):
        value = raw
    if not spec:
        return str(value)
    kind = spec[-1]
    if kind == "s":
        value = str(value)
    elif kind in "bcdoxX":
        value = int(value)
    elif kind in "eEfFgGn%":
        value = float(value)
    return format(value, spec)


def escape_markdown(text: str) -> str:
    """``text`` with the characters Markdown would read as markup escaped ("[CLS]" stays "[CLS]")."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)


def cite_text(keys: str, textual: bool, links: BookLinks) -> str:
    """``{cite}`a,b``` as "(A et al., 2020; B and C, 2019)", ``{cite:t}`` as "A et al. (2020)", linked.

    Several works are listed by author and year, as the book lists them.
    """
    found = []
    for key in (k.strip() for k in keys.split(",")):
        if key not in links.references:
            raise ValueError(f"citation key {key!r} is not in references.bib")
        found.append(links.references[key])
    parts = [f"{who} ({year})" if textual else f"{who}, {year}" for who, year in sorted(found)]
    text = "; ".join(parts)
    return f"[{text if textual else f'({text})'}]({links.page('book/references')})"


def term_anchor(term: str) -> str:
    """The anchor Sphinx gives a glossary term on its page (``sphinx.util.nodes.make_id`` with the prefix
    "term"): "term-" and the term in ASCII, each run of characters other than letters, digits, "." and "_"
    one hyphen, the case kept ("Haar measure" -> "term-Haar-measure")."""
    text = unicodedata.normalize("NFKD", "term-" + " ".join(term.split())).encode("ascii", "ignore").decode("ascii")
    anchor = re.sub(r"^[-0-9._]+|-+$", "", re.sub(r"[^a-zA-Z0-9._]+", "-", text))
    if anchor == "term":
        raise ValueError(f"the glossary term {term!r} gives no anchor of its own (Sphinx would number it)")
    return anchor


def glossary_anchors(text: str) -> dict[str, str]:
    """Each term of the ``{glossary}`` blocks of a page (``book/glossary.md``), lowercased as a ``{term}`` role
    finds it, with its anchor (:func:`term_anchor`). A term is a line of the block that is not indented
    ("term : classifier" names "term"); its definition is indented under it."""
    anchors: dict[str, str] = {}
    for block in _blocks(text):
        if block.name != "glossary":
            continue
        for line in block.body.split("\n"):
            if not line.strip() or line[0].isspace() or line.startswith(".."):
                continue
            term = re.split(r" +: +", line.strip(), maxsplit=1)[0]
            key, anchor = " ".join(term.split()).lower(), term_anchor(term)
            if key in anchors or anchor in anchors.values():
                raise ValueError(f"the glossary has the term {term!r} twice (or its anchor {anchor!r})")
            anchors[key] = anchor
    return anchors


def api_page(target: str) -> str:
    """The API page that documents ``target``: ``book/api/<floor>`` for ``helpers.<floor>.x`` (one page per
    floor, ``API_FLOORS``), else the quickstart page ``book/api`` (the package ``helpers`` itself)."""
    parts = target.split(".")
    return f"book/api/{parts[1]}" if len(parts) > 1 and parts[0] == "helpers" and parts[1] in API_FLOORS else "book/api"


def _split_target(content: str) -> tuple[str | None, str]:
    """A role's explicit title and its target: ``title <target>`` or just ``target``."""
    match = EXPLICIT.match(content.strip())
    return (match["title"], match["target"]) if match else (None, content.strip())


def _api_link(kind: str, content: str, links: BookLinks) -> str:
    title, target = _split_target(content)
    if title is None:
        short = target.startswith("~")
        target = target.lstrip("~")
        title = target.rsplit(".", 1)[-1] if short else target
        if kind in ("func", "meth"):
            title += "()"
    anchor = f"module-{target}" if kind == "mod" else target
    return f"[`{title}`]({links.page(api_page(target), anchor)})"


def _docname(target: str, docname: str) -> str:
    """A ``{doc}`` target resolved against the page it is written on (``/intro`` is from the root)."""
    if target.startswith("/"):
        return target.lstrip("/")
    return posixpath.normpath(posixpath.join(posixpath.dirname(docname), target)).removeprefix("./")


def _role(name: str, content: str, links: BookLinks, docname: str, glue: dict[str, str]) -> str:
    """One role as plain Markdown (see the module's docstring); ``ValueError`` for one it does not know."""
    if name == "glue:text" or name == "glue":
        key, _, spec = content.partition(":")
        if "::" in content or key not in glue:
            raise ValueError(f"{docname}: no glued value {content!r} in the committed outputs")
        return escape_markdown(glue_text(glue[key], spec if name == "glue:text" else ""))
    if name == "doc":
        title, target = _split_target(content)
        target = _docname(target, docname)
        if target not in links.titles:
            raise ValueError(f"{docname}: {{doc}} names {target!r}, which is not a page of the book")
        return f"[{title or links.titles[target]}]({links.page(target)})"
    if name in ("numref", "ref"):
        title, label = _split_target(content)
        if label not in links.labels:
            raise ValueError(f"{docname}: {{{name}}} names {label!r}, which is no exercise or figure of the book")
        where, number, kind = links.labels[label]
        text = (title or f"{kind} %s").replace("%s", number).replace("{number}", number)
        return f"[{text}]({links.page(where, label)})"
    if name == "term":
        title, target = _split_target(content)
        key = " ".join(target.split()).lower()
        if key not in links.glossary:
            raise ValueError(f"{docname}: {{term}} names {target!r}, which is no term of the glossary")
        return f"[{title or target}]({links.page(GLOSSARY, links.glossary[key])})"
    if name in ("cite", "cite:p", "cite:t"):
        return cite_text(content, name == "cite:t", links)
    if name.startswith("py:"):
        return _api_link(name[3:], content, links)
    raise ValueError(f"{docname}: the role {{{name}}} has no Colab rendering")


def _repository_link(match: re.Match, links: BookLinks) -> str:
    item = match["item"]
    if item.startswith("make "):
        path = "benchmarks/" if item == "make bench" else "Makefile"
    else:
        path = item
        if links.root is not None and not (links.root / path).exists():
            raise ValueError(f"the prose names {path!r}, which is not in the repository")
    return f"[`{item}`]({links.blob(path)})"


def explorer_note(match: re.Match, links: BookLinks, docname: str) -> str:
    """The note that stands for a live explorer (``<div class="explorer" ...>``) in the Colab edition:
    where the explorer is on the book's page, and what runs in Colab instead."""
    attributes = dict(EXPLORER_ATTRIBUTE.findall(match["attributes"]))
    kind = attributes.get("data-explorer", "")
    if kind not in EXPLORER_IN_COLAB:
        raise ValueError(f"{docname}: the explorer {kind!r} has no Colab note (EXPLORER_IN_COLAB)")
    page = links.page(docname, attributes.get("id", ""))
    return (
        f"*The live explorer is on [the book's page]({page}): it draws precomputed numbers in the browser "
        f"and does not run in Colab; {EXPLORER_IN_COLAB[kind]}.*"
    )


def markdown_text(text: str, links: BookLinks, docname: str, glue: dict[str, str]) -> str:
    """One markdown cell's roles in plain Markdown (directives are ``exercise_cells``' work).

    Args:
        text: the cell's source.
        links: where the links point.
        docname: the page the text is on (``book/01_anatomy_of_a_head``).
        glue: the notebook's glued values, name -> saved ``text/plain``.
    """
    text = EXPLORER.sub(lambda m: explorer_note(m, links, docname), text)
    text = ROLE.sub(lambda m: _role(m["name"], m["content"], links, docname, glue), text)
    return REPOSITORY_ONLY.sub(lambda m: _repository_link(m, links), text)


class _Block(NamedTuple):
    name: str  # "text" for plain Markdown, else the directive's name
    argument: str
    options: dict[str, str]
    body: str


def _blocks(text: str) -> list[_Block]:
    """A markdown cell cut into plain text and the directives in it (``` or ::: fences)."""
    blocks, plain, lines, i = [], [], text.split("\n"), 0
    while i < len(lines):
        match = FENCE.match(lines[i].strip())
        if not match:
            plain.append(lines[i])
            i += 1
            continue
        closing = re.compile(rf"^{re.escape(match['fence'][0])}{{{len(match['fence'])},}}\s*$")
        j = i + 1
        while j < len(lines) and not closing.match(lines[j].strip()):
            j += 1
        if j == len(lines):
            raise ValueError(f"the directive {{{match['name']}}} is never closed")
        body, options = lines[i + 1 : j], {}
        while body and OPTION.match(body[0]):
            option = OPTION.match(body.pop(0))
            options[option["key"]] = option["value"]
        blocks += [
            _Block("text", "", {}, "\n".join(plain)),
            _Block(match["name"], match["argument"], options, "\n".join(body)),
        ]
        plain, i = [], j + 1
    return blocks + [_Block("text", "", {}, "\n".join(plain))]


def figure_names(text: str, docname: str = "") -> list[str]:
    """The labels (``:name:``) of the ``{figure}`` blocks of a markdown cell, in order.

    Sphinx numbers a captioned figure (``numfig``), a block of a markdown cell and a code cell's figure in
    one sequence; the edition numbers them by label, so a figure block needs a name and a caption.
    """
    names = []
    for block in _blocks(text):
        if block.name == "figure":
            if not block.options.get("name") or not block.body.strip():
                raise ValueError(
                    f"{docname}: the figure {block.argument!r} needs a :name: and a caption to be numbered"
                )
            names.append(block.options["name"])
    return names


def _figure(block: _Block, links: BookLinks | None, docname: str) -> str:
    """A ``{figure}`` of a drawing (``book/diagrams/x.svg``): the image from the repository at the edition's
    commit, then "**Figure N.k.** caption" (the caption's roles are ``markdown_text``'s work)."""
    if links is None:
        raise ValueError("the directive {figure} has no Colab rendering without the book's links")
    path = posixpath.normpath(_docname(block.argument.strip(), docname))
    if not path.startswith(DIAGRAMS + "/"):
        raise ValueError(f"{docname}: the figure {block.argument!r} is not a drawing of {DIAGRAMS}/")
    if links.root is not None and not (links.root / path).is_file():
        raise ValueError(f"{docname}: the figure {path!r} is not in the repository")
    name = block.options.get("name", "")
    if name not in links.labels:
        raise ValueError(f"{docname}: the figure {path!r} has no :name: the book numbers")
    alt = escape_markdown(" ".join(block.options.get("alt", "").split()))
    return f"![{alt}]({links.image(path)})\n\n**Figure {links.labels[name].number}.** {block.body.strip()}"


def _details(body: str, summary: str) -> str:
    return f"<details>\n<summary>{summary}</summary>\n\n{body.strip()}\n\n</details>"


def _admonition(name: str, body: str) -> str:
    quoted = "\n".join(f"> {line}" if line else ">" for line in body.strip().split("\n"))
    return f"> **{name.capitalize()}.**\n{quoted}"


def _code_cells_after(cells: list, index: int) -> int:
    """How many code cells a reader sees after cell ``index``, before the next markdown cell
    (a ``remove-cell`` cell is bookkeeping: folded in the edition, not the solution's code)."""
    count = 0
    for cell in cells[index + 1 :]:
        if cell["cell_type"] != "code":
            break
        count += "remove-cell" not in cell.get("metadata", {}).get("tags", [])
    return count


def _solution_parts(text: str, number: str, shown: bool, following: int) -> list[str]:
    """A solution's text in one cell as a ``<details>`` block, and a line when its code follows."""
    parts = []
    if text:
        summary = f"Solution to Exercise {number}" + (" (continued)" if shown else "")
        parts.append(_details(text, summary))
    if following:
        lead = "" if text else f"**Solution to Exercise {number}.** "
        cells = "The next cell is" if following == 1 else f"The next {following} cells are"
        parts.append(f"{lead}{cells} the solution's code.")
    return parts


def exercise_cells(cells: list, chapter: str | None, links: BookLinks | None = None, docname: str = "") -> list:
    """The markdown cells of one notebook with their directives in plain Markdown (``cells`` changed in place).

    An exercise opens with "**Exercise N.k**" (``chapter`` "3" gives 3.1, 3.2, ... in order); its
    solution's text goes in ``<details><summary>Solution to Exercise N.k</summary>``, one block per
    markdown cell, and a cell after which the solution continues in code says so ("The next cell is
    the solution's code."). Code cells stay code cells. Admonitions (``note``) become block quotes. A
    ``{figure}`` of a drawing becomes its image and "**Figure N.k.** caption", numbered by ``links.labels``
    (``docname``, the page, resolves its path; without ``links`` a figure is refused).
    """
    numbers: dict[str, str] = {}
    solution, shown = None, False  # the open solution's exercise number; whether its text has shown yet
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        parts, buffer = [], []
        for block in _blocks(cell["source"]):
            if block.name == "text":
                (buffer if solution else parts).append(block.body)
            elif block.name in ("exercise-start", "exercise"):
                if chapter is None:
                    raise ValueError("an exercise in a notebook without a chapter number")
                number = f"{chapter}.{len(numbers) + 1}"
                numbers[block.options.get("label", f"#{number}")] = number
                parts.append(f"**Exercise {number}**\n\n{block.body}".rstrip())
            elif block.name in ("solution-start", "solution", "solution-end"):
                if block.name != "solution-end":
                    if block.argument not in numbers:
                        raise ValueError(f"a solution to {block.argument!r}, which is no exercise before it")
                    solution, shown = numbers[block.argument], False
                    buffer.append(block.body)
                if block.name != "solution-start":
                    parts += _solution_parts("\n".join(buffer).strip(), solution, shown, 0)
                    buffer, solution = [], None
            elif block.name in ADMONITIONS:
                (buffer if solution else parts).append(_admonition(block.name, block.body))
            elif block.name == "figure":
                (buffer if solution else parts).append(_figure(block, links, docname))
            elif block.name != "exercise-end":
                raise ValueError(f"the directive {{{block.name}}} has no Colab rendering")
        if solution:
            text = "\n".join(buffer).strip()
            parts += _solution_parts(text, solution, shown, _code_cells_after(cells, index))
            shown = shown or bool(text)
        cell["source"] = "\n\n".join(p.strip("\n") for p in parts if p.strip())
    return cells
