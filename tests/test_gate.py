"""The regression gate (analysis.gate, analysis.gate_stats) on synthetic result files."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats

from dbench.analysis import gate, gate_stats as gs

GOLDEN = Path(__file__).resolve().parent / "golden"
ENV = {"time": "2026-12-01T00:00:00+00:00", "device": "cuda:0", "gpu_name": "NVIDIA H200",
       "nvidia_driver": "580.159.04", "torch": "2.11.0+cu130", "torch_git": "70d99e998b4955e0049d13a98d77ae1b14db1f45",
       "sm_clock_mhz": "1980",
       "git": {"sha": "0123456789abcdef", "dirty": False}}


def make_row(op: str, variant: str, mode: str = "inference", *, metric: str = "cpu_us",
             absolute: list[float] | None = None, ratio: list[float] | None = None, status: str = "ok",
             a_absolute: list[float] | None = None, a_ratio: list[float] | None = None) -> dict[str, Any]:
    """A result row with per-process medians (and ratios to the floor, and side A for A/B)."""
    absolute = absolute or []
    row: dict[str, Any] = {
        "scenario": "boundary", "op": op, "variant": variant, "mode": mode, "device": "cuda:0", "shape": [4, 32],
        "dtype": "float32", "axes": [], "driver": "python", "metric": metric, "unit": "us", "timer": "perf_counter_ns",
        "status": status, "reason": "forward differs from the fp64 reference" if status == "failed" else None,
        "median": float(np.median(absolute)) if absolute else None, "q1": None, "q3": None, "ci_low": None,
        "ci_high": None, "samples": [], "ratio_median": float(np.median(ratio)) if ratio else None,
    }
    if absolute:
        row["process_medians"] = list(absolute)
    if ratio:
        row["process_ratio_medians"] = list(ratio)
    if a_absolute is not None:
        row["a_process_medians"] = list(a_absolute)
    if a_ratio is not None:
        row["a_process_ratio_medians"] = list(a_ratio)
    return row


def make_doc(rows: list[dict[str, Any]], ab: dict[str, Any] | None = None, **env: Any) -> dict[str, Any]:
    doc = {"schema_version": 2, "scenario": "boundary", "status": "complete", "config": {"dtype": "float32"},
           "env": {**ENV, **env}, "rows": rows}
    if ab is not None:
        doc["ab"] = ab
    return doc


def noisy(rng: np.random.Generator, level: float, sigma: float, n: int) -> list[float]:
    """n per-process values, log-normal around `level`."""
    return list(level * np.exp(rng.normal(0, sigma, n)))


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path


def verdicts(result: gate.GateResult) -> dict[str, str]:
    return {r.label: r.verdict for r in result.rows}


# ---------------------------------------------------------------------------------------------
# The decision rule


@pytest.mark.parametrize(("low", "high", "expected"), [
    (0.99, 1.01, "same"),  # inside the band
    (1.06, 1.20, "regression"),  # the whole CI above 1+δ
    (1.02, 1.10, "inconclusive"),  # excludes 1, but the slowdown may be smaller than δ
    (0.80, 0.94, "improvement"),
    (0.90, 1.10, "inconclusive"),  # too wide to say anything
    (1 / 1.05, 1.05, "same"),  # the band's edges belong to it
])
def test_decide_against_the_band(low: float, high: float, expected: str) -> None:
    assert gs.decide(low, high, 0.05) == expected


@pytest.mark.parametrize(("low", "high", "expected"), [
    (0.97, 1.04, "same"),  # inside ±5 %, though it reaches past +3 %
    (1.035, 1.045, "regression"),  # above +3 %: a call wins over equivalence
    (0.955, 0.965, "improvement"),
    (0.96, 1.06, "inconclusive"),  # past the equivalence band
    (1 / 1.05, 1.05, "same"),
])
def test_same_has_its_own_band_and_a_call_wins(low: float, high: float, expected: str) -> None:
    assert gs.decide(low, high, 0.03, 0.05) == expected
    assert gs.decide(low, high, 0.03, 0.01) == gs.decide(low, high, 0.03)  # never narrower than ±δ


def test_processes_needed_takes_the_nearer_decision() -> None:
    # Estimate +4 %, between a 3 % call and a 5 % equivalence edge: the CI half-width that decides is
    # the wider room, log(1.05) - log(1.04) vs log(1.04) - log(1.03), both about 1 %: either will do.
    effect = gs.Effect(math.log(1.04), 0.0, 4.0, True, per_process_var=0.02 ** 2, n=5)
    room = max(math.log(1.05) - math.log(1.04), math.log(1.04) - math.log(1.03))
    assert gs.margin(effect, 0.03, 0.05) == pytest.approx(room)
    # At +1 %, `same` within ±5 % is four points away, within ±3 % two.
    near_one = gs.Effect(math.log(1.01), 0.0, 4.0, True, per_process_var=0.02 ** 2, n=5)
    assert gs.margin(near_one, 0.03, 0.05) == pytest.approx(math.log(1.05) - math.log(1.01))
    assert gs.margin(near_one, 0.03) == pytest.approx(math.log(1.03) - math.log(1.01))
    wide, narrow = gs.processes_needed(near_one, 0.03, 1e-4, 0.05), gs.processes_needed(near_one, 0.03, 1e-4)
    assert wide is not None and narrow is not None and wide < narrow


def test_a_paired_night_calls_beyond_3_percent_and_says_same_within_5() -> None:
    rng = np.random.default_rng(11)
    rows = []
    for name, slowdown in (("flat", 1.0), ("four", 1.04), ("ten", 1.10)):
        a = list(5.0 * np.exp(rng.normal(0, 0.2, 12)))
        b = [x * slowdown * math.exp(e) for x, e in zip(a, rng.normal(0, 0.002, 12))]
        rows.append(make_row(name, "cpp", absolute=b, a_absolute=a))
    doc = make_doc(rows, ab={"a": "", "b": "x", "pairs": 12, "order": "AB" * 12})
    result = gate.gate([doc])
    by_op = {r.label.split("/")[0]: r for r in result.rows}
    assert {k: r.verdict for k, r in by_op.items()} == {"flat": "same", "four": "regression", "ten": "regression"}
    assert by_op["flat"].delta == 0.03 and by_op["flat"].same_delta == gate.DEFAULT_SAME_DELTA
    assert "±3.0% (same ±5.0%)" in gate.render(result, "txt")
    assert "`same` within ±5.0%" in result.header[1]
    # --same-delta 0.03: one band for both; 0.001 is narrower than δ, so ±δ holds.
    assert gate.gate([doc], same_delta=0.03).rows[-1].same_delta == 0.03
    assert gate.gate([doc], same_delta=0.001).rows[-1].same_delta == 0.03


def test_independent_runs_keep_one_band() -> None:
    base, new = two_runs()
    result = gate.gate([new], [base])
    assert all(r.same_delta == r.delta for r in result.rows if r.delta is not None)
    assert "`same` within" not in result.header[1]


def test_welch_ci_is_scipys() -> None:
    rng = np.random.default_rng(1)
    new, base = noisy(rng, 1.1, 0.02, 5), noisy(rng, 1.0, 0.04, 7)
    effect = gs.independent_effect(new, base)
    ref = scipy.stats.ttest_ind(np.log(new), np.log(base), equal_var=False).confidence_interval(0.9)
    assert effect is not None
    assert effect.ci(0.05) == pytest.approx((math.exp(ref.low), math.exp(ref.high)), rel=1e-9)


def test_paired_ci_is_scipys() -> None:
    rng = np.random.default_rng(2)
    a = noisy(rng, 1.0, 0.1, 6)
    b = [x * 1.05 * math.exp(e) for x, e in zip(a, rng.normal(0, 0.01, 6))]
    effect = gs.paired_effect(b, a)
    ref = scipy.stats.ttest_rel(np.log(b), np.log(a)).confidence_interval(0.9)
    assert effect is not None and effect.paired
    assert effect.ci(0.05) == pytest.approx((math.exp(ref.low), math.exp(ref.high)), rel=1e-9)


def test_an_interval_too_wide_for_a_float_is_inconclusive_not_an_error() -> None:
    # Two pairs 41 % apart in log ratio at α = 4.4e-5 (0.01 a night over 225 rows): t = 7162, half-width
    # 1452 on the log scale.
    effect = gs.paired_effect([1.0, 1.0], [1.5, 1.0])
    assert effect is not None
    low, high = effect.ci(0.01 / 225)
    assert (low, high) == (0.0, math.inf)
    assert gs.decide(low, high, 0.05) == "inconclusive"


def test_processes_needed_is_the_smallest_n_that_decides() -> None:
    # Estimate 1 % above 1, per-process σ 3 %: a `same` needs the CI half-width below log(1.05) - log(1.01).
    effect = gs.Effect(math.log(1.01), 0.0, 4.0, False, per_process_var=0.03 ** 2, n=3)
    n = gs.processes_needed(effect, 0.05, 0.05)
    assert n is not None

    def half(k: int) -> float:
        return gs.t_quantile(0.05, 2 * (k - 1)) * 0.03 * math.sqrt(2 / k)

    room = math.log(1.05) - math.log(1.01)
    assert half(n) <= room < half(n - 1)


def test_processes_needed_at_a_per_row_alpha_of_a_big_table() -> None:
    # 4 pairs, per-pair σ 5 %, estimate at 1.0, δ 5 %, α 0.01/114 rows: with n = 2 the t quantile is
    # in the thousands; the answer is the smallest n whose CI fits the band, not "no number would".
    effect = gs.Effect(0.0, 0.05 / 2, 3.0, True, per_process_var=0.05 ** 2, n=4)
    alpha = 0.01 / 114
    n = gs.processes_needed(effect, 0.05, alpha)
    assert n is not None

    def half(k: int) -> float:
        return gs.t_quantile(alpha, k - 1) * 0.05 / math.sqrt(k)

    assert half(n) <= math.log(1.05) < half(n - 1)


def test_processes_needed_refuses_what_processes_cannot_fix() -> None:
    on_edge = gs.Effect(math.log(1.05), 0.0, 4.0, False, per_process_var=0.03 ** 2)
    run_noise = gs.Effect(0.0, 0.0, 4.0, False, per_process_var=0.03 ** 2, fixed_var=0.05 ** 2)
    assert gs.processes_needed(on_edge, 0.05, 0.05) is None
    assert gs.processes_needed(run_noise, 0.05, 0.05) is None


# ---------------------------------------------------------------------------------------------
# Verdicts of whole runs


def two_runs(seed: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """A baseline and a new run of 6 processes each: one row slower by 20 %, one unchanged, one too noisy
    to say, one failed, one gone, one new, and a GPU row."""
    rng = np.random.default_rng(seed)
    n = 6
    base = make_doc([
        make_row("muladd", "raw", absolute=noisy(rng, 6.0, 0.01, n)),
        make_row("muladd", "cpp", absolute=noisy(rng, 8.0, 0.01, n), ratio=noisy(rng, 1.30, 0.01, n)),
        make_row("muladd", "custom_op", absolute=noisy(rng, 18.0, 0.01, n), ratio=noisy(rng, 3.0, 0.002, n)),
        make_row("muladd", "triton_op", absolute=noisy(rng, 60.0, 0.2, n), ratio=noisy(rng, 10.0, 0.2, n)),
        make_row("muladd", "stable", absolute=noisy(rng, 11.0, 0.01, n), ratio=noisy(rng, 1.8, 0.01, n)),
        make_row("muladd", "define_impl", absolute=noisy(rng, 9.0, 0.01, n), ratio=noisy(rng, 1.5, 0.01, n)),
        make_row("muladd", "raw", metric="gpu_us", absolute=noisy(rng, 0.95, 0.002, n)),
    ])
    new = make_doc([
        make_row("muladd", "raw", absolute=noisy(rng, 6.0, 0.01, n)),
        make_row("muladd", "cpp", absolute=noisy(rng, 9.6, 0.01, n), ratio=noisy(rng, 1.56, 0.01, n)),
        make_row("muladd", "custom_op", absolute=noisy(rng, 18.0, 0.01, n), ratio=noisy(rng, 3.0, 0.002, n)),
        make_row("muladd", "triton_op", absolute=noisy(rng, 60.0, 0.2, n), ratio=noisy(rng, 10.0, 0.2, n)),
        make_row("muladd", "stable", status="failed"),
        make_row("muladd", "nested_custom_op", absolute=noisy(rng, 24.0, 0.01, n), ratio=noisy(rng, 4.0, 0.01, n)),
        make_row("muladd", "raw", metric="gpu_us", absolute=noisy(rng, 0.95, 0.002, n)),
    ])
    return base, new


def test_verdicts_of_a_synthetic_pair_of_runs() -> None:
    base, new = two_runs()
    result = gate.gate([new], [base])
    got = {(r.label, r.metric): r for r in result.rows}
    assert got["muladd/cpp/inference", "cpu_us/floor"].verdict == "regression"
    assert got["muladd/cpp/inference", "cpu_us/floor"].ratio == pytest.approx(1.2, rel=0.02)
    assert got["muladd/custom_op/inference", "cpu_us/floor"].verdict == "same"
    assert got["muladd/raw/inference", "cpu_us"].verdict == "same"  # the floor: no ratio, judged in µs
    assert got["muladd/raw/inference", "gpu_us"].verdict == "same"
    noisy_row = got["muladd/triton_op/inference", "cpu_us/floor"]
    assert noisy_row.verdict == "inconclusive" and "processes per side would decide it" in noisy_row.note
    assert got["muladd/stable/inference", "cpu_us"].verdict == "failed"
    assert got["muladd/define_impl/inference", "cpu_us/floor"].verdict == "missing"
    assert got["muladd/nested_custom_op/inference", "cpu_us/floor"].verdict == "new"
    assert result.exit_code == gate.EXIT_FAIL
    assert result.counts == {"failed": 1, "regression": 1, "missing": 1, "inconclusive": 1, "new": 1, "same": 3}
    assert [r.verdict for r in result.rows][:2] == ["failed", "regression"]  # problems first


def test_the_more_runs_estimate_decides_when_followed() -> None:
    # A row with σ 4 % per process is inconclusive at 3 processes; at the number the gate asks for,
    # drawn afresh from the same distributions, most draws are decided.
    rng = np.random.default_rng(3)

    def judge(n: int) -> gate.RowVerdict:
        base = make_doc([make_row("o", "v", absolute=[1.0] * n, ratio=noisy(rng, 2.0, 0.04, n))])
        new = make_doc([make_row("o", "v", absolute=[1.0] * n, ratio=noisy(rng, 2.0, 0.04, n))])
        return gate.gate([new], [base]).rows[0]

    first = judge(3)
    found = re.search(r"≈(\d+) processes per side would decide it \((\d+) more\)", first.note)
    assert first.verdict == "inconclusive" and found, first.note
    asked = int(found.group(1))
    assert asked > 3 and int(found.group(2)) == asked - 3
    decided = [judge(asked).verdict for _ in range(40)]
    assert decided.count("same") >= 20, decided


def test_one_process_per_side_needs_a_calibration() -> None:
    base = make_doc([make_row("o", "v", absolute=[10.0], ratio=[2.0])])
    new = make_doc([make_row("o", "v", absolute=[10.0], ratio=[2.6])])
    plain = gate.gate([new], [base]).rows[0]
    assert plain.verdict == "inconclusive" and "--calibration" in plain.note
    row_id = plain.row_id
    calibration = {"kind": gate.CALIBRATION_KIND, "params": {"alpha_row": 0.01},
                   "rows": {row_id: {"sigma_log_ratio": 0.01, "df_ratio": 40, "delta_ratio": 0.05,
                                     "stable_absolute": False}}}
    judged = gate.gate([new], [base], calibration=calibration).rows[0]
    assert judged.verdict == "regression" and judged.delta == 0.05


def test_cpu_rows_are_judged_on_the_ratio_unless_asked() -> None:
    # The whole machine ran 30 % slower in the new run: every absolute median moved, the ratios did not.
    rng = np.random.default_rng(4)
    n = 5
    base = make_doc([make_row("o", "cpp", absolute=noisy(rng, 8.0, 0.01, n), ratio=noisy(rng, 1.3, 0.005, n))])
    new = make_doc([make_row("o", "cpp", absolute=noisy(rng, 10.4, 0.01, n), ratio=noisy(rng, 1.3, 0.005, n))])
    assert gate.gate([new], [base]).rows[0].verdict == "same"
    absolute = gate.gate([new], [base], metric="absolute").rows[0]
    assert absolute.verdict == "regression" and absolute.metric == "cpu_us"
    calibration = {"kind": gate.CALIBRATION_KIND, "rows": {absolute.row_id: {"stable_absolute": True}}}
    assert gate.gate([new], [base], calibration=calibration).rows[0].metric == "cpu_us"


def test_a_folder_is_one_run_of_its_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    folder = tmp_path / "new"
    folder.mkdir()
    for i in range(4):  # four single-process files make a 4-process run
        write(folder / f"p{i}.json", make_doc([make_row("o", "v", absolute=noisy(rng, 5.0, 0.01, 1))]))
    base = write(tmp_path / "base.json", make_doc([make_row("o", "v", absolute=noisy(rng, 5.0, 0.01, 4))]))
    run = gate.load_run(folder)
    result = gate.gate([d for _, d in run], [gate.load_run(base)[0][1]])
    assert len(run) == 4 and result.rows[0].n_new == 4 and result.rows[0].verdict == "same"


# ---------------------------------------------------------------------------------------------
# A/B runs


def ab_doc(rng: np.random.Generator, slowdown: float, pairs: int = 8) -> dict[str, Any]:
    """An A/B run whose machine drifts by ±20 % between pairs (both sides of a pair alike)."""
    drift = np.exp(rng.normal(0, 0.2, pairs))
    a = list(5.0 * drift * np.exp(rng.normal(0, 0.005, pairs)))
    b = list(5.0 * slowdown * drift * np.exp(rng.normal(0, 0.005, pairs)))
    return make_doc([make_row("o", "cpp", absolute=b, a_absolute=a)],
                    ab={"a": "", "b": "DBENCH_INJECT_NS=500", "pairs": pairs, "order": "ABBA" * (pairs // 2)})


def test_ab_pairs_cancel_the_machine_drift() -> None:
    rng = np.random.default_rng(6)
    doc = ab_doc(rng, 1.10)
    row = gate.gate([doc]).rows[0]
    assert row.verdict == "regression" and row.ratio == pytest.approx(1.10, rel=0.01)
    # The same numbers as two independent runs: the drift swamps the effect.
    r = doc["rows"][0]
    alone = gs.independent_effect(r["process_medians"], r["a_process_medians"])
    assert alone is not None and gs.decide(*alone.ci(0.05), 0.05) == "inconclusive"
    assert gate.gate([ab_doc(rng, 1.0)]).rows[0].verdict == "same"


def test_ab_files_pool_their_pairs_file_by_file() -> None:
    rng = np.random.default_rng(9)
    first, second = ab_doc(rng, 1.10, pairs=4), ab_doc(rng, 1.10, pairs=4)
    second["rows"][0]["a_process_medians"] = second["rows"][0]["a_process_medians"][:3]  # not paired: left out
    assert gate.gate([first, second]).rows[0].n_new == 8 and gate.gate([first, second]).rows[0].n_baseline == 4
    pooled = gate.gate([first, ab_doc(rng, 1.10, pairs=4)]).rows[0]
    assert pooled.n_baseline == 8 and pooled.verdict == "regression"


def test_calibrated_delta_wins_over_the_option_for_its_rows() -> None:
    base, new = two_runs()
    plain = {r.label: r for r in gate.gate([new], [base], delta=0.25).rows if r.metric.endswith("floor")}
    assert plain["muladd/cpp/inference"].verdict == "same"  # 20 % slower, with the whole CI inside ±25 %
    cal = {"kind": gate.CALIBRATION_KIND, "rows": {plain["muladd/cpp/inference"].row_id: {"delta_ratio": 0.03}}}
    judged = {r.label: r for r in gate.gate([new], [base], delta=0.25, calibration=cal).rows}
    assert judged["muladd/cpp/inference"].delta == 0.03 and judged["muladd/cpp/inference"].verdict == "regression"
    assert judged["muladd/custom_op/inference"].delta == 0.25


def test_ratio_mode_keeps_floors_in_microseconds() -> None:
    base, new = two_runs()
    metrics = {(r.label, r.metric) for r in gate.gate([new], [base], metric="ratio").rows}
    assert ("muladd/raw/inference", "cpu_us") in metrics and ("muladd/cpp/inference", "cpu_us/floor") in metrics
    with pytest.raises(gate.GateInputError, match="metric"):
        gate.gate([new], [base], metric="cycles")


def test_ab_row_failed_on_side_a_fails() -> None:
    doc = ab_doc(np.random.default_rng(8), 1.0)
    doc["rows"][0]["a_status"] = "failed"
    result = gate.gate([doc])
    assert result.rows[0].verdict == "failed" and result.exit_code == gate.EXIT_FAIL


def test_ab_refuses_a_baseline_and_plain_needs_one() -> None:
    rng = np.random.default_rng(7)
    base, new = two_runs()
    with pytest.raises(gate.GateInputError, match="no baseline"):
        gate.gate([new])
    with pytest.raises(gate.GateInputError, match="give it no baseline"):
        gate.gate([ab_doc(rng, 1.0)], [base])


# ---------------------------------------------------------------------------------------------
# Environments and the command line


def test_different_environments_are_refused_unless_allowed() -> None:
    base, new = two_runs()
    other = {**new, "env": {**new["env"], "torch_git": "ffffffff"}}
    with pytest.raises(gate.GateInputError, match="torch_git"):
        gate.gate([other], [base])
    allowed = gate.gate([other], [base], allow_different_env=True)
    assert any("torch_git" in w for w in allowed.warnings)
    assert verdicts(allowed) == verdicts(gate.gate([new], [base]))


def test_sm_clocks_of_both_runs_and_their_processes_are_shown() -> None:
    base, new = two_runs()
    new = {**new, "env": {**new["env"], "sm_clock_mhz": "1755",
                          "processes": [{"sm_clock_mhz": "1755"}, {"sm_clock_mhz": "1980"}]}}
    header = gate.gate([new], [base]).header
    assert "GPU rows (gpu_us): SM clock baseline 1980 MHz, new 1755/1980 MHz" in header


def test_an_incomplete_run_is_judged_with_a_warning() -> None:
    base, new = two_runs()
    result = gate.gate([{**new, "status": "interrupted"}], [base], new_sources=["new.json"])
    assert any("new.json is 'interrupted'" in w for w in result.warnings)
    assert "warning: new.json" in gate.render(result, "txt")


@pytest.mark.parametrize("status", ["running", "interrupted", "failed"])
def test_an_unfinished_new_run_is_never_a_pass(tmp_path: Path, status: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A run that did not finish has not timed what it was to: NO DECISION (exit 3), never PASS."""
    base, _ = two_runs()
    base_path = write(tmp_path / "base.json", base)
    new_path = write(tmp_path / "new.json", {**base, "status": status})
    assert gate.main([str(base_path), str(base_path)]) == 0  # the same rows, complete: PASS
    capsys.readouterr()
    assert gate.main([str(new_path), str(base_path), "--format", "txt"]) == 3
    assert f"the new run did not finish: {new_path} is '{status}'" in capsys.readouterr().out
    assert gate.gate([base], [{**base, "status": status}]).passed  # an unfinished baseline is only a warning


