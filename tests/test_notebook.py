"""helpers.book.notebook: the first cell's setup and the text of computed numbers."""

from __future__ import annotations

import pytest

import helpers


@pytest.mark.parametrize(
    "value, bound, text",
    [
        (8e-6, 1e-5, "1e-5"),
        (6e-6, 1e-4, "1e-4"),
        (0.0, 1e-7, "1e-7"),
        (3.2e-3, 1e-4, "3.2e-03"),
        (1e-4, 1e-4, "1.0e-04"),
    ],
)
def test_residual_text_states_the_bound_or_the_broken_value(value, bound, text):
    assert helpers.residual_text(value, bound) == text


def test_residual_text_needs_a_positive_bound():
    with pytest.raises(ValueError, match="positive"):
        helpers.residual_text(1e-6, 0.0)
