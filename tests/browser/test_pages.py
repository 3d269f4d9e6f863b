"""Open every page of the built book (_build/html) in headless Chromium and check what a reader sees.

Run ``make book`` first. The browser is a system Chromium driven by
playwright through ``executable_path`` (no browser download): the
``BOOK_CHROMIUM`` environment variable, else ``chromium``,
``chromium-browser`` or ``google-chrome`` on PATH. Without one, or without a
build, every test here skips and says why.

The pages are served from 127.0.0.1 and every other request is refused, so a
page that needs the network fails. Each page fails on

* a console error or an uncaught exception, or a request that leaves the machine;
* an image that did not load (``naturalWidth`` 0);
* raw TeX in the text outside typeset math (``$$``, ``\\frac``, ``\\mathbb`` ...);
* an exercise solution that shows before its toggle is clicked, or stays hidden after;
* a code cell tagged ``hide-input`` whose input shows before it is opened;
* an interactive widget (it needs a kernel) without a loaded static figure in its own or the next cell;
* on a notebook page, a missing Colab launch button, or one that opens another notebook than the page's Colab edition;
* an unrendered role or markup in the text (``{glue``, ``{cite``, ``{numref``, ``**``, a raw ``$...$``);
* a Python repr where a reader looks, in the prose, a table or a printed output (``True``,
  ``False``, ``tensor(``, ``array(``, a dict or a bracketed list of numbers);
* a figure whose 10-pt text renders under 9 px at the size it is shown (figures are saved at
  ``FIGURE_DPI``, so it must be shown at ``MIN_FIGURE_SCALE`` of its natural width or more);
* an element that runs past the right edge of the content column;
* on a chapter, an exercise numbered out of its chapter or a reference to a missing one;
* on the report, anything before its verdict table but prose (no code, no other table).

A screenshot of each page goes to ``_build/screenshots/``. A separate check,
without a browser, reads the HTML: no page loads MathJax from a CDN.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")

# TeX that should never survive typesetting; checked in the text outside MathJax's output and code.
RAW_TEX = re.compile(
    r"\$\$|\\(?:frac|mathbb|mathbf|mathrm|operatorname|begin|end|sqrt|left|right|top|cdot|sum|in|le|ge)(?![a-zA-Z])|\\[(\[]"
)
# Markup that only shows when a role or directive did not render.
UNRENDERED = re.compile(
    r"\{(?:glue|cite|numref|ref|doc|py|eq|term)[:}]|\*\*[^*\n]{1,80}\*\*|(?<![\w$])\$[^$\s][^$]*\$(?!\w)|```"
)
# Python reprs a reader should never see: booleans, tensors, arrays, dicts, lists of numbers (an index, T_h[0], is not one).
PYTHON_REPR = re.compile(
    r"(?<![\w-])(?:True|False)(?![\w-])|\btensor\(|\barray\(|\bnp\.\w+\(|\{'\w+': |(?<![\w\]])\[(?!(?:19|20)\d\d[a-z]?\])-?\d+(?:\.\d+)?(?:, -?\d+(?:\.\d+)?)*\]"
)
# The book's interval notation, an estimate and its 95% interval ("0.63 [0.58, 0.68]"), or an interval named as one
# ("paired difference [-0.0763, -0.0393]", "the control [0.19, 0.21]": a verdict's note): not a list repr.
INTERVAL = re.compile(r"(?:-?\d+(?:\.\d+)?|\bdifference|\binterval|\bcontrol)\s+\[-?\d+(?:\.\d+)?, -?\d+(?:\.\d+)?\]")
FIGURE_DPI = 110  # helpers.book.plots.style: savefig.dpi
MIN_FIGURE_SCALE = 9 / (10 * FIGURE_DPI / 72)  # 10-pt text at FIGURE_DPI, shown at 9 px or more
EXERCISE = re.compile(r"\bExercise (\d+|\?+)\.?(\d+)?")
REDIRECT = re.compile(r'<meta http-equiv="Refresh" content="0; url=([^"]+)"', re.I)


def find_chromium() -> str | None:
    """The Chromium to drive: $BOOK_CHROMIUM, else the first known browser on PATH."""
    explicit = os.environ.get("BOOK_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else shutil.which(explicit)
    for name in BROWSER_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def book_pages() -> list[str]:
    """Every HTML page of the build, relative to _build/html (assets excluded)."""
    if not HTML.is_dir():
        return []
    # _modules: the API's [source] pages (sphinx.ext.viewcode), highlighted code and nothing else
    skip = ("_static", "_sources", "_images", "_sphinx_design_static", "_modules")
    return sorted(
        p.relative_to(HTML).as_posix() for p in HTML.rglob("*.html") if p.relative_to(HTML).parts[0] not in skip
    )


def test_raw_tex_pattern():
    assert RAW_TEX.search(r"where $$x$$") and RAW_TEX.search(r"a \frac{1}{2}") and RAW_TEX.search(r"\mathbb{R}")
    assert RAW_TEX.search(r"\(x\)") and RAW_TEX.search(r"x \in X")
    assert not RAW_TEX.search("price: $5, a \\infinity, \\index, plain text")


def test_reader_patterns():
    problems = text_problems(
        "x {glue:text}`a` and **bold and $d_v$ here; ok: True; [63] or {'a': 1}; Exercise 25 and Exercise 4.1",
        ["tensor([0.1000])", "a plain 0.75 line"],
        "book/04_effective_attention.html",
    )
    joined = "\n".join(problems)
    assert "unrendered markup" in joined and "'{glue:text}`a`" in joined or "{glue" in joined
    assert joined.count("Python repr in the prose") == 3 and "Python repr in the output" in joined
    assert not text_problems("as Brunner et al. [2020] show", [], "book/intro.html")
    assert "'Exercise 25'" in joined and "'Exercise 4.1'" not in joined
    assert not text_problems("A sentence with 0.75, [CLS] and a-True-ish word.", ["0.75  0.80"], "book/intro.html")
    intervals = "Here -0.26 [-0.27, -0.25] over 115 sequences;\n      2.63 [2.48, 2.81]"
    assert not text_problems(intervals, ["1\t2.63 [2.48, 2.81]\t1.22 [1.19, 1.46]"], "book/report.html")
    assert text_problems("a list [2.48, 2.81] alone", ["values: [1, 2, 3]"], "book/report.html")
    assert not text_problems(
        "the interval alone: paired difference [-0.0763, -0.0393] against 0", [], "book/intro.html"
    )
    assert chapter_number("book/paper_scale/04_effective_attention.html") == 4
    assert not text_problems("the sink's row ||T_h[0]|| and x[3]", [], "book/09_decoder_llm.html")  # indexing
    assert 0.58 < MIN_FIGURE_SCALE < 0.6
    edition = "book/paper_scale/06_hidden_token_attribution.html"
    assert not caption_number_problems(["Figure 6.1 ", "Table 6.1 ", "Figure 6.2 "], edition)
    assert caption_number_problems(["Figure 6.10 ", "Figure 6.11 ", "Figure 6.13 "], edition) == [
        "Figure 6.10 where Figure 6.1 was expected",  # then counted on from 6.10: one problem per break
        "Figure 6.13 where Figure 6.12 was expected",
    ]
    assert caption_number_problems(["Figure 5.1 "], edition) == ["Figure 5.1 where Figure 6.1 was expected"]
    assert not caption_number_problems(["Figure 3.2 "], "book/intro.html")


def test_find_chromium_prefers_the_environment(monkeypatch, tmp_path):
    fake = tmp_path / "my-chromium"
    fake.write_text("")
    monkeypatch.setenv("BOOK_CHROMIUM", str(fake))
    assert find_chromium() == str(fake)
    monkeypatch.setenv("BOOK_CHROMIUM", str(tmp_path / "absent"))
    assert find_chromium() is None


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture(scope="module")
def server():
    if not (HTML / "index.html").exists():
        pytest.skip("no built book in _build/html: run `make book` first")
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser(server):
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium found: set BOOK_CHROMIUM or install one (Debian: apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -r requirements.txt)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield browser
        browser.close()


def _config() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "_config.yml").read_text())


def expected_colab_url(page: str) -> str | None:
    """The Colab URL of the page's own Colab edition (colab/book/<page>.ipynb, which must exist),
    or None when the page is not built from a notebook."""
    from helpers.book.colab import edition_path

    notebook = Path(page).with_suffix(".ipynb")
    if not (ROOT / notebook).exists():
        return None
    edition = edition_path(ROOT, ROOT / notebook)
    assert edition.exists(), f"{page} has no Colab edition {edition.relative_to(ROOT)}: run `make colab`"
    config = _config()
    repository = config["repository"]["url"].rstrip("/").removeprefix("https://github.com/")
    branch = config["repository"].get("branch", "main")
    colab = config["launch_buttons"]["colab_url"].rstrip("/")
    return f"{colab}/github/{repository}/blob/{branch}/{edition.relative_to(ROOT).as_posix()}"


def test_expected_colab_url_points_at_the_edition():
    page = "book/01_anatomy_of_a_head.html"
    if not (ROOT / "book/01_anatomy_of_a_head.ipynb").exists():
        pytest.skip("chapter 1 is not in this checkout")
    assert expected_colab_url(page).endswith("/blob/main/colab/book/01_anatomy_of_a_head.ipynb")
    assert expected_colab_url("book/intro.html") is None


# In the page: text outside typeset math, code and scripts.
_VISIBLE_TEXT_JS = """() => {
  const clone = document.body.cloneNode(true);
  clone.querySelectorAll('mjx-container, mjx-assistive-mml, script, style, pre, code, .MathJax, nav.bd-links, .bd-search, textarea, dt.sig')
       .forEach(e => e.remove());
  return clone.textContent;
}"""

# The prose a reader reads: paragraphs, list items, headings and captions outside code and outputs.
_PROSE_TEXT_JS = """() => [...document.querySelectorAll('main p, main li, main h1, main h2, main h3, main figcaption')]
  .filter(e => !e.closest('.cell_output, .highlight, pre, table, nav, .bd-toc, dl.py, .toctree-wrapper'))
  .map(e => {
    const clone = e.cloneNode(true);
    clone.querySelectorAll('mjx-assistive-mml, .headerlink').forEach(m => m.remove());
    clone.querySelectorAll('mjx-container, .MathJax').forEach(m => m.replaceWith('⟨math⟩'));
    return clone.textContent.replace(/\\s+/g, ' ').trim();
  })"""

_BROKEN_IMAGES_JS = """async () => {
  const imgs = [...document.images];
  await Promise.all(imgs.map(img => { img.loading = 'eager'; return img.decode().catch(() => null); }));
  return imgs.filter(img => img.naturalWidth === 0).map(img => img.getAttribute('src'));
}"""

# Widgets whose own and next cell hold no loaded image.
_WIDGETS_WITHOUT_STATIC_JS = """() => {
  const scripts = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
  const bad = [];
  for (const script of scripts) {
    const cell = script.closest('.cell');
    const cells = [cell, cell && cell.nextElementSibling].filter(Boolean);
    const ok = cells.some(c => [...c.querySelectorAll('.cell_output img')].some(img => img.naturalWidth > 0));
    if (!ok) bad.push(cell ? (cell.id || cell.className) : 'widget outside a cell');
  }
  return {widgets: scripts.length, bad};
}"""


# What a reader reads in outputs: printed text and HTML tables (not the code).
_OUTPUT_TEXT_JS = """() => [...document.querySelectorAll('.cell_output pre, .cell_output table')]
  .filter(e => !e.closest('.tag_nbval-ignore-output'))
  .map(e => e.innerText)"""

_FIGURE_SCALES_JS = """async () => {
  const imgs = [...document.querySelectorAll('.cell_output img')];
  await Promise.all(imgs.map(img => { img.loading = 'eager'; return img.decode().catch(() => null); }));
  const shown = imgs.filter(img => img.naturalWidth > 0 && img.offsetParent !== null)
    .map(img => ({src: img.getAttribute('src'), shown: img.getBoundingClientRect().width, natural: img.naturalWidth}));
  // a figure's panels stacked for a phone (book.js): each piece is a canvas cut from the image at its pixels
  const pieces = [...document.querySelectorAll('a.figure-stack canvas')].filter(c => c.offsetParent !== null)
    .map(c => ({src: c.closest('a').getAttribute('href') + ' (a stacked piece)',
                shown: c.getBoundingClientRect().width, natural: c.width}));
  return shown.concat(pieces);
}"""
# Once book.js has read every figure's PNG: the figures whose PNG names two or more columns of panels
# and that are not shown stacked (book.js marks each img with data-panels when it is done with it).
_UNSTACKED_JS = """async () => {
  const imgs = [...document.querySelectorAll('div.cell_output div.figure-scroll img')];
  for (let wait = 0; wait < 100 && imgs.some(img => !img.dataset.panels); wait++)
    await new Promise(r => setTimeout(r, 100));
  const states = imgs.map(img => img.dataset.panels || 'not read');
  const bad = imgs.filter(img => img.dataset.panels !== 'stacked' && img.dataset.panels !== 'one column')
    .map(img => img.getAttribute('src') + ': ' + (img.dataset.panels || 'not read'));
  const hidden = [...document.querySelectorAll('a.figure-stack')].filter(a => a.offsetParent === null)
    .map(a => a.getAttribute('href') + ': stacked but not shown');
  return {bad: bad.concat(hidden), stacked: states.filter(s => s === 'stacked').length};
}"""

# Elements whose right edge passes the content column's (inside a scrolling box is fine).
_OVERFLOW_JS = """() => {
  const article = document.querySelector('main article, main .bd-article, main');
  if (!article) return [];
  const right = article.getBoundingClientRect().right + 2;
  const scrolls = e => { for (let p = e.parentElement; p && p !== article; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll' || o === 'hidden') return true; }
    return false; };
  const bad = [];
  for (const e of article.querySelectorAll('mjx-container[display="true"]')) {
    if (e.scrollWidth > e.clientWidth + 1) {
      const tex = (e.querySelector('mjx-assistive-mml') || e).textContent.slice(0, 60);
      bad.push(`a display equation ${e.scrollWidth} px wide in ${e.clientWidth} px: ${tex}`);
    }
  }
  for (const e of article.querySelectorAll('*')) {
    const box = e.getBoundingClientRect();
    if (box.width > 0 && box.right > right && !scrolls(e) && e.offsetParent !== null) {
      bad.push(`${e.tagName.toLowerCase()}.${(e.className || '').toString().split(' ')[0]} ends at ${Math.round(box.right)} px (column ${Math.round(right)})`);
      if (bad.length > 4) break;
    }
  }
  return bad;
}"""

# The report: what comes before the verdict table.
_BEFORE_VERDICT_JS = """() => {
  const verdict = document.querySelector('table.verdict');
  if (!verdict) return ['no verdict table (table.verdict)'];
  const bad = [];
  for (const e of document.querySelectorAll('main .cell_input, main table')) {
    if (e === verdict) break;
    if (e.offsetParent !== null) bad.push(e.tagName.toLowerCase() + '.' + (e.className || '').toString().split(' ')[0]);
  }
  return bad;
}"""


# Link texts and citations that do not read as English: a doubled word ("the The", "block block"),
# a name followed by itself in parentheses, a citation that repeats its authors, a possessive on a plural title.
DOUBLED_WORD = re.compile(r"\b([A-Za-z][A-Za-z'-]+) \1\b|\b[Tt]he [Tt]he\b")
DOUBLED_NAME = re.compile(r"\b([A-Z][\w-]*(?: [\w-]+){0,6}) \(\1\)")
DOUBLED_CITATION = re.compile(r"\b([A-Z][\w-]+ (?:et al\.|and [A-Z][\w-]+|& [A-Z][\w-]+)) [\[(]\1")
PLURAL_POSSESSIVE = re.compile(r"\b\w+(?<![us])s['’]s\b")  # "spaces's", not "corpus's"


def stutter_problems(paragraphs: list[str]) -> list[str]:
    """Doubled words, names and citations, and "spaces's", in the prose (not in code or outputs)."""
    problems = []
    for text in paragraphs:
        for pattern in (DOUBLED_WORD, DOUBLED_NAME, DOUBLED_CITATION, PLURAL_POSSESSIVE):
            for match in pattern.finditer(text):
                problems.append(f"stutter in the prose: ...{text[max(0, match.start() - 40) : match.end() + 30]!r}...")
    return problems


def test_stutter_patterns():
    bad = [
        "documented on the The helpers, floor by floor page.",
        "naive identifiability and Hidden Token Attribution (Hidden Token Attribution).",
        "as Brunner et al. [Brunner et al., 2020] show",
        "is Simplex-constrained null spaces’s question.",
        "With 105 tokens (passage passage-029) and",
    ]
    assert [len(stutter_problems([line])) for line in bad] == [1, 1, 1, 1, 1]
    good = "Brunner et al. [2020] show that the head (the layer's part) sees A T; that is, BERT's heads."
    assert not stutter_problems([good, "Hidden Token Attribution (HTA) and chapter 6.", "the corpus’s pairs"])
    assert not stutter_problems(["the head of this chapter (layer LAYER, head HEAD)"])


def keep_offline(page, server: str, problems: list[str]) -> None:
    """Serve the page's requests from ``server`` only: one that would leave the machine is refused and
    recorded in ``problems`` (the favicon, asked for by the browser and not by the book, gets an empty answer)."""

    def refuse_outside(route):
        if route.request.url == f"{server}/favicon.ico":
            route.fulfill(status=204)
        elif route.request.url.startswith(server):
            route.continue_()
        else:
            problems.append(f"request leaves the machine: {route.request.url}")
            route.abort()

    page.route("**/*", refuse_outside)


def small_figures(page, min_scale: float) -> list[str]:
    """Figures shown at less than ``min_scale`` of their natural width: their 10-pt text renders too small."""
    problems = []
    for figure in page.evaluate(_FIGURE_SCALES_JS):
        scale = figure["shown"] / figure["natural"]
        if scale < min_scale:
            problems.append(
                f"figure {figure['src']} is {figure['natural']} px wide, shown at {figure['shown']:.0f} px: "
                f"10-pt text renders at {10 * FIGURE_DPI / 72 * scale:.1f} px "
                f"(< {10 * FIGURE_DPI / 72 * min_scale:.0f})"
            )
    return problems


def chapter_number(page_path: str) -> int | None:
    """The chapter a page is (book/04_effective_attention.html and its paper-scale page -> 4), None for others."""
    match = re.match(r"book/(?:paper_scale/)?(\d\d)_", page_path)
    return int(match.group(1)) if match else None


def caption_number_problems(captions: list[str], page_path: str) -> list[str]:
    """A chapter's figures and tables (its captions' numbers, "Figure 6.1 ") numbered N.1, N.2, ... by type, N its
    chapter: the paper-scale pages too, which Sphinx alone would number on from the chapter's own figures."""
    chapter = chapter_number(page_path)
    if chapter is None:
        return []
    problems, seen = [], {}
    for caption in captions:
        match = re.match(r"\s*(\w+)\s+(\d+)\.(\d+)", caption)
        if not match:
            continue
        kind, number, position = match.group(1), int(match.group(2)), int(match.group(3))
        expected = seen.get(kind, 0) + 1
        if number != chapter or position != expected:
            problems.append(f"{kind} {number}.{position} where {kind} {chapter}.{expected} was expected")
        seen[kind] = position
    return problems


