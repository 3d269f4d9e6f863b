import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402
import torch  # noqa: E402

import helpers  # noqa: E402

from .conftest import LONG_TEXT  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def head(tiny_model, tokenizer):
    encoding = helpers.encode(tokenizer, LONG_TEXT, model=tiny_model)
    internals = helpers.capture(tiny_model, encoding)
    return internals.A[0, 1], internals.T[0, 1], helpers.tokens_of(tokenizer, encoding)


def check_valid(explorer, A, T):
    report = helpers.methods.nullspace.validity(explorer.alternative(), A, T)
    assert report.min_entry >= -1e-12
    assert report.row_sum_error < 1e-6  # A itself is float32
    assert report.output_error < 1e-5
    assert explorer.output_change() < 1e-5


def test_explorer_builds_without_a_kernel_and_reacts_to_its_sliders(head):
    A, T, tokens = head
    explorer = helpers.NullSpaceExplorer(A, T, tokens, directions=2, seed=0)
    assert len(explorer.sliders) == 2 and explorer.directions.shape == (2, *A.shape)
    assert explorer.steps == (0.0, 0.0)
    assert torch.allclose(explorer.alternative(), A.double())
    first_image, first_caption = explorer.image.value, explorer.caption.value
    assert first_image[:4] == b"\x89PNG"
    explorer.sliders[0].value = explorer.sliders[0].max  # fires the observer
    assert explorer.image.value != first_image and explorer.caption.value != first_caption
    assert (explorer.alternative() - A).abs().max() > 1e-3
    check_valid(explorer, A, T)


def test_every_corner_of_the_sliders_is_valid(head):
    A, T, tokens = head
    explorer = helpers.NullSpaceExplorer(A, T, directions=2, seed=1)
    for a in (explorer.sliders[0].min, explorer.sliders[0].max):
        for b in (explorer.sliders[1].min, explorer.sliders[1].max):
            report = helpers.methods.nullspace.validity(explorer.alternative([a, b]), A, T)
            assert report.min_entry >= -1e-12 and report.row_sum_error < 1e-6 and report.output_error < 1e-5
    assert explorer.sliders[0].max >= 0.5 - 1e-9  # half the way to a vertex of the valid polytope
    # and the ranges are tight: one slider alone at twice its end leaves the simplex
    low, high = explorer.ranges[0]
    assert float((A.double() + 1.01 * high * explorer.directions[0]).min()) < 0
    assert explorer.sliders[0].max == pytest.approx(high / 2)


def test_explorer_takes_given_directions(head):
    A, T, tokens = head
    D = helpers.methods.nullspace.null_direction(T, seed=2)
    explorer = helpers.NullSpaceExplorer(A, T, directions=D[None].float())
    assert len(explorer.sliders) == 1
    assert explorer.ranges[0] == pytest.approx(helpers.methods.nullspace.step_range(A, D.float()), rel=1e-5)
    explorer.sliders[0].value = explorer.sliders[0].min
    check_valid(explorer, A, T)


def test_static_figure(head):
    A, T, tokens = head
    explorer = helpers.NullSpaceExplorer(A, T, tokens, directions=1)
    fig = explorer.figure([explorer.sliders[0].max])
    assert len(fig.axes) >= 3
    assert "t_1" in fig._suptitle.get_text()
    matplotlib.pyplot.close(fig)


def test_bad_input(head):
    A, T, tokens = head
    with pytest.raises(ValueError, match="directions"):
        helpers.NullSpaceExplorer(A, T, directions=0)
    with pytest.raises(ValueError, match="directions"):
        helpers.NullSpaceExplorer(A, T, directions=torch.ones(2, 3, 3))
    with pytest.raises(ValueError, match="LN"):  # a direction that changes the output
        helpers.NullSpaceExplorer(
            A, T, directions=torch.randn((1, *A.shape), generator=torch.Generator().manual_seed(0))
        )
    with pytest.raises(ValueError, match="tokens"):
        helpers.NullSpaceExplorer(A, T, tokens[:-1])
    with pytest.raises(ValueError, match="sum to 1"):
        helpers.NullSpaceExplorer(A * 2, T)
    with pytest.raises(ValueError, match="rows"):
        helpers.NullSpaceExplorer(A, T[:-2])
    explorer = helpers.NullSpaceExplorer(A, T, directions=2)
    with pytest.raises(ValueError, match="steps"):
        explorer.alternative([0.1])


def test_short_input_has_nothing_to_explore(tiny_model, tokenizer):
    internals = helpers.capture(tiny_model, helpers.encode(tokenizer, "Too short.", model=tiny_model))
    with pytest.raises(ValueError, match="identifiable"):
        helpers.NullSpaceExplorer(internals.A[0, 0], internals.T[0, 0])


def test_grid_figure_stands_in_for_the_sliders(head):
    A, T, tokens = head
    explorer = helpers.NullSpaceExplorer(A, T, tokens, directions=2, seed=0)
    figure = explorer.grid_figure(positions=3)
    panels = [ax for ax in figure.axes if ax.get_title()]
    assert len(panels) == 9 and panels[0].get_title() == "$t_1$=0, $t_2$=0"
    corner = panels[-1].images[0].get_array()  # both sliders at their right end
    expected = explorer.alternative([s.max for s in explorer.sliders]) - explorer.A
    assert torch.allclose(torch.as_tensor(corner.data), expected, atol=1e-12)
    with pytest.raises(ValueError, match="positions"):
        explorer.grid_figure(positions=1)
    matplotlib.pyplot.close("all")
