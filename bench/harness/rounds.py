"""The run object of one process: a scenario's cases timed in interleaved rounds, and the other passes
it declares, into one result document.

`Run.execute` reserves the result file, builds the cases, makes the declared passes in their fixed
order (CPU rounds, the roofs on a CPU, the GPU pass with the roofs on a CUDA device, the C++ pass)
and writes the final document whatever ends the run: the last pass, a failed write, a Ctrl-C, a bug.
The document is assembled in one place, `Run.document`, from what the passes left on the run.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from dbench.bench.harness.options import RunOptions
from dbench.bench.core.passes import Pass

from dbench.bench.harness import common
from dbench.bench.harness.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, shown
from dbench.bench.harness.cpp_pass import cpp_gpu_section, cpp_section
from dbench.bench.harness.device import open_result, pin_cpus
from dbench.bench.harness.gpu_turn import gpu_turn
from dbench.bench.harness.interrupts import GracefulStop
from dbench.bench.io.result_types import ResultDocument


class _Refused(Exception):
    """The build found nothing to run (the run ends with exit 2 and the reason in its file)."""


@dataclass
class Finished:
    """A run's end: its exit status, its final document, and where that was written."""

    code: int
    json_path: Path | None  # None: the final write failed (said on stderr; the run is not gated)
    doc: dict[str, Any] | None = None  # None: no tables to show (refused, or the final write failed)
    csv_path: Path | None = None


