"""95% intervals over sequences: the bootstrap every corpus-level figure of the book carries.

Tokens of one sequence are not independent (they share a context, a length and,
for a pair, a topic), so the unit that is resampled is the sequence: draw as many
sequences as there are, with replacement, pool their values, apply the statistic;
the interval is the 2.5th and 97.5th percentiles of that statistic over the draws.
The seed is fixed, so the interval of the same numbers is the same on every run.

::

    removed = table.groupby("example").removed.mean()          # one value per text
    helpers.bootstrap(removed)                                  # mean, 95% interval
    helpers.bootstrap(table.own, groups=table.example, statistic=np.median)  # pooled tokens
    helpers.bootstrap(hits, seeds=True)     # hits: (texts, seeds), one column per trained map

A figure that depends on a training seed (a fitted probe, a fine-tuned model) varies with the seed as
well as with the sequences. With ``seeds=True`` axis 1 of the values holds one column per seed; each
draw then also draws the seed columns with replacement (the same columns for every sequence, since
one seed's model meets every sequence: seeds and sequences are crossed) and averages over them before
the statistic, so the interval carries the seed-to-seed spread as well (a two-way bootstrap; with 3
seeds the seed draw has 10 distinct outcomes, so the interval is rough, but no longer blind to seeds).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Estimate",
    "bootstrap",
    "paired_difference",
    "per_sequence_slopes",
    "resolving_format",
    "RESAMPLES",
    "LEVEL",
]

RESAMPLES = 2000
"""Bootstrap draws per interval (the referee's minimum is 1000)."""
LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A figure and its interval over sequences.

    value: the statistic of all the sequences; low, high: the percentile interval;
    sequences: how many sequences it rests on; level: the interval's coverage.
    """

    value: float
    low: float
    high: float
    sequences: int
    level: float = LEVEL

    def text(self, fmt: str = ".2f") -> str:
        """ "0.42 [0.38, 0.47]"; a figure that rounds to zero is written without a sign ("0.00", not "-0.00")."""
        return f"{_unsigned_zero(self.value, fmt)} [{_unsigned_zero(self.low, fmt)}, {_unsigned_zero(self.high, fmt)}]"

    def __sub__(self, other: float) -> Estimate:
        """The same estimate less a constant (a fixed control)."""
        other = float(other)
        return Estimate(self.value - other, self.low - other, self.high - other, self.sequences, self.level)


_FIXED = re.compile(r"^(?P<head>[^.]*\.)(?P<digits>\d+)(?P<kind>[f%])$")


def resolving_format(fmt: str, ends: Sequence[tuple[float, float]], extra: int = 3) -> str:
    """``fmt`` with as many more decimals (up to ``extra``) as it takes for no interval end to print as its bound.

    ``ends``: (end, bound) pairs. An interval printed "-0.01 [-0.01, 0.00]" against a bound of 0 reads as
    touching it whether or not it does; with one more digit it prints "-0.011 [-0.014, -0.004]". Ends equal
    to their bound stay so; a format that is not fixed-point (``.2f``, ``+.3f``, ``.1%``) is returned as is.
    """
    match = _FIXED.match(fmt)
    if match is None:
        return fmt
    digits = int(match["digits"])
    for more in range(extra + 1):
        candidate = f"{match['head']}{digits + more}{match['kind']}"
        if all(
            end == bound or _unsigned_zero(end, candidate) != _unsigned_zero(bound, candidate) for end, bound in ends
        ):
            return candidate
    return candidate


def _unsigned_zero(value: float, fmt: str) -> str:
    """format(value, fmt), less the minus sign of a negative figure that rounds to zero."""
    text = format(value, fmt)
    digits = text.lstrip("-")
    mantissa = digits.split("e")[0]
    if text.startswith("-") and mantissa[:1].isdigit() and not any(ch in "123456789" for ch in mantissa):
        return digits
    return text


def bootstrap(
    values,
    statistic: Callable[[np.ndarray], float] = np.mean,
    *,
    groups: Sequence | np.ndarray | None = None,
    seeds: bool = False,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = 0,
) -> Estimate:
    """The statistic of ``values`` with a percentile bootstrap interval over sequences.

    values: (m,) or (m, k) numbers. Without ``groups`` each row is one sequence (a
    per-sequence figure); with ``groups`` (m,) labels, rows sharing a label are one
    sequence, resampled together and pooled before ``statistic`` is applied.
    A list of 1-D arrays (one per sequence) is read the same way.
    statistic: array -> number, applied along the first axis (np.mean, np.median,
    or a function of an (m, k) array such as a difference of two columns).
    seeds: values are (m, S) or (m, S, k), one column per training seed (S >= 2); the figure is the
    statistic of the mean over the seeds, (m,) or (m, k), and each draw resamples the seeds too (see
    the module's text). ``seed`` is the bootstrap's own random seed, not a training seed.
    Returns an :class:`Estimate`; needs at least two sequences.
    """
    if isinstance(values, (list, tuple)) and values and np.ndim(values[0]) >= 1 and groups is None:
        groups = np.concatenate([np.full(len(v), k) for k, v in enumerate(values)])
        values = np.concatenate([np.asarray(v, dtype=float) for v in values])
    data = np.asarray(values, dtype=float)
    if data.ndim == 0 or data.shape[0] == 0:
        raise ValueError("bootstrap needs at least one value per sequence, got none")
    if not 0 < level < 1:
        raise ValueError(f"level must lie between 0 and 1, got {level}")
    if int(resamples) < 1000:
        raise ValueError(f"an interval needs at least 1000 resamples, got {resamples}")
    if groups is None:
        members = None
    else:
        labels = np.asarray(groups)
        if labels.shape[0] != data.shape[0]:
            raise ValueError(f"groups has {labels.shape[0]} labels for {data.shape[0]} values")
        _, codes = np.unique(labels, return_inverse=True)
        order = np.argsort(codes, kind="stable")
        members = np.split(order, np.cumsum(np.bincount(codes))[:-1])
    count = data.shape[0] if members is None else len(members)
    if count < 2:
        raise ValueError(f"an interval over sequences needs at least 2 sequences, got {count}")
    if seeds:
        if data.ndim not in (2, 3):
            raise ValueError(f"with seeds=True values must be (m, seeds) or (m, seeds, k); got shape {data.shape}")
        if data.shape[1] < 2:
            raise ValueError(f"with seeds=True axis 1 holds the seeds and needs at least 2; got {data.shape[1]}")
    value = float(statistic(data.mean(axis=1) if seeds else data))
    if not np.isfinite(value):
        raise ValueError(f"the statistic of the data is {value}: nothing to put an interval on")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, count, size=(int(resamples), count))
    if seeds:  # the seed columns from a generator of their own: the sequence draws stay those of seeds=False
        columns = np.random.default_rng([seed, 1]).integers(0, data.shape[1], size=(int(resamples), data.shape[1]))
    stats = np.empty(int(resamples))
    for r, chosen in enumerate(draws):
        index = chosen if members is None else np.concatenate([members[c] for c in chosen])
        sample = data[index]
        stats[r] = statistic(sample[:, columns[r]].mean(axis=1) if seeds else sample)
    tail = (1 - level) / 2
    low, high = np.nanquantile(stats, [tail, 1 - tail])
    return Estimate(value, float(low), float(high), count, level)


def paired_difference(
    values,
    control,
    statistic: Callable[[np.ndarray], float] = np.mean,
    *,
    groups: Sequence | np.ndarray | None = None,
    seeds: bool = False,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = 0,
) -> Estimate:
    """statistic(values) - statistic(control) with an interval from resampling the sequences *together*.

    values, control: (m,) numbers measured on the same sequences (row k of each belongs to the
    same sequence; with ``groups``, rows sharing a label are one sequence). Each draw takes the
    same sequences for both, so what the sequences share (their length, their topic) cancels:
    the interval is that of the paired difference, narrower than the two marginal intervals
    whenever the two figures move together over sequences. Same seed, same draws as
    :func:`bootstrap`. With ``seeds``, either may be (m, S), one column per training seed (a figure
    without a seed, (m,), is the same in every column); seed column s of the two is drawn together.
    """
    values = np.asarray(values, dtype=float)
    control = np.asarray(control, dtype=float)
    if seeds:
        if values.ndim not in (1, 2) or control.ndim not in (1, 2) or values.shape[0] != control.shape[0]:
            raise ValueError(
                f"values and control must be (m,) or (m, seeds) over the same rows; got {values.shape} and {control.shape}"
            )
        widths = [a.shape[1] for a in (values, control) if a.ndim == 2]
        if not widths:
            raise ValueError("seeds=True but neither values nor control has a seed axis (m, seeds)")
        width = widths[0]
        values, control = (a if a.ndim == 2 else np.repeat(a[:, None], width, axis=1) for a in (values, control))
        if values.shape != control.shape:
            raise ValueError(f"values and control have different seed counts: {values.shape} and {control.shape}")
    elif values.ndim != 1 or values.shape != control.shape:
        raise ValueError(
            f"values and control must be (m,) arrays over the same rows; got {values.shape} and {control.shape}"
        )
    if not np.isfinite(control).all():
        raise ValueError("the control has values that are not finite")

    def difference(pair: np.ndarray) -> float:
        return float(statistic(pair[:, 0]) - statistic(pair[:, 1]))

    return bootstrap(
        np.stack([values, control], axis=-1),
        difference,
        groups=groups,
        seeds=seeds,
        resamples=resamples,
        level=level,
        seed=seed,
    )


def per_sequence_slopes(values, groups, states: Sequence[float]) -> np.ndarray:
    """Per sequence, the least-squares slope of its mean value over ``states``: what ``bootstrap`` resamples
    for a trend.

    values: (N, S) item n's value (e.g. identified or not) at the s-th of ``states``, or (N, seeds, S)
    with one column per training seed; groups: (N,) the sequence of each item (G distinct values, in
    sorted order). Returns (G,), or (G, seeds) for ``bootstrap(..., seeds=True)``.
    """
    values = np.asarray(values, dtype=float)
    states = np.asarray(states, dtype=float)
    if values.ndim not in (2, 3) or values.shape[-1] != len(states):
        raise ValueError(
            f"values must be (N, {len(states)}) or (N, seeds, {len(states)}), one column per state; got {values.shape}."
        )
    if len(states) < 2:
        raise ValueError("a slope needs at least two states.")
    groups = np.asarray(groups)
    if groups.shape != (values.shape[0],):
        raise ValueError(f"groups must be (N,) = ({values.shape[0]},); got {groups.shape}.")
    _, index = np.unique(groups, return_inverse=True)
    sums = np.zeros((index.max() + 1, *values.shape[1:]))
    np.add.at(sums, index, values)
    means = sums / np.bincount(index).reshape(-1, *[1] * (values.ndim - 1))  # (G, [seeds,] S)
    slopes = np.polyfit(states, means.reshape(-1, len(states)).T, 1)[0]
    return slopes.reshape(means.shape[:-1])
