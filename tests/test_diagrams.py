"""The drawings of the ideas (book/diagrams/): current, deterministic and legible on a phone.

``make diagrams`` draws every ``book/diagrams/<name>.py`` into ``book/diagrams/<name>.svg``. The
SVGs are committed; this test redraws them into a temporary folder and fails when a committed one
differs in content (its metadata aside), so a drawing's code and its picture cannot drift apart.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from matplotlib.text import Text

ROOT = Path(__file__).resolve().parents[1]
DIAGRAMS = ROOT / "book" / "diagrams"


def _build_module():
    spec = importlib.util.spec_from_file_location("diagrams_build", DIAGRAMS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _build_module()
drawing = build.load("drawing")


def test_every_drawing_script_is_built():
    scripts = sorted(p.stem for p in DIAGRAMS.glob("*.py") if p.stem not in ("build", "drawing"))
    assert scripts == sorted(build.DRAWINGS), "list every drawing in book/diagrams/build.py's DRAWINGS"


def test_committed_drawings_are_current(tmp_path):
    stale = []
    for path in build.build(tmp_path):
        committed = DIAGRAMS / path.name
        if not committed.exists():
            stale.append(f"{path.name} is not committed")
        elif drawing.content_hash(committed.read_text()) != drawing.content_hash(path.read_text()):
            stale.append(f"{path.name} differs from what its script draws")
    assert not stale, "run `make diagrams` and commit the SVGs: " + "; ".join(stale)


def test_drawings_are_deterministic(tmp_path):
    first = {p.name: p.read_bytes() for p in build.build(tmp_path / "a")}
    second = {p.name: p.read_bytes() for p in build.build(tmp_path / "b")}
    assert first == second
    assert all(b"<dc:date>" not in svg for svg in first.values()), "an SVG carries a date"


@pytest.mark.parametrize("name", build.DRAWINGS)
def test_drawing_is_legible_on_a_phone(name):
    """No text under MIN_FONT pt, and shown at the width a figure gets on a 390-px screen, none under 8 px."""
    module = build.load(name)
    assert module.CAPTION.count("$") % 2 == 0 and "Look at" in module.CAPTION, "a caption says what to look at"
    fig = module.draw()
    width = fig.get_figwidth()
    assert width <= drawing.MAX_WIDTH
    scale = min(1.0, drawing.PHONE_COLUMN / (width * 96))  # an SVG inch is 96 CSS px
    small = [
        f"{t.get_text()!r} at {t.get_fontsize() * 96 / 72 * scale:.1f} px"
        for t in fig.findobj(Text)
        if t.get_text().strip()
        and t.get_visible()
        and (t.get_fontsize() < drawing.MIN_FONT or t.get_fontsize() * 96 / 72 * scale < 8)
    ]
    drawing.plt.close(fig)
    assert not small, f"{name}: text under 8 px on a phone: " + ", ".join(small)
