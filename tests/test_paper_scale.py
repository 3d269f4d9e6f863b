"""The paper-scale edition (helpers.book.paper_scale): written from the chapters, run on all-mpnet-base-v2, and
refused by these tests while its committed runs are stale (the chapter's code or the helpers changed since)."""

import copy
import json
from pathlib import Path

import pytest

from helpers.book import paper_scale
from helpers.book.chapters import CHAPTER_NEEDS
from helpers.book.records import committed_record, record_defects
from helpers.book.registry import load_registry

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
EDITIONS = [BOOK / paper_scale.EDITION_FOLDER / f"{c}.ipynb" for c in paper_scale.edition_chapters()]


def _without_run(notebook: dict) -> dict:
    """A notebook less what a run and its stamp add: outputs, counts, timestamps, fingerprint, time line."""
    notebook = copy.deepcopy(notebook)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            cell["metadata"].pop("execution", None)
        cell.pop("id", None)
        text = paper_scale.TIME_LINE.sub("**Time:**", "".join(cell["source"]))
        cell["source"] = text
    return {"cells": notebook["cells"]}  # the metadata holds what a run leaves (widget state, the kernel's version)


def test_the_edition_holds_every_encoder_chapter():
    assert paper_scale.edition_chapters() == [c for c, needs in CHAPTER_NEEDS.items() if "causal" not in needs]
    assert len(paper_scale.edition_chapters()) == 8 and paper_scale.refused_chapters() == {}
    with pytest.raises(ValueError, match="not in the paper-scale edition"):
        paper_scale.edition_notebook({"cells": []}, "09_decoder_llm")


def test_the_generator_fixes_the_model_relabels_and_links_back():
    chapter = "02_rank_argument"
    source = json.loads((BOOK / f"{chapter}.ipynb").read_text())
    edition = paper_scale.edition_notebook(source, chapter)
    code = ["".join(c["source"]) for c in edition["cells"] if c["cell_type"] == "code"]
    assert paper_scale.MODEL_LINE in code[0] and code[0].count(paper_scale.CHAPTER_MODEL_LINE) == 1
    # the page reads BOOK_MODEL like its chapter, with the edition's model as the default
    assert f'os.environ.get("BOOK_MODEL") or "{paper_scale.EDITION_MODEL}"' in code[0]
    # every other code cell is the chapter's own
    original = ["".join(c["source"]) for c in source["cells"] if c["cell_type"] == "code"]
    assert code[1:] == original[1:]
    text = json.dumps(edition)
    assert "ps-fig-2-rank-sweep" in text and '"fig-2-rank-sweep"' not in text
    assert "{doc}`../01_anatomy_of_a_head`" in text and "{doc}`01_anatomy_of_a_head`" not in text
    title = "".join(edition["cells"][0]["source"])
    assert title.startswith("# The rank argument (paper scale)") and "not yet measured" in title
    # the summary's bullets state the bundled model's verdicts: the edition points at them instead
    assert "<!-- states:" in json.dumps(source) and "<!-- states:" not in text
    assert "The chapter's summary ({doc}`../02_rank_argument`" in text


def test_the_live_explorers_of_the_bundled_model_are_left_out():
    chapter = json.loads((BOOK / "03_simplex_null_spaces.ipynb").read_text())
    assert any(paper_scale.LIVE_EXPLORER in "".join(c["source"]) for c in chapter["cells"])
    edition = paper_scale.edition_notebook(chapter, "03_simplex_null_spaces")
    assert paper_scale.LIVE_EXPLORER not in json.dumps(edition)
    markdown = [c for c in chapter["cells"] if c["cell_type"] == "markdown"]
    assert len([c for c in edition["cells"] if c["cell_type"] == "markdown"]) == len(markdown) - 1


