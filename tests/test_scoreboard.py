"""How a scoreboard reads: the verdict first, the quantity under each figure, findings that do not hold in a
neutral colour, long tables grouped by verdict; and the committed scoreboards are what the code renders."""

import json
import re
import shutil
from pathlib import Path

import pytest

from helpers.book.records import CLAIMS_MIME
from helpers.book.rerender import main, rendered_outputs, rerender_notebook, scoreboard_outputs
from helpers.book.scoreboard import GROUP_ABOVE, Scoreboard, claims_frame

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))


def record(kind, id, verdict, measured="0.50 [0.40, 0.60] over 20 sequences"):
    return {"id": id, "kind": kind, "claim": f"the claim {id}", "verdict": verdict, "measured": measured}


def board(records, quantities=None):
    quantities = quantities or {}
    return Scoreboard(claims_frame(records, "99_test", lambda chapter, id: quantities.get(id, "")))


def cells(html: str, id: str) -> list[str]:
    """The cells of the row of claim ``id``, in order."""
    row = re.search(rf"<tr [^>]*>((?:(?!</tr>).)*>{id}</span>.*?)</tr>", html).group(1)
    return re.findall(r"<td[^>]*>.*?</td>", row)


def test_the_verdict_comes_first_and_the_figure_names_its_quantity():
    html = board(
        [record("paper", "a", "reproduced"), record("paper", "b", "not testable here", measured="")],
        {"a": "Spearman correlation", "b": "share of heads"},
    )._repr_html_()
    assert re.search(r"<thead><tr><th class=\"verdict\">verdict</th><th>claim</th>", html)
    a = cells(html, "a")
    assert a[0] == '<td class="verdict yes">reproduced</td>'
    assert a[3] == '<td>0.50 [0.40, 0.60] over 20 sequences<div class="quantity">Spearman correlation</div></td>'
    assert cells(html, "b")[3] == "<td>-</td>"  # nothing measured: no quantity to name


def test_a_finding_that_does_not_hold_is_neutral_and_a_claim_not_reproduced_stays_red():
    html = board([record("paper", "p", "not reproduced"), record("finding", "f", "does not hold")])._repr_html_()
    assert cells(html, "p")[0] == '<td class="verdict no">not reproduced</td>'
    assert cells(html, "f")[0] == '<td class="verdict neutral">does not hold</td>'


def test_the_report_puts_its_chapter_after_the_verdict():
    frame = claims_frame([{**record("paper", "a", "reproduced"), "chapter": "04"}], quantity=lambda c, i: "")
    frame.insert(0, "chapter", ["04"])
    html = Scoreboard(frame, links={"04": "04.html"})._repr_html_()
    assert '<th class="verdict">verdict</th><th class="chapter">ch.</th><th>claim</th>' in html
    assert cells(html, "a")[1] == '<td class="chapter"><a href="04.html">04</a></td>'


def test_a_short_table_stays_flat():
    html = board([record("paper", f"c{i}", "reproduced") for i in range(GROUP_ABOVE)])._repr_html_()
    assert '<details class="scoreboard-group"' not in html and html.count("<table") == 1


def test_a_long_table_is_grouped_by_verdict_and_only_a_majority_starts_closed():
    verdicts = ["reproduced"] * 6 + ["not reproduced"] * 2 + ["in direction only"]
    html = board([record("paper", f"c{i}", v) for i, v in enumerate(verdicts)])._repr_html_()
    summaries = re.findall(r'<details class="scoreboard-group"( open)?><summary>(.*?)</summary>', html)
    assert [(bool(is_open), re.sub("<[^>]+>", "", text)) for is_open, text in summaries] == [
        (False, "reproduced (6)"),  # more than half of the rows: closed, its count says enough
        (True, "in direction only (1)"),  # the registry's order of verdicts, not the order of the rows
        (True, "not reproduced (2)"),
    ]
    assert '<summary><span class="verdict no">not reproduced</span> (2)</summary>' in html
    assert html.count("<table") == 3 and html.count("<tr class=") == len(verdicts)


def test_no_group_starts_closed_without_a_majority():
    verdicts = ["holds"] * 4 + ["does not hold"] * 3 + ["inconclusive"] * 2
    html = board([record("finding", f"f{i}", v) for i, v in enumerate(verdicts)])._repr_html_()
    assert html.count('<details class="scoreboard-group" open>') == 3
    assert '<span class="verdict neutral">does not hold</span> (3)' in html


def test_the_plain_text_names_the_quantity():
    text = repr(board([record("finding", "f", "holds")], {"f": "share of heads"}))
    assert "here, share of heads: 0.50 [0.40, 0.60] over 20 sequences;" in text


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.stem)
def test_the_committed_scoreboard_is_what_the_code_renders_from_its_record(notebook):
    """Every committed scoreboard output equals a re-render of the record it carries (else run
    ``python -m helpers.book.rerender book/0*.ipynb``, or execute the chapter)."""
    outputs = scoreboard_outputs(json.loads(notebook.read_text(encoding="utf-8")))
    assert len(outputs) == 1, f"{notebook.name}: {len(outputs)} scoreboard outputs"
    committed = outputs[0]["data"]
    fresh = rendered_outputs(outputs[0]["metadata"][CLAIMS_MIME])
    assert committed == fresh, f"{notebook.name}: stale scoreboard; python -m helpers.book.rerender {notebook.name}"


def test_rerender_replaces_a_stale_scoreboard_and_nothing_else(tmp_path):
    copy = tmp_path / CHAPTERS[-1].name
    shutil.copy(CHAPTERS[-1], copy)
    notebook = json.loads(copy.read_text(encoding="utf-8"))
    scoreboard_outputs(notebook)[0]["data"]["text/html"] = ["<p>an old rendering</p>"]
    copy.write_text(json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    assert main(["--check", str(copy)]) == 1
    assert rerender_notebook(copy) == 1
    assert copy.read_text(encoding="utf-8") == CHAPTERS[-1].read_text(encoding="utf-8")
    assert main(["--check", str(copy)]) == 0
