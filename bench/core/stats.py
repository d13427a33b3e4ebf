"""Robust statistics over per-round samples.

Per case: median, quartiles and a distribution-free confidence interval of the
median (order statistics of a binomial, via scipy.stats.quantile_test; the ranks
depend on n and the level only, so they are found once per n and cached: a run
summarises every row after every round).
Between cases: the paired difference, taken per round, so slow drifts of the
machine that hit both cases of a round cancel out.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.stats

CONFIDENCE = 0.95
# A list of samples, or the array of one (paired differences and ratios are arrays).
Samples = Sequence[float] | np.ndarray


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    q1: float
    q3: float
    ci_low: float
    ci_high: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def rel_ci_halfwidth(self) -> float:
        """Half-width of the CI relative to |median| (inf when undefined)."""
        if self.n == 0 or self.median == 0 or math.isnan(self.ci_low):
            return math.inf
        return (self.ci_high - self.ci_low) / 2 / abs(self.median)


@functools.lru_cache(maxsize=None)
def _ci_ranks(n: int, confidence: float) -> tuple[int, int] | None:
    """0-based ranks of the order statistics bounding the median's CI for n samples (None when
    n is too small for the level): quantile_test's interval over the ranks themselves."""
    ci = scipy.stats.quantile_test(np.arange(n, dtype=float), q=(n - 1) / 2, p=0.5).confidence_interval(confidence)
    if math.isnan(ci.low) or math.isnan(ci.high):
        return None
    return int(ci.low), int(ci.high)


def median_ci(samples: Samples, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """CI of the median; with too few samples for the level, the sample range.

    The order-statistic interval needs n >= 6 for 95%; below that the widest
    available interval (min, max) is returned, which has lower coverage.
    """
    x = np.sort(np.asarray(samples, dtype=float))
    if x.size == 0:
        return math.nan, math.nan
    ranks = _ci_ranks(int(x.size), float(confidence))
    if ranks is None:
        return float(x[0]), float(x[-1])
    return float(x[ranks[0]]), float(x[ranks[1]])


def summarize(samples: Samples, confidence: float = CONFIDENCE) -> Summary:
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan)
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    low, high = median_ci(x, confidence)
    return Summary(int(x.size), float(med), float(q1), float(q3), low, high)


def paired_differences(case: Sequence[float], baseline: Sequence[float]) -> np.ndarray:
    """Per-round differences case - baseline (rounds are aligned by index)."""
    if len(case) != len(baseline):
        raise ValueError(f"paired samples need equal rounds, got {len(case)} and {len(baseline)}")
    return np.asarray(case, dtype=float) - np.asarray(baseline, dtype=float)


def paired_ratios(case: Sequence[float], baseline: Sequence[float]) -> np.ndarray:
    """Per-round ratios case / baseline: a slowdown of the whole machine in a round cancels."""
    if len(case) != len(baseline):
        raise ValueError(f"paired samples need equal rounds, got {len(case)} and {len(baseline)}")
    base = np.asarray(baseline, dtype=float)
    if np.any(base <= 0):
        raise ValueError("paired ratios need positive baseline samples")
    return np.asarray(case, dtype=float) / base


def relative_spread(a: float, b: float) -> float:
    """|a - b| relative to their mean: the run-to-run spread of two medians."""
    mean = (a + b) / 2
    return abs(a - b) / abs(mean) if mean else math.inf