def text_problems(text: str, outputs: list[str], page_path: str) -> list[str]:
    """Unrendered markup and Python reprs in the prose, reprs in outputs, exercises out of their chapter."""
    problems = []
    for match in list(UNRENDERED.finditer(text))[:5]:
        problems.append(f"unrendered markup: ...{text[max(0, match.start() - 40) : match.end() + 40]!r}...")
    # the API pages' docstrings speak of True, False and lists as values: only the chapters are read for reprs
    reprs = [] if page_path.startswith("book/api") else [("prose", text)] + [("output", o) for o in outputs]
    for where, part in reprs:
        part = INTERVAL.sub(lambda m: "#" * len(m.group(0)), part)  # same length: the excerpts stay in place
        for match in list(PYTHON_REPR.finditer(part))[:3]:
            problems.append(
                f"Python repr in the {where}: ...{part[max(0, match.start() - 40) : match.end() + 30]!r}..."
            )
    chapter = chapter_number(page_path)
    if chapter is not None:
        for match in EXERCISE.finditer(text):
            if not match.group(1).isdigit():
                problems.append(f"a reference to a missing exercise: {match.group(0)!r}")
            elif int(match.group(1)) != chapter or match.group(2) is None:
                problems.append(f"exercise numbered out of chapter {chapter}: {match.group(0)!r}")
    return problems


