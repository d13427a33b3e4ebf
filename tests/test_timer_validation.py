"""The timer-validation verdict, on synthetic rows (the scenario itself needs a GPU)."""

from __future__ import annotations

from typing import Any

import pytest

from dbench.scenarios.timer_validation import AGREEMENT_MIN_US, ratio_table, report


def rows_for(kernel: str, size: str, **medians: float) -> list[dict[str, Any]]:
    return [{"op": kernel, "variant": timer, "size": size, "axes": ["size"], "timer": timer, "median": value}
            for timer, value in medians.items()]


def test_verdict_compares_events_with_cupti_span() -> None:
    # 64 MiB copy as seen on the H200: events count the gaps between back-to-back kernels.
    lines = ratio_table(rows_for("copy", "64MiB", cupti=65.65, cupti_span=67.50, events=67.68))
    (line,) = lines
    assert line["events/cupti"] == pytest.approx(67.68 / 65.65)
    assert line["events/span"] == pytest.approx(67.68 / 67.50)
    assert line["cupti_span/cupti"] == pytest.approx(67.50 / 65.65)
    assert line["within_2pct"] is True


def test_verdict_fails_when_events_and_span_disagree() -> None:
    (line,) = ratio_table(rows_for("sleep", "100us", cupti=100.0, cupti_span=100.5, events=103.0))
    assert line["within_2pct"] is False


def test_no_verdict_below_threshold_or_without_span() -> None:
    short = ratio_table(rows_for("sleep", "20us", cupti=AGREEMENT_MIN_US - 1, cupti_span=AGREEMENT_MIN_US,
                                 events=3 * AGREEMENT_MIN_US))
    no_span = ratio_table(rows_for("sleep", "1ms", cupti=1000.0, events=1001.0))
    assert short[0]["within_2pct"] is None
    assert no_span[0]["within_2pct"] is None and no_span[0]["events/span"] is None


def test_report_exit_code_follows_verdict() -> None:
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=200)
    good = rows_for("sleep", "1ms", cupti=1000.0, cupti_span=1001.0, events=1002.0)
    bad = rows_for("sleep", "2ms", cupti=2000.0, cupti_span=2001.0, events=2100.0)
    assert report(good, console) == 0
    assert report(good + bad, console) == 1
