"""The bootstrap interval over sequences."""

import numpy as np
import pytest

from helpers.methods.intervals import Estimate, bootstrap, paired_difference, per_sequence_slopes


def test_the_interval_covers_the_mean_and_shrinks_with_more_sequences():
    rng = np.random.default_rng(3)
    few = bootstrap(rng.normal(1.0, 1.0, size=20))
    many = bootstrap(rng.normal(1.0, 1.0, size=2000))
    assert few.low < few.value < few.high and many.low < 1.0 < many.high
    assert (many.high - many.low) < 0.3 * (few.high - few.low)
    # the normal approximation: 95% of a mean of n unit-variance values is about +-1.96 / sqrt(n)
    assert abs((many.high - many.low) / 2 - 1.96 / np.sqrt(2000)) < 0.01
    assert few.sequences == 20 and many.sequences == 2000


def test_the_same_numbers_give_the_same_interval():
    values = np.random.default_rng(0).uniform(size=30)
    assert bootstrap(values) == bootstrap(values)
    assert bootstrap(values, seed=1) != bootstrap(values)


def test_groups_resample_whole_sequences_not_tokens():
    # ten sequences, each with one shared offset and 50 tokens of tiny noise: the tokens are not
    # independent, so the interval must be as wide as ten values' worth, not 500
    rng = np.random.default_rng(1)
    offsets = rng.normal(size=10)
    tokens = np.repeat(offsets, 50) + 1e-3 * rng.normal(size=500)
    groups = np.repeat(np.arange(10), 50)
    by_sequence = bootstrap(tokens, groups=groups)
    naive = bootstrap(tokens)
    per_sequence = bootstrap(offsets)
    assert by_sequence.sequences == 10 and naive.sequences == 500
    width = by_sequence.high - by_sequence.low
    assert abs(width - (per_sequence.high - per_sequence.low)) < 0.25 * width
    assert (naive.high - naive.low) < 0.5 * width
    # a list of per-sequence arrays reads the same way, and a median is allowed
    lists = [tokens[groups == g] for g in range(10)]
    assert bootstrap(lists, statistic=np.median) == bootstrap(tokens, groups=groups, statistic=np.median)


def test_a_statistic_of_two_columns():
    rng = np.random.default_rng(2)
    pairs = np.stack([rng.normal(1.0, 0.1, 40), rng.normal(0.5, 0.1, 40)], axis=1)
    difference = bootstrap(pairs, statistic=lambda x: float(np.mean(x[:, 0] - x[:, 1])))
    assert difference.low > 0.4 and difference.high < 0.6


def test_bad_input_is_refused_early():
    with pytest.raises(ValueError, match="at least 2 sequences"):
        bootstrap([0.5])
    with pytest.raises(ValueError, match="at least 2 sequences"):
        bootstrap(np.ones(5), groups=np.zeros(5))
    with pytest.raises(ValueError, match="labels"):
        bootstrap(np.ones(5), groups=np.arange(4))
    with pytest.raises(ValueError, match="1000 resamples"):
        bootstrap(np.ones(5), resamples=100)
    with pytest.raises(ValueError, match="none"):
        bootstrap(np.array([]))
    with pytest.raises(ValueError, match="nan"):
        bootstrap(np.array([np.nan, 1.0]))


def test_text_and_shift():
    figure = Estimate(0.4, 0.3, 0.5, 12)
    assert figure.text() == "0.40 [0.30, 0.50]" and figure.text(".0%") == "40% [30%, 50%]"
    shifted = figure - 0.1
    assert Estimate(-0.001, -0.004, 0.01, 3).text() == "0.00 [0.00, 0.01]"
    assert Estimate(-0.004, -0.011, -0.0001, 3).text(".0%") == "0% [-1%, 0%]"
    assert Estimate(-0.02, -float("inf"), -0.0, 3).text() == "-0.02 [-inf, 0.00]"
    assert abs(shifted.value - 0.3) < 1e-12 and abs(shifted.low - 0.2) < 1e-12 and shifted.sequences == 12