def _visible(locator) -> bool:
    return locator.count() > 0 and any(locator.nth(i).is_visible() for i in range(locator.count()))


def check_solutions(page) -> list[str]:
    """Each exercise solution: body hidden until its toggle is clicked, shown after."""
    problems = []
    solutions = page.locator("div.admonition[class*='solution']")
    for i in range(solutions.count()):
        solution = solutions.nth(i)
        label = solution.get_attribute("id") or f"solution {i + 1}"
        body = solution.locator(":scope > :not(.admonition-title)")
        if _visible(body):
            problems.append(f"{label}: solution visible before its toggle is clicked")
            continue
        solution.locator(":scope > .admonition-title").first.click()
        page.wait_for_timeout(300)
        if not _visible(body):
            problems.append(f"{label}: solution still hidden after its toggle is clicked")
    return problems


def check_hidden_inputs(page) -> list[str]:
    """Cells tagged hide-input: the source is collapsed until the reader opens it."""
    problems = []
    cells = page.locator(".cell.tag_hide-input")
    for i in range(cells.count()):
        source = cells.nth(i).locator(".cell_input pre")
        if _visible(source):
            problems.append(f"hide-input cell {i + 1}: its input shows without being opened")
    return problems


@pytest.mark.parametrize("page_path", book_pages() or ["<no build>"])
def test_page(browser, server, page_path):
    redirect = REDIRECT.search((HTML / page_path).read_text()) if (HTML / page_path).exists() else None
    if redirect:  # a bare redirect (the book's index.html): its target must exist
        assert (HTML / page_path).parent.joinpath(redirect.group(1)).exists(), (
            f"{page_path} redirects to a missing page"
        )
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(120_000)  # two shared CPU cores render the long API page slowly
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(f"uncaught exception: {exc}"))

    keep_offline(page, server, problems)
    try:
        page.goto(f"{server}/{page_path}", wait_until="load")
        if page.locator(".math, mjx-container").count():
            typeset = page.evaluate(
                "() => window.MathJax && window.MathJax.startup ? MathJax.startup.promise.then(() => true) : false"
            )
            if not typeset:
                problems.append("the page has math but MathJax did not start")
        broken = page.evaluate(_BROKEN_IMAGES_JS)
        problems += [f"image did not load: {src}" for src in broken]
        text = page.evaluate(_VISIBLE_TEXT_JS)
        for match in list(RAW_TEX.finditer(text))[:5]:
            problems.append(f"raw TeX in the text: ...{text[max(0, match.start() - 40) : match.end() + 40]!r}...")
        problems += text_problems(text, page.evaluate(_OUTPUT_TEXT_JS), page_path)
        problems += caption_number_problems(page.locator("span.caption-number").all_inner_texts(), page_path)
        problems += stutter_problems(page.evaluate(_PROSE_TEXT_JS))
        problems += small_figures(page, MIN_FIGURE_SCALE)
        problems += [f"overflows the column: {item}" for item in page.evaluate(_OVERFLOW_JS)]
        problems += [f"a glued value set apart in weight: {item}" for item in page.evaluate(_HEAVY_GLUE_JS)]
        if page_path == "book/report.html":
            problems += [f"before the report's verdict table: {item}" for item in page.evaluate(_BEFORE_VERDICT_JS)]
        widgets = page.evaluate(_WIDGETS_WITHOUT_STATIC_JS)
        problems += [f"interactive widget without a static figure: {cell}" for cell in widgets["bad"]]
        problems += check_hidden_inputs(page)
        expected = expected_colab_url(page_path)
        if expected is not None:
            links = page.locator("a[href*='colab.research.google.com']")
            hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
            if not hrefs:
                problems.append("no Colab launch button")
            problems += [f"Colab button opens {href}, not {expected}" for href in hrefs if href != expected]
        # the API reference pages run to tens of thousands of px: a full-page capture of one can fail
        # ("Unable to capture screenshot") when memory is short, and its first screen is what a reader checks
        page.screenshot(
            path=str(SCREENSHOTS / (page_path.replace("/", "__").removesuffix(".html") + ".png")),
            full_page=not page_path.startswith("book/api/"),
        )
        problems += check_solutions(page)  # last: it clicks
    finally:
        context.close()
    assert not problems, f"{page_path}:\n  " + "\n  ".join(problems)


