"""Static checks of the chapters: the first cell, the model from the environment, claims, no typed sizes."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
# Sizes of the default model (d_v = 32, d = 384) and of BERT-Base (d_v = 64, d = 768): read them from
# helpers.describe(model) or helpers.paper, never type them.
MODEL_SIZES = re.compile(r"(?<![\w.])(32|64|384|768)(?![\w.])")
GLUE_ROLE = re.compile(r"\{glue:[a-z]+\}`[^`]*`")
PERCENTAGE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?%")


def _cells(notebook: Path, kind: str) -> list:
    return [c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == kind]


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_first_cell_sets_up_the_chapter_and_installs_nothing(notebook):
    first = _cells(notebook, "code")[0]
    # the Colab edition (colab/book/, written by helpers.book.colab) puts the install in front of this cell
    installs = re.findall(r"pip|git\+|google\.colab", first.source)
    assert not installs, f"{notebook.name}: no install in the book's first cell ({installs}): the Colab edition has it"
    assert 'os.environ.get("BOOK_MODEL")' in first.source, f"{notebook.name}: MODEL must come from BOOK_MODEL"
    assert "hide-input" in first.metadata.get("tags", []), f"{notebook.name}: collapse the install cell in HTML"


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_ends_with_its_claims(notebook):
    code = _cells(notebook, "code")
    assert code[-1].source.strip().endswith("claims.enforce()"), f"{notebook.name}: the last cell enforces the claims"
    named = re.compile(rf'Claims\(\s*"{notebook.stem}"')
    assert named.search("".join(c.source for c in code)), "the scoreboard is named after the file"


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_typed_model_sizes(notebook):
    typed = []
    for cell in _cells(notebook, "code") + _cells(notebook, "markdown"):
        text = GLUE_ROLE.sub("", cell.source)
        text = re.sub(r"#.*", "", text) if cell.cell_type == "code" else RUNNING_TIME.sub("", text)
        typed += [m.group(0) for m in MODEL_SIZES.finditer(text)]
    assert not typed, (
        f"{notebook.name}: model sizes typed in the text or code: {typed}; read them from helpers.describe"
    )


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_typed_percentages_in_the_prose(notebook):
    typed = [
        m.group(0) for cell in _cells(notebook, "markdown") for m in PERCENTAGE.finditer(GLUE_ROLE.sub("", cell.source))
    ]
    assert not typed, (
        f"{notebook.name}: percentages typed in the prose: {typed}; glue them (helpers.glue, helpers.paper)"
    )


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_first_cell_says_when_the_method_does_not_apply(notebook):
    from helpers.book.chapters import CHAPTER_NEEDS

    first = _cells(notebook, "code")[0]
    assert notebook.stem in CHAPTER_NEEDS, f"{notebook.stem}: say in helpers.book.chapters.CHAPTER_NEEDS what it needs"
    loads = re.compile(rf'helpers\.load_for_chapter\(\s*MODEL,\s*"{notebook.stem}"\s*\)')
    assert loads.search(first.source), (
        f"{notebook.name}: the first cell must load the model with helpers.load_for_chapter for this chapter"
    )


RESIDUAL = re.compile(r"(?<![\w.])[2-9](?:\.\d+)?[eE]-\d+")


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_raw_residual_in_a_checked_output(notebook):
    # a residual such as 8e-06 is float noise that another CPU prints as 4e-06: print its bound
    # (helpers.residual_text), a power of ten, instead. Cells tagged nbval-ignore-output are not compared.
    raw = []
    for cell in _cells(notebook, "code"):
        if "nbval-ignore-output" in cell.metadata.get("tags", []):
            continue
        for output in cell.get("outputs", []):
            texts = [output.get("text", "")] + [
                v for k, v in output.get("data", {}).items() if k.startswith(("text/", "application/papermill"))
            ]
            raw += [m.group(0) for text in texts for m in RESIDUAL.finditer(str(text))]
    assert not raw, f"{notebook.name}: residuals printed as numbers in compared outputs: {raw[:5]}"


HIDDEN_INPUT = {"remove-cell", "remove-input", "hide-input"}
BOOKKEEPING = re.compile(r"\bhelpers\.glue\(|\bclaims\.(?!enforce\b)\w+\(")
COLUMN = 74  # characters of code a cell shows at 1280 px (book/ruff.toml formats the chapters to it)


def _visible_code_lines(notebook: Path) -> list[str]:
    return [
        line
        for cell in _cells(notebook, "code")
        if not HIDDEN_INPUT & set(cell.metadata.get("tags", []))
        for line in cell.source.splitlines()
        if line.strip()
    ]


@pytest.mark.parametrize("notebook", CHAPTERS + [ROOT / "book" / "report.ipynb"], ids=lambda p: p.stem)
def test_bookkeeping_is_out_of_sight(notebook):
    """Glue and claim calls run in cells removed from the HTML: under 10% of the code a reader sees."""
    visible = _visible_code_lines(notebook)
    shown = [line for line in visible if BOOKKEEPING.search(line)]
    assert len(shown) <= 0.1 * len(visible), (
        f"{notebook.name}: {len(shown)} of {len(visible)} visible code lines are glue or claims; "
        f"move them to a cell tagged remove-cell: {shown[:3]}"
    )


REMOVED = {"remove-cell", "remove-input"}  # cells whose code the page does not show at all (hide-input folds it)
# a visible line that registers a claim, or sets or computes a chapter's budget (helpers.book.budgets holds them)
OUT_OF_SIGHT = re.compile(
    r"\bClaims\(|\bclaims\.(?!enforce\b)\w+\(|\b[A-Z_]*(?:BUDGET|SCALE)\b|\bwork_scale\(|\bthin\b"
)


def _names(source: str) -> tuple[set[str], set[str]]:
    """Names a cell binds (assignments, imports, defs, loop and comprehension targets) and names it reads."""
    import ast

    bound, read = set(), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, read


def test_names_removed_cells_define_are_not_read_by_visible_ones():
    """A reader who copies the code on the page can run it: no visible cell reads a name that only a cell
    removed from the page (remove-cell, remove-input) defines."""
    problems = []
    for notebook in CHAPTERS + [ROOT / "book" / "report.ipynb"]:
        shown, hidden = set(), {}
        for index, cell in enumerate(_cells(notebook, "code")):
            bound, read = _names(cell.source)
            if REMOVED & set(cell.metadata.get("tags", [])):
                hidden.update({name: index for name in bound if name not in shown})
                continue
            unseen = sorted(name for name in read - bound - shown if name in hidden)
            problems += [
                f"{notebook.name}, code cell {index}: {name} (from code cell {hidden[name]})" for name in unseen
            ]
            shown |= bound
    assert not problems, "visible code reads names only a removed cell defines:\n" + "\n".join(problems)


def test_visible_code_registers_no_claim_and_sets_no_budget():
    """Claims are registered in removed cells; budgets come from helpers.book.budgets, not from visible code."""
    found = [
        f"{notebook.name}: {line.strip()}"
        for notebook in CHAPTERS + [ROOT / "book" / "report.ipynb"]
        for line in _visible_code_lines(notebook)
        if OUT_OF_SIGHT.search(line)
    ]
    assert not found, "visible lines that register a claim or set a budget:\n" + "\n".join(found)


# how the book is run: the introduction's "Running the book yourself" says it once, the chapters' prose never
RUNNING_JARGON = re.compile(
    r"\bBOOK_[A-Z_]+\b|\bmake (?:bench|test|book|check|notebooks|colab|colab-check|lint|browser)\b|\bstrict mode\b"
)


def test_chapter_prose_leaves_how_the_book_is_run_to_the_introduction():
    found = [
        f"{notebook.name}: {match.group(0)!r}"
        for notebook in CHAPTERS + [ROOT / "book" / "report.ipynb"]
        for cell in _cells(notebook, "markdown")
        for match in RUNNING_JARGON.finditer(cell.source)
    ]
    assert not found, "environment variables and make targets in chapter prose:\n" + "\n".join(found)
    introduction = (ROOT / "book" / "intro.md").read_text()
    assert "## Running the book yourself" in introduction
    for name in ("BOOK_MODEL", "BOOK_CLAIMS=report", "BOOK_DEVICE=cuda", "BOOK_PROGRESS=0", "make bench"):
        assert name in introduction, f"the introduction's running section does not say {name}"


def test_the_checks_of_visible_code_can_fail():
    """The two checks above, on cells that break them."""
    bound, read = _names("rows = budget_rows(n)\nfor k in rows:\n    print(k, [j for j in range(k)])")
    assert {"rows", "k", "j"} <= bound and {"budget_rows", "n", "print", "range"} <= read
    for line in ("claims = helpers.Claims(__name__)", "claims.finding('x', ...)", "ROW_BUDGET = 48",
                 "SCALE = helpers.book.chapters.work_scale(model)", "thin = max(1, round(4 * size))"):  # fmt: skip
        assert OUT_OF_SIGHT.search(line), line
    assert not OUT_OF_SIGHT.search("claims.enforce()")


@pytest.mark.parametrize("notebook", CHAPTERS + [ROOT / "book" / "report.ipynb"], ids=lambda p: p.stem)
def test_visible_code_fits_the_column(notebook):
    """The code a reader sees fits the code cell's width in the rendered page (no horizontal scrolling)."""
    long = [line for line in _visible_code_lines(notebook) if len(line) > COLUMN]
    assert not long, f"{notebook.name}: {len(long)} visible code lines over {COLUMN} characters: {long[:3]}"


