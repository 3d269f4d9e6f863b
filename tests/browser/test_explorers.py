# ruff: noqa: F811  (the tests take the imported fixtures `browser` and `server` as arguments)
"""The live explorers of chapters 3 and 4 in headless Chromium: they draw, and redraw when a control changes.

Run ``make book`` first; the browser and the server are test_pages.py's (a system Chromium, the
build served from 127.0.0.1). Each explorer must draw its canvas from the JSON under
``_static/explorers/``, draw something else after a control changes, and fit a 390-px screen.
In chapter 3 the moved row's bars change while the head output it gives stays the same.
"""

from __future__ import annotations

import pytest

# test_pages.py's fixtures, imported under their names so that pytest finds them here
from .test_pages import _OVERFLOW_JS, HTML, PHONE, browser, keep_offline, server  # noqa: F401

CHAPTER_3 = "book/03_simplex_null_spaces.html"
CHAPTER_4 = "book/04_effective_attention.html"
SPLIT = "#explorer-attention-split"
NULL_SPACE = "#explorer-null-space"

_PIXELS_JS = "selector => document.querySelector(selector + ' canvas').toDataURL()"


def _open(browser, server, page_path, viewport=None):
    if not (HTML / page_path).exists():
        pytest.skip(f"{page_path} is not in the build")
    context = browser.new_context(viewport=viewport or {"width": 1280, "height": 900}, device_scale_factor=1)
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))

    keep_offline(page, server, problems)
    page.goto(f"{server}/{page_path}", wait_until="load")
    return context, page, problems


def _drawn(page, selector: str, before: str | None = None) -> str:
    """Wait until the explorer has drawn (a state other than ``before``); its canvas's pixels."""
    page.wait_for_function(
        "([s, b]) => { const e = document.querySelector(s); return e && e.dataset.drawn && e.dataset.drawn !== b; }",
        arg=[selector, before],
        timeout=30_000,
    )
    return page.evaluate(_PIXELS_JS, selector)


def test_chapter_4_explorer_redraws_when_a_control_changes(browser, server):
    context, page, problems = _open(browser, server, CHAPTER_4)
    try:
        first = _drawn(page, SPLIT)
        assert page.locator(f"{SPLIT} select").count() == 3  # text, layer, head
        for label in ("text", "layer", "head"):
            assert page.locator(f"{SPLIT} label", has_text=label).count() == 1, f"no label for the {label}"
        state = page.get_attribute(SPLIT, "data-drawn")
        page.select_option(f"{SPLIT}-head", "4")
        after_head = _drawn(page, SPLIT, state)
        assert after_head != first, "the drawing did not change with the head"
        state = page.get_attribute(SPLIT, "data-drawn")
        page.select_option(f"{SPLIT}-text", "2")  # another text: loads its own file
        after_text = _drawn(page, SPLIT, state)
        assert after_text != after_head, "the drawing did not change with the text"
        assert "null space has dimension 16" in page.inner_text(SPLIT)
        state = page.get_attribute(SPLIT, "data-drawn")
        page.select_option(f"{SPLIT}-text", "0")  # shorter than d_v: no null part
        _drawn(page, SPLIT, state)
        assert "null space has dimension 0" in page.inner_text(SPLIT)
    finally:
        context.close()
    assert not problems, problems


def test_chapter_3_explorer_moves_the_row_but_not_the_output(browser, server):
    context, page, problems = _open(browser, server, CHAPTER_3)
    try:
        first = _drawn(page, NULL_SPACE)
        change = page.locator(f"{NULL_SPACE} .explorer-output-change")
        assert float(change.get_attribute("data-value")) == 0 and float(change.get_attribute("data-moved")) == 0
        state = page.get_attribute(NULL_SPACE, "data-drawn")
        page.evaluate(
            """s => { const r = document.querySelector(s + '-t1'); r.value = r.max;
                      r.dispatchEvent(new Event('input', {bubbles: true})); }""",
            NULL_SPACE,
        )
        moved = _drawn(page, NULL_SPACE, state)
        assert moved != first, "the drawing did not change with the slider"
        assert float(change.get_attribute("data-moved")) > 0.05, "the row hardly moved"
        assert float(change.get_attribute("data-value")) < 1e-5, "the head output changed"
        assert "Relative change of the head output" in change.inner_text()
        assert page.locator(f"label[for='{NULL_SPACE[1:]}-t1']").count() == 1
    finally:
        context.close()
    assert not problems, problems


@pytest.mark.parametrize(("page_path", "selector"), [(CHAPTER_4, SPLIT), (CHAPTER_3, NULL_SPACE)])
def test_explorer_fits_a_phone(browser, server, page_path, selector):
    context, page, problems = _open(browser, server, page_path, PHONE)
    try:
        _drawn(page, selector)
        box = page.locator(selector).bounding_box()
        canvas = page.locator(f"{selector} canvas").bounding_box()
        assert (
            box["x"] + box["width"] <= PHONE["width"] and canvas["x"] + canvas["width"] <= box["x"] + box["width"] + 1
        )
        scrolls = page.evaluate(
            "s => { const e = document.querySelector(s); return e.scrollWidth > e.clientWidth + 1; }", selector
        )
        assert not scrolls, "the explorer scrolls sideways on a phone"
        overflow = [item for item in page.evaluate(_OVERFLOW_JS) if "explorer" in item or "canvas" in item]
        assert not overflow, overflow
    finally:
        context.close()
    assert not problems, problems


def test_chapter_4_explorer_reads_a_cell_out_at_a_tap(browser, server):
    """On a phone a tap fires no pointer move: the readout must follow the tap too."""
    if not (HTML / CHAPTER_4).exists():
        pytest.skip(f"{CHAPTER_4} is not in the build")
    context = browser.new_context(viewport=PHONE, device_scale_factor=2, has_touch=True, is_mobile=True)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    keep_offline(page, server, problems)
    try:
        page.goto(f"{server}/{CHAPTER_4}", wait_until="load")
        _drawn(page, SPLIT)
        canvas = page.locator(f"{SPLIT} canvas")
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        hover = page.locator(f"{SPLIT} .explorer-hover")
        before = hover.inner_text()
        page.touchscreen.tap(box["x"] + box["width"] / 2, box["y"] + box["height"] * 0.2)
        page.wait_for_function(
            "([s, b]) => document.querySelector(s + ' .explorer-hover').textContent !== b", arg=[SPLIT, before]
        )
        assert hover.inner_text().startswith("query "), hover.inner_text()
    finally:
        context.close()
    assert not problems, problems