# A glued value (span.pasted-text) reads as the text around it: the same weight as its parent (book.css).
_HEAVY_GLUE_JS = """() => [...document.querySelectorAll('article span.pasted-text')]
  .filter(s => getComputedStyle(s).fontWeight !== getComputedStyle(s.parentElement).fontWeight)
  .slice(0, 5).map(s => s.textContent.trim().slice(0, 60))"""


# Every verdict of a scoreboard is on the screen without scrolling sideways (book.css: a row is a card on a phone).
_VERDICTS_OFF_SCREEN_JS = """() => [...document.querySelectorAll('table.scoreboard td.verdict')]
  .filter(td => { const r = td.getBoundingClientRect(); return r.width > 0 && (r.left < 0 || r.right > innerWidth); })
  .slice(0, 3).map(td => td.closest('tr').textContent.trim().slice(0, 60))"""

# A figure that scrolls sideways says so: book.js shows a hint under it.
_SILENT_SCROLL_JS = """() => [...document.querySelectorAll('div.figure-scroll')]
  .filter(box => box.scrollWidth > box.clientWidth + 1)
  .filter(box => { const h = box.nextElementSibling;
                   return !(h && h.matches('p.figure-scroll-hint') && getComputedStyle(h).display !== 'none'); })
  .slice(0, 3).map(box => (box.querySelector('img') || {}).src)"""