def test_seeds_inside_the_interval_widen_it_by_the_seed_spread():
    rng = np.random.default_rng(3)
    sequences = rng.normal(0.5, 0.05, size=(40, 1))
    # three training seeds that shift every sequence's figure together (a seed effect)
    by_seed = sequences + np.array([[-0.1, 0.0, 0.1]])
    averaged = bootstrap(by_seed.mean(axis=1))
    crossed = bootstrap(by_seed, seeds=True)
    assert crossed.value == pytest.approx(averaged.value)
    assert crossed.high - crossed.low > 2 * (averaged.high - averaged.low)
    # seeds that agree leave the sequences' interval as it was (same sequence draws)
    same = np.repeat(sequences, 3, axis=1)
    assert bootstrap(same, seeds=True) == bootstrap(sequences[:, 0])


def test_seeds_with_groups_and_a_statistic_of_columns():
    groups = np.repeat(np.arange(12), 5)
    hits = np.random.default_rng(0).integers(0, 2, size=(60, 3, 2)).astype(float)
    result = bootstrap(hits, lambda v: v[:, 0].mean() - v[:, 1].mean(), groups=groups, seeds=True)
    mean = hits.mean(axis=1)
    assert result.value == pytest.approx(mean[:, 0].mean() - mean[:, 1].mean())
    assert result.sequences == 12 and result.low <= result.value <= result.high


def test_paired_difference_with_seeds_broadcasts_a_seedless_control():
    rng = np.random.default_rng(1)
    values = rng.normal(0.6, 0.1, size=(30, 3)) + np.array([0.0, 0.05, -0.05])
    control = rng.normal(0.5, 0.1, size=30)
    paired = paired_difference(values, control, seeds=True)
    assert paired.value == pytest.approx(values.mean() - control.mean())
    plain = paired_difference(values.mean(axis=1), control)
    assert paired.high - paired.low > plain.high - plain.low
    with pytest.raises(ValueError, match="seed axis"):
        paired_difference(values[:, 0], control, seeds=True)
    with pytest.raises(ValueError, match="different seed counts"):
        paired_difference(values, values[:, :2], seeds=True)
    with pytest.raises(ValueError, match="at least 2"):
        bootstrap(values[:, :1], seeds=True)
    with pytest.raises(ValueError, match="values must be"):
        bootstrap(values[:, 0], seeds=True)


def test_per_sequence_slopes_keep_the_seed_axis():
    states = [0, 1, 2]
    groups = np.array([0, 0, 1, 1])
    values = np.zeros((4, 2, 3))
    values[:, 0] = [0, 1, 2]  # seed 0: slope 1
    values[:, 1] = [0, 2, 4]  # seed 1: slope 2
    slopes = per_sequence_slopes(values, groups, states)
    assert slopes.shape == (2, 2)
    assert slopes == pytest.approx(np.array([[1.0, 2.0], [1.0, 2.0]]))
    assert per_sequence_slopes(values[:, 0], groups, states) == pytest.approx([1.0, 1.0])


def test_an_interval_end_never_prints_as_the_bound_it_is_read_against():
    from helpers.methods.intervals import resolving_format

    # -0.011 [-0.014, -0.004] against 0 prints "-0.01 [-0.01, 0.00]" at two decimals: one more is needed
    assert resolving_format(".2f", [(-0.014, 0.0), (-0.004, 0.0)]) == ".3f"
    assert resolving_format("+.2f", [(0.0004, 0.0), (0.02, 0.0)]) == "+.4f"
    assert resolving_format(".1%", [(0.5004, 0.5)]) == ".2%"  # 50.04% against 50%
    assert resolving_format(".2f", [(0.3, 0.0), (0.5, 0.0)]) == ".2f"  # far from the bound: as asked
    assert resolving_format(".2f", [(0.0, 0.0)]) == ".2f"  # an end on the bound stays on it
    assert resolving_format(".2f", [(1e-9, 0.0)]) == ".5f"  # at most three more digits
    assert resolving_format(".3g", [(1e-9, 0.0)]) == ".3g"  # not fixed-point: unchanged
