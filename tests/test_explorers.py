"""The data of the live explorers (_static/explorers/): current, and consistent with what the pages show.

``make explorers`` (``book/explorers/build.py``) computes them with the bundled model. This test
recomputes them into a temporary folder and compares them with the committed files within a tolerance
(the last digits differ between CPU kernels), then checks what the pages rely on: attention rows that
sum to one, an empty null part below d_v, and rows moved by the sliders that stay valid with the same
head output.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from helpers.book import explorers

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "book" / "explorers" / "build.py"


def _build_module():
    spec = importlib.util.spec_from_file_location("explorers_build", BUILD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _build_module()
DATA = build.OUT_DIR


def _load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def _numbers_differ(a, b, atol: float, where: str = "") -> list[str]:
    """Where two JSON values differ: in structure or text, or in a number by more than ``atol``."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(a)} against {sorted(b)}"]
        return [d for k in a for d in _numbers_differ(a[k], b[k], atol, f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        try:
            x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        except (TypeError, ValueError):  # not a rectangular array of numbers: compare item by item
            x = y = None
        if x is not None:
            if x.shape != y.shape:
                return [f"{where}: shape {x.shape} against {y.shape}"]
            gap = float(np.abs(x - y).max()) if x.size else 0.0
            return [f"{where}: numbers differ by up to {gap:.3g}"] if gap > atol else []
        if len(a) != len(b):
            return [f"{where}: {len(a)} items against {len(b)}"]
        return [
            d for i, (p, q) in enumerate(zip(a, b, strict=True)) for d in _numbers_differ(p, q, atol, f"{where}[{i}]")
        ]
    if isinstance(a, float) or isinstance(b, float):
        return [f"{where}: {a} against {b}"] if abs(a - b) > atol else []
    return [] if a == b else [f"{where}: {a!r} against {b!r}"]


def test_the_comparison_can_fail():
    assert not _numbers_differ({"a": [[1, 2]], "s": "x"}, {"a": [[1, 3]], "s": "x"}, atol=1)
    assert _numbers_differ({"a": [[1, 2]]}, {"a": [[1, 4]]}, atol=1) == [".a: numbers differ by up to 2"]
    assert _numbers_differ({"a": [1]}, {"a": [1, 2]}, atol=1) and _numbers_differ({"s": "x"}, {"s": "y"}, atol=1)


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    out = tmp_path_factory.mktemp("explorers")
    return {path.name: path for path in build.build(out)}


def test_committed_data_are_current(rebuilt):
    committed = sorted(p.name for p in DATA.glob("*.json"))
    assert committed == sorted(rebuilt), "run `make explorers` and commit _static/explorers/"
    stale = []
    for name, path in rebuilt.items():
        # maps in thousandths may differ by one unit, the float values of chapter 3 in their last digits
        atol = 1.0 if name.startswith("effective_attention_") else 2e-3
        stale += [f"{name}{d}" for d in _numbers_differ(_load(path), _load(DATA / name), atol)]
    assert not stale, "run `make explorers` and commit _static/explorers/: " + "; ".join(stale[:5])


def test_data_files_are_small():
    sizes = {p.name: p.stat().st_size for p in DATA.glob("*.json")}
    assert sizes and max(sizes.values()) < 1_000_000, sizes


def test_attention_maps_are_consistent():
    index = _load(DATA / build.EFFECTIVE)
    d_v, scale = index["d_v"], index["scale"]
    assert len(index["texts"]) == 3 and index["texts"][0]["n"] < d_v < index["texts"][1]["n"]
    for entry in index["texts"]:
        text = _load(DATA / entry["file"])
        n = len(text["tokens"])
        raw, effective = np.asarray(text["raw"]) / scale, np.asarray(text["effective"]) / scale
        assert n == entry["n"] and raw.shape == effective.shape == (6, 12, n, n)
        assert np.abs(raw.sum(-1) - 1).max() <= n * 0.5 / scale  # each weight rounded by at most half a unit
        assert raw.min() >= 0
        null = raw - effective
        assert np.all(np.asarray(text["null_dims"]) == max(0, n - d_v))
        if n <= d_v:
            assert np.abs(null).max() == 0, "no null space, no null attention"
        else:
            # the null part takes a visible share of every head's map, and effective attention is signed
            share = np.linalg.norm(null, axis=(-2, -1)) / np.linalg.norm(raw, axis=(-2, -1))
            assert share.min() > 0.05 and effective.min() < 0


def test_moved_rows_stay_valid_with_the_same_output():
    data = _load(DATA / build.NULL_SPACE)
    n = len(data["tokens"])
    assert np.asarray(data["T"]).shape[0] == n and len(data["rows"]) == 2
    (low1, high1), (low2, high2) = data["ranges"]
    assert low1 <= 0 < high1 and low2 <= 0 < high2
    for t1 in (low1, high1):
        for t2 in (low2, high2):
            moved = explorers.moved_rows(data, [t1, t2]).numpy()
            assert moved.min() >= -1e-9 and np.abs(moved.sum(-1) - 1).max() < 1e-6
            assert float(explorers.row_output_change(data, [t1, t2]).max()) <= 1e-5
    # while the rows themselves move visibly
    a = np.asarray([row["a"] for row in data["rows"]])
    assert np.abs(explorers.moved_rows(data, [high1, high2]).numpy() - a).max() > 0.05