PHONE = {"width": 390, "height": 844}
# On a phone a figure may scroll sideways in its box (book.js), but its 10-pt text never renders under 8 px.
PHONE_MIN_FIGURE_SCALE = 8 / (10 * FIGURE_DPI / 72)


def reading_pages() -> list[str]:
    """The pages a reader reads on a phone: the chapters, the introduction, the report and the glossary
    (not the API pages)."""
    return [
        p
        for p in book_pages()
        if p.startswith("book/") and not p.startswith("book/api") and not REDIRECT.search((HTML / p).read_text())
    ]


@pytest.mark.parametrize("page_path", reading_pages() or ["<no build>"])
def test_page_at_phone_width(browser, server, page_path):
    """At 390 px: nothing overflows its box (wide tables, code and figures scroll inside their own),
    and no figure's text is shown under 8 px."""
    context = browser.new_context(viewport=PHONE, device_scale_factor=1)
    context.set_default_timeout(120_000)
    page = context.new_page()
    try:
        page.goto(f"{server}/{page_path}", wait_until="load")
        page.evaluate(_BROKEN_IMAGES_JS)  # waits until every figure is decoded
        # a long display equation may scroll inside its own box on a phone (book.css gives it an edge shadow)
        problems = [
            f"overflows the column: {item}"
            for item in page.evaluate(_OVERFLOW_JS)
            if not item.startswith("a display equation")
        ]
        stacking = page.evaluate(_UNSTACKED_JS)
        problems += [f"a figure not stacked for a phone: {item}" for item in stacking["bad"]]
        problems += small_figures(page, PHONE_MIN_FIGURE_SCALE)
        problems += [f"a scoreboard verdict off the screen: {item}" for item in page.evaluate(_VERDICTS_OFF_SCREEN_JS)]
        problems += [
            f"a figure wider than the screen without a hint: {src}" for src in page.evaluate(_SILENT_SCROLL_JS)
        ]
        page.screenshot(
            path=str(SCREENSHOTS / ("phone__" + page_path.replace("/", "__").removesuffix(".html") + ".png"))
        )
    finally:
        context.close()
    assert not problems, f"{page_path} at {PHONE['width']} px:\n  " + "\n  ".join(problems)


