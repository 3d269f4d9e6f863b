"""The spectrum plot of chapter 3's keys section draws what it is given and rejects bad input."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import helpers  # noqa: E402


def test_one_line_per_spectrum_and_the_d_k_marker():
    ax = helpers.plots.plot_centred_log_spectra(
        {"A": torch.tensor([3.0, 1.0, 0.0]), "B": torch.tensor([2.0, 2.0])}, d_v=1
    )
    assert len(ax.lines) == 3  # two spectra and the d_v line
    assert ax.lines[0].get_ydata()[0] == pytest.approx(1.0)
    plt.close("all")


def test_bad_inputs():
    with pytest.raises(ValueError, match="empty"):
        helpers.plots.plot_centred_log_spectra({}, d_v=2)
    with pytest.raises(ValueError, match="d_v"):
        helpers.plots.plot_centred_log_spectra({"A": torch.ones(3)}, d_v=0)
    with pytest.raises(ValueError, match="finite"):
        helpers.plots.plot_centred_log_spectra({"A": torch.tensor([1.0, float("inf")])}, d_v=1)
    plt.close("all")
