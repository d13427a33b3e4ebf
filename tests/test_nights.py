"""Synthetic nights (analysis.nights): pairs kept whole, sides swapped whole, outcomes counted per night."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dbench.analysis import gate, nights
from test_gate import make_doc, make_row, write


def ab_run(seed: int, pairs: int = 4, *, gpu_slowdown: float = 1.0, slow_pairs: tuple[int, ...] = ()) -> dict[str, Any]:
    """An A/B run of 6 GPU rows (σ 0.3 % per process) and 6 CPU rows (σ 3 %); in `slow_pairs` the
    host is 1.5x slower for every CPU row of side B's process (a shared per-process state)."""
    rng = np.random.default_rng(seed)
    rows = []
    state = np.array([1.5 if i in slow_pairs else 1.0 for i in range(pairs)])
    for i in range(6):
        a = 1.0 * np.exp(rng.normal(0, 0.003, pairs))
        b = gpu_slowdown * np.exp(rng.normal(0, 0.003, pairs))
        rows.append(make_row("muladd", f"v{i}", metric="gpu_us", absolute=list(b), a_absolute=list(a)))
    for i in range(6):
        a = 10 * np.exp(rng.normal(0, 0.03, pairs))
        b = 10 * state * np.exp(rng.normal(0, 0.03, pairs))
        rows.append(make_row("muladd", f"v{i}", absolute=list(b), a_absolute=list(a)))
    return make_doc(rows, ab={"a": "env:", "b": "env:", "pairs": pairs, "order": "ABBA" * (pairs // 2)})


def test_a_night_keeps_each_pair_whole_and_swaps_it_whole() -> None:
    docs = [("r0", ab_run(0)), ("r1", ab_run(1))]
    pool = nights.pool(docs)
    assert len(pool.pairs) == 8 and len(pool.keys) == 12
    doc = nights.night(pool, [5, 2], [True, False])
    gate.check_result(doc, "night")
    src1, src0 = docs[1][1]["rows"], docs[0][1]["rows"]
    for row, s1, s0 in zip(doc["rows"], src1, src0):
        # pair 5 is the second file's pair 1, swapped: its side A value is on side B now
        assert row["process_medians"] == [s1["a_process_medians"][1], s0["process_medians"][2]]
        assert row["a_process_medians"] == [s1["process_medians"][1], s0["a_process_medians"][2]]
    assert doc["ab"]["pairs"] == 2


def test_nights_count_outcomes_and_catch_an_injected_slowdown() -> None:
    aa = nights.pool([(f"r{i}", ab_run(i)) for i in range(3)])
    tally, _ = nights.run_nights(aa, 6, 40, 0, True, {})
    assert tally.nights == 40 and tally.outcomes[gate.PASS] == 40
    injected = nights.pool([(f"i{i}", ab_run(10 + i, gpu_slowdown=1.3)) for i in range(3)])
    _, results = nights.run_nights(injected, 6, 40, 1, False, {})
    caught = nights.injected_summary(results, r"/v\d/", "gpu_us")
    assert caught["catch_rate"] == 1.0 and caught["nights_all_caught"] == 1.0
    assert caught["other_rows_called_regression"] == 0


def test_a_shared_slow_state_raises_false_alarms_at_a_per_row_alpha_and_not_at_the_nights() -> None:
    # Side B's process slow in 3 of 4 pairs of each file (as seen on the H200): every CPU row moves together.
    aa = nights.pool([(f"r{i}", ab_run(20 + i, slow_pairs=(0, 1, 2))) for i in range(3)])
    every = {"require": list(gate.CLASSES)}
    loose, _ = nights.run_nights(aa, 4, 100, 0, True, {"alpha": 0.05, **every})
    shared, _ = nights.run_nights(aa, 4, 100, 0, True, every)
    assert loose.outcomes[gate.FAIL] > 0
    assert shared.outcomes[gate.FAIL] < loose.outcomes[gate.FAIL]


def test_the_command_writes_its_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(write(tmp_path / f"aa{i}.json", ab_run(i))) for i in range(2)]
    inj = str(write(tmp_path / "inj.json", ab_run(9, gpu_slowdown=1.3)))
    out = tmp_path / "nights.json"
    assert nights.main([*files, "--nights", "5", "--pairs", "3", "--injected", inj, "--injected-row", "/v",
                        "--injected-metric", "gpu_us", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["aa"]["nights"] == 5 and doc["aa"]["pool_pairs"] == 8 and doc["injected"]["pool_pairs"] == 4
    assert "synthetic nights of 3 pairs drawn from 8" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "message"), [
    (["--pairs", "9"], "the pool has 8 pairs"),
    (["--pairs", "1"], "argument --pairs: expected a whole number from 2 to 500"),  # at parse time (SystemExit)
    (["--nights", "0"], "argument --nights: expected a whole number from 1 to 10000"),
    (["--injected", "X"], "--injected-row"),
    (["--alpha-night", "2"], "--alpha-night"),
    (["--require", "cpu"], "unknown class"),
])
def test_bad_input_exits_2_in_one_line(tmp_path: Path, extra: list[str], message: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(write(tmp_path / f"aa{i}.json", ab_run(i))) for i in range(2)]
    try:
        code = nights.main([*files, "--nights", "2", *extra])
    except SystemExit as exc:  # argparse's refusal of a value out of its range
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_plain_results_are_not_nights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = write(tmp_path / "plain.json", make_doc([make_row("muladd", "raw", absolute=[1.0, 1.1])]))
    assert nights.main([str(plain)]) == 2
    assert "not an A/B result" in capsys.readouterr().err


def test_plot_draws_studies_and_refuses_other_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(write(tmp_path / f"aa{i}.json", ab_run(i))) for i in range(2)]
    studies = []
    for k in (2, 4):
        out = tmp_path / f"k{k}.json"
        assert nights.main([*files, "--nights", "3", "--pairs", str(k), "--out", str(out)]) == 0
        studies.append(str(out))
    png = tmp_path / "fig.png"
    assert nights.main(["plot", *studies, "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert nights.main(["plot", files[0], "--out", str(png)]) == 2
    assert "not a study" in capsys.readouterr().err
