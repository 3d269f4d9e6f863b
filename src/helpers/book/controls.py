"""A claim's control: the strongest simple alternative explanation, computed in the same run."""

from __future__ import annotations

from dataclasses import dataclass

from ..methods.intervals import Estimate, bootstrap, paired_difference

__all__ = ["Control", "as_bool", "as_number"]


@dataclass(frozen=True)
class Control:
    """The strongest simple alternative explanation, computed in the same run.

    what: a reader's description ("a random column space of the same rank, r/n");
    value: a number (a fixed control: chance, 1/n, no change), or an
    :class:`~helpers.methods.intervals.Estimate` with its own interval;
    difference: for a control measured on the same sequences as the estimate, the paired
    difference estimate - control with its interval (:meth:`paired` computes both).
    """

    what: str
    value: float | Estimate
    difference: Estimate | None = None

    def __post_init__(self):
        if not isinstance(self.what, str) or not self.what.strip():
            raise ValueError("a control needs a description of what it is")
        if not isinstance(self.value, Estimate):
            if self.difference is not None:
                raise ValueError("a paired control needs its own interval as value (Control.paired)")
            object.__setattr__(self, "value", as_number(self.value, "control", "value"))
        if self.difference is not None and not isinstance(self.difference, Estimate):
            raise TypeError("difference must be an Estimate (helpers.methods.intervals.paired_difference)")

    @classmethod
    def paired(cls, what: str, values, control_values, statistic=None, *, groups=None, seeds=False) -> Control:
        """A control measured on the same sequences: its own interval and the paired difference's.

        values, control_values: (m,) the estimate's and the control's values, row by row on the same
        sequences (one per sequence, or per token with ``groups`` naming each row's sequence);
        statistic: array -> number (default the mean). The claim's estimate must be the same
        statistic of ``values`` (``helpers.bootstrap(values, statistic, groups=groups, seeds=seeds)``).
        seeds: either may be (m, S), one column per training seed, resampled inside the intervals
        (:func:`~helpers.methods.intervals.bootstrap`); a control without seeds may stay (m,).
        """
        import numpy as np

        statistic = statistic or np.mean
        control_values = np.asarray(control_values, dtype=float)
        own_seeds = seeds and control_values.ndim == 2
        return cls(
            what,
            bootstrap(control_values, statistic, groups=groups, seeds=own_seeds),
            paired_difference(values, control_values, statistic, groups=groups, seeds=seeds),
        )

    @property
    def comparison(self) -> str:
        """ "paired", "fixed" or "independent": how the verdict reads this control."""
        if self.difference is not None:
            return "paired"
        return "independent" if isinstance(self.value, Estimate) else "fixed"

    @property
    def low(self) -> float:
        return self.value.low if isinstance(self.value, Estimate) else self.value

    @property
    def high(self) -> float:
        return self.value.high if isinstance(self.value, Estimate) else self.value

    @property
    def point(self) -> float:
        return self.value.value if isinstance(self.value, Estimate) else self.value

    def text(self, fmt: str) -> str:
        figure = self.value.text(fmt) if isinstance(self.value, Estimate) else format(self.value, fmt)
        if self.difference is not None:
            figure += f"; paired difference {self.difference.text(fmt)}"
        return f"{self.what}: {figure}"


def as_bool(value, id: str) -> bool:
    if hasattr(value, "numel") and hasattr(value, "item"):  # torch tensor
        if value.numel() != 1:
            raise TypeError(f"claim {id!r}: holds must be one boolean, got a tensor of {value.numel()} elements")
        value = value.item()
    if hasattr(value, "dtype") and getattr(value, "shape", None) == ():  # numpy scalar
        value = value.item()
    if not isinstance(value, bool):
        raise TypeError(f"claim {id!r}: holds must be a boolean, got {type(value).__name__}")
    return value


def as_number(value, id: str, what: str) -> float:
    if hasattr(value, "numel") and hasattr(value, "item"):
        if value.numel() != 1:
            raise TypeError(f"claim {id!r}: {what} must be one number, got a tensor of {value.numel()} elements")
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise TypeError(f"claim {id!r}: {what} must be a number, got {type(value).__name__}")
    value = float(value)
    if value != value:
        raise ValueError(f"claim {id!r}: {what} is NaN")
    return value