def test_multi_panel_figures_stack_on_a_phone_and_only_there(browser, server):
    """The stacking is not vacuous: chapter 8's figures of two panels side by side stack at 390 px (book.js,
    from the columns their PNGs name), and at 1280 px every figure shows whole, no stack on the screen."""
    page_path = next((p for p in reading_pages() if p.startswith("book/08_")), None)
    if page_path is None:
        pytest.skip("no built chapter 8")
    counts = {}
    for width in (PHONE["width"], 1280):
        context = browser.new_context(viewport={"width": width, "height": 900}, device_scale_factor=1)
        page = context.new_page()
        try:
            page.goto(f"{server}/{page_path}", wait_until="load")
            result = page.evaluate(_UNSTACKED_JS)
            counts[width] = (result["stacked"], page.evaluate(_ON_SCREEN_JS, "a.figure-stack canvas"))
            if width == PHONE["width"] and result["stacked"]:
                page.locator("a.figure-stack").first.scroll_into_view_if_needed()
                page.screenshot(path=str(SCREENSHOTS / "phone__stacked_figure.png"))
        finally:
            context.close()
    assert counts[PHONE["width"]][0] >= 2, f"chapter 8 at 390 px stacks {counts[PHONE['width']][0]} figures"
    assert counts[1280][1] == 0, "at 1280 px a stacked copy of a figure is on the screen"


