"""Alt text for the figures the notebooks draw.

A plot in a cell output reaches the page as an image whose alt text is its file name (a hash), which a
screen reader reads out digit by digit. Each such image gets words instead: the first sentence of its
figure's caption, or, for a plot without a caption, the title of the section it sits in.
"""

from __future__ import annotations

import re

from docutils import nodes

MAX_ALT = 300  # characters: a screen reader reads the whole caption from the page anyway


def needs_alt(image: nodes.image) -> bool:
    """True where the image has no alt text of its own (none, or its file name)."""
    alt = (image.get("alt") or "").strip()
    uri = image.get("uri", "")
    return (
        not alt or alt == uri or alt.split("/")[-1] == uri.split("/")[-1]
    )


def first_sentence(text: str) -> str:
    """The caption's first sentence, cut at MAX_ALT characters on a word."""
    text = " ".join(text.split())
    match = re.match(r"(.+?[.:;])(\s|$)", text)
    sentence = match.group(1).rstrip(".:;") if match else text
    if len(sentence) > MAX_ALT:
        sentence = sentence[:MAX_ALT].rsplit(" ", 1)[0] + " ..."
    return sentence


def alt_for(image: nodes.image) -> str | None:
    """Words for an image: its figure's caption, else 'Plot in the section <title>'."""
    parent = image.parent
    while parent is not None and not isinstance(
        parent, (nodes.figure, nodes.section)
    ):
        parent = parent.parent
    if isinstance(parent, nodes.figure):
        captions = [
            c for c in parent.children if isinstance(c, nodes.caption)
        ]
        if captions and captions[0].astext().strip():
            return first_sentence(captions[0].astext())
        parent = parent.parent
        while parent is not None and not isinstance(
            parent, nodes.section
        ):
            parent = parent.parent
    if isinstance(parent, nodes.section):
        titles = [
            c for c in parent.children if isinstance(c, nodes.title)
        ]
        if titles:
            return f"Plot in the section {titles[0].astext().strip()}"
    return None


def add_alt_text(app, doctree, docname) -> None:
    for image in doctree.findall(nodes.image):
        if needs_alt(image):
            alt = alt_for(image)
            if alt:
                image["alt"] = alt


def setup(app):
    app.connect("doctree-resolved", add_alt_text)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
