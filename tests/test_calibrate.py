"""Gate calibration (analysis.calibrate) on synthetic A/A data of known noise."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dbench.analysis import calibrate, gate, gate_stats as gs
from test_gate import make_doc, make_row, write

# Row -> (per-process σ of the log ratio, σ of a whole run's shift): the truth the estimates must find.
NOISE = {"noop/raw": (0.004, 0.0), "noop/cpp": (0.0075, 0.0), "noop/custom_op": (0.02, 0.0),
         "muladd/cpp": (0.0075, 0.0), "muladd/stable": (0.01, 0.01), "l2norm/cpp": (0.0075, 0.0),
         "l2norm/define_impl": (0.03, 0.0), "l2norm/triton_op": (0.05, 0.02)}


def aa_run(rng: np.random.Generator, processes: int, slowdown: dict[str, float] | None = None) -> dict[str, Any]:
    """One run of identical code: per row, a run-wide shift plus per-process noise, on the log scale.
    `slowdown` multiplies the named rows (label prefix op/variant) by a known factor."""
    rows = []
    for name, (sigma, sigma_run) in NOISE.items():
        op, variant = name.split("/")
        shift = rng.normal(0, sigma_run) if sigma_run else 0.0
        level = 2.0 * (slowdown or {}).get(name, 1.0)
        ratio = list(level * np.exp(shift + rng.normal(0, sigma, processes)))
        rows.append(make_row(op, variant, absolute=list(5.0 * np.exp(rng.normal(0, 0.2, processes))), ratio=ratio))
    return make_doc(rows)


def label_of(name: str) -> str:
    return f"{name}/inference"


def by_label(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["label"]: r for r in doc["rows"].values() if r["metric"] == "cpu_us"}


def test_mde_is_the_hand_formula() -> None:
    # (z_{1-α} + z_{power}) σ sqrt(2/n) with z_0.999 = 3.090232, z_0.95 = 1.644854, sqrt(2/5) = 0.632456.
    assert gs.mde(0.02, 5, 0.001, 0.95) == pytest.approx(4.735086 * 0.02 * 0.632456, rel=1e-6)
    assert gs.mde(0.02, 5, 0.001, 0.95, paired=True) == pytest.approx(4.735086 * 0.02 * 0.447214, rel=1e-6)


def test_estimated_noise_is_the_true_noise() -> None:
    rng = np.random.default_rng(10)
    runs = [[aa_run(rng, 6)] for _ in range(30)]
    doc = calibrate.calibrate(runs, alpha_nightly=0.01, power=0.95, floor=0.01)
    rows = by_label(doc)
    assert doc["params"]["alpha_row"] == pytest.approx(0.01 / len(NOISE))
    for name, (sigma, sigma_run) in NOISE.items():
        row = rows[label_of(name)]
        df = row["df_ratio"]
        assert df == 30 * 5
        # σ's sampling error with df degrees of freedom is about σ / sqrt(2 df): allow four of them.
        assert row["sigma_log_ratio"] == pytest.approx(sigma, abs=4 * sigma / math.sqrt(2 * df))
        # A run's shift, on the variance scale: the mean square between 30 runs has variance
        # 2 E[MS_b]² / 29 with E[MS_b] = σ² + 6 σ_run², and σ_run² = (MS_b - MS_w) / 6.
        tolerance = 4 * math.sqrt(2 / 29) * (sigma ** 2 + 6 * sigma_run ** 2) / 6
        assert row["sigma_run_log_ratio"] ** 2 == pytest.approx(sigma_run ** 2, abs=tolerance)
        effective = math.sqrt(row["sigma_log_ratio"] ** 2 + 6 * row["sigma_run_log_ratio"] ** 2)
        expected_mde = math.expm1(gs.mde(effective, 6, doc["params"]["alpha_row"], 0.95))
        assert row["mde_ratio"] == pytest.approx(expected_mde)
        # ... and the MDE of the true noise within sampling error: the effective σ² is about the mean
        # square between the 30 runs (E = σ² + 6 σ_run²), so its σ has 29 df whatever σ_run is.
        true_mde = gs.mde(math.sqrt(sigma ** 2 + 6 * sigma_run ** 2), 6, doc["params"]["alpha_row"], 0.95)
        assert math.log1p(row["mde_ratio"]) == pytest.approx(true_mde, rel=4 / math.sqrt(2 * 29))
        assert row["delta_ratio"] == pytest.approx(max(expected_mde, 0.01))
        assert row["detectable_ratio"] > row["delta_ratio"]
        assert row["stable_absolute"] is False  # the absolute medians carry 20 % machine noise


def test_one_process_per_run_uses_the_spread_of_runs() -> None:
    rng = np.random.default_rng(11)
    doc = calibrate.calibrate([[aa_run(rng, 1)] for _ in range(40)])
    row = by_label(doc)[label_of("noop/custom_op")]
    assert row["n"] == 1 and row["df_ratio"] == 39 and row["sigma_run_log_ratio"] == 0
    assert row["sigma_log_ratio"] == pytest.approx(0.02, abs=4 * 0.02 / math.sqrt(2 * 39))


def test_paired_calibration_from_ab_files_with_identical_sides() -> None:
    rng = np.random.default_rng(12)
    docs = []
    for _ in range(10):
        drift = np.exp(rng.normal(0, 0.2, 8))  # the machine moves between pairs: pairs cancel it
        a, b = 2.0 * drift * np.exp(rng.normal(0, 0.01, 8)), 2.0 * drift * np.exp(rng.normal(0, 0.01, 8))
        row = make_row("o", "cpp", absolute=list(b), ratio=list(b), a_absolute=list(a), a_ratio=list(a))
        docs.append(make_doc([row], ab={"a": "", "b": "", "pairs": 8, "order": "ABBA" * 4}))
    doc = calibrate.calibrate([[d] for d in docs])
    row = next(iter(doc["rows"].values()))
    # one pair's log ratio: the difference of two independent σ = 1 % noises
    assert doc["design"] == "paired"
    assert row["sigma_log_ratio"] == pytest.approx(0.01 * math.sqrt(2), rel=4 / math.sqrt(2 * 70))
    assert row["mde_ratio"] == pytest.approx(math.expm1(gs.mde(row["sigma_log_ratio"], 8, 0.01, 0.95, paired=True)))


def test_false_alarms_stay_under_alpha_and_the_injected_slowdown_is_detected_at_the_claimed_power() -> None:
    rng = np.random.default_rng(13)
    aa = [[aa_run(rng, 6)] for _ in range(12)]
    cal = calibrate.calibrate(aa, alpha_nightly=0.05, power=0.95, floor=0.01)
    injected = [[aa_run(rng, 6, slowdown={"noop/cpp": 1.05, "muladd/cpp": 1.05, "l2norm/cpp": 1.05})]
                for _ in range(8)]
    # The design makes a 5 % slowdown of the cpp rows (σ 0.75 % per process, 6 per side) detectable.
    assert all(by_label(cal)[label_of(n)]["detectable_ratio"] <= 0.05 for n in ("noop/cpp", "muladd/cpp", "l2norm/cpp"))
    ev = calibrate.evaluate(aa, injected, cal, injected_row="/cpp/")
    assert ev.aa_trials == 66 and ev.aa_rows == 66 * len(NOISE)
    assert ev.false_alarm_rate <= cal["params"]["alpha_row"]
    assert ev.injected_trials == 8 * 12 * 3
    assert ev.claimed_power is not None and ev.claimed_power >= 0.9
    # Trials share baselines, so allow more than a binomial error.
    assert ev.detection_rate >= ev.claimed_power - 0.1
    assert ev.observed_effect == pytest.approx(1.05, abs=0.01)


def test_a_per_row_alpha_replaces_bonferroni_and_says_what_a_night_then_expects() -> None:
    rng = np.random.default_rng(15)
    aa = [[aa_run(rng, 6)] for _ in range(6)]
    loose = calibrate.calibrate(aa, alpha_row=0.005, floor=0.0)
    strict = calibrate.calibrate(aa, alpha_nightly=0.01, floor=0.0)
    assert loose["params"]["alpha_row"] == 0.005
    assert loose["params"]["alpha_nightly"] == pytest.approx(0.005 * len(NOISE))
    # A larger per-row α narrows every band: the MDE's z_{1-α} shrinks, nothing else changes.
    for label, row in by_label(loose).items():
        assert row["mde_ratio"] < by_label(strict)[label]["mde_ratio"]


def test_injected_rows_are_chosen_by_pattern_and_metric_and_counted_per_class() -> None:
    rng = np.random.default_rng(16)
    aa = [[aa_run(rng, 6)] for _ in range(4)]
    cal = calibrate.calibrate(aa, alpha_nightly=0.05, floor=0.01)
    injected = [[aa_run(rng, 6, slowdown={"muladd/cpp": 1.3, "l2norm/cpp": 1.3})] for _ in range(2)]
    ev = calibrate.evaluate(aa, injected, cal, injected_row=r"^(muladd|l2norm)/cpp/")
    assert ev.injected_trials == 2 * 4 * 2 and ev.detected == ev.injected_trials
    assert ev.classes == {"CPU time, Python": (16, 16, pytest.approx(1.3, abs=0.02))}
    assert "  CPU time, Python: 16 verdicts, 16 regression (1.000)" in "\n".join(ev.lines(0.01, 0.05))
    none = calibrate.evaluate(aa, injected, cal, injected_row=r"^(muladd|l2norm)/cpp/", injected_metric="gpu_us")
    assert none.injected_trials == 0 and none.classes == {}


@pytest.mark.parametrize(("extra", "message"), [
    (["--injected-row", "(cpp"], "--injected-row '(cpp': not a regular expression"),
    (["--target-effect", "0"], "--target-effect must be a positive slowdown"),
    (["--alpha-row", "1.5"], "--alpha-row must lie in (0, 0.5), not 1.5"),
    (["--alpha-row", "nan"], "--alpha-row must lie in (0, 0.5), not nan"),
    (["--floor", "-0.1"], "--floor must lie in (0, 1), not -0.1"),
    (["--floor", "inf"], "--floor must lie in (0, 1), not inf"),
    (["--power", "nan"], "--power must lie in (0, 1), not nan"),
    (["--target-effect", "inf"], "--target-effect must be a positive slowdown"),
    (["--processes", "-3"], "--processes must be a number of processes"),
    (["--out", "/nonexistent-folder/cal.json"], "the folder /nonexistent-folder does not exist"),
])
def test_a_bad_option_is_refused_in_one_line_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             extra: list[str], message: str) -> None:
    rng = np.random.default_rng(17)
    runs = []
    for i in range(2):
        runs.append(tmp_path / f"aa{i}.json")
        runs[-1].write_text(json.dumps(aa_run(rng, 4)))
    code = calibrate.main([*map(str, runs), "--out", str(tmp_path / "cal.json"), "--injected", str(runs[0]), *extra])
    err = capsys.readouterr().err
    assert code == calibrate.EXIT_BAD_INPUT
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "cal.json").exists()  # refused before anything was computed or written


def test_the_gate_at_the_band_edge_errs_at_rate_alpha() -> None:
    """The regression rule's size: a true slowdown of exactly δ is called a regression with
    probability α (the worst case of its null); a smaller one, less often."""
    rng = np.random.default_rng(14)
    alpha, delta, n, trials = 0.05, 0.02, 5, 1500
    calls = {1.0: 0, 1.02: 0}
    for true in calls:
        for _ in range(trials):
            base = list(np.exp(rng.normal(0, 0.01, n)))
            new = list(true * np.exp(rng.normal(0, 0.01, n)))
            effect = gs.independent_effect(new, base)
            assert effect is not None
            calls[true] += gs.decide(*effect.ci(alpha), delta) == "regression"
    se = math.sqrt(alpha * (1 - alpha) / trials)
    assert abs(calls[1.02] / trials - alpha) <= 4 * se
    assert calls[1.0] / trials < alpha / 5


def test_cli_writes_a_calibration_the_gate_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(15)
    paths = [str(write(tmp_path / f"aa{i}.json", aa_run(rng, 4))) for i in range(4)]
    injected = str(write(tmp_path / "inj.json", aa_run(rng, 4, slowdown={"muladd/cpp": 1.3})))
    out = tmp_path / "cal.json"
    assert calibrate.main([*paths, "--out", str(out), "--injected", injected, "--injected-row", "muladd/cpp"]) == 0
    printed = capsys.readouterr().out
    assert "false-alarm rate" in printed and "detection rate" in printed
    cal = gate.load_calibration(out)
    assert json.loads(out.read_text())["params"]["runs"] == 4
    result = gate.gate([gate.load_run(Path(injected))[0][1]], [gate.load_run(Path(paths[0]))[0][1]], calibration=cal)
    judged = {r.label: r for r in result.rows}
    assert judged["muladd/cpp/inference"].verdict == "regression"
    assert judged["muladd/cpp/inference"].delta == pytest.approx(by_label(cal)["muladd/cpp/inference"]["delta_ratio"])


def test_cli_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("")
    assert calibrate.main([str(bad), "--out", str(tmp_path / "c.json")]) == 2
    assert "empty file" in capsys.readouterr().err
    single = write(tmp_path / "one.json", make_doc([make_row("o", "v", absolute=[1.0], ratio=[1.0])]))
    assert calibrate.main([str(single), "--out", str(tmp_path / "c.json")]) == 2
    assert "enough processes or runs" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()


def test_claimed_power_is_the_simulated_power() -> None:
    """power() / detectable() promise what the gate then does: at the slowdown claimed to be caught
    with probability 0.8, simulated runs are caught that often."""
    rng = np.random.default_rng(16)
    sigma, n, delta, alpha, trials = 0.01, 6, 0.02, 0.01, 1500
    se, df = sigma * math.sqrt(2 / n), 2 * (n - 1)
    slowdown = gs.detectable(delta, se, df, alpha, 0.8)
    assert gs.power(math.log1p(slowdown), delta, se, df, alpha) == pytest.approx(0.8)
    caught = 0
    for _ in range(trials):
        effect = gs.independent_effect(list((1 + slowdown) * np.exp(rng.normal(0, sigma, n))),
                                       list(np.exp(rng.normal(0, sigma, n))))
        assert effect is not None
        caught += gs.decide(*effect.ci(alpha), delta) == "regression"
    # Welch's df is a little below the pooled 2(n - 1): allow that beside four binomial errors.
    assert caught / trials == pytest.approx(0.8, abs=4 * math.sqrt(0.8 * 0.2 / trials) + 0.03)


@pytest.mark.slow
def test_calibration_script_end_to_end_on_the_cpu(tmp_path: Path) -> None:
    """scripts/gate_calibration.sh with tiny runs: A/A and injected A/B files, then a calibration the
    gate reads and the evaluation of the injected `cpp` rows (their spin makes them slower)."""
    import os
    import subprocess

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "DEVICE": "cpu", "PAIRS": "2", "INJECT_NS": "20000",
           "RUN_ARGS": "--ops noop --variants raw,cpp --no-cpp --quick --rounds 4"}
    proc = subprocess.run(["bash", str(root / "scripts" / "gate_calibration.sh"), str(tmp_path), "2", "1"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("done in") == 3 and "FAILED" not in proc.stdout
    aa, injected = sorted((tmp_path / "aa").glob("*.json")), sorted((tmp_path / "injected").glob("*.json"))
    assert len(aa) == 2 and len(injected) == 1
    assert json.loads(injected[0].read_text())["ab"]["b"] == "env:DBENCH_INJECT_NS=20000"
    calibration = json.loads((tmp_path / "gate-calibration.json").read_text())
    assert calibration["design"] == "paired" and any('"cpp"' in key for key in calibration["rows"])
    text = (tmp_path / "calibration.txt").read_text()
    assert "injected:" in text and "false-alarm rate" in text
    # A 20 µs spin on a call of a few µs shows in every injected row's paired ratio; two pairs give
    # one degree of freedom, so the verdict may stay inconclusive, never same or improvement.
    result = gate.gate([doc for _, doc in gate.load_run(injected[0])], calibration=calibration)
    cpp = [r for r in result.rows if "/cpp/" in r.label]
    assert cpp and all(r.ratio > 2 and r.verdict in (gs.REGRESSION, gs.INCONCLUSIVE) for r in cpp)


@pytest.mark.parametrize("args, env, message", [(["x"], {}, "AA_RUNS must be a whole number"),
                                                (["1"], {}, "AA_RUNS must be at least 2"),
                                                (["3", "-1"], {}, "INJECTED_RUNS must be a whole number"),
                                                ([], {"PAIRS": "1"}, "PAIRS must be at least 2")])
def test_calibration_script_refuses_bad_counts_before_any_run(tmp_path: Path, args: list[str], env: dict[str, str],
                                                              message: str) -> None:
    import os
    import subprocess

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "out"
    proc = subprocess.run(["bash", str(root / "scripts" / "gate_calibration.sh"), str(out), *args],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()
