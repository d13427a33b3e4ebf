"""A scenario that makes its own table (passes=(Pass.CUSTOM,), e.g. timer_validation): it runs itself;
the harness keeps its result file's lifecycle."""

from __future__ import annotations

import signal
from dataclasses import replace
from typing import Any

from dbench.bench.harness.options import RunOptions

from dbench.bench.harness.common import Outcome, shown
from dbench.bench.harness.device import open_result
from dbench.bench.harness.interrupts import GracefulStop
from dbench.bench.io.result_types import ResultDocument


def run_custom(scenario: Any, options: RunOptions, console: Any, stop: GracefulStop) -> Outcome:
    from dbench.bench.io import env as envmod
    from dbench.bench.io.results import write_result

    stop.install(signal.SIGINT, signal.SIGTERM)
    device = options.device
    env, json_path = open_result(scenario.name, device, device, options, console, warn=False)
    doc = ResultDocument(scenario.name, "running", env=envmod.redact_paths(env))
    write_result(json_path, doc)
    try:
        rows, extra = scenario.custom_run(device)
    except BaseException as exc:
        write_result(json_path, replace(doc, status="interrupted" if isinstance(exc, KeyboardInterrupt) else "failed",
                                        error=f"{type(exc).__name__}: {exc}"))
        raise
    env.update(extra)
    done = replace(doc, status="complete", env=envmod.redact_paths(env), rows=rows)
    write_result(json_path, done)
    code = scenario.custom_report(rows, console)
    console.print(f"wrote {shown(json_path)}")
    return Outcome(code, json_path, done.to_json())
