"""The one numbering convention: layers and heads from 1 for readers, tensors from 0."""

import numpy as np
import pytest

from helpers.model.numbering import check_count, head_index, hidden_state_index, layer_index, layer_number


def test_round_trip_and_numpy_integers():
    assert layer_index(1, 6) == 0 and layer_index(6, 6) == 5
    assert layer_number(layer_index(3, 6)) == 3
    assert head_index(np.int64(12), 12) == 11
    assert hidden_state_index(0, 6) == 0 and hidden_state_index(6, 6) == 6


@pytest.mark.parametrize(
    "bad, error", [(0, ValueError), (7, ValueError), (2.0, TypeError), ("3", TypeError), (True, TypeError)]
)
def test_out_of_range_or_wrong_type(bad, error):
    with pytest.raises(error, match="layer"):
        layer_index(bad, 6)


def test_counts():
    assert check_count(np.int32(8), "samples") == 8
    with pytest.raises(ValueError, match="samples"):
        check_count(0, "samples")
