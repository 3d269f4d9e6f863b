"""The site search ranks the glossary first and the API pages below the chapters that use a word.

Sets Sphinx's ``html_search_scorer`` to ``search_scorer.js`` beside this file (its rules are in
its comment). Sphinx opens that path relative to the working directory, so it is made absolute
here, from the configuration directory, whatever directory the build runs from.
"""

from __future__ import annotations

from pathlib import Path

SCORER = Path(__file__).with_name("search_scorer.js")


def set_scorer(app, config) -> None:
    config.html_search_scorer = str(SCORER)


def setup(app):
    app.connect("config-inited", set_scorer)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
