"""The quickstart at the top of the API page (book/api.md) runs as it stands.

Every ```python block of the page, in order, in one namespace, on the bundled encoder:
what a reader copies works, and a renamed helper or argument fails here first.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

ROOT = Path(__file__).resolve().parents[1]
API_PAGE = ROOT / "book" / "api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.M | re.S)


def quickstart_blocks() -> list[str]:
    return BLOCK.findall(API_PAGE.read_text())


def test_the_page_has_a_quickstart_of_short_blocks():
    blocks = quickstart_blocks()
    assert len(blocks) >= 5, "the quickstart: load and encode, capture, effective attention, HTA, a plot"
    code = "\n".join(blocks)
    for call in ("load_model", "encode", "capture", "effective_attention", "hidden_token_attribution", "plots."):
        assert call in code, f"the quickstart does not call {call}"
    long = [line for line in code.splitlines() if len(line) > 74]
    assert not long, f"quickstart lines over 74 characters (the code column): {long}"


def test_the_quickstart_runs(monkeypatch, capsys):
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: None)
    namespace: dict = {}
    for number, block in enumerate(quickstart_blocks(), 1):
        try:
            exec(compile(block, f"book/api.md, quickstart block {number}", "exec"), namespace)
        except Exception as error:  # say which block a reader would see fail
            raise AssertionError(f"quickstart block {number} fails: {error!r}\n{block}") from error
    assert "layers," in capsys.readouterr().out
    assert isinstance(namespace["fig"], plt.Figure)
    n = len(namespace["tokens"])
    assert tuple(namespace["internals"].A.shape[-2:]) == (n, n)
    assert tuple(namespace["contributions"].shape) == (n, n)
    plt.close("all")