def test_math_is_served_from_the_build():
    """No page loads MathJax from a CDN; pages with math load the copy in _static/mathjax."""
    pages = book_pages()
    if not pages:
        pytest.skip("no built book in _build/html: run `make book` first")
    assert (HTML / "_static" / "mathjax" / "tex-chtml.js").exists(), "sphinx-mathjax-offline did not copy MathJax"
    with_math = 0
    for page_path in pages:
        html = (HTML / page_path).read_text()
        scripts = re.findall(r'<script[^>]*\ssrc="([^"]+)"', html)
        remote = [src for src in scripts if "mathjax" in src.lower() and re.match(r"(https?:)?//", src)]
        assert not remote, f"{page_path} loads MathJax from the network: {remote}"
        if 'class="math' in html:
            with_math += 1
            assert any(re.search(r"(^|/)_static/mathjax/tex-chtml\.js", src) for src in scripts), (
                f"{page_path} has math but no local MathJax"
            )
    assert with_math, "no page with math was found: the check saw nothing"


# What is on the screen: shown, not transparent, and inside the viewport.
_ON_SCREEN_JS = """(selector) => [...document.querySelectorAll(selector)].filter(e => {
  const r = e.getBoundingClientRect(), s = getComputedStyle(e);
  return r.width > 0 && r.height > 0 && r.right > 0 && r.left < innerWidth && r.bottom > 0 && r.top < innerHeight
    && s.visibility !== 'hidden' && Number(s.opacity) > 0.5;
}).length"""
# The chapter list and the page's contents, wherever the theme put them (the sidebar or its dialog).
CHAPTER_LINKS = "nav.bd-docs-nav a.reference"
CONTENTS_LINKS = "nav.page-toc a"
SEARCH_BOXES = ".search-button-field, .search-button"