class Run:
    """One in-process run of `scenario` on `device` over the selection `sel` (scenarios.Selection)."""

    def __init__(self, scenario: Any, options: RunOptions, sel: Any, console: Any, stop: GracefulStop,
                 started: float) -> None:
        from dbench.bench.core.probe import probe_case
        from dbench.bench.core.runner import RunConfig

        device = options.device
        self.scenario, self.device, self.options, self.sel = scenario, device, options, sel
        self.console, self.stop = console, stop
        self.cuda = device.startswith("cuda")
        self.config = RunConfig(rounds=options.rounds, block_seconds=options.block_ms / 1e3,
                                warmup_seconds=options.warmup_ms / 1e3, seed=options.seed, order=options.order,
                                adaptive=options.adaptive, rel_precision=options.precision,
                                max_seconds=options.time_budget)
        self.phases: dict[str, float] = {}  # seconds per phase, in order (config.phase_seconds)
        self._last = started
        self.cases: list[Any] = []
        self.extra_rows: list[dict[str, Any]] = []  # GPU and C++ rows, added after the CPU rounds
        self.probe = probe_case()  # timed in every round beside the cases; not a row (bench/core/probe.py)
        self.info: dict[str, Any] = {"rounds_done": 0}
        self.measured: dict[str, Any] = {}  # the machine's roofs (kernel scenarios)
        self.env: dict[str, Any] = {}
        self.json_path = Path()

    # --- the document ----------------------------------------------------------------------------
    def phase(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = round(now - self._last, 2)
        self._last = now

    def document(self, status: str) -> ResultDocument:
        from dbench.bench.io import env as envmod
        from dbench.bench.core.identity import case_identity
        from dbench.bench.core.probe import probe_summary
        from dbench.bench.io.results import case_rows, mark_gpu_bound
        from dbench.bench.harness.roofline import attach

        rows = case_rows(self.cases) + self.extra_rows
        mark_gpu_bound(rows)
        for row in rows:  # a case to be timed that has no round (yet): say why it has no samples
            if row["status"] == "not run" and row["reason"] is None:
                row["reason"] = "no round timed yet" if status == "running" else "the run ended before its first round"
        if "roofs" in self.measured:
            works = {case_identity(c.key): c.work for c in self.cases if c.work is not None}
            attach(rows, works, self.measured["roofs"], "gpu_us" if self.cuda else "cpu_us")
        roofs = {"cache": list(self.options.cache)} if self.scenario.makes(Pass.ROOFS) else {}
        return ResultDocument(
            scenario=self.scenario.name,
            status=status,
            config={**vars(self.config), "dtype": self.options.dtype, **roofs, **self.info,
                    "phase_seconds": dict(self.phases)},
            env=envmod.redact_paths(self.env),
            speed_probe=probe_summary(self.probe.samples),
            roofs=self.measured.get("roofs"),
            rows=rows,
        )

    def write(self, status: str, error: str | None = None) -> Path:
        from dbench.bench.io.results import write_result

        return write_result(self.json_path, dataclasses.replace(self.document(status), error=error))

    # --- the run ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Pinning, the environment, the result file reserved and first written (status running)."""
        import torch

        from dbench.bench.harness.cli import UsageError

        torch.set_num_threads(1)  # CPU kernels are single-threaded; keep the pool out of the timing
        try:
            pinned = pin_cpus(self.options.pin_cores, self.options.pin_offset)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        self.stop.install(signal.SIGINT, signal.SIGTERM)
        self.env, self.json_path = open_result(self.scenario.name, self.device, self.device, self.options, self.console,
                                               {"pinned_cpu": pinned})
        self.phase("start")  # imports (torch, the suite), pinning, environment capture

    def execute(self) -> Finished:
        """Every declared pass in order; the final document written whatever ends them."""
        from dbench.bench.io.results import ResultWriteError

        self.start()
        status = "complete"
        try:
            self.write("running")
            self.build()
            for step in self.steps():
                step()
        except _Refused as exc:
            self.write("failed", error=str(exc))
            return Finished(EXIT_USAGE, self.json_path)
        except ResultWriteError as exc:  # a checkpoint failed (full disk, folder read-only or gone)
            self.stop.requested = True
            return self.write_error(exc, self.document("failed"))
        except KeyboardInterrupt:
            status = "interrupted"
        except BaseException as exc:  # a bug: keep what was measured, then show the traceback
            if not self.stop.requested:
                self.write("failed", error=f"{type(exc).__name__}: {exc}")
                self.console.print(f"[red]run failed; what it measured is in {shown(self.json_path)}[/red]")
                raise
            status = "interrupted"  # a Ctrl-C inside code that re-raised it as another error
        return self.finish(status)

    def finish(self, status: str) -> Finished:
        from dbench.bench.io.results import ResultWriteError, write_result

        if status == "interrupted":
            self.info["stop_reason"] = "interrupted"
        self.stop.requested = True  # from here on a signal cannot cut the write short
        doc = self.document(status)
        try:
            csv_path = write_result(self.json_path, doc)
        except ResultWriteError as exc:
            return self.write_error(exc, doc)
        failed = any(r["status"] == "failed" for r in doc.rows)
        code = EXIT_INTERRUPTED if status == "interrupted" else EXIT_FAILED if failed else EXIT_OK
        return Finished(code, self.json_path, doc.to_json(), csv_path)

    def write_error(self, exc: OSError, doc: ResultDocument) -> Finished:
        """A result write failed mid-run: one line naming the file and why, one last try to write what
        was measured (status failed; if that fails too, the file stays as its last complete write,
        never a partial one); exit 1, as for any write that fails once the file is reserved, even before
        the first round. Not gated (no document)."""
        from dbench.bench.io.results import ResultWriteError, write_result

        rounds = self.info["rounds_done"]
        try:
            write_result(self.json_path, dataclasses.replace(doc, status="failed", error=str(exc)))
            kept = f"what was measured is in {shown(self.json_path)} (status failed)"
        except ResultWriteError as again:
            kept = (f"the final write failed too ({again.strerror}): {shown(self.json_path)} is left as its last "
                    "complete write")
        print(f"{common.PROG}: error: {exc}; stopped after {rounds} round(s); {kept}", file=sys.stderr)
        return Finished(EXIT_FAILED, None)

    # --- the passes ------------------------------------------------------------------------------
    def build(self) -> None:
        """The cases and their pre-flight checks (the native build's loading included)."""
        from dbench.ops.libraries import NativeBuildMissing

        try:
            with self.console.status("building the cases and checking their contracts") as status:
                built = itertools.count(1)
                sel = dataclasses.replace(self.sel, on_case=lambda label: status.update(
                    f"building and checking case {next(built)}: {label}"))
                self.cases = self.scenario.build(sel)
        except NativeBuildMissing as exc:
            print(f"{common.PROG}: error: {exc}", file=sys.stderr)  # a refusal: one line on stderr, as every other
            raise _Refused(str(exc)) from None
        if not any(c.runnable or c.error for c in self.cases) and not self.options.shard_child:
            # The plan said something could run (check_selection); building found otherwise.
            why = f"nothing selected can be timed on {self.device}: " + \
                  ("; ".join(dict.fromkeys(str(c.na_reason) for c in self.cases)) or "no cases")
            print(f"{common.PROG}: error: {why}", file=sys.stderr)
            raise _Refused(why)
        self.console.print(f"[bold]{self.scenario.name}[/bold]: {len(self.cases)} cases "
                           f"({sum(c.runnable for c in self.cases)} timed) on {self.device}, "
                           f"{self.config.rounds} rounds{' max' if self.config.adaptive else ''}")
        self.phase("build")
        if self.stop.signalled:  # a Ctrl-C that the build (an extension's import, a compile) caught and dropped
            raise KeyboardInterrupt

    def steps(self) -> list[Callable[[], None]]:
        """The declared passes that apply on this device, in the order they are made. A duet pair's
        process (a GPU turn to take) makes its CPU passes first, the Python rounds and the C++
        driver's, while its partner makes the same, and its GPU passes last, in turns."""
        made = self.scenario.makes
        gpu = made(Pass.GPU) and self.cuda and self.options.gpu_timer != "off"
        cpp = made(Pass.CPP_DRIVER) and not self.options.no_cpp
        if self.options.gpu_turn is not None:
            steps = [(made(Pass.CPU_ROUNDS), self.cpu_rounds), (cpp, self.cpp_cpu_pass),
                     (self.options.cpu_done is not None, self.cpu_passes_done), (gpu, self.gpu_pass),
                     (cpp and made(Pass.GPU), self.cpp_gpu_pass)]
        else:
            steps = [(made(Pass.CPU_ROUNDS), self.cpu_rounds), (made(Pass.ROOFS) and not self.cuda, self.cpu_roofs),
                     (gpu, self.gpu_pass), (cpp, self.cpp_pass)]
        return [step for wanted, step in steps if wanted]

    def cpu_rounds(self) -> None:
        from dbench.bench.harness.progress import RichProgress
        from dbench.bench.core.runner import Throttled, run

        # After a round, the result file with every finished round, at most every few seconds
        # (summarising all rows is not free); the end of the run always writes it.
        write_running = Throttled(lambda: self.write("running"), common.CHECKPOINT_SECONDS)

        def on_round(n: int) -> None:
            self.info.update(rounds_done=n)
            write_running()

        outcome = run(self.cases + [self.probe], self.config, on_round=on_round, reporter=RichProgress())
        self.info.update(stop_reason=outcome.stop_reason, seconds=round(outcome.seconds, 2),
                         timer_overhead_ns=outcome.timer_overhead_ns, gpu_rounds_done=0)
        self.phase("cpu_rounds")
        if outcome.stop_reason == "interrupted":
            raise KeyboardInterrupt

    def cpu_passes_done(self) -> None:
        """Say so to the parent (--overlap-pairs: it may start the next pair on other cores now), by
        making the marker file it named; made new, never through a link (the folder is the run's own)."""
        assert self.options.cpu_done is not None
        os.close(os.open(self.options.cpu_done, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))

    def cpu_roofs(self) -> None:
        from dbench.bench.harness.roofline import measure_roofs

        self.measured["roofs"] = measure_roofs(self.device, self.case_dtypes())

    def gpu_pass(self) -> None:
        """The cases on the GPU (CUPTI or CUDA events), and the roofs with the same timer."""
        from dbench.bench.core.gputimer import gpu_rows, make_gpu_timer
        from dbench.bench.harness.progress import RichProgress
        from dbench.bench.harness.roofline import measure_roofs
        from dbench.bench.core.runner import run_gpu

        self.write("running")
        timer = make_gpu_timer(self.device, prefer=self.options.gpu_timer)
        if timer is not None:
            try:
                with gpu_turn(self.options.gpu_turn, self.info):
                    done, interrupted = run_gpu(self.cases, self.config, timer, self.options.gpu_rounds,
                                                reporter=RichProgress(eta=False))
                    self.info["gpu_rounds_done"] = done
                    self.extra_rows.extend(gpu_rows(self.cases, timer))
                    if self.scenario.makes(Pass.ROOFS) and not interrupted:
                        self.console.print("measuring the roofs (memcpy, copy kernel, cuBLAS)")
                        self.measured["roofs"] = measure_roofs(self.device, self.case_dtypes(), timer)
                self.env.update(timer.meta())
            finally:
                timer.close()
            if interrupted:
                raise KeyboardInterrupt
        self.phase("gpu_pass")

    def cpp_pass(self, gpu: bool | None = None) -> None:
        """The C++ driver times what the scenario asks of it (Scenario.cpp_request: its ops, the
        driver's flags for them), with its GPU pass where the scenario makes one (unless `gpu` is False)."""
        request = self.scenario.cpp_request(self.sel)  # there is one: the scenario makes this pass
        if request.ops:
            self.extra_rows.extend(cpp_section(self.device, request, self.options, self.env, self.console,
                                               self.json_path, gpu=self.scenario.makes(Pass.GPU) if gpu is None
                                               else gpu, waited=self.info))
            self.phase("cpp_driver")

    def cpp_cpu_pass(self) -> None:
        self.cpp_pass(gpu=False)

    def cpp_gpu_pass(self) -> None:
        """The C++ driver's GPU pass alone, after its CPU run (cpp_cpu_pass) and the Python GPU pass."""
        request = self.scenario.cpp_request(self.sel)
        if request.ops:
            self.extra_rows.extend(cpp_gpu_section(self.device, request, self.options, self.env, self.console,
                                                   self.json_path, waited=self.info))
            self.phase("cpp_driver_gpu")

    def case_dtypes(self) -> tuple[Any, ...]:
        """The dtypes the timed cases use (their compute roofs are measured)."""
        import torch

        return tuple(getattr(torch, d) for d in dict.fromkeys(c.key["dtype"] for c in self.cases if c.runnable))