@pytest.mark.parametrize("edition", EDITIONS, ids=lambda p: p.stem)
def test_a_committed_edition_is_the_chapter_run_on_mpnet_and_not_stale(edition):
    chapter = edition.stem
    assert edition.is_file(), f"no edition {edition.relative_to(ROOT)}: run make paper-scale"
    committed = json.loads(edition.read_text())
    expected = paper_scale.edition_notebook(json.loads((BOOK / f"{chapter}.ipynb").read_text()), chapter)
    assert _without_run(committed) == _without_run(expected), (
        f"{edition.name} differs from its chapter: the chapter changed since the edition was written (make paper-scale)"
    )
    stamp = committed["metadata"].get("book", {})
    assert stamp.get("model") == paper_scale.EDITION_MODEL
    assert stamp.get("code") == paper_scale.code_fingerprint(committed), "the edition was edited after its run"
    assert stamp.get("helpers") == paper_scale.helpers_fingerprint(), (
        f"{edition.name} was run with other helpers than these: its records are stale (make paper-scale)"
    )
    assert "not yet measured" not in "".join(committed["cells"][0]["source"])
    record = committed_record(edition)
    assert record["model"] == paper_scale.EDITION_MODEL and record["chapter"] == chapter
    assert record_defects(record) == []
    registered = {e.id for e in load_registry().chapter(chapter)}
    assert {c["id"] for c in record["claims"] if c["kind"] != "check"} == registered


def test_stamp_needs_a_run_and_writes_the_measured_time():
    chapter = "04_effective_attention"
    edition = paper_scale.edition_notebook(json.loads((BOOK / f"{chapter}.ipynb").read_text()), chapter)
    with pytest.raises(ValueError, match="no execution timestamps"):
        paper_scale.stamp(copy.deepcopy(edition))
    code = [c for c in edition["cells"] if c["cell_type"] == "code"]
    code[0]["metadata"]["execution"] = {"iopub.execute_input": "2026-12-05T01:00:00.000000Z"}
    code[-1]["metadata"]["execution"] = {"shell.execute_reply": "2026-12-05T01:07:40.000000Z"}
    stamped = paper_scale.stamp(edition)
    assert "about 8 minutes on 2 CPU cores for this edition" in "".join(stamped["cells"][0]["source"])
    assert stamped["metadata"]["book"]["code"] == paper_scale.code_fingerprint(stamped)


def test_every_edition_page_is_in_the_books_contents():
    toc = (BOOK.parent / "_toc.yml").read_text()
    for chapter in paper_scale.edition_chapters():
        assert f"- file: book/{paper_scale.EDITION_FOLDER}/{chapter}\n" in toc, chapter


def test_every_chapter_in_the_edition_points_at_its_page():
    for chapter in paper_scale.edition_chapters():
        notebook = json.loads((BOOK / f"{chapter}.ipynb").read_text())
        title = next("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")
        assert "**Paper scale:**" in title and f"{{doc}}`paper_scale/{chapter}`" in title, chapter


def test_the_helpers_fingerprint_leaves_out_only_what_no_run_imports(tmp_path):
    for name in ("book/colab.py", "book/claims.py", "model/capture.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    before = paper_scale.helpers_fingerprint(tmp_path)
    (tmp_path / "book/colab.py").write_text("x = 2\n")  # an edition writer: no run imports it
    assert paper_scale.helpers_fingerprint(tmp_path) == before
    (tmp_path / "book/claims.py").write_text("x = 2\n")
    assert paper_scale.helpers_fingerprint(tmp_path) != before
    # and nothing a run imports (a chapter, the helpers but those writers) imports them
    left_out = {Path(p).stem for p in paper_scale.NOT_IMPORTED_BY_A_RUN}
    helpers_root = ROOT / "src" / "helpers"
    sources = [
        p.read_text()
        for p in helpers_root.rglob("*.py")
        if p.relative_to(helpers_root).as_posix() not in paper_scale.NOT_IMPORTED_BY_A_RUN
    ]
    sources += [p.read_text() for p in BOOK.glob("*.ipynb")]
    for stem in left_out:
        assert not any(f"book.{stem}" in s or f"from .{stem} import" in s or f"import {stem}" in s for s in sources), (
            stem
        )
