"""The book's small Sphinx extensions (book/_ext): plain-text docstrings, one copy of each script, the search's scorer."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))

import edition_numbers  # noqa: E402
import plain_docstrings  # noqa: E402
import search_ranking  # noqa: E402
import unique_scripts  # noqa: E402


def test_bars_are_escaped_outside_backticks():
    assert plain_docstrings.escape_bars("max |A T| over rows") == r"max \|A T\| over rows"
    assert plain_docstrings.escape_bars("``|x|`` and |y|") == r"``|x|`` and \|y\|"


def test_a_colon_before_an_indented_block_makes_it_literal():
    lines = ["Three maps:", "", "    naive  g(e) = e", "       linear g(e) = e W", "", "After."]
    assert plain_docstrings.literal_blocks(lines)[0] == "Three maps::"
    assert plain_docstrings.literal_blocks(["Args:", "", "    A: (n, n)"])[0] == "Args:"  # napoleon section
    assert plain_docstrings.literal_blocks(["Note:", "    text"])[0] == "Note:"
    assert plain_docstrings.literal_blocks(["A sentence:", "no indent follows"])[0] == "A sentence:"


def test_literal_blocks_keep_their_bars():
    lines = ["Norms:", "", "    |x| = 1", "", "and |y|."]
    plain_docstrings.process_docstring(None, "module", "m", None, {}, lines)
    assert lines == ["Norms::", "", "    |x| = 1", "", r"and \|y\|."]


class _Script(str):
    def __new__(cls, filename, body=""):
        obj = super().__new__(cls, filename or "")
        obj.filename, obj.attributes = filename, ({"body": body} if body else {})
        return obj


def test_repeated_inline_scripts_are_dropped():
    scripts = [
        _Script("a.js"),
        _Script(None, "const X = 1"),
        _Script("", "const X = 1"),
        _Script("a.js"),
        _Script(None, "other"),
    ]
    kept = unique_scripts.unique(scripts)
    assert [(s.filename, s.attributes.get("body")) for s in kept] == [
        ("a.js", None),
        (None, "const X = 1"),
        (None, "other"),
    ]


def test_the_search_scorer_is_set_by_an_absolute_path():
    class Config:
        html_search_scorer = ""

    config = Config()
    search_ranking.set_scorer(None, config)
    scorer = Path(config.html_search_scorer)
    assert scorer.is_absolute() and scorer.exists()
    code = scorer.read_text()
    # a whole Scorer (it replaces Sphinx's), with the two rules
    for name in ("objNameMatch", "objPrio", "partialTerm", "score:", '"book/glossary"', '"book/api"'):
        assert name in code, f"search_scorer.js lacks {name}"


def test_a_plot_gets_its_caption_or_its_section_as_alt_text():
    import figure_alt
    from docutils import nodes

    captioned = nodes.image(uri="_images/ab12.png", alt="_images/ab12.png")
    figure = nodes.figure("", captioned, nodes.caption("", "Rank of T against n. Each dot is a head; the line is d_v."))
    plain = nodes.image(uri="_images/cd34.png")
    own = nodes.image(uri="_images/ef56.png", alt="The null space drawn")
    section = nodes.section("", nodes.title("", "The rank sweep"), figure, nodes.paragraph("", "", plain), own)
    figure_alt.add_alt_text(None, section, "page")
    assert captioned["alt"] == "Rank of T against n"
    assert plain["alt"] == "Plot in the section The rank sweep"
    assert own["alt"] == "The null space drawn"  # an author's alt text stays
    assert (
        figure_alt.first_sentence("word " * 100).endswith(" ...")
        and len(figure_alt.first_sentence("word " * 100)) <= 304
    )


def test_edition_pages_number_their_figures_from_one():
    """Sphinx numbers the edition's chapter 6 page on from the chapter's own figures (6.10, 6.11, ...);
    the extension restarts them at 6.1 in Sphinx's order, and leaves the chapters' own numbers alone."""

    class Env:
        toc_fignumbers = {
            "book/06_hidden_token_attribution": {"figure": {"fig-a": (6, 1), "fig-b": (6, 2)}},
            "book/paper_scale/06_hidden_token_attribution": {
                "figure": {"ps-fig-b": (6, 11), "ps-fig-a": (6, 10), "ps-fig-c": (6, 12)},
                "exercise": {"ps-ex-1": (6, 4)},
            },
        }

    env = Env()
    renumbered = edition_numbers.restart_edition_numbers(None, env)
    assert renumbered == ["book/paper_scale/06_hidden_token_attribution"]
    edition = env.toc_fignumbers["book/paper_scale/06_hidden_token_attribution"]
    assert edition["figure"] == {"ps-fig-a": (6, 1), "ps-fig-b": (6, 2), "ps-fig-c": (6, 3)}
    assert edition["exercise"] == {"ps-ex-1": (6, 1)}
    assert env.toc_fignumbers["book/06_hidden_token_attribution"]["figure"] == {"fig-a": (6, 1), "fig-b": (6, 2)}


def test_count_of_writes_none_and_all_in_words():
    from helpers.book.notebook import count_of

    assert count_of(0, 36) == "none of the 36"
    assert count_of(3, 36) == "3 of the 36"
    assert count_of(8, 8) == "all 8"
    assert count_of(2, 2) == "both" and count_of(1, 1) == "the one"
    with pytest.raises(ValueError, match="not a part"):
        count_of(9, 8)
