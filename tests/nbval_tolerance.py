"""nbval with a tolerance for numbers: the notebook check that passes on any CPU.

nbval compares every re-executed output with the committed one, character for
character. CPUs differ in the last digits of what they compute (other BLAS and
ATen kernels, another reduction order, another thread count), so an exact
comparison fails on a machine that did not write the outputs. This plugin
(``pytest -p tests.nbval_tolerance``, as ``make test`` and ``make check`` run
it) keeps nbval and its sanitize file, and changes one thing: after
sanitizing, two output strings are equal when

* the text between the numbers is identical, character for character;
* they hold the same count of numbers, in the same order;
* each integer (no decimal point, no exponent: counts, shapes, sizes, indices)
  is identical;
* each other number, read as printed, agrees within :data:`RELATIVE` of the
  committed value or within one unit of its last printed digit, whichever is
  larger. An integer followed by ``%`` is a rounded share: one unit (one
  percentage point) of slack.

So "0.76" may become "0.75" and "0.931" may become "0.937", but "0.75" may
not become "0.83", "8e-06" may not become "4e-06" (an identity's residual is
noise: print "below 1e-5" instead), and any committed number moved by 10%
fails. A cell whose output legitimately varies carries the tag
``nbval-ignore-output``, as in plain nbval.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

RELATIVE = 0.02
"""Relative tolerance for a printed non-integer number (2%)."""

NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-+\u2212]?)(?P<mantissa>\d+\.\d+|\.\d+|\d+)(?P<exponent>[eE][-+]?\d+)?(?![\w])"
)

# The committed outputs hold no progress bars (helpers.model.progress): every notebook check runs with them off,
# also `make check` and a plain `pytest -p tests.nbval_tolerance --nbval book/...`, where tests/conftest.py is not
# loaded. The notebook kernels inherit it from this process.
os.environ.setdefault("BOOK_PROGRESS", "0")


@dataclass(frozen=True)
class Printed:
    """A number as printed: its value, whether it is an integer, and one unit of its last digit."""

    value: float
    integer: bool
    unit: float

    @classmethod
    def parse(cls, match: re.Match) -> Printed:
        sign = -1.0 if match["sign"] in ("-", "\u2212") else 1.0
        mantissa, exponent = match["mantissa"], match["exponent"] or ""
        decimals = len(mantissa.split(".", 1)[1]) if "." in mantissa else 0
        scale = 10.0 ** int(exponent[1:]) if exponent else 1.0
        percent = match.string.startswith("%", match.end())
        integer = "." not in mantissa and not exponent and not percent
        return cls(sign * float(mantissa) * scale, integer, 10.0**-decimals * scale)


def split_numbers(text: str) -> tuple[list[str], list[Printed]]:
    """``text`` cut into the pieces between numbers (one more than the numbers) and the numbers."""
    pieces, numbers, start = [], [], 0
    for match in NUMBER.finditer(text):
        pieces.append(text[start : match.start()])
        numbers.append(Printed.parse(match))
        start = match.end()
    pieces.append(text[start:])
    return pieces, numbers


def numbers_agree(reference: Printed, test: Printed, relative: float = RELATIVE) -> bool:
    """Whether a re-computed number ``test`` agrees with the committed ``reference`` (module docstring)."""
    if reference.integer or test.integer:
        return reference.integer == test.integer and reference.value == test.value
    if not (math.isfinite(reference.value) and math.isfinite(test.value)):
        return reference.value == test.value
    slack = max(relative * abs(reference.value), reference.unit, test.unit)
    return abs(test.value - reference.value) <= slack * (1 + 1e-9)


def first_difference(reference: str, test: str, relative: float = RELATIVE) -> str | None:
    """None when ``test`` matches ``reference`` under the tolerance, else a sentence saying where not."""
    if reference == test:
        return None
    ref_pieces, ref_numbers = split_numbers(reference)
    test_pieces, test_numbers = split_numbers(test)
    if len(ref_numbers) != len(test_numbers):
        return f"the output holds {len(test_numbers)} numbers, the committed one {len(ref_numbers)}"
    for k, (a, b) in enumerate(zip(ref_pieces, test_pieces, strict=True)):
        if a != b:
            return f"the text differs before number {k + 1}: {b[-60:]!r} where the committed output has {a[-60:]!r}"
    for k, (a, b) in enumerate(zip(ref_numbers, test_numbers, strict=True)):
        if not numbers_agree(a, b, relative):
            kind = "an integer" if a.integer else f"beyond the tolerance (max({relative:g} relative, one unit))"
            context = ref_pieces[k][-40:]
            return f"number {k + 1} (after {context!r}) is {b.value:g}, committed {a.value:g}: {kind}"
    return None


class TolerantText(str):
    """A sanitized output string whose ``==`` is :func:`first_difference` is None."""

    __hash__ = str.__hash__
    last_difference: str | None = None

    def __eq__(self, other):
        if not isinstance(other, str):
            return NotImplemented
        difference = first_difference(str(self), str(other))
        if difference is not None:
            TolerantText.last_difference = difference
        return difference is None

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal


def install() -> None:
    """Make nbval's comparison tolerant: its sanitizer returns :class:`TolerantText`."""
    from nbval.plugin import IPyNbCell

    if getattr(IPyNbCell.sanitize, "tolerant", False):
        return
    exact_sanitize = IPyNbCell.sanitize
    exact_compare = IPyNbCell.compare_outputs

    def sanitize(self, s):
        clean = exact_sanitize(self, s)
        return TolerantText(clean) if isinstance(clean, str) else clean

    def compare_outputs(self, test, ref, skip_compare=None):
        TolerantText.last_difference = None
        same = exact_compare(self, test, ref, skip_compare)
        if not same and TolerantText.last_difference:
            self.comparison_traceback.insert(0, f"  {TolerantText.last_difference}")
        return same

    sanitize.tolerant = True
    IPyNbCell.sanitize = sanitize
    IPyNbCell.compare_outputs = compare_outputs


def prepare_caches() -> None:
    """Build what a first run would build inside a notebook and report there, before any kernel starts.

    matplotlib builds its font cache on its first import and says so on stderr: that line would
    land in the first cell of whichever notebook ran first on a new machine.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.font_manager  # noqa: F401  (builds the cache under $MPLCONFIGDIR or $XDG_CACHE_HOME)


def pytest_configure(config):
    if config.getoption("nbval", default=False):
        install()
        prepare_caches()
