"""The verdict rule: what an interval and its control allow a chapter to say.

A claim names, before it is measured, the side of its control its figure must fall on.
Its verdict is read from one or more *comparisons*, each an interval against a bound:

* **paired** (the estimate and the control measured on the same sequences): the interval of
  the paired per-sequence difference, estimate minus control, against 0;
* **fixed** (a control that is a number: chance, 1/n, no change): the estimate's interval
  against that number;
* **independent** (a control measured on other sequences): the estimate's interval against
  the control's far edge (two marginal intervals; conservative);
* a **threshold** from the paper (its "most" read as 0.5): the estimate's interval against it.

Each comparison *clears* (the whole interval on the predicted side), goes *against* (the
whole interval on the other side) or *contains* the bound. Then:

========================  ==========================================  ========================
what the comparisons say   paper claim                                finding
========================  ==========================================  ========================
all clear                  reproduced; in direction only when a        holds
                           published size lies outside the interval
                           widened by its tolerance
one contains, none         inconclusive                                inconclusive
against
one against                not reproduced                              does not hold
========================  ==========================================  ========================

Before that: a claim on fewer than :data:`MIN_SEQUENCES` sequences gets **too few
sequences** (what its interval says goes into the note), counted apart; a paper claim
whose premise (a property of the model it presumes, checked first) is absent gets
**premise absent**. So no negative verdict rests on an interval that contains its bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..methods.intervals import Estimate

__all__ = [
    "MIN_SEQUENCES",
    "PAPER_VERDICTS",
    "FINDING_VERDICTS",
    "CHECK_VERDICTS",
    "POSITIVE",
    "NEGATIVE",
    "APART",
    "COMPARISONS",
    "Comparison",
    "Decision",
    "compare",
    "decide",
]

MIN_SEQUENCES = 10
"""No verdict on fewer sequences: a percentile bootstrap over 3 has 10 distinct resamples."""

PAPER_VERDICTS = (
    "reproduced",
    "in direction only",
    "inconclusive",
    "not reproduced",
    "premise absent",
    "too few sequences",
    "not testable here",
)
FINDING_VERDICTS = ("holds", "inconclusive", "does not hold", "too few sequences", "not testable here")
CHECK_VERDICTS = ("passes", "fails")
POSITIVE = ("reproduced", "in direction only", "holds")
NEGATIVE = ("not reproduced", "does not hold")
APART = ("premise absent", "too few sequences", "not testable here")
"""Verdicts counted apart from the tested claims."""
COMPARISONS = ("paired", "fixed", "independent")
SIDES = ("above", "below")


def compare(low: float, high: float, bound: float, side: str) -> str:
    """ "clears", "against" or "contains": where the interval [low, high] lies relative to ``bound``."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    if side == "above":
        return "clears" if low > bound else "against" if high < bound else "contains"
    return "clears" if high < bound else "against" if low > bound else "contains"


@dataclass(frozen=True)
class Comparison:
    """One interval read against one bound: what ``decide`` combines."""

    what: str  # "paired difference", "estimate against the control", "estimate against the paper's bound"
    low: float
    high: float
    bound: float
    outcome: str  # "clears", "against", "contains"


@dataclass(frozen=True)
class Decision:
    """The verdict and the comparisons it was read from."""

    verdict: str
    comparisons: tuple[Comparison, ...]
    reversed: bool  # the control's comparison lies wholly on the other side
    size_agrees: bool | None  # None when no size is compared
    reading: str  # a sentence: what the intervals said (kept in the note of a verdict counted apart)


def decide(
    kind: str,
    estimate: Estimate,
    side: str,
    *,
    control: float | None = None,
    control_interval: tuple[float, float] | None = None,
    difference: Estimate | None = None,
    threshold: float | None = None,
    size: float | None = None,
    tolerance: float | None = None,
    min_sequences: int = MIN_SEQUENCES,
    premise: bool = True,
) -> Decision:
    """The verdict of a paper claim (``kind="paper"``) or finding (``"finding"``); see the module docstring.

    Exactly one control: ``difference`` (the paired difference estimate - control, with its interval),
    ``control`` (a fixed number) or ``control_interval`` (an independent control's (low, high)).
    ``threshold``: a bound on the estimate from the paper. ``size`` and ``tolerance``: a published
    figure the interval widened by the tolerance must hold (paper claims only).
    """
    if kind not in ("paper", "finding"):
        raise ValueError(f"kind must be 'paper' or 'finding', got {kind!r}")
    given = [x is not None for x in (difference, control, control_interval)]
    if sum(given) != 1:
        raise ValueError("give exactly one of difference (paired), control (fixed) or control_interval (independent)")
    comparisons = []
    if difference is not None:
        if difference.sequences != estimate.sequences:
            raise ValueError(
                f"the paired difference rests on {difference.sequences} sequences, the estimate on "
                f"{estimate.sequences}: a paired comparison needs the same sequences"
            )
        lo, hi = difference.low, difference.high
        comparisons.append(Comparison("paired difference", lo, hi, 0.0, compare(lo, hi, 0.0, side)))
    elif control is not None:
        c = float(control)
        outcome = compare(estimate.low, estimate.high, c, side)
        comparisons.append(Comparison("estimate against the control", estimate.low, estimate.high, c, outcome))
    else:
        c_low, c_high = (float(x) for x in control_interval)
        edge = c_high if side == "above" else c_low
        outcome = compare(estimate.low, estimate.high, edge, side)
        if outcome == "against":  # against only when clear of the control's whole interval
            far = c_low if side == "above" else c_high
            outcome = "against" if compare(estimate.low, estimate.high, far, side) == "against" else "contains"
        comparisons.append(Comparison("estimate against the control", estimate.low, estimate.high, edge, outcome))
    reversed_ = comparisons[0].outcome == "against"
    if threshold is not None:
        t = float(threshold)
        outcome = compare(estimate.low, estimate.high, t, side)
        comparisons.append(Comparison("estimate against the paper's bound", estimate.low, estimate.high, t, outcome))
    for c in comparisons:
        if not all(math.isfinite(x) for x in (c.low, c.high, c.bound)):
            raise ValueError(f"{c.what}: the interval or its bound is not finite ({c})")
    outcomes = {c.outcome for c in comparisons}
    direction = "against" if "against" in outcomes else "contains" if "contains" in outcomes else "clears"
    size_agrees = None
    if size is not None and kind == "paper":
        if tolerance is None or tolerance < 0:
            raise ValueError("a compared size needs a tolerance >= 0")
        size_agrees = estimate.low - tolerance <= float(size) <= estimate.high + tolerance
    if direction == "clears":
        verdict = ("in direction only" if size_agrees is False else "reproduced") if kind == "paper" else "holds"
    elif direction == "contains":
        verdict = "inconclusive"
    else:
        verdict = "not reproduced" if kind == "paper" else "does not hold"
    reading = "; ".join(f"{c.what} [{c.low:.3g}, {c.high:.3g}] {c.outcome} {c.bound:.3g}" for c in comparisons)
    if not premise:
        if kind != "paper":
            raise ValueError("only a paper claim has a premise")
        verdict = "premise absent"
    elif estimate.sequences < min_sequences:
        verdict = "too few sequences"
    return Decision(verdict, tuple(comparisons), reversed_, size_agrees, reading)