CLAIMS_MIME = "application/vnd.book.claims+json"


def _scoreboard_record(notebook: Path) -> tuple[dict | None, list[str]]:
    """The record the committed scoreboard cell carries, and that cell's tags."""
    last = _cells(notebook, "code")[-1]
    for output in last.get("outputs", []):
        record = output.get("metadata", {}).get(CLAIMS_MIME)
        if record:
            return record, last.metadata.get("tags", [])
    return None, last.metadata.get("tags", [])


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_the_committed_scoreboard_is_compared_and_sound(notebook):
    """Every paper claim and finding has a control and an interval, no control meets its own bound,
    and the notebook check compares the scoreboard, so a verdict that changes fails the build."""
    from helpers.book.claims import record_defects

    record, tags = _scoreboard_record(notebook)
    assert "nbval-ignore-output" not in tags, f"{notebook.name}: the scoreboard must be compared by the notebook check"
    assert record is not None, f"{notebook.name}: the last cell's output carries no claims record: re-execute it"
    assert record["chapter"] == notebook.stem
    defects = record_defects(record)
    assert not defects, f"{notebook.name}: " + "; ".join(defects)
    kinds = {c["kind"] for c in record["claims"]}
    assert kinds, f"{notebook.name}: an empty scoreboard"


FIGURE_LABEL = re.compile(r"fig-(\d+)-[a-z0-9-]+")