def navigation_page() -> str | None:
    """A chapter with sections: its contents panel has entries."""
    chapters = [p for p in reading_pages() if chapter_number(p) is not None]
    return chapters[0] if chapters else None


@pytest.mark.parametrize("width", [PHONE["width"], 1280])
def test_navigation_buttons_open_their_panels(browser, server, width):
    """The article header's ☰ and contents buttons (book.js): at 390 px a tap opens the chapter list, then the
    page's contents, on screen; at 1280 px ☰ folds the sidebar away and back. One search box at each width."""
    page_path = navigation_page()
    if page_path is None:
        pytest.skip("no chapter in the build")
    phone = width < 992  # the theme's breakpoint: below it the sidebars open as dialogs
    context = browser.new_context(viewport={"width": width, "height": 844}, device_scale_factor=1, has_touch=phone)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"uncaught exception: {exc}"))
    try:
        page.goto(f"{server}/{page_path}", wait_until="load")
        page.wait_for_timeout(300)
        searches = page.evaluate(_ON_SCREEN_JS, SEARCH_BOXES)
        if searches != 1:
            problems.append(f"{searches} search boxes on the screen, not one")
        menu = page.locator(".bd-header-article .primary-toggle")
        contents = page.locator(".bd-header-article .secondary-toggle")
        if not menu.is_visible():
            problems.append("no visible ☰ in the article header")
        elif phone:
            before = page.evaluate(_ON_SCREEN_JS, CHAPTER_LINKS)
            menu.tap()
            page.wait_for_timeout(600)
            shown = page.evaluate(_ON_SCREEN_JS, CHAPTER_LINKS)
            if before or shown < 5:
                problems.append(f"☰: {before} chapter links on the screen before, {shown} after (want 0, then 5+)")
            page.screenshot(path=str(SCREENSHOTS / f"phone__navigation_menu_{width}.png"))
            page.keyboard.press("Escape")
            page.wait_for_timeout(400)
            if page.evaluate(_ON_SCREEN_JS, CHAPTER_LINKS):
                problems.append("the chapter list stays on the screen after Escape")
            if not contents.is_visible():
                problems.append("no visible contents button in the article header")
            else:
                contents.tap()
                page.wait_for_timeout(600)
                entries = page.evaluate(_ON_SCREEN_JS, CONTENTS_LINKS)
                if entries < 2:
                    problems.append(f"contents button: {entries} of the page's sections on the screen (want 2+)")
                page.screenshot(path=str(SCREENSHOTS / f"phone__navigation_contents_{width}.png"))
        else:
            shown = page.evaluate(_ON_SCREEN_JS, CHAPTER_LINKS)
            menu.click()
            page.wait_for_timeout(700)
            folded = page.evaluate(_ON_SCREEN_JS, CHAPTER_LINKS)
            menu.click()
            page.wait_for_timeout(700)
            unfolded = page.evaluate(_ON_SCREEN_JS, CHAPTER_LINKS)
            if shown < 5 or folded or unfolded != shown:
                problems.append(
                    f"☰ on the desktop: {shown} chapter links, {folded} after a click, {unfolded} after two"
                )
            if page.evaluate(_ON_SCREEN_JS, CONTENTS_LINKS) < 2:
                problems.append("the page's contents are not in the right sidebar")
    finally:
        context.close()
    assert not problems, f"{page_path} at {width} px:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("query", ["leverage", "polytope"])
def test_search_ranks_the_glossary_first(browser, server, query):
    """The site search (book/_ext/search_scorer.js): a glossary word finds its definition before any API entry."""
    if not (HTML / "book" / "glossary.html").exists():
        pytest.skip("no glossary in the build")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        page.goto(f"{server}/search.html?q={query}", wait_until="load")
        page.wait_for_selector("#search-results ul.search li", timeout=60_000)
        page.wait_for_timeout(500)  # results are appended one by one
        hrefs = page.eval_on_selector_all("#search-results ul.search li > a", "links => links.map(a => a.href)")
    finally:
        context.close()
    assert hrefs, f"no search results for {query!r}"
    assert "/book/glossary.html" in hrefs[0], f"first result for {query!r} is {hrefs[0]}, not the glossary"
    # for a plain word the chapters that use it come before any API entry
    api = [k for k, href in enumerate(hrefs) if "/book/api" in href]
    chapters = [k for k, href in enumerate(hrefs) if re.search(r"/book/\d\d_", href)]
    if api and chapters:
        assert chapters[0] < api[0], f"for {query!r} {hrefs[api[0]]} ranks above every chapter"
