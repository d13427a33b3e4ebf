"""Statistics of the regression gate: effects between runs judged across processes.

All effects live on the log scale: a row's value in one process (its median, or its ratio to
the in-run floor) is one observation, the effect of new vs baseline is the difference of the mean
logs (the log of the ratio of geometric means), and its uncertainty comes from the spread of those
per-process values, never from the samples inside one process (they share one process's state and
are far tighter than two processes are to each other).

* ``independent_effect``: Welch's t on the log values of two independent runs, optionally with
  variance components known from a calibration (a side with one process, the run-to-run shift
  that no number of processes averages away), combined with Welch–Satterthwaite degrees of freedom.
* ``paired_effect``: a one-sample t on the per-pair log ratios of an A/B run.
* ``fit_prior``, ``moderate``: the empirical-Bayes moderated t (Smyth 2004, the method of limma's
  eBayes): the variances of many rows, each from few pairs, give a prior (d0, s0²) by limma's
  method of moments on log s² (fitFDist); each row's variance is shrunk toward s0² and its t gains
  d0 degrees of freedom.
* ``decide``: the verdict of a CI against the equivalence band [1/(1+δ), 1+δ].
* ``processes_needed``: how many processes (pairs) per side would decide an inconclusive row
  (``smallest_n``: the search, shared with the calibration's processes_for_target).
* ``mde``, ``power``, ``detectable``: what a design can detect, for calibration.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    import numpy as np

# numpy and scipy are imported where they are used: the commands built on this module check their
# input before paying for those imports.
REGRESSION, IMPROVEMENT, SAME, INCONCLUSIVE = "regression", "improvement", "same", "inconclusive"
MAX_PROCESSES = 10_000  # beyond this "more processes" is no answer


@dataclass(frozen=True)
class Effect:
    """log(new / baseline) with its standard error and degrees of freedom."""

    log_ratio: float
    se: float
    df: float
    paired: bool
    per_process_var: float  # the variance of one process's log value (of one pair's log ratio, paired)
    fixed_var: float = 0.0  # variance that more processes do not shrink (run-to-run shifts)
    n: float = 0.0  # processes per side (pairs), as observed
    prior_df: float = 0.0  # d0 of a moderated t: degrees of freedom the row borrowed from its class

    @property
    def ratio(self) -> float:
        return math.exp(self.log_ratio)

    def ci(self, alpha: float) -> tuple[float, float]:
        """The two-sided (1 - 2α) CI of the ratio: each bound is a one-sided level-α test."""
        half = t_quantile(alpha, self.df) * self.se
        # A few pairs at a tiny α can make the interval wider than a float holds: [0, inf] then.
        return beyond_float(math.exp, self.log_ratio - half), beyond_float(math.exp, self.log_ratio + half)


def beyond_float(fn: Callable[[float], float], x: float) -> float:
    """exp or expm1 of a log that may be too large for a float (inf then)."""
    return math.inf if x > 700 else fn(x)


@functools.lru_cache(maxsize=4096)  # a night asks for the same few (α, df) thousands of times
def t_quantile(alpha: float, df: float) -> float:
    """The one-sided (1 - α) quantile of Student's t (the normal one for infinite df)."""
    import scipy.stats

    return float(scipy.stats.norm.ppf(1 - alpha) if math.isinf(df) else scipy.stats.t.ppf(1 - alpha, df))


def log_values(values: Sequence[float | None]) -> np.ndarray:
    """Logs of the usable (finite, positive) values."""
    import numpy as np

    x = np.asarray([v for v in values if v is not None], dtype=float)
    return np.log(x[np.isfinite(x) & (x > 0)])