def test_every_figure_is_numbered_and_captioned():
    """A cell that draws a figure carries mystnb.figure (a label and a caption): the book numbers it (Figure 5.2)."""
    problems, labels = [], []
    for notebook in CHAPTERS:
        chapter = int(notebook.name[:2])
        for index, cell in enumerate(_cells(notebook, "code")):
            images = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
            if not images:
                continue
            where = f"{notebook.name}, code cell {index}"
            figure = cell.metadata.get("mystnb", {}).get("figure", {})
            label = FIGURE_LABEL.fullmatch(figure.get("name", ""))
            if not label or int(label[1]) != chapter:
                problems.append(f"{where}: no label fig-{chapter}-<slug> ({figure.get('name')!r})")
            if len(figure.get("caption", "").split()) < 8:
                problems.append(f"{where}: no caption of a sentence or more ({figure.get('caption')!r})")
            others = [o for o in cell.get("outputs", []) if o.get("output_type") in ("display_data", "execute_result")]
            if len(images) > 1 or len(others) > 1:
                problems.append(f"{where}: one figure per captioned cell (the caption wraps every display output)")
            labels.append(figure.get("name"))
    duplicated = sorted({name for name in labels if labels.count(name) > 1})
    assert not problems and not duplicated, "\n".join(problems + [f"label used twice: {d}" for d in duplicated])


def test_every_numref_names_a_label_of_the_book():
    """{numref} targets exist: a figure's label (cell metadata) or an exercise's (:label:)."""
    known = set()
    for notebook in CHAPTERS:
        for cell in nbformat.read(notebook, as_version=4).cells:
            known.add(cell.metadata.get("mystnb", {}).get("figure", {}).get("name"))
            known.update(re.findall(r"^:label:\s*(\S+)", cell.source, flags=re.M))
    missing = [
        f"{notebook.name}: {target}"
        for notebook in CHAPTERS
        for cell in _cells(notebook, "markdown")
        for target in re.findall(r"\{numref\}`(?:[^`<]*<)?([^`>]+)>?`", cell.source)
        if target not in known
    ]
    assert not missing, f"{{numref}} to no label: {missing}"


RUNNING_TIME = re.compile(r"\*\*Time:\*\* about (\d+) minutes? on 2 CPU cores")


def committed_minutes(notebook: Path) -> float:
    """The committed run's wall time in minutes, from the cells' execution timestamps (first start to last reply)."""
    from datetime import datetime

    stamps = [c.metadata.get("execution", {}) for c in _cells(notebook, "code")]
    stamps = [s for s in stamps if "iopub.execute_input" in s and "shell.execute_reply" in s]
    assert stamps, f"{notebook.name}: no execution timestamps (run it with jupyter execute)"
    start = datetime.fromisoformat(stamps[0]["iopub.execute_input"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(stamps[-1]["shell.execute_reply"].replace("Z", "+00:00"))
    return (end - start).total_seconds() / 60


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_the_chapter_says_how_long_it_takes(notebook):
    """Near its top, the time of the committed run, within a factor of 1.5 of the cells' own timestamps."""
    opening = _cells(notebook, "markdown")[0].source
    said = RUNNING_TIME.search(opening)
    assert said, f"{notebook.name}: the opening cell must say '**Time:** about N minutes on 2 CPU cores'"
    measured = committed_minutes(notebook)
    assert measured / 1.5 <= int(said[1]) <= max(1.0, measured * 1.5), (
        f"{notebook.name}: says {said[1]} minutes, the committed run took {measured:.1f}"
    )


@pytest.mark.parametrize("notebook", [*CHAPTERS, ROOT / "book" / "report.ipynb"], ids=lambda p: p.stem)
def test_no_committed_output_is_a_warning(notebook):
    """A warning on stderr names the machine's paths and reads differently on every clone: silence its cause."""
    streams = [
        output.text
        for cell in _cells(notebook, "code")
        for output in cell.get("outputs", [])
        if output.get("output_type") == "stream" and output.get("name") == "stderr"
    ]
    assert not streams, f"{notebook.name}: stderr in a committed output: {streams[0][:200]!r}"
