"""The gate's moderated t (analysis.gate_stats.fit_prior, moderate; Smyth 2004) and its use by the
gate per class of rows: the estimator on simulated variances, its limits, the fallbacks, and the
false-positive rate it gives on simulated A/A nights."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import scipy.special
import scipy.stats

from dbench.analysis import gate, gate_stats as gs
from test_gate import make_doc, make_row


def scaled_variances(rng: np.random.Generator, rows: int, d: float, d0: float, s0_sq: float) -> np.ndarray:
    """Sample variances s_g² on d df of rows whose true σ_g² ~ s0²·d0/χ²_d0 (the prior limma assumes)."""
    sigma_sq = s0_sq * d0 / rng.chisquare(d0, rows) if math.isfinite(d0) else np.full(rows, s0_sq)
    return sigma_sq * rng.chisquare(d, rows) / d


@pytest.mark.parametrize(("d0", "d"), [(4.0, 5.0), (10.0, 5.0), (20.0, 3.0)])
def test_the_prior_is_recovered_from_simulated_variances(d0: float, d: float) -> None:
    rng = np.random.default_rng(40)
    s2 = scaled_variances(rng, 20_000, d, d0, 0.04 ** 2)
    prior = gs.fit_prior(s2, [d] * s2.size)
    assert prior.d0 == pytest.approx(d0, rel=0.2)
    assert prior.s0_sq == pytest.approx(0.04 ** 2, rel=0.05)
    assert prior.rows == s2.size and prior.df_pooled == pytest.approx(d * s2.size)


def test_rows_that_vary_no_more_than_sampling_give_an_infinite_d0() -> None:
    # Equal variances: log s² has no spread at all, less than ψ'(d/2), so d0 is infinite and s0² the
    # variance itself (the mean of e_g = log s² − ψ(d/2) + log(d/2), back on the variance scale).
    d = 5.0
    prior = gs.fit_prior([0.01] * 50, [d] * 50)
    assert math.isinf(prior.d0)
    assert prior.s0_sq == pytest.approx(0.01 * math.exp(-scipy.special.digamma(d / 2) + math.log(d / 2)))
    # A shared σ² sampled on 5 df: d0 infinite, or so large that the prior is one variance.
    s2 = scaled_variances(np.random.default_rng(3), 5000, d, math.inf, 0.02 ** 2)
    fitted = gs.fit_prior(s2, [d] * s2.size)
    assert fitted.d0 > 100 and fitted.s0_sq == pytest.approx(0.02 ** 2, rel=0.05)
    row = gs.paired_effect([1.0, 1.1, 0.9, 1.05, 1.0, 0.95], [1.0] * 6)
    assert row is not None
    moderated = gs.moderate(row, gs.Prior(math.inf, 0.02 ** 2, 50, 250.0))
    assert moderated.per_process_var == 0.02 ** 2 and moderated.df == 250.0  # capped at the pooled df


def test_the_estimator_leaves_out_what_limma_leaves_out_and_lifts_zeros() -> None:
    s2 = scaled_variances(np.random.default_rng(5), 200, 5.0, 8.0, 1e-3)
    clean = gs.fit_prior(s2, [5.0] * 200)
    dirty = gs.fit_prior([*s2, math.nan, math.inf, -1.0, 0.3], [*[5.0] * 200, 5.0, 5.0, 5.0, 0.0])
    assert dirty == clean
    with_zero = gs.fit_prior([0.0, *s2[1:]], [5.0] * 200)  # a zero becomes 1e-5 of the median
    lifted = gs.fit_prior([1e-5 * float(np.median([0.0, *s2[1:]])), *s2[1:]], [5.0] * 200)
    assert with_zero == lifted
    assert gs.fit_prior([0.5], [5.0]) == gs.Prior(0.0, 0.5, 1, 5.0)  # one row: no prior at all
    with pytest.raises(ValueError):
        gs.fit_prior([], [])


@pytest.mark.parametrize("x", [1e-8, 1e-3, 0.1, 0.49, 1.0, 4.9, 100.0, 1e8])
def test_trigamma_inverse_inverts_trigamma(x: float) -> None:
    y = gs.trigamma_inverse(x)
    assert float(scipy.special.polygamma(1, y)) == pytest.approx(x, rel=1e-6 if 1e-6 <= x <= 1e7 else 1e-2)


def test_a_moderated_t_with_d0_zero_is_the_rows_own_t() -> None:
    row = gs.paired_effect([1.02, 1.10, 0.97, 1.05], [1.0, 1.0, 1.0, 1.0])
    assert row is not None
    same = gs.moderate(row, gs.Prior(0.0, 123.0, 40, 120.0))
    assert (same.se, same.df, same.per_process_var, same.prior_df) == (row.se, row.df, row.per_process_var, 0.0)
    assert same.ci(0.01) == row.ci(0.01)


def test_the_moderated_ci_is_the_posterior_variance_on_d0_plus_dg_df() -> None:
    d = np.log([1.02, 1.10, 0.97, 1.05, 1.01, 0.99])
    row = gs.paired_effect(list(np.exp(d)), [1.0] * 6)
    assert row is not None
    prior = gs.Prior(4.0, 0.03 ** 2, 100, 500.0)
    m = gs.moderate(row, prior)
    s2 = (4.0 * 0.03 ** 2 + 5 * float(np.var(d, ddof=1))) / 9.0
    half = scipy.stats.t.ppf(0.99, 9.0) * math.sqrt(s2 / 6)
    assert m.df == 9.0 and m.prior_df == 4.0
    assert m.ci(0.01) == pytest.approx((math.exp(d.mean() - half), math.exp(d.mean() + half)))
    # More pairs would decide it on the moderated df too: the estimate holds, the prior's df stay.
    n = gs.processes_needed(m, 0.05, 0.01)
    assert n is not None and scipy.stats.t.ppf(0.99, n - 1 + 4.0) * math.sqrt(s2 / n) <= gs.margin(m, 0.05)
    with pytest.raises(ValueError, match="paired"):
        gs.moderate(gs.independent_effect([1.0, 1.1], [1.0, 1.2]), prior)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# The gate: pooled per class and metric, or each row alone, and saying which


def aa_night(rng: np.random.Generator, rows: int, pairs: int, *, d0: float = 6.0, s0: float = 0.04,
             slow: dict[int, float] | None = None) -> dict[str, Any]:
    """An A/B night of `rows` CPU (Python) rows judged on their ratio to the floor, their per-pair σ
    drawn from the scaled inverse χ² prior; row i of side B `slow[i]` times slower."""
    sigma = np.sqrt(s0 ** 2 * d0 / rng.chisquare(d0, rows))
    out = []
    for i in range(rows):
        a = 2.0 * np.exp(rng.normal(0, sigma[i] / math.sqrt(2), pairs))
        b = 2.0 * (slow or {}).get(i, 1.0) * np.exp(rng.normal(0, sigma[i] / math.sqrt(2), pairs))
        out.append(make_row("muladd", f"v{i}", absolute=list(5 * b), ratio=list(b), a_absolute=list(5 * a),
                            a_ratio=list(a)))
    return make_doc(out, ab={"a": "env:", "b": "env:", "pairs": pairs, "order": "AB" * pairs})


def test_a_class_of_enough_rows_and_pairs_gets_the_moderated_t_and_says_so() -> None:
    result = gate.gate([aa_night(np.random.default_rng(1), 40, 6)])
    state = result.classes["cpu-python"]
    (test,) = state.tests
    assert test.test == gate.MODERATED and test.pooled == 40 and test.d_g == 5.0
    assert test.d0 is not None and 1 < test.d0 < 100 and test.s0 == pytest.approx(0.04, rel=0.5)
    assert all(r.df == pytest.approx(test.d0 + 5.0) for r in result.rows)
    line = next(h for h in result.header if h.startswith("CPU time, Python"))
    assert "moderated t on 40 cpu_us/floor rows (prior d0" in line and "d_g 5" in line
    data = gate.as_data(result)
    assert data["classes"]["cpu-python"]["tests"][0]["test"] == gate.MODERATED
    # --per-row: each row alone, on 5 df, and the header says it was asked.
    alone = gate.gate([aa_night(np.random.default_rng(1), 40, 6)], pool=False)
    assert {r.df for r in alone.rows} == {5.0} and "per-row t on 40 cpu_us/floor rows (asked" in alone.header[-1]


def test_too_few_rows_or_pairs_fall_back_to_the_per_row_t_and_say_why() -> None:
    small = gate.gate([aa_night(np.random.default_rng(2), gate.MIN_POOL_ROWS - 1, 6)])
    (test,) = small.classes["cpu-python"].tests
    assert test.test == gate.PER_ROW and "fewer than 20 rows to pool" in small.header[-1]
    assert {r.df for r in small.rows} == {5.0}
    two = gate.gate([aa_night(np.random.default_rng(2), 40, 2)])
    (test,) = two.classes["cpu-python"].tests
    assert test.test == gate.PER_ROW and "fewer than 3 pairs" in two.header[-1]
    assert {r.df for r in two.rows} == {1.0}
    assert two.outcome == gate.NO_DECISION  # nothing decided is never a pass
    # Independent runs: each row's Welch t, named.
    base, new = (make_doc([make_row("muladd", f"v{i}", absolute=[5.0, 5.1, 4.9], ratio=[2.0, 2.02, 1.98])
                           for i in range(30)]) for _ in range(2))
    welch = gate.gate([new], [base])
    assert welch.classes["cpu-python"].tests[0].test == gate.WELCH


def test_the_moderated_t_keeps_its_false_positive_rate_on_simulated_aa_nights() -> None:
    """A/A nights whose rows' variances follow the model: CIs that exclude 1 at most at 2α per row
    (two one-sided bounds at α), and about at it: the pooled test is calibrated, not conservative."""
    rng = np.random.default_rng(2004)
    alpha, trials, excludes = 0.01, 0, 0
    for _ in range(60):
        result = gate.gate([aa_night(rng, 40, 6)], alpha=alpha)
        assert result.classes["cpu-python"].tests[0].test == gate.MODERATED
        trials += len(result.rows)
        excludes += sum(r.ci_low > 1 or r.ci_high < 1 for r in result.rows)  # type: ignore[operator]
    assert trials == 2400 and 0.5 * 2 * alpha <= excludes / trials <= 1.25 * 2 * alpha


def test_a_slowed_row_is_caught_where_its_own_pairs_cannot_catch_it() -> None:
    """Six pairs at the night's α (0.01 over 40 rows): a +20 % row whose own 5 df cannot flag it is a
    regression once its variance borrows the class's df; no other row is called, and the class's
    median row detects less."""
    night = aa_night(np.random.default_rng(1), 40, 6, slow={3: 1.20})
    pooled, alone = gate.gate([night]), gate.gate([night], pool=False)
    for result, verdict in ((pooled, gs.REGRESSION), (alone, gs.INCONCLUSIVE)):
        assert {r.label: r.verdict for r in result.rows}["muladd/v3/inference"] == verdict
        assert not [r for r in result.rows if r.verdict in (gs.REGRESSION, gs.IMPROVEMENT)
                    and r.label != "muladd/v3/inference"]
    assert pooled.classes["cpu-python"].detectable < alone.classes["cpu-python"].detectable  # type: ignore[operator]