def satterthwaite(components: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(se, df) of a sum of independent variance components (variance, df each)."""
    total = sum(v for v, _ in components)
    if total <= 0:
        return 0.0, math.inf
    denom = sum(v * v / d for v, d in components if v > 0 and not math.isinf(d))
    return math.sqrt(total), (total * total / denom if denom > 0 else math.inf)


def _side(x: np.ndarray, sigma: float | None, sigma_df: float) -> tuple[float, float] | None:
    """(variance of the side's mean log, its df): from the side's own spread with ≥ 2 processes,
    else from a calibrated per-process σ; None when neither is there."""
    import numpy as np

    if x.size >= 2:
        return float(np.var(x, ddof=1)) / x.size, float(x.size - 1)
    if x.size == 1 and sigma is not None:
        return sigma * sigma, sigma_df
    return None


def independent_effect(new: Sequence[float | None], base: Sequence[float | None], *, sigma: float | None = None,
                       sigma_df: float = math.inf, run_var: float = 0.0, run_df: float = math.inf) -> Effect | None:
    """Welch's t on log values (new and base are raw positive values, one per process).

    `sigma` (a calibrated per-process σ of the log value, with `sigma_df`) stands in for a side
    with one process; `run_var` (with `run_df`) is the variance of a whole run's shift (calibrated),
    added once for each side. None when the spread cannot be estimated."""
    x, y = log_values(new), log_values(base)
    sides = [_side(x, sigma, sigma_df), _side(y, sigma, sigma_df)]
    if x.size == 0 or y.size == 0 or None in sides:
        return None
    fixed = 2 * run_var
    se, df = satterthwaite([*sides, *([(fixed, run_df)] if fixed > 0 else [])])  # type: ignore[list-item]
    per_process = (sides[0][0] * x.size + sides[1][0] * y.size) / 2  # type: ignore[index]
    return Effect(float(x.mean() - y.mean()), se, df, False, per_process, fixed, (x.size + y.size) / 2)


def paired_effect(new: Sequence[float | None], base: Sequence[float | None]) -> Effect | None:
    """One-sample t on per-pair log ratios (pair i = new[i] and base[i], adjacent in time)."""
    import numpy as np

    pairs = [(b, a) for b, a in zip(new, base) if b is not None and a is not None and b > 0 and a > 0]
    d = np.log([b for b, _ in pairs]) - np.log([a for _, a in pairs]) if pairs else np.array([])
    if d.size < 2:
        return None
    var = float(np.var(d, ddof=1))
    return Effect(float(d.mean()), math.sqrt(var / d.size), float(d.size - 1), True, var, 0.0, float(d.size))


@dataclass(frozen=True)
class Prior:
    """The prior of the rows' variances: σ_g² ~ s0²·d0/χ²_d0 (a scaled inverse χ²), fitted to rows
    whose sample variances s_g² have d_g degrees of freedom each."""

    d0: float  # its degrees of freedom (inf: every row has the variance s0²)
    s0_sq: float
    rows: int  # rows fitted
    df_pooled: float  # the sum of their d_g: a row's total df never exceeds it (limma's cap)


def trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x (x > 0): Newton's method on 1/trigamma, which is convex and nearly
    linear, from 0.5 + 1/x, so the iteration converges monotonically (limma's trigammaInverse)."""
    from scipy.special import polygamma

    if not x > 0:
        raise ValueError(f"trigamma takes only positive values, not {x}")
    if x > 1e7:  # trigamma(y) ≈ 1/y² for small y
        return 1 / math.sqrt(x)
    if x < 1e-6:  # trigamma(y) ≈ 1/y for large y
        return 1 / x
    y = 0.5 + 1 / x
    for _ in range(50):
        tri = float(polygamma(1, y))
        step = tri * (1 - tri / x) / float(polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def fit_prior(variances: Sequence[float], dfs: Sequence[float]) -> Prior:
    """Moment estimates of (d0, s0²) from sample variances s_g² with d_g degrees of freedom (limma's
    fitFDist, no covariate). Under the prior, log s_g² = log σ_g² + log(χ²_dg/d_g), whose mean is
    log s0² + ψ(d_g/2) − log(d_g/2) − ψ(d0/2) + log(d0/2) and whose variance is ψ'(d_g/2) + ψ'(d0/2).
    So e_g = log s_g² − ψ(d_g/2) + log(d_g/2) has a sample variance whose excess over the mean
    ψ'(d_g/2) is ψ'(d0/2); when there is none (the rows vary no more than sampling alone makes them),
    d0 is infinite and s0² = exp(mean e_g). Rows with non-finite or negative s² or df ≤ 0 are left
    out; a zero s² is raised to 1e-5 of the median (all of them to 1e-5 when the median is 0)."""
    import numpy as np
    from scipy.special import digamma, polygamma

    x, d = np.asarray(variances, dtype=float), np.asarray(dfs, dtype=float)
    ok = np.isfinite(x) & np.isfinite(d) & (x > -1e-15) & (d > 1e-15)
    x, d = np.maximum(x[ok], 0.0), d[ok]
    if x.size == 0:
        raise ValueError("no usable variance to fit a prior to")
    if x.size == 1:
        return Prior(0.0, float(x[0]), 1, float(d[0]))
    m = float(np.median(x)) or 1.0
    e = np.log(np.maximum(x, 1e-5 * m)) - digamma(d / 2) + np.log(d / 2)
    mean = float(e.mean())
    excess = float(e.var(ddof=1)) - float(np.mean(polygamma(1, d / 2)))
    if excess > 0:
        d0 = 2 * trigamma_inverse(excess)
        s0_sq = math.exp(mean + float(digamma(d0 / 2)) - math.log(d0 / 2))
    else:
        d0, s0_sq = math.inf, math.exp(mean)
    return Prior(d0, s0_sq, int(x.size), float(d.sum()))


def moderate(effect: Effect, prior: Prior) -> Effect:
    """The row's effect with its variance shrunk toward the prior: s~² = (d0·s0² + d_g·s_g²)/(d0 + d_g)
    (s0² itself for an infinite d0), the t on d0 + d_g degrees of freedom, capped at the pooled df of
    the rows the prior came from. With d0 = 0 it is the row's own t. Paired effects only (one
    variance per row; Welch's two sides and calibrated components are not pooled)."""
    if not effect.paired:
        raise ValueError("only a paired effect (one variance of the per-pair log ratios) can be moderated")
    if math.isinf(prior.d0):
        var = prior.s0_sq
    else:
        var = (prior.d0 * prior.s0_sq + effect.df * effect.per_process_var) / (prior.d0 + effect.df)
    df = min(prior.d0 + effect.df, max(prior.df_pooled, effect.df))
    return Effect(effect.log_ratio, math.sqrt(var / effect.n), df, effect.paired, var, effect.fixed_var,
                  effect.n, df - effect.df)


def band(delta: float) -> tuple[float, float]:
    """The equivalence band of the ratio: symmetric on the log scale."""
    return 1 / (1 + delta), 1 + delta


def same_band(delta: float, same_delta: float | None) -> float:
    """The equivalence band's δ: same_delta, never narrower than the band ±δ a call is made beyond
    (a row is not `same` where it could be a regression); ±δ itself when None."""
    return delta if same_delta is None else max(delta, same_delta)


def decide(ci_low: float, ci_high: float, delta: float, same_delta: float | None = None) -> str:
    """regression: the whole CI above 1+δ (the slowdown is larger than δ, at level α);
    improvement: the whole CI below 1/(1+δ); same: the whole CI inside the equivalence band
    ±same_delta (two one-sided tests; the band ±δ when None or narrower); inconclusive: anything
    else, including a CI that excludes 1 but reaches into the band."""
    low, high = band(delta)
    if ci_low > high:
        return REGRESSION
    if ci_high < low:
        return IMPROVEMENT
    same_low, same_high = band(same_band(delta, same_delta))
    if same_low <= ci_low and ci_high <= same_high:
        return SAME
    return INCONCLUSIVE


def margin(effect: Effect, delta: float, same_delta: float | None = None) -> float:
    """The CI half-width (log scale) that would decide the row if the estimate stayed where it is:
    the wider of its distances past the band edge ±δ (a call) and inside the equivalence edge
    ±same_delta (same); 0 on an edge of both."""
    size = abs(effect.log_ratio)
    return max(size - math.log1p(delta), math.log1p(same_band(delta, same_delta)) - size, 0.0)


def processes_needed(effect: Effect, delta: float, alpha: float, same_delta: float | None = None) -> int | None:
    """Processes per side (pairs) at which the CI would decide the row, assuming the estimate and
    the spread stay as observed; None when no number would (estimate on a band edge, or a
    run-to-run shift as large as the margin)."""
    m = margin(effect, delta, same_delta)
    if m <= 0 or effect.per_process_var <= 0:
        return None
    factor = 1 if effect.paired else 2  # the variance of a difference of two means of n each

    def decides(n: int) -> bool:
        df = (n - 1 if effect.paired else 2 * (n - 1)) + effect.prior_df
        return t_quantile(alpha, df) * math.sqrt(factor * effect.per_process_var / n + effect.fixed_var) <= m

    # Both t's quantile and the variance of the mean fall as n grows, so `decides` is monotone.
    # (At a per-row α of 1e-4, n = 2 has one degree of freedom and a quantile in the thousands:
    # a search that starts there must not stop there.)
    return smallest_n(decides)


def smallest_n(ok: Callable[[int], bool], limit: int = MAX_PROCESSES) -> int | None:
    """The smallest n in [2, limit] with ok(n), for an ok that stays True once it is (more
    processes never decide less): doubling to a bracket, then bisection. None when ok(limit)
    is False."""
    if not ok(limit):
        return None
    low, high = 1, 2  # low: known not ok (n = 1 has no spread); high: to be tried
    while not ok(high):
        low, high = high, min(2 * high, limit)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if ok(mid) else (mid, high)
    return high


def mde(sigma: float, n: float, alpha: float, power: float, paired: bool = False) -> float:
    """Minimum detectable effect on the log scale: (z_{1-α} + z_{power})·σ·sqrt(2/n) for two
    independent runs of n processes each, ·σ/sqrt(n) for n pairs (σ: of one pair's log ratio)."""
    import scipy.stats

    z = scipy.stats.norm.ppf(1 - alpha) + scipy.stats.norm.ppf(power)
    return float(z * sigma * (math.sqrt(1 / n) if paired else math.sqrt(2 / n)))


def power(effect_log: float, delta: float, se: float, df: float, alpha: float) -> float:
    """P(the gate calls `regression`) for a true effect (log scale): the CI's lower bound must
    clear log(1+δ), so the statistic (estimate - log(1+δ))/se is a noncentral t."""
    import warnings

    import scipy.stats

    if se <= 0:
        return float(effect_log > math.log1p(delta))
    ncp = (effect_log - math.log1p(delta)) / se
    crit = t_quantile(alpha, df)
    if math.isinf(df):
        return float(scipy.stats.norm.sf(crit - ncp))
    with warnings.catch_warnings():  # far tails of a wide design: the series' closest value will do
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(scipy.stats.nct.sf(crit, df, ncp))


def detectable(delta: float, se: float, df: float, alpha: float, target: float) -> float:
    """The smallest relative slowdown called `regression` with probability `target`: the power
    depends on the effect only through (effect - log(1+δ))/se, so this is log(1+δ) + k·se with k
    the noncentrality at which the test reaches `target` (inf: none a float holds)."""
    if se <= 0:
        return delta
    return beyond_float(math.expm1, math.log1p(delta) + _ncp_for_power(alpha, df, target) * se)


@functools.lru_cache(maxsize=1024)
def _ncp_for_power(alpha: float, df: float, target: float) -> float:
    import scipy.optimize

    crit = t_quantile(alpha, df)
    hi = max(1.0, 2 * (crit + t_quantile(1 - target, df)))
    while power(hi, 0.0, 1.0, df, alpha) < target:  # the t quantiles bound it; widen if not
        if hi > 1e12:
            return math.inf
        hi *= 2
    return float(scipy.optimize.brentq(lambda k: power(k, 0.0, 1.0, df, alpha) - target, 0.0, hi))
