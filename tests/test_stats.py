"""Statistics on synthetic samples: exact values where the math gives them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dbench.bench.core import stats


def test_summary_quartiles_of_1_to_9() -> None:
    s = stats.summarize(list(range(1, 10)))
    assert (s.n, s.median, s.q1, s.q3, s.iqr) == (9, 5.0, 3.0, 7.0, 4.0)


def test_median_ci_is_the_binomial_order_statistic_interval() -> None:
    # n = 10 at 95%: the interval runs from the 2nd to the 9th order statistic.
    assert stats.median_ci(np.arange(1.0, 11.0)) == (2.0, 9.0)
    # n = 30: 10th to 21st (binomial(30, 1/2) 2.5% quantile is 10).
    assert stats.median_ci(np.arange(1.0, 31.0)) == (10.0, 21.0)


def test_median_ci_is_order_invariant_and_brackets_the_median() -> None:
    x = np.random.default_rng(3).lognormal(size=41)
    low, high = stats.median_ci(x)
    assert low <= float(np.median(x)) <= high
    assert stats.median_ci(x[::-1]) == (low, high)


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_median_ci_ranks_match_scipy_on_data_with_ties(confidence: float) -> None:
    # The cached ranks must give what quantile_test gives on the samples themselves.
    import scipy.stats

    rng = np.random.default_rng(11)
    for n in range(1, 151):
        x = np.round(rng.lognormal(size=n), 1)  # rounding makes ties
        ci = scipy.stats.quantile_test(x, q=float(np.median(x)), p=0.5).confidence_interval(confidence)
        expected = (float(x.min()), float(x.max())) if math.isnan(ci.low) else (float(ci.low), float(ci.high))
        assert stats.median_ci(x, confidence) == expected, n


def test_median_ci_falls_back_to_the_range_for_tiny_samples() -> None:
    assert stats.median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0)


def test_empty_samples_give_nan_and_infinite_precision() -> None:
    s = stats.summarize([])
    assert s.n == 0 and math.isnan(s.median)
    assert s.rel_ci_halfwidth == math.inf


def test_rel_ci_halfwidth() -> None:
    s = stats.Summary(n=10, median=10.0, q1=9.0, q3=11.0, ci_low=9.5, ci_high=10.5)
    assert s.rel_ci_halfwidth == pytest.approx(0.05)


def test_paired_differences_cancel_a_shared_drift() -> None:
    drift = np.linspace(0.0, 5.0, 20)  # the machine slows down during the run
    base = 2.0 + drift
    case = 3.0 + drift  # always exactly 1 us more, paired per round
    d = stats.summarize(stats.paired_differences(case, base))
    assert d.median == pytest.approx(1.0) and d.iqr == pytest.approx(0.0)
    # Unpaired, the drift makes the two medians' difference uncertain.
    assert stats.summarize(case).iqr > 2.0


def test_paired_differences_need_aligned_rounds() -> None:
    with pytest.raises(ValueError, match="equal rounds"):
        stats.paired_differences([1.0, 2.0], [1.0])


def test_relative_spread() -> None:
    assert stats.relative_spread(99.0, 101.0) == pytest.approx(0.02)
    assert stats.relative_spread(0.0, 0.0) == math.inf
