"""The quickstart at the top of the API page (book/api.md) and in the README runs as it stands.

Every ```python block of the page, in order, in one namespace, on the bundled encoder: what a reader
copies works, and a renamed helper or argument fails here first. The README's section "Using the helpers
as a library" holds the same code in one block: it must equal the page's blocks, and it runs too.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import pytest

ROOT = Path(__file__).resolve().parents[1]
API_PAGE = ROOT / "book" / "api.md"
README = ROOT / "README.md"
README_SECTION = "## Using the helpers as a library"
BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.M | re.S)


def quickstart_blocks() -> list[str]:
    return BLOCK.findall(API_PAGE.read_text())


def readme_blocks() -> list[str]:
    """The ```python blocks of the README's library section (up to the next section)."""
    text = README.read_text()
    assert README_SECTION in text, f"the README has no section {README_SECTION!r}"
    section = text.split(README_SECTION, 1)[1].split("\n## ", 1)[0]
    return BLOCK.findall(section)


def test_the_page_has_a_quickstart_of_short_blocks():
    blocks = quickstart_blocks()
    assert len(blocks) >= 7, "the quickstart: load and encode, capture, effective attention, HTA, mixing, a map, a plot"
    code = "\n".join(blocks)
    calls = (
        "load_model",
        "encode",
        "capture",
        "effective_attention",
        "hidden_token_attribution",
        "context_mixing",
        "fit_token_map",
        "plots.",
    )
    for call in calls:
        assert call in code, f"the quickstart does not call {call}"
    long = [line for line in code.splitlines() if len(line) > 74]
    assert not long, f"quickstart lines over 74 characters (the code column): {long}"


def test_the_readme_quickstart_is_the_pages():
    assert readme_blocks() == ["\n".join(quickstart_blocks())], (
        "the README's quickstart differs from book/api.md's: paste the page's blocks, one after the other"
    )


@pytest.mark.parametrize("source", ["book/api.md", "README.md"])
def test_the_quickstart_runs(source, monkeypatch, capsys):
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: None)
    namespace: dict = {}
    blocks = quickstart_blocks() if source == "book/api.md" else readme_blocks()
    for number, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"{source}, quickstart block {number}", "exec"), namespace)
        except Exception as error:  # say which block a reader would see fail
            raise AssertionError(f"{source}: quickstart block {number} fails: {error!r}\n{block}") from error
    assert "layers," in capsys.readouterr().out
    assert isinstance(namespace["fig"], plt.Figure)
    n = len(namespace["tokens"])
    L = namespace["arch"].num_layers
    assert tuple(namespace["internals"].A.shape[-2:]) == (n, n)
    assert tuple(namespace["contributions"].shape) == (n, n)
    assert tuple(namespace["mixing"].scores.shape) == (L, n, n)
    assert 0.3 < namespace["rate"] <= 1.0, "a trained linear map identifies far more tokens than chance"
    plt.close("all")