@pytest.mark.parametrize("field", ["gpu_name", "nvidia_driver", "torch"])
def test_each_environment_field_is_checked(field: str) -> None:
    base, new = two_runs()
    with pytest.raises(gate.GateInputError, match=field if field != "gpu_name" else "gpu"):
        gate.gate([{**new, "env": {**new["env"], field: "other"}}], [base])


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = two_runs()
    base_path, new_path = write(tmp_path / "base.json", base), write(tmp_path / "new.json", new)
    assert gate.main([str(new_path), str(base_path), "--format", "md"]) == 1
    out = capsys.readouterr().out
    assert "| muladd/cpp/inference" in out and "FAIL: 8 rows" in out
    assert gate.main([str(base_path), str(base_path)]) == 0
    assert "PASS" in capsys.readouterr().out
    other = write(tmp_path / "other.json", {**new, "env": {**new["env"], "torch": "2.12.0"}})
    assert gate.main([str(other), str(base_path)]) == 2
    assert "not comparable" in capsys.readouterr().err
    assert gate.main([str(other), str(base_path), "--allow-different-env"]) == 1


@pytest.mark.parametrize(("content", "message"), [
    ("", "empty file"),
    ("{not json", "not valid JSON"),
    ('{"rows": 3}', "not a result file"),
    (None, "cannot read the result file"),
])
def test_cli_bad_input_is_one_line_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   content: str | None, message: str) -> None:
    base = write(tmp_path / "base.json", two_runs()[0])
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    assert gate.main([str(base), str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err and message in err


def test_cli_empty_folder_and_bad_calibration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write(tmp_path / "base.json", two_runs()[0])
    (tmp_path / "empty").mkdir()
    assert gate.main([str(tmp_path / "empty"), str(base)]) == 2
    assert "no result files" in capsys.readouterr().err
    assert gate.main([str(base), str(base), "--calibration", str(base)]) == 2
    assert "not a calibration file" in capsys.readouterr().err


def test_golden_markdown(tmp_path: Path) -> None:
    """The committed example (README, 'The regression gate') is what the gate prints for the committed
    synthetic files."""
    base, new = (gate.load_run(GOLDEN / f"gate-{n}.json")[0][1] for n in ("base", "new"))
    result = gate.gate([new], [base], new_sources=["gate-new.json"], baseline_sources=["gate-base.json"])
    assert gate.render(result, "md") == (GOLDEN / "gate-new-vs-base.md").read_text()


def test_the_module_runs_as_a_command() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "dbench.analysis.gate", str(GOLDEN / "gate-new.json"),
                           str(GOLDEN / "gate-base.json"), "--hide-same"],
                          cwd=GOLDEN.parent.parent, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "muladd/cpp/inference" in done.stdout and "muladd/custom_op/inference" not in done.stdout
    assert "(3 rows same, not shown)" in done.stdout and "FAIL: 8 rows" in done.stdout


def test_ci_level_is_never_rounded_to_100_percent() -> None:
    from dbench.analysis.gate import level_text

    assert level_text(0.05) == "90%" and level_text(0.025) == "95%"
    assert level_text(0.01 / 114) == "99.982%" and level_text(0.0049) == "99.02%"


# ---------------------------------------------------------------------------------------------
# The night's α, row classes, advisory classes


def classed_runs(seed: int, *, cpu_sigma: float, cpu_slowdown: float = 1.0, gpu_slowdown: float = 1.0,
                 n: int = 6, rows: int = 10) -> tuple[dict[str, Any], dict[str, Any]]:
    """A baseline and a new run with `rows` steady GPU rows and `rows` CPU (Python) rows of σ `cpu_sigma`."""
    rng = np.random.default_rng(seed)

    def run(cpu: float, gpu: float) -> dict[str, Any]:
        return make_doc([make_row("muladd", f"v{i}", metric="gpu_us", absolute=noisy(rng, gpu, 0.002, n))
                         for i in range(rows)]
                        + [make_row("muladd", f"v{i}", absolute=noisy(rng, 10 * cpu, cpu_sigma, n))
                           for i in range(rows)])

    return run(1.0, 1.0), run(cpu_slowdown, gpu_slowdown)


def test_the_nights_alpha_is_shared_by_the_rows_judged() -> None:
    base, new = classed_runs(0, cpu_sigma=0.01)
    result = gate.gate([new], [base])
    assert result.alpha == pytest.approx(gate.DEFAULT_ALPHA_NIGHT / 20)
    assert "Bonferroni" in result.header[1] and "20 rows judged" in result.header[1]
    assert gate.gate([new], [base], alpha_night=0.2).alpha == pytest.approx(0.01)
    assert gate.gate([new], [base], alpha=0.05).alpha == 0.05  # given per row: no sharing
    # A FAILED row or one on a single side gets no CI, so it takes no share.
    new["rows"][0] = make_row("muladd", "v0", metric="gpu_us", status="failed")
    assert gate.gate([new], [base]).alpha == pytest.approx(gate.DEFAULT_ALPHA_NIGHT / 19)


def test_a_noisy_class_is_advisory_and_its_regressions_do_not_fail_the_night() -> None:
    # CPU rows with σ 30 % per process cannot flag +10 % at 6 processes; the GPU rows can.
    base, new = classed_runs(1, cpu_sigma=0.3, cpu_slowdown=3.0)
    result = gate.gate([new], [base])
    cpu, gpu = result.classes["cpu-python"], result.classes["gpu"]
    assert gpu.gating and gpu.detectable is not None and gpu.detectable < 0.10
    assert not cpu.gating and cpu.detectable is not None and cpu.detectable > 0.10
    assert cpu.regressions > 0  # a 3x slowdown shows through even that noise ...
    assert result.outcome == gate.PASS and result.exit_code == gate.EXIT_PASS  # ... and is advisory
    assert "advisory with" in result.summary() and "CPU time, Python: advisory" in "\n".join(result.header)
    # Required, the class gates whatever it can detect.
    required = gate.gate([new], [base], require=["cpu-python"])
    assert required.outcome == gate.FAIL and required.classes["cpu-python"].why.startswith("required")


def test_a_regression_in_a_gating_class_fails() -> None:
    base, new = classed_runs(2, cpu_sigma=0.01, gpu_slowdown=1.3)
    result = gate.gate([new], [base])
    assert result.classes["gpu"].gating and result.classes["gpu"].regressions == 10
    assert result.outcome == gate.FAIL


def test_a_night_whose_every_class_is_advisory_decides_nothing() -> None:
    # Steady rows, decided `same`; but no design flags a slowdown inside its own band of ±5 %, so a
    # 1 % target leaves every class advisory.
    base, new = classed_runs(3, cpu_sigma=0.01)
    result = gate.gate([new], [base], target=0.01)
    assert result.decided >= 10 and not any(c.gating for c in result.classes.values())
    assert result.outcome == gate.NO_DECISION and result.exit_code == gate.EXIT_NO_DECISION
    assert any("every class is advisory" in w for w in result.undecided_reasons())


def test_a_required_class_that_decided_nothing_is_no_decision() -> None:
    base, new = classed_runs(4, cpu_sigma=0.01)
    result = gate.gate([new], [base], require=["cpu-cpp"])  # no C++-driver rows at all
    assert result.outcome == gate.NO_DECISION
    assert any("required class CPU time, C++ driver" in w for w in result.undecided_reasons())
    with pytest.raises(gate.GateInputError, match="unknown class"):
        gate.gate([new], [base], require=["gpus"])


@pytest.mark.parametrize("args", [["--require", "cpu"], ["--alpha-night", "0"], ["--alpha-night", "0.7"],
                                  ["--target", "1.5"], ["--target", "-0.1"]])
def test_bad_class_or_level_options_exit_2(tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    base, new = classed_runs(5, cpu_sigma=0.01)
    assert gate.main([str(write(tmp_path / "n.json", new)), str(write(tmp_path / "b.json", base)), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("python -m dbench.analysis.gate: error:")


def test_require_takes_a_comma_list_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = classed_runs(6, cpu_sigma=0.3, cpu_slowdown=3.0)
    args = [str(write(tmp_path / "n.json", new)), str(write(tmp_path / "b.json", base))]
    assert gate.main(args) == gate.EXIT_PASS
    assert gate.main([*args, "--require", "gpu,cpu-python"]) == gate.EXIT_FAIL
    assert "required" in capsys.readouterr().out


def test_detectable_of_a_design_that_detects_nothing_is_infinite() -> None:
    assert gs.detectable(0.05, 50.0, 1.0, 1e-6, 0.95) == math.inf


@pytest.mark.parametrize(("se", "df", "alpha"), [(0.01, 3.0, 0.01 / 246), (0.02, 9.0, 0.002), (0.004, math.inf, 0.05)])
def test_detectable_is_where_the_power_reaches_its_target(se: float, df: float, alpha: float) -> None:
    found = gs.detectable(0.05, se, df, alpha, 0.95)
    assert found > 0.05
    assert gs.power(math.log1p(found), 0.05, se, df, alpha) == pytest.approx(0.95, abs=1e-6)


def test_json_format_carries_the_outcome_the_classes_and_every_row(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    base, new = two_runs()
    args = [str(write(tmp_path / "new.json", new)), str(write(tmp_path / "base.json", base)), "--format", "json"]
    assert gate.main(args) == gate.EXIT_FAIL
    data = json.loads(capsys.readouterr().out)
    result = gate.gate([new], [base])
    assert data["kind"] == "dbench-gate" and data["outcome"] == "FAIL" and data["exit_code"] == 1
    assert data["summary"] == result.summary() and data["counts"] == result.counts
    assert [r["verdict"] for r in data["rows"]] == [r.verdict for r in result.rows]
    assert set(data["classes"]) == set(result.classes) and all("gating" in c for c in data["classes"].values())
    regression = next(r for r in data["rows"] if r["verdict"] == "regression")
    assert regression["gating"] and regression["row_class"] == "cpu-python" and regression["ci_low"] > 1.05
    assert gate.main([*args, "--hide-same"]) == 1
    assert "same" not in {r["verdict"] for r in json.loads(capsys.readouterr().out)["rows"]}


def test_json_has_no_infinity() -> None:
    # Two pairs 41 % apart at a tiny α: the CI is [0, inf] and nothing is detectable; JSON says null.
    doc = make_doc([make_row("o", "cpp", absolute=[1.0, 1.0], a_absolute=[1.5, 1.0])],
                   ab={"a": "", "b": "x", "pairs": 2, "order": "ABBA"})
    text = gate.render(gate.gate([doc], alpha=1e-6), "json")
    assert "Infinity" not in text and json.loads(text)["rows"][0]["ci_high"] is None


@pytest.mark.slow
@pytest.mark.timing
def test_a_python_side_injection_fails_the_night_on_exactly_its_rows(tmp_path: Path) -> None:
    """A real A/B run on the CPU, side B's define_impl Python kernel busy-waiting 100 µs a call
    (DBENCH_INJECT_PY_NS): the gate, with the CPU class required, calls its rows (define_impl and
    its autograd.Function wrapper, which calls it) regressions and no other row. Sized for a noisy
    2-core machine: with 3 pairs and 40 µs, the fwd_bwd row (about 2.5x) once missed the band at
    α = 0.1 %; with 4 pairs and 100 µs its CI's low end read 3.0 to 4.6 in 4 runs out of 4, and
    then once (a fresh clone, 2026-12-05) it stayed undecided: 4 pairs leave the per-row t 3
    degrees of freedom (the class is too small to pool), whose quantile at this α is about 22.
    6 pairs give it 5 (about 10). Even so, a fresh clone's .ci/run (2026-12-07, beside its other
    test workers on the 2 cores) left the fwd_bwd row undecided once: one disturbed pair of 6 is
    enough. So every row called must be an injected one and the night must fail, and at most one
    injected row may stay inconclusive, only while its ratio still reads far above 1."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "ab"
    run = subprocess.run([sys.executable, str(root / "run.py"), "--scenario", "boundary", "--device", "cpu",
                          "--ops", "muladd",
                          "--variants", "raw,define_impl,custom_op,function_raw,function_define_impl",
                          "--modes", "inference,fwd_bwd", "--no-cpp", "--quick", "--rounds", "12",
                          "--ab", "env:", "env:DBENCH_INJECT_PY_NS=100000", "--pairs", "6", "--out", str(out)],
                         capture_output=True, text=True, timeout=900, cwd=root)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (path,) = [p for p in out.glob("*.json") if not p.name.endswith(".gbench.json")]
    # A night's false-alarm level of 0.1 %, not the gate's 5 %: a test that fails once in twenty
    # quiet runs would be noise; a +400 % row is still far beyond it.
    result = gate.gate([doc for _, doc in gate.load_run(path)], require=["cpu-python"], alpha_night=1e-3)
    cpu = [r for r in result.rows if gate.row_class(r.metric, r.label) == "cpu-python"]
    injected = {r.label for r in cpu if "/define_impl/" in r.label or "/function_define_impl/" in r.label}
    regressions = {r.label for r in result.rows if r.verdict == gs.REGRESSION}
    said = {r.label: (r.verdict, r.ratio, r.ci_low, r.ci_high, r.df) for r in cpu if r.label in injected}
    assert injected and regressions <= injected and len(regressions) >= len(injected) - 1, (regressions, said)
    for label in injected - regressions:
        verdict, ratio = said[label][:2]
        assert verdict == gs.INCONCLUSIVE and ratio > 1.5, (label, said[label])
    assert not any(r.verdict == gs.IMPROVEMENT for r in result.rows)
    assert result.exit_code == 1


def test_each_class_gates_at_its_own_target_unless_one_is_given() -> None:
    """+13 % detectable: enough for the C++ driver's rows (target +15 %), not for the Python or GPU
    rows (+10 %); --target sets one target for every class."""
    def rows(detectable: float) -> list[gate.RowVerdict]:
        cases = (("noop/cpp/inference", "cpu_us/floor"), ("noop/cpp_typed/no_grad (cpp)", "cpu_us/floor"),
                 ("noop/cpp/inference", "gpu_us"))
        return [gate.RowVerdict(lab, lab, metric, gs.INCONCLUSIVE, detectable=detectable) for lab, metric in cases]

    assert {r.row_class for r in rows(0.13)} == set(gate.CLASSES)
    states = gate.class_states(rows(0.13), None, ())
    assert {k: s.gating for k, s in states.items()} == {"gpu": False, "cpu-python": False, "cpu-cpp": True}
    assert "more than the +10% target" in states["cpu-python"].why and states["cpu-cpp"].why.endswith("95% power")
    assert all(s.gating for s in gate.class_states(rows(0.13), 0.2, ()).values())
    assert not any(s.gating for s in gate.class_states(rows(0.16), None, ()).values())


def test_the_gate_does_not_read_its_own_output_in_the_folder_it_gates(tmp_path: Path) -> None:
    """`gate DIR --format json > DIR/verdicts.json`: the shell makes the file empty before the gate
    starts; the gate reads the A/B run beside it, not that file (else "empty file", exit 2)."""
    import subprocess
    import sys

    folder = tmp_path / "night"
    folder.mkdir()
    write(folder / "ab.json", ab_doc(np.random.default_rng(6), 1.10))
    out = folder / "verdicts.json"
    with out.open("w") as stdout:
        done = subprocess.run([sys.executable, "-m", "dbench.analysis.gate", str(folder), "--format", "json"],
                              stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1, done.stderr  # FAIL: the +10 % row, and nothing about an empty file
    assert json.loads(out.read_text())["rows"][0]["verdict"] == "regression"
    # Another empty file in the folder is still an error that names it.
    (folder / "other.json").write_text("")
    with (tmp_path / "elsewhere.json").open("w") as stdout:
        done = subprocess.run([sys.executable, "-m", "dbench.analysis.gate", str(folder)],
                              stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 2 and "other.json: empty file" in done.stderr


def test_an_ab_night_holds_cpu_rows_to_a_narrower_band_than_two_runs() -> None:
    """δ by design: +4 % on a CPU row is a regression in an A/B run (band 3 %, its sides share the
    hour) and `same` between two independent runs (band 5 %, the hosts' hour-to-hour shift)."""
    rng = np.random.default_rng(11)
    night = ab_doc(rng, 1.04, pairs=12)
    row = gate.gate([night]).rows[0]
    assert row.verdict == "regression" and row.delta == pytest.approx(0.03)
    assert row.ci_low > 1.03
    header = gate.render(gate.gate([night]), "md").splitlines()
    assert any("δ default of an A/B run 3.0% (cpu_us), 5.0% (gpu_us)" in line for line in header)
    a = list(np.exp(rng.normal(0, 0.002, 12)) * 5.0)
    b = [v * 1.04 for v in a]
    base, new = make_doc([make_row("o", "cpp", absolute=a)]), make_doc([make_row("o", "cpp", absolute=b)])
    between = gate.gate([new], [base]).rows[0]
    assert between.delta == pytest.approx(0.05) and between.verdict == "same"
    # A given --delta wins over both defaults.
    assert gate.gate([night], delta=0.05).rows[0].verdict != "regression"
