"""The notebook check's tolerance: kernel noise passes, real changes fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.nbval_tolerance import first_difference, split_numbers

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "committed, computed",
    [
        ("median 0.76", "median 0.75"),  # one unit of the last printed digit
        ("0.931", "0.937"),  # within 2%
        ("share 31%", "share 30%"),  # a rounded percentage: one point
        ("-0.00", "0.00"),
        ("<td>0.93</td><td>12</td>", "<td>0.94</td><td>12</td>"),
        ("pair-0007, n = 33 tokens.", "pair-0007, n = 33 tokens."),
    ],
)
def test_kernel_noise_passes(committed, computed):
    assert first_difference(committed, computed) is None


@pytest.mark.parametrize(
    "committed, computed, says",
    [
        ("median 0.75", "median 0.83", "beyond the tolerance"),  # 10% off
        ("error 8e-06", "error 4e-06", "beyond the tolerance"),  # residuals are noise: print "below 1e-5"
        ("14.4%", "15.9%", "beyond the tolerance"),
        ("n = 33", "n = 34", "an integer"),  # counts and shapes are exact
        ("layer 2: 0.5", "layer 3: 0.5", "an integer"),
        ("holds", "fails", "text differs"),
        ("0.5 and 0.6", "0.5", "holds 1 numbers"),
    ],
)
def test_real_changes_fail(committed, computed, says):
    difference = first_difference(committed, computed)
    assert difference is not None and says in difference


@pytest.mark.parametrize("printed", ["0.050", "0.31", "0.75", "0.931", "2.9", "14.4", "30.6", "123.4", "1.2e-03"])
def test_every_number_moved_by_ten_percent_fails(printed):
    # the check's promise: a committed number off by 10% fails (wherever 10% is more than one printed unit)
    number = split_numbers(printed)[1][0]
    assert 0.1 * number.value > number.unit
    for factor in (1.1, 0.9):
        assert first_difference(printed, f"{number.value * factor:.6g}") is not None, (printed, factor)


def test_numbers_are_read_as_printed():
    pieces, numbers = split_numbers("layer2 has 3 heads at 0.25 (1.5e-03), 40%.")
    assert pieces == ["layer2 has ", " heads at ", " (", "), ", "%."]
    assert [(n.value, n.integer) for n in numbers] == [(3, True), (0.25, False), (1.5e-3, False), (40, False)]
    assert numbers[2].unit == pytest.approx(1e-4)


def _notebook(path: Path, committed: str) -> Path:
    cell = nbformat.v4.new_code_cell("print(f'median {0.7512:.2f}')", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"median {committed}\n")]
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    return path


def test_nbval_with_the_plugin_passes_noise_and_fails_a_moved_number(tmp_path):
    noisy = _notebook(tmp_path / "noisy.ipynb", "0.76")  # computed: 0.75
    moved = _notebook(tmp_path / "moved.ipynb", "0.83")  # 10% off
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.nbval_tolerance", "--nbval", "--nbval-current-env"]
    passed = subprocess.run([*command, str(noisy)], cwd=ROOT, capture_output=True, text=True)
    failed = subprocess.run([*command, str(moved)], cwd=ROOT, capture_output=True, text=True)
    assert passed.returncode == 0, passed.stdout
    assert failed.returncode == 1 and "beyond the tolerance" in failed.stdout, failed.stdout
