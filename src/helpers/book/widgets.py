"""Interactive explorers (ipywidgets). They build without a running kernel, so they are testable.

``NullSpaceExplorer(A, T, tokens)``: sliders move along directions whose
rows lie in LN([T, 1]); the picture shows the model's attention, the
alternative A + Ã and the difference Ã, and the caption the relative change
of the head output A T (zero up to rounding).

The default directions point from A to vertices of the polytope of valid
rows (``lp_bounds.extreme_alternative``: the distribution least like A, then
random objectives), so they travel far: a random direction in LN([T, 1]) is
stopped almost at once by the smallest softmax weights. Each slider spans
its own direction's non-negative range divided by the number of sliders, so
every slider setting is an average of valid matrices and therefore valid.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch

from ..methods.linalg import DEFAULT_RTOL, relative_output_change
from ..methods.lp_bounds import extreme_alternative
from ..methods.nullspace import null_projection, simplex_null_space, step_range
from ..model.checks import check_attention_and_values, check_attention_distribution, check_not_causal


class NullSpaceExplorer:
    """Sliders along null directions of one head.

    Args:
        A: (n, n) the head's attention probabilities.
        T: (n, d) the head's T = V H.
        tokens: n token strings for the axes (optional).
        directions: the number of sliders (1 to 4), each along A -> a vertex
            of the valid polytope (see the module docstring); or a tensor
            (k, n, n) of directions with rows in LN([T, 1]).
        seed: seeds the random objectives of the second and later directions.

    Attributes:
        directions: (k, n, n) float64; ranges: k (t_low, t_high) pairs of
        each direction alone; sliders: the k ``FloatSlider``; image, caption;
        widget: the ``VBox`` to display.
    """

    def __init__(
        self,
        A: torch.Tensor,
        T: torch.Tensor,
        tokens: Sequence[str] | None = None,
        directions: int | torch.Tensor = 2,
        seed: int = 0,
        rtol: float = DEFAULT_RTOL,
        dpi: int = 72,
    ):
        import ipywidgets as widgets

        check_attention_and_values(A, T)
        check_attention_distribution(A)
        check_not_causal(A, "the null-space explorer")
        if tokens is not None and len(tokens) != A.shape[0]:
            raise ValueError(f"{len(tokens)} tokens for an attention matrix of {A.shape[0]} rows.")
        A, T = A.detach().cpu(), T.detach().cpu()  # a widget on the CPU: its LPs and drawing run there anyway
        N = simplex_null_space(T, rtol)
        if N.shape[1] == 0:
            raise ValueError(
                f"LN([T, 1]) is trivial for this input of {A.shape[0]} tokens: attention is identifiable "
                "here and there is nothing to explore. Use a longer input."
            )
        self.A, self.T, self.tokens, self.dpi = A.double(), T.double(), tokens, dpi
        if isinstance(directions, torch.Tensor):
            if directions.dim() != 3 or directions.shape[1:] != A.shape or not 1 <= directions.shape[0] <= 4:
                raise ValueError(
                    f"directions must be (k, n, n) with k from 1 to 4 and n = {A.shape[0]}; "
                    f"got {tuple(directions.shape)}."
                )
            D = directions.detach().cpu().double()
            leak = float((D - null_projection(D, N)).abs().max() / D.abs().max().clamp_min(1e-300))
            if not torch.isfinite(D).all() or leak > 1e-6:
                raise ValueError(
                    "directions must be finite with every row in LN([T, 1]); project them with "
                    "null_projection(directions, simplex_null_space(T))."
                )
            self.directions = D
        elif isinstance(directions, int) and not isinstance(directions, bool) and 1 <= directions <= 4:
            draws = torch.Generator().manual_seed(seed)
            objectives = [-self.A] + [
                torch.randn(A.shape, generator=draws, dtype=torch.float64) for _ in range(directions - 1)
            ]
            self.directions = torch.stack(
                [
                    extreme_alternative(self.A, self.T, objective, rtol, progress=False) - self.A
                    for objective in objectives
                ]
            )
        else:
            raise ValueError(f"directions must be an int from 1 to 4 or a (k, n, n) tensor; got {directions!r}.")
        self.ranges = [step_range(self.A, D) for D in self.directions]
        k = len(self.directions)
        self.sliders = [
            widgets.FloatSlider(
                value=0.0,
                min=low / k,
                max=high / k,
                step=(high - low) / (k * 200),
                description=f"step $t_{i + 1}$",
                readout_format=".3g",
                continuous_update=False,
                layout=widgets.Layout(width="45%"),
            )
            for i, (low, high) in enumerate(self.ranges)
        ]
        self.caption = widgets.HTML()
        self.image = widgets.Image(format="png")
        self.widget = widgets.VBox([widgets.HBox(self.sliders), self.caption, self.image])
        for slider in self.sliders:
            slider.observe(lambda change: self.update(), names="value")
        self.update()

    @property
    def steps(self) -> tuple[float, ...]:
        """The sliders' current values."""
        return tuple(float(slider.value) for slider in self.sliders)

    def _steps(self, steps: Sequence[float] | None) -> torch.Tensor:
        steps = self.steps if steps is None else tuple(steps)
        if len(steps) != len(self.sliders):
            raise ValueError(f"Give {len(self.sliders)} steps, one per slider; got {len(steps)}.")
        return torch.tensor(steps, dtype=torch.float64)

    def alternative(self, steps: Sequence[float] | None = None) -> torch.Tensor:
        """A + sum_k t_k D_k: (n, n), for the given steps or the sliders' values."""
        t = self._steps(steps)
        return self.A + torch.einsum("k,kij->ij", t, self.directions)

    def output_change(self, steps: Sequence[float] | None = None) -> float:
        """max |(A' - A) T| / max |A T|: zero (to rounding) for every step."""
        return float(relative_output_change(self.alternative(steps), self.A, self.T))

    def figure(self, steps: Sequence[float] | None = None) -> plt.Figure:
        """The picture for the given steps (or the sliders'), as a matplotlib figure."""
        from .plots.nullspace import plot_null_step

        t = self._steps(steps)
        return plot_null_step(
            self.A, self.alternative(t.tolist()), self.output_change(t.tolist()), self.tokens, steps=t.tolist()
        )

    def grid_figure(self, positions: int = 3) -> plt.Figure:
        """The explorer for a page without a kernel: Ã at ``positions`` settings of the first two sliders.

        Rows step the second slider and columns the first, from 0 to its right end
        (one row when there is a single slider); every panel is valid with the same output.
        """
        if isinstance(positions, bool) or not isinstance(positions, int) or not 2 <= positions <= 5:
            raise ValueError(f"positions must be an integer from 2 to 5, got {positions!r}.")
        from .plots.nullspace import plot_null_grid

        fractions = [k / (positions - 1) for k in range(positions)]
        first = [f * self.sliders[0].max for f in fractions]
        second = [f * self.sliders[1].max for f in fractions] if len(self.sliders) > 1 else [0.0]
        rest = [0.0] * max(0, len(self.sliders) - 2)
        grid, labels = [], []
        for t2 in second:
            steps = [[t1, t2, *rest][: len(self.sliders)] for t1 in first]
            grid.append([self.alternative(s) for s in steps])
            labels.append([", ".join(f"$t_{k + 1}$={t:.2g}" for k, t in enumerate(s[:2])) for s in steps])
        return plot_null_grid(self.A, grid, labels)

    def update(self) -> None:
        """Redraw the picture and caption for the sliders' values (called on every slider change)."""
        alternative = self.alternative()
        self.caption.value = (
            f"min weight {float(alternative.min()):.3f} (&ge; 0), max |row sum - 1| "
            f"{float((alternative.sum(-1) - 1).abs().max()):.1e}, relative change of A&thinsp;T "
            f"{self.output_change():.1e}"
        )
        fig = self.figure()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=self.dpi)
        plt.close(fig)
        self.image.value = buffer.getvalue()

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
