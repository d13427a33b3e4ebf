"""The regression gate: one verdict per row of a new run against a baseline, judged across processes.

    python -m dbench.analysis.gate NEW BASELINE... [--format md|txt|json] [--calibration FILE] [--delta 0.05]
                            [--same-delta 0.05]
                            [--alpha-night 0.01 | --alpha A] [--target T] [--require CLASS[,CLASS]]
                            [--metric auto|absolute|ratio] [--allow-different-env]

NEW is a result file or a folder of them (a folder is one run; each file holds processes of it).
BASELINE is one or more files or folders whose processes are pooled. When NEW is an A/B file
(`run.py --ab`), it is judged on its own pairs (side B vs side A) and takes no baseline.

Per row the effect is new / baseline as a ratio of geometric means of the per-process medians,
with a CI from the spread across processes: Welch's t on the log values for independent runs, a
paired t on the per-pair log ratios for A/B. For A/B the rows of a class judged on one metric
borrow strength from each other: an empirical-Bayes moderated t (Smyth 2004, limma's eBayes)
shrinks each row's variance toward the class's and adds the prior's degrees of freedom, when the
rows have at least MIN_POOL_PAIRS pairs and there are MIN_POOL_ROWS of them (else each row's own t,
and the header says why). The CI is two-sided at 1 - 2α (each bound a one-sided
test at level α: --alpha, else the calibration's per-row α, else the night's --alpha-night
(0.01) shared by the rows judged, Bonferroni). Against the band
[1/(1+δ), 1+δ]:

* ``regression``: the whole CI lies above 1+δ (the slowdown exceeds δ at level α);
* ``improvement``: the whole CI lies below 1/(1+δ);
* ``same``: the whole CI lies inside the equivalence band (two one-sided tests): ±DEFAULT_SAME_DELTA
  (5 %, --same-delta), or ±δ where that is wider, so an A/B night's narrower band for calls does not
  turn rows that reproduce within 5 % into inconclusive ones;
* ``inconclusive``: anything else; the note says how many processes (pairs) per side would
  decide it if the estimate and spread stayed as observed;
* ``failed``: FAILED in the new run; ``missing``: timed in the baseline, not in the new run;
  ``new``: only in the new run.

A CI that excludes 1 but reaches into the band is not a regression: the slowdown is real but
may be smaller than δ, and a gate that fires on such rows fires on every harmless shift of a
long, precise run. CPU rows are judged on their ratio to the in-run floor (paired per round,
so a machine that is slow for the whole run cancels), in absolute µs with --metric absolute or
where the calibration says the row is steadier that way, and in absolute µs where a row has no
floor; GPU rows on their gpu_us medians. δ comes per row from --calibration (analysis.calibrate),
else --delta, else DEFAULT_DELTA: 0.05 between runs (the band within which the H200's repeated
runs reproduced most rows); in an A/B run 0.03 for CPU rows and 0.05 for GPU rows.

Rows fall into classes (CLASSES: GPU time, CPU time of the Python driver, of the C++ driver). A
class gates the night when its median row would flag a --target slowdown (0.15 for the C++
driver's rows, 0.10 for the others) with 95 % power at tonight's design, or when --require names
it; else it is advisory: judged and shown, its regressions do not fail the night. The outcome, in
the headline with the rows decided per class and the count of each verdict, and the exit status:

* ``FAIL`` (exit 1): a ``failed`` row, or a ``regression`` in a gating class; it wins over NO DECISION.
* ``NO DECISION`` (exit 3): no row was compared, no row was decided (every row inconclusive,
  missing, new or n/a), every class is advisory, no row of a gating class was decided, a
  --require'd class decided nothing, a row timed in the baseline is missing tonight (n/a,
  untimed or gone), or the new run did not finish (status running, interrupted or failed). Never
  a pass: a gate that judged nothing, or not what the baseline timed, has not passed.
* ``PASS`` (exit 0): none of the above; inconclusive and new rows are listed, and do not fail.
* exit 2, bad input, one line on stderr: an unreadable, oversized, empty or non-result file or one
  with a non-finite or non-positive time (named, with the row), a calibration file with a value
  out of range, --delta or --target outside (0, 1), --alpha or --alpha-night outside (0, 0.5), an
  unknown class to --require, or runs of different
  scenario, device, GPU, driver, torch build or dtype (unless --allow-different-env).

A folder's files are its runs, except the file the gate's own output is redirected to
(`gate DIR > DIR/verdicts.md` reads DIR's results, not the empty verdicts.md).
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

# Light imports only (numpy and scipy wait inside gate_stats, tabulate inside render): bad input
# is refused before any of them is loaded.
from dbench.analysis import gate_stats as gs
from dbench.analysis.compare import environment as compare_environment
from dbench.analysis.load import ResultFileError, check_result, read_json, read_result, result_files
from dbench.bench.harness.cli import Parser, name_list, path_value  # usage errors in one line, like run.py's
from dbench.bench.core.identity import case_label, identity_text, row_identity

EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_NO_DECISION = 0, 1, 2, 3
PASS, FAIL, NO_DECISION = "PASS", "FAIL", "NO DECISION"
OUTCOME_EXIT = {PASS: EXIT_PASS, FAIL: EXIT_FAIL, NO_DECISION: EXIT_NO_DECISION}
FAILED, MISSING, NEW = "failed", "missing", "new"
VERDICTS = (FAILED, gs.REGRESSION, MISSING, gs.INCONCLUSIVE, gs.IMPROVEMENT, NEW, gs.SAME)  # display order
DECIDED = (gs.REGRESSION, gs.IMPROVEMENT, gs.SAME)
JUDGED_METRICS = ("cpu_us", "gpu_us")
# The band ±δ by design and metric. Two runs at different hours (independent) move CPU ratios by a few
# percent as the host changes: 5 % is the band within which the H200's repeated runs reproduced most
# rows. An A/B night's sides share the hour, and on the twelve real A/A nights of the paired designs
# (eight on H100 hosts, four on the H200, 498 rows each) no CPU row's CI lay above 0.994, so its CPU
# rows are held to 3 %: the slowdown a class detects is δ plus its noise's reach, 2 points less
# (results/h100/gate/duet-nights/README.md, "The band of a paired night"). GPU rows keep 5 %.
DEFAULT_DELTA = {"independent": {"cpu_us": 0.05, "gpu_us": 0.05}, "paired": {"cpu_us": 0.03, "gpu_us": 0.05}}
# `same` claims equivalence, which a reader carries from one night to the next: it keeps the band of
# independent runs (or a row's δ where wider) whatever the design. A paired night's narrower band is
# for calling slowdowns: held to ±3 %, 40 of the 198 Python rows of a quiet A/A night were `same`,
# 192 at ±5 % (aa18cache in results/h100/gate/duet-nights). --same-delta sets it.
DEFAULT_SAME_DELTA = 0.05
# The false alarms a night may raise, shared by the rows judged (Bonferroni: each CI bound at
# α_night / rows). Shared, not per row: 246 rows at 0.05 each raised 5 false regressions on
# identical code on the H200 (results/h200/README.md). analysis.calibrate uses the same default.
DEFAULT_ALPHA_NIGHT = 0.01
# A class of rows gates the night when its median row flags its target slowdown with POWER at
# tonight's design; else it is advisory (its regressions are shown, the outcome does not follow
# them). The C++ driver's calls are a few µs, so a fixed host-side cost is a larger share of them:
# its rows are asked to catch +15 %, the Python and GPU rows +10 %. --target sets one for all.
DEFAULT_TARGETS = {"gpu": 0.10, "cpu-python": 0.10, "cpu-cpp": 0.15}
POWER = 0.95
# The moderated t pools a class's rows of one metric when at least MIN_POOL_ROWS of them have
# MIN_POOL_PAIRS pairs (2 degrees of freedom each): fewer rows, or rows of 1 df, whose log s² has a
# heavy left tail, make the prior's moment estimates too loose to lean on.
MIN_POOL_ROWS, MIN_POOL_PAIRS = 20, 3
MODERATED, PER_ROW, WELCH = "moderated t", "per-row t", "per-row Welch t"
# Row classes: the key (for --require) and the name shown. One definition, used by calibrate too.
CLASSES = {"gpu": "GPU time", "cpu-python": "CPU time, Python", "cpu-cpp": "CPU time, C++ driver"}
# --delta lies in (0, 1): a band of ±100 % or more calls every slowdown short of 2x `same`.
MAX_DELTA = 1.0
# A calibrated δ may exceed 1 for a row the A/A runs found very noisy (it then says how little that
# row can tell); beyond an 11-fold band it is no band at all (analysis.calibrate's MAX_DETECTABLE).
MAX_CALIBRATED_DELTA = 10.0
RATIO, ABSOLUTE = "ratio", "absolute"
SUFFIX = {RATIO: "ratio", ABSOLUTE: "abs"}  # calibration fields: sigma_log_ratio, sigma_log_abs, ...
CALIBRATION_KIND = "dbench-calibration"


class GateInputError(ValueError):
    """Input the gate cannot judge: the message is one line naming the file or the difference."""


# ---------------------------------------------------------------------------------------------
# Loading


def load_run(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(source, document) for a result file, or for every result file (*.json) of a folder."""
    return [(str(f), read_result(f)) for f in result_files(path)]


def check_delta(delta: float | None, name: str = "--delta") -> None:
    if delta is not None and not (isinstance(delta, (int, float)) and 0 < delta < MAX_DELTA):
        raise GateInputError(f"{name} must lie in (0, {MAX_DELTA:g}) (0.05 = ±5 %), not {delta}")


def check_alpha(alpha: float | None, name: str = "--alpha") -> None:
    if alpha is not None and not (isinstance(alpha, (int, float)) and 0 < alpha < 0.5):
        raise GateInputError(f"{name} must lie in (0, 0.5) (each CI bound's one-sided level), not {alpha}")


def check_classes(require: Iterable[str], name: str = "require") -> None:
    unknown = [c for c in require if c not in CLASSES]
    if unknown:
        raise GateInputError(f"{name}: unknown class {unknown[0]!r} (one of {', '.join(CLASSES)})")


def _calibration_value_problem(name: str, value: Any) -> str | None:
    """Why one field of a calibration row is unusable (None: it is fine)."""
    if name in ("label", "metric"):
        return None if value is None or isinstance(value, str) else "not text"
    if name == "stable_absolute":
        return None if value is None or isinstance(value, bool) else "not true or false"
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "not a number"
    if not math.isfinite(value):
        return "not finite"
    if name == "delta" or name.startswith("delta_"):
        return None if 0 < value <= MAX_CALIBRATED_DELTA else f"outside (0, {MAX_CALIBRATED_DELTA:g}]"
    if name == "n" or name.startswith(("df_", "run_df_")):
        return None if value > 0 else "not positive"
    return None if value >= 0 else "negative"


def check_calibration(doc: Any, source: str | Path) -> dict[str, Any]:
    """A calibration document whose every value the gate may use is finite and in range."""
    if not isinstance(doc, dict) or doc.get("kind") != CALIBRATION_KIND or not isinstance(doc.get("rows"), dict):
        raise ResultFileError(f"{source}: not a calibration file (written by python -m dbench.analysis.calibrate)")
    params = doc.get("params") or {}
    if not isinstance(params, dict) or not isinstance(doc.get("env") or {}, dict):
        raise ResultFileError(f"{source}: not a calibration file (params or env is not an object)")
    if doc.get("design") not in (None, "independent", "paired"):
        raise ResultFileError(f"{source}: design is {doc.get('design')!r}, not independent or paired")
    try:
        check_alpha(params.get("alpha_row"), "params.alpha_row")
    except GateInputError as exc:
        raise ResultFileError(f"{source}: {exc}") from None
    for row_id, entry in doc["rows"].items():
        if not isinstance(entry, dict):
            raise ResultFileError(f"{source}: row {row_id}: not an object")
        for name, value in entry.items():
            problem = _calibration_value_problem(str(name), value)
            if problem:
                shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
                raise ResultFileError(f"{source}: row {entry.get('label') or row_id}: {name} is {shown}, {problem}")
    return doc


def load_calibration(path: Path) -> dict[str, Any]:
    return check_calibration(read_json(path, "calibration"), path)


def environment(doc: Mapping[str, Any]) -> dict[str, Any]:
    """What must match for two runs to be judged against each other: analysis.compare's list,
    plus the NVIDIA driver and torch's commit (one version string covers many nightly builds)."""
    env = doc.get("env") or {}
    return {**compare_environment(dict(doc)), "nvidia_driver": env.get("nvidia_driver"),
            "torch_git": env.get("torch_git")}


def env_differences(reference: Mapping[str, Any], others: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
    ref = environment(reference)
    out = []
    for source, doc in others:
        env = environment(doc)
        out += [f"{k}: {ref[k]!r} vs {env[k]!r} in {source}" for k in ref if env[k] != ref[k]]
    return out


def is_ab(doc: Mapping[str, Any]) -> bool:
    return isinstance(doc.get("ab"), Mapping)


# ---------------------------------------------------------------------------------------------
# Rows of a run: per-process values, pooled over its files


def _status(row: Mapping[str, Any]) -> str:
    return str(row.get("status") or "ok").lower()


def process_values(row: Mapping[str, Any], quantity: str, side: str = "") -> list[float | None]:
    """One value per process: `process_medians` (`process_ratio_medians`), else the row's single
    `median` (`ratio_median`) as one process. `side` "a_" reads side A of an A/B row."""
    many = row.get(f"{side}process_{'ratio_' if quantity == RATIO else ''}medians")
    if isinstance(many, list):
        return list(many)
    if side:
        return []
    one = row.get("ratio_median" if quantity == RATIO else "median")
    return [one] if one is not None else []


@dataclass
class RowRun:
    """One row of one run (or of pooled baseline runs)."""

    row: dict[str, Any]  # the first file's row: names the row
    status: str
    reason: str | None
    values: dict[str, list[float | None]] = field(default_factory=lambda: {RATIO: [], ABSOLUTE: []})
    # A/B: (B, A) per pair, joined within each file, so pooled files cannot shift the pairing
    pairs: dict[str, list[tuple[float | None, float | None]]] = field(default_factory=lambda: {RATIO: [], ABSOLUTE: []})
    a_timed: bool = False  # A/B: side A has a value in some file (whatever side B did)

    def usable(self, quantity: str) -> bool:
        return gs.log_values(self.values[quantity]).size > 0

    @property
    def timed(self) -> bool:
        """ok and with a value: a row marked ok without one was not timed, and counts as absent."""
        return self.status == "ok" and (self.usable(RATIO) or self.usable(ABSOLUTE))

    @property
    def state(self) -> str:
        """What a missing or new row's note says of this side."""
        return "untimed" if self.status == "ok" else self.status


def collect(docs: Sequence[Mapping[str, Any]]) -> dict[tuple[Any, ...], RowRun]:
    """The judged rows (cpu_us, gpu_us) of a set of documents, keyed by row identity, processes pooled.
    A row FAILED in any file failed; otherwise it is ok when any file timed it."""
    out: dict[tuple[Any, ...], RowRun] = {}
    for doc in docs:
        for row in doc["rows"]:
            if row.get("metric") not in JUDGED_METRICS:
                continue
            key, status, reason = row_identity(row), _status(row), row.get("reason")
            if str(row.get("a_status") or "").lower() == FAILED:  # an A/B row whose side A failed
                status, reason = FAILED, f"side A: {reason or 'failed'}"
            run = out.setdefault(key, RowRun(dict(row), status, reason))
            if status == FAILED and run.status != FAILED:
                run.status, run.reason = FAILED, reason
            elif status == "ok" and run.status != FAILED:
                run.status = "ok"
            if str(row.get("a_status") or "ok").lower() == "ok":
                run.a_timed |= any(gs.log_values(process_values(row, q, "a_")).size for q in (RATIO, ABSOLUTE))
            if status != "ok":
                continue
            for q in (RATIO, ABSOLUTE):
                b, a = process_values(row, q), process_values(row, q, "a_")
                run.values[q] += b
                if len(a) == len(b):  # the contract: element i of A and B is pair i
                    run.pairs[q] += list(zip(b, a))
    return out


def row_label(row: Mapping[str, Any]) -> str:
    driver = row.get("driver") or "python"
    return case_label(row) + ("" if driver == "python" else f" ({driver})")


def row_class(metric: str, label: str) -> str:
    """A row's class (a key of CLASSES): GPU time, or CPU time from the Python or the C++ driver."""
    if metric.startswith("gpu_us"):
        return "gpu"
    return "cpu-cpp" if label.endswith("(cpp)") else "cpu-python"


# ---------------------------------------------------------------------------------------------
# Verdicts


@dataclass(frozen=True)
class RowVerdict:
    label: str
    row_id: str  # bench.core.identity row identity as text (the calibration file's key)
    metric: str  # what was judged: cpu_us/floor (ratio to the in-run floor), cpu_us, gpu_us
    verdict: str
    baseline: float | None = None  # geometric mean over processes (side A for A/B)
    new: float | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    delta: float | None = None
    same_delta: float | None = None  # the equivalence band of `same` (the row's δ or wider)
    n_baseline: int = 0
    n_new: int = 0
    note: str = ""
    detectable: float | None = None  # the slowdown this row's CI flags with POWER (judged rows only)
    df: float | None = None  # the t's degrees of freedom (a moderated t's d0 + d_g)

    @property
    def row_class(self) -> str:
        return row_class(self.metric, self.label)


@dataclass(frozen=True)
class PoolTest:
    """The test the rows of one class judged on one metric got tonight."""

    metric: str  # cpu_us/floor, cpu_us or gpu_us
    rows: int  # judged with a CI
    test: str  # MODERATED, PER_ROW or WELCH
    pooled: int = 0  # rows the prior was fitted to (moderated)
    d0: float | None = None  # the prior's degrees of freedom (inf: one variance for all; JSON null)
    s0: float | None = None  # the prior's σ of one pair's log ratio
    d_g: float | None = None  # the rows' own degrees of freedom (median: pairs − 1)
    why: str = ""  # why a paired class fell back to the per-row t

    def text(self) -> str:
        if self.test == MODERATED:
            assert self.d0 is not None and self.s0 is not None
            prior = (f"d0 ∞: the rows vary no more than {self.d_g:g} df make them, one variance σ {self.s0:.1%}"
                     if math.isinf(self.d0) else f"prior d0 {self.d0:.1f} df + d_g {self.d_g:g}, σ0 {self.s0:.1%}")
            alone = self.rows - self.pooled
            return (f"{MODERATED} on {self.pooled} {self.metric} rows ({prior})"
                    + (f", {PER_ROW} on {alone} with fewer than {MIN_POOL_PAIRS} pairs" if alone else ""))
        parts = [p for p in (self.why, None if self.d_g is None else f"{self.d_g:.3g} df") if p]
        return f"{self.test} on {self.rows} {self.metric} rows" + (f" ({', '.join(parts)})" if parts else "")


@dataclass(frozen=True)
class ClassState:
    """What one class of rows decided tonight, and whether it gates the night."""

    key: str  # of CLASSES
    judged: int  # rows compared (timed on both sides)
    decided: int  # regression, improvement or same
    regressions: int
    detectable: float | None  # median over the judged rows of the slowdown flagged with POWER
    gating: bool
    why: str  # why it gates or is advisory
    tests: tuple[PoolTest, ...] = ()  # per metric judged: the test used, its df

    def line(self) -> str:
        """The header's line: gating or advisory, what it detects, and the tests that say so."""
        tests = "; ".join(t.text() for t in self.tests)
        return f"{self.name}: {'gating' if self.gating else 'advisory'} ({self.why})" + (f"; {tests}" if tests else "")

    @property
    def name(self) -> str:
        return CLASSES[self.key]

    def text(self) -> str:
        shown = f"{self.name} {self.decided}/{self.judged}"
        if not self.gating:
            shown += " advisory" + (f" with {self.regressions} regression(s) not gating" if self.regressions else "")
        return shown


def class_states(rows: Sequence[RowVerdict], target: float | None, required: Iterable[str],
                 tests: Mapping[str, Sequence[PoolTest]] | None = None) -> dict[str, ClassState]:
    """Per class with judged rows: gating when required, or when its median row flags a `target`
    slowdown (None: the class's DEFAULT_TARGETS) with POWER at tonight's design (its own spread,
    pairs and α); else advisory."""
    import numpy as np

    out = {}
    required = set(required)
    for key in CLASSES:
        judged = [r for r in rows if r.row_class == key and r.verdict in (*DECIDED, gs.INCONCLUSIVE)]
        if not judged and key not in required:
            continue
        goal = DEFAULT_TARGETS[key] if target is None else target
        found = [math.inf if r.detectable is None else r.detectable for r in judged]
        detectable = float(np.median(found)) if found else None
        reach = "no row judged" if detectable is None else (
            "detects no slowdown" if math.isinf(detectable) else f"detects +{detectable:.1%}")
        gating = key in required or (detectable is not None and detectable <= goal)
        why = ("required" + (f"; {reach}" if detectable is not None else "") if key in required
               else f"{reach} with {POWER:.0%} power" + ("" if gating else f", more than the +{goal:.0%} target"))
        out[key] = ClassState(key, len(judged), sum(r.verdict in DECIDED for r in judged),
                              sum(r.verdict == gs.REGRESSION for r in judged), detectable, gating, why,
                              tuple((tests or {}).get(key, ())))
    return out


@dataclass(frozen=True)
class GateResult:
    rows: list[RowVerdict]
    design: str  # "independent" or "paired"
    alpha: float
    new_sources: list[str]
    baseline_sources: list[str]
    header: list[str]  # lines that say what was compared (clocks, probes, calibration)
    warnings: list[str]
    classes: dict[str, ClassState] = field(default_factory=dict)  # judged classes (empty: all gate)
    unfinished: list[str] = field(default_factory=list)  # new-run files whose status is not complete

    def gating(self, row: RowVerdict) -> bool:
        state = self.classes.get(row.row_class)
        return state is None or state.gating

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(r.verdict for r in self.rows)
        return {v: c[v] for v in VERDICTS if c[v]}

    @property
    def decided(self) -> int:
        """Rows with a verdict on the change: regression, improvement or same."""
        return sum(r.verdict in DECIDED for r in self.rows)

    @property
    def outcome(self) -> str:
        """FAIL (a FAILED row, or a regression in a gating class) wins; NO DECISION when no gating
        row was decided, a required class decided nothing or a row the baseline timed is missing;
        else PASS."""
        if any(r.verdict == FAILED or (r.verdict == gs.REGRESSION and self.gating(r)) for r in self.rows):
            return FAIL
        return NO_DECISION if self.undecided_reasons() else PASS

    def undecided_reasons(self) -> list[str]:
        """Why the gate cannot pass (empty when it can)."""
        out = []
        gating = [c for c in self.classes.values() if c.gating]
        if not self.rows:
            out.append("no row to compare: neither run timed a cpu_us or gpu_us row the other could be judged against")
        elif not self.decided:
            out.append("no row was decided (every row inconclusive, missing or new)")
        elif self.classes and not gating:
            out.append("every class is advisory at this design (" + "; ".join(
                f"{c.name}: {c.why}" for c in self.classes.values()) + "): run more pairs, or --require CLASS")
        elif self.classes and not any(c.decided for c in gating):
            out.append("no row of a gating class was decided")
        out += [f"required class {c.name}: none of its {c.judged} rows was decided"
                for c in gating if c.why.startswith("required") and not c.decided]
        missing = self.counts.get(MISSING, 0)
        if missing:
            out.append(f"{missing} row(s) timed in the baseline are missing in the new run")
        # A run that did not finish (running, interrupted, failed) has not timed what it was to: never a pass.
        out += [f"the new run did not finish: {u}" for u in self.unfinished]
        return out

    @property
    def exit_code(self) -> int:
        return OUTCOME_EXIT[self.outcome]

    @property
    def passed(self) -> bool:
        return self.outcome == PASS

    def summary(self) -> str:
        counts = "".join(f", {n} {v}" for v, n in self.counts.items())
        classes = " (" + "; ".join(c.text() for c in self.classes.values()) + ")" if self.classes else ""
        return f"{self.outcome}: {len(self.rows)} rows — {self.decided} decided{classes}{counts}"


def level_text(alpha: float) -> str:
    """The two-sided level 1 - 2α, with the digits it needs: 90%, 99.98% (never a rounded 100%)."""
    level = 100 * (1 - 2 * alpha)
    if abs(level - round(level)) < 1e-9:
        return f"{level:.0f}%"
    return f"{level:.{max(1, 1 - math.floor(math.log10(100 - level)))}f}%"


def geomean(values: Sequence[float | None]) -> float | None:
    x = gs.log_values(values)
    return float(math.exp(x.mean())) if x.size else None


def choose_quantity(metric: str, mode: str, cal: Mapping[str, Any] | None, has_ratio: bool) -> str:
    """CPU rows: the ratio to the in-run floor unless asked for absolute µs or calibrated as steadier
    in µs; a row without a floor ratio (the floor itself) in µs. GPU rows: gpu_us."""
    if metric != "cpu_us" or not has_ratio or mode == ABSOLUTE:
        return ABSOLUTE
    if mode == "auto" and cal is not None and cal.get("stable_absolute"):
        return ABSOLUTE
    return RATIO


def metric_name(metric: str, quantity: str) -> str:
    return f"{metric}/floor" if quantity == RATIO else metric


def _cal_number(cal: Mapping[str, Any] | None, name: str, quantity: str) -> float | None:
    """A calibration number of this row for one quantity (None when absent or not finite)."""
    value = None if cal is None else cal.get(f"{name}_{SUFFIX[quantity]}")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def row_delta(metric: str, quantity: str, cal: Mapping[str, Any] | None, delta: float | None, design: str) -> float:
    """The calibrated δ of this row and quantity, else --delta, else the default of its design and metric."""
    return _cal_number(cal, "delta", quantity) or delta or DEFAULT_DELTA[design][metric]


def row_same_delta(delta: float, same_delta: float | None) -> float:
    """The band a row's CI must lie inside to be `same`: --same-delta (else DEFAULT_SAME_DELTA), or the
    row's δ where that is wider (a row is never `same` outside the band it is called a regression beyond)."""
    return gs.same_band(delta, DEFAULT_SAME_DELTA if same_delta is None else same_delta)


def effect_of(new: RowRun, base: RowRun | None, quantity: str, cal: Mapping[str, Any] | None) -> gs.Effect | None:
    if base is None:  # A/B: side A of the same rows
        return gs.paired_effect([b for b, _ in new.pairs[quantity]], [a for _, a in new.pairs[quantity]])
    q = quantity
    run_sigma = _cal_number(cal, "sigma_run_log", q) or 0.0
    return gs.independent_effect(new.values[q], base.values[q], sigma=_cal_number(cal, "sigma_log", q),
                                 sigma_df=_cal_number(cal, "df", q) or math.inf, run_var=run_sigma ** 2,
                                 run_df=_cal_number(cal, "run_df", q) or math.inf)


def needed_note(effect: gs.Effect, delta: float, alpha: float, same_delta: float | None = None) -> str:
    n = gs.processes_needed(effect, delta, alpha, same_delta)
    unit = "pairs" if effect.paired else "processes per side"
    if n is None:
        return f"more {unit} would not decide it (estimate at the band edge, or run-to-run shifts)"
    return f"≈{n} {unit} would decide it ({max(0, n - math.floor(effect.n))} more)"


def one_side(run: RowRun, mode: str, cal: Mapping[str, Any] | None) -> tuple[str, float | None]:
    """What a row present on one side only would be judged on, and its value there."""
    q = choose_quantity(run.row["metric"], mode, cal, run.usable(RATIO))
    return metric_name(run.row["metric"], q), geomean(run.values[q])


def judged_quantity(new: RowRun, base: RowRun | None, metric_mode: str, cal: Mapping[str, Any] | None) -> str:
    """What a row timed on both sides is judged on (choose_quantity; A/B when `base` is None)."""
    has_ratio = new.usable(RATIO) and (base.usable(RATIO) if base is not None else
                                       gs.log_values([a for _, a in new.pairs[RATIO]]).size > 0)
    return choose_quantity(new.row["metric"], metric_mode, cal, has_ratio)


PoolKey = tuple[str, str]  # (class, metric judged): the rows one prior is fitted to


def fit_pools(new_rows: Mapping[tuple[Any, ...], RowRun], keys: Iterable[tuple[Any, ...]], metric_mode: str,
              cal_rows: Mapping[str, Any]) -> tuple[dict[PoolKey, gs.Prior], dict[PoolKey, PoolTest]]:
    """A/B: per class and metric judged (a ratio to the floor and µs vary differently), the moderated
    t's prior fitted to the per-pair variances of its rows with MIN_POOL_PAIRS pairs or more, when
    there are MIN_POOL_ROWS of them; else the per-row t, and why."""
    import numpy as np

    effects: dict[PoolKey, list[gs.Effect]] = {}
    for key in keys:
        new, cal = new_rows[key], cal_rows.get(identity_text(key))
        q = judged_quantity(new, None, metric_mode, cal)
        effect = effect_of(new, None, q, cal)
        if effect is not None:
            metric = metric_name(new.row["metric"], q)
            effects.setdefault((row_class(metric, row_label(new.row)), metric), []).append(effect)
    priors, tests = {}, {}
    for pool, found in sorted(effects.items()):
        usable = [e for e in found if e.n >= MIN_POOL_PAIRS]
        d_g = float(np.median([e.df for e in usable or found]))
        if len(usable) >= MIN_POOL_ROWS:
            prior = priors[pool] = gs.fit_prior([e.per_process_var for e in usable], [e.df for e in usable])
            tests[pool] = PoolTest(pool[1], len(found), MODERATED, len(usable), prior.d0, math.sqrt(prior.s0_sq), d_g)
        else:
            why = (f"fewer than {MIN_POOL_PAIRS} pairs, too few to pool" if not usable else
                   f"fewer than {MIN_POOL_ROWS} rows to pool")
            tests[pool] = PoolTest(pool[1], len(found), PER_ROW, d_g=d_g, why=why)
    return priors, tests


def own_tests(rows: Sequence[RowVerdict], test: str, why: str = "") -> dict[PoolKey, PoolTest]:
    """Rows judged on their own t (WELCH for independent runs: pooling is for A/B pairs), per class
    and metric, with their median df."""
    import numpy as np

    groups: dict[PoolKey, list[float]] = {}
    for r in rows:
        if r.df is not None:
            groups.setdefault((r.row_class, r.metric), []).append(r.df)
    return {k: PoolTest(k[1], len(v), test, d_g=float(np.median(v)), why=why) for k, v in sorted(groups.items())}


def judge_row(label: str, row_id: str, new: RowRun, base: RowRun | None, *, metric_mode: str,
              cal: Mapping[str, Any] | None, delta: float | None, alpha: float,
              priors: Mapping[PoolKey, gs.Prior] | None = None, same_delta: float | None = None) -> RowVerdict:
    """One row's verdict; an A/B row of MIN_POOL_PAIRS pairs or more in a pool of `priors` on the
    moderated t."""
    metric = new.row["metric"]
    other = base
    q = judged_quantity(new, other, metric_mode, cal)
    d = row_delta(metric, q, cal, delta, "paired" if other is None else "independent")
    d_same = row_same_delta(d, same_delta)
    base_values = other.values[q] if other is not None else [a for _, a in new.pairs[q]]
    common: dict[str, Any] = dict(label=label, row_id=row_id, metric=metric_name(metric, q), delta=d, same_delta=d_same,
                  baseline=geomean(base_values), new=geomean(new.values[q]),
                  n_baseline=int(gs.log_values(base_values).size), n_new=int(gs.log_values(new.values[q]).size))
    effect = effect_of(new, other, q, cal)
    if effect is None:
        why = ("no values on one side" if not common["n_new"] or not common["n_baseline"] else
               "one process per side: run more (run.py --processes N) or pass --calibration")
        if other is None:
            why = "fewer than 2 complete A/B pairs"
        return RowVerdict(verdict=gs.INCONCLUSIVE, note=why, **common)
    prior = (priors or {}).get((row_class(common["metric"], label), common["metric"]))
    if prior is not None and effect.paired and effect.n >= MIN_POOL_PAIRS:
        effect = gs.moderate(effect, prior)
    low, high = effect.ci(alpha)
    verdict = gs.decide(low, high, d, d_same)
    note = needed_note(effect, d, alpha, d_same) if verdict == gs.INCONCLUSIVE else ""
    return RowVerdict(verdict=verdict, ratio=effect.ratio, ci_low=low, ci_high=high, note=note,
                      detectable=gs.detectable(d, effect.se, effect.df, alpha, POWER), df=effect.df, **common)


def _clocks(docs: Sequence[Mapping[str, Any]]) -> str:
    """The SM clocks a run recorded: the run's, and each process's (env.processes) where listed."""
    found = []
    for doc in docs:
        env = doc.get("env") or {}
        listed = env.get("processes")
        processes = listed if isinstance(listed, list) else []
        found += [env.get("sm_clock_mhz")] + [p.get("sm_clock_mhz") for p in processes if isinstance(p, Mapping)]
    clocks = sorted({str(c) for c in found if c is not None})
    return "/".join(clocks) + " MHz" if clocks else "not recorded"


def _probe(docs: Sequence[Mapping[str, Any]]) -> float | None:
    medians = [(d.get("speed_probe") or {}).get("median") for d in docs]
    return geomean([m for m in medians if isinstance(m, (int, float)) and not isinstance(m, bool)])


def header_lines(new_docs: Sequence[Mapping[str, Any]], base_docs: Sequence[Mapping[str, Any]],
                 rows: Sequence[RowVerdict], design: str, alpha: float, alpha_source: str,
                 delta_source: str) -> list[str]:
    lines = []
    if design == "paired":
        ab = new_docs[0]["ab"]
        lines.append(f"A/B run: B = {ab.get('b')!r} vs A = {ab.get('a')!r}, {ab.get('pairs')} pairs "
                     f"(order {ab.get('order')}); paired t on per-pair log ratios")
    else:
        lines.append(f"independent runs: {len(new_docs)} new file(s) vs {len(base_docs)} baseline file(s); "
                     "Welch t on per-process log values")
    lines.append(f"CI {level_text(alpha)}: one-sided α {alpha:.3g} per bound, {alpha_source}; δ {delta_source}")
    if any(r.metric == "gpu_us" for r in rows):
        base_clock = _clocks(new_docs) if design == "paired" else _clocks(base_docs)
        lines.append(f"GPU rows (gpu_us): SM clock baseline {base_clock}, new {_clocks(new_docs)}")
    probes = _probe(base_docs), _probe(new_docs)
    if all(p is not None for p in probes):
        lines.append(f"speed probe: baseline {probes[0]:.3f} µs, new {probes[1]:.3f} µs "
                     f"(new/baseline {probes[1] / probes[0]:.3f})")  # type: ignore[operator]
    return lines


def design_of(new_docs: Sequence[Mapping[str, Any]], baseline_docs: Sequence[Mapping[str, Any]]) -> str:
    """"paired" for A/B runs (no baseline), "independent" for plain runs (a baseline needed)."""
    if not new_docs:
        raise GateInputError("no new result files")
    paired = [is_ab(d) for d in new_docs]
    if any(paired) and not all(paired):
        raise GateInputError("the new run mixes A/B files and plain result files")
    if all(paired) and baseline_docs:
        raise GateInputError("an A/B run is judged on its own pairs: give it no baseline")
    if not all(paired) and not baseline_docs:
        raise GateInputError("no baseline: give baseline result files, or an A/B file (run.py --ab) as the new run")
    return "paired" if all(paired) else "independent"


def input_warnings(new: Sequence[tuple[str, Mapping[str, Any]]], base: Sequence[tuple[str, Mapping[str, Any]]],
                   allow_different_env: bool) -> list[str]:
    """Environment differences (refused unless allowed) and incomplete runs."""
    differences = env_differences(new[0][1], [*new[1:], *base])
    if differences and not allow_different_env:
        raise GateInputError(f"the runs are not comparable ({'; '.join(differences)}); "
                             "pass --allow-different-env to judge them anyway")
    incomplete = [f"{s} is {d.get('status')!r}, not complete" for s, d in [*new, *base]
                  if d.get("status") not in (None, "complete")]
    return [f"different environments, {w}" for w in differences] + incomplete


def calibration_warnings(calibration: Mapping[str, Any], reference: Mapping[str, Any], design: str) -> list[str]:
    """A calibration of another machine or design still applies, but say so."""
    cal_env, ref = calibration.get("env") or {}, environment(reference)
    diff = [k for k in ref if k in cal_env and cal_env[k] != ref[k]]
    out = [f"the calibration was measured in another environment ({', '.join(diff)}): its δ may not fit this run"
           ] if diff else []
    if calibration.get("design", design) != design:
        out.append(f"the calibration is for {calibration.get('design')} runs, this run is {design}: "
                   "its δ assumes the other design")
    return out


def judged_keys(new_rows: Mapping[tuple[Any, ...], RowRun], base_rows: Mapping[tuple[Any, ...], RowRun],
                paired: bool) -> list[tuple[Any, ...]]:
    """The rows that get a CI tonight: timed on both sides and not FAILED (row_verdicts' rule)."""
    return [key for key, new in new_rows.items()
            if new.status != FAILED and new.timed
            and (new.a_timed if paired else key in base_rows and base_rows[key].timed)]


def row_verdicts(new_rows: Mapping[tuple[Any, ...], RowRun], base_rows: Mapping[tuple[Any, ...], RowRun],
                 paired: bool, cal_rows: Mapping[str, Any], **judging: Any) -> list[RowVerdict]:
    """One verdict per row of either side (rows timed on neither side are left out), problems first.
    A row FAILED in the new run is `failed`; one timed in the baseline (side A) but n/a, untimed
    (ok without a value) or absent in the new run is `missing`; one timed in the new run only `new`."""
    out = []
    for key, new in new_rows.items():
        base = base_rows.get(key)
        base_timed = new.a_timed if paired else base is not None and base.timed
        label, rid = row_label(new.row), identity_text(key)
        names = dict(label=label, row_id=rid, metric=new.row["metric"])
        if new.status == FAILED:
            out.append(RowVerdict(verdict=FAILED, note=str(new.reason or ""), **names))
        elif not new.timed:
            if base_timed:
                note = f"{new.state} in {'side B' if paired else 'new'}" + (f": {new.reason}" if new.reason else "")
                out.append(RowVerdict(verdict=MISSING, note=note, **names))
        elif not base_timed:
            shown, value = one_side(new, judging["metric_mode"], cal_rows.get(rid))
            why = ("not timed on side A" if paired else "not in the baseline" if base is None
                   else f"{base.state} in the baseline")
            out.append(RowVerdict(verdict=NEW, note=why, new=value, **{**names, "metric": shown}))
        else:
            out.append(judge_row(label, rid, new, base, cal=cal_rows.get(rid), **judging))
    for key, base in base_rows.items():
        if key not in new_rows and base.timed:
            rid = identity_text(key)
            shown, value = one_side(base, judging["metric_mode"], cal_rows.get(rid))
            out.append(RowVerdict(verdict=MISSING, label=row_label(base.row), row_id=rid, metric=shown,
                                  baseline=value, note="not in the new run"))
    return sorted(out, key=lambda r: VERDICTS.index(r.verdict))  # stable: run order within a verdict


def delta_origin(delta: float | None, calibration: Mapping[str, Any] | None, design: str,
                 same_delta: float | None = None) -> str:
    """Where each row's δ comes from, and the band of `same`, for the header."""
    fallback = (f"{delta:.1%}" if delta is not None else
                ("default of an A/B run " if design == "paired" else "default ")
                + ", ".join(f"{v:.1%} ({m})" for m, v in DEFAULT_DELTA[design].items()))
    origin = f"per row from the calibration, else {fallback}" if calibration is not None else fallback
    same = DEFAULT_SAME_DELTA if same_delta is None else same_delta
    deltas = [delta] if delta is not None else list(DEFAULT_DELTA[design].values())
    if calibration is None and min(deltas) >= same:  # `same` keeps each row's own band: nothing to say
        return origin
    return f"{origin}; `same` within ±{same:.1%}, or ±δ where wider"


def row_alpha(alpha: float | None, calibration: Mapping[str, Any] | None, alpha_night: float | None,
              judged: int) -> tuple[float, str]:
    """The one-sided level of each row's CI bound, and where it comes from: given, else the
    calibration's per-row α, else the night's α shared by the `judged` rows (Bonferroni)."""
    calibrated = ((calibration or {}).get("params") or {}).get("alpha_row")
    if alpha is not None:
        return alpha, "given (--alpha)"
    if calibrated is not None:
        return float(calibrated), "the calibration's per-row α"
    night = DEFAULT_ALPHA_NIGHT if alpha_night is None else alpha_night
    judged = max(1, judged)
    return night / judged, f"{night:g} a night shared by {judged} rows judged (Bonferroni)"


def check_settings(*, metric: str, delta: float | None, same_delta: float | None, alpha: float | None,
                   alpha_night: float | None, target: float | None, require: Sequence[str]) -> None:
    """gate()'s settings, each in its range (GateInputError naming the first that is not)."""
    if metric not in ("auto", RATIO, ABSOLUTE):
        raise GateInputError(f"metric must be auto, ratio or absolute, not {metric!r}")
    check_delta(delta, "delta")
    check_delta(same_delta, "same_delta")
    check_alpha(alpha, "alpha")
    check_alpha(alpha_night, "alpha_night")
    check_delta(target, "target")
    check_classes(list(require))


def gate(new_docs: Sequence[Mapping[str, Any]], baseline_docs: Sequence[Mapping[str, Any]] = (), *,
         calibration: Mapping[str, Any] | None = None, delta: float | None = None, metric: str = "auto",
         alpha: float | None = None, alpha_night: float | None = None, target: float | None = None,
         require: Iterable[str] = (), allow_different_env: bool = False, pool: bool = True,
         same_delta: float | None = None, new_sources: Sequence[str] | None = None,
         baseline_sources: Sequence[str] | None = None) -> GateResult:
    """Judge every cpu_us / gpu_us row of `new_docs` (one run: its files pooled as processes) against
    `baseline_docs` (pooled), or, when the new documents are A/B runs, side B against side A.

    δ per row comes from `calibration` (a document written by analysis.calibrate), else `delta`,
    else DEFAULT_DELTA; a row is `same` when its CI lies inside ±`same_delta` (default
    DEFAULT_SAME_DELTA) or inside ±δ where that is wider. The one-sided level of each CI bound:
    `alpha` when given, else the calibration's per-row α, else `alpha_night` (default
    DEFAULT_ALPHA_NIGHT) divided by the rows judged (Bonferroni). A class of rows (CLASSES) gates
    the outcome when it is in `require` or its median row flags a `target` slowdown (default: its
    class's DEFAULT_TARGETS) with POWER; else it is advisory.
    A/B rows are judged on the moderated t of their class and metric (fit_pools) unless `pool` is
    False (each row on its own pairs only).
    Raises GateInputError for input it cannot judge, ResultFileError (a ValueError too) for a
    document or calibration that is not well formed."""
    new_docs, baseline_docs, require = list(new_docs), list(baseline_docs), list(require)
    check_settings(metric=metric, delta=delta, same_delta=same_delta, alpha=alpha, alpha_night=alpha_night,
                   target=target, require=require)
    new_sources = list(new_sources or [f"new[{i}]" for i in range(len(new_docs))])
    baseline_sources = list(baseline_sources or [f"baseline[{i}]" for i in range(len(baseline_docs))])
    for source, doc in [*zip(new_sources, new_docs), *zip(baseline_sources, baseline_docs)]:
        check_result(doc, source)  # documents built in memory get the file reader's checks too
    if calibration is not None:
        check_calibration(calibration, "the calibration")
    design = design_of(new_docs, baseline_docs)
    warnings = input_warnings(list(zip(new_sources, new_docs)), list(zip(baseline_sources, baseline_docs)),
                              allow_different_env)
    if calibration is not None:
        warnings += calibration_warnings(calibration, new_docs[0], design)
    new_rows = collect(new_docs)
    base_rows = collect(baseline_docs) if design == "independent" else {}
    paired = design == "paired"
    cal_rows = (calibration or {}).get("rows") or {}
    keys = judged_keys(new_rows, base_rows, paired)
    alpha, alpha_source = row_alpha(alpha, calibration, alpha_night, len(keys))
    priors, tests = fit_pools(new_rows, keys, metric, cal_rows) if paired and pool else ({}, {})
    verdicts = row_verdicts(new_rows, base_rows, paired, cal_rows, metric_mode=metric, delta=delta, alpha=alpha,
                            priors=priors, same_delta=same_delta)
    if not paired:
        tests = own_tests(verdicts, WELCH)
    elif not pool:
        tests = own_tests(verdicts, PER_ROW, "asked (--per-row)")
    by_class: dict[str, list[PoolTest]] = {}
    for (key, _), test in tests.items():
        by_class.setdefault(key, []).append(test)
    header = header_lines(new_docs, baseline_docs, verdicts, design, alpha, alpha_source,
                          delta_origin(delta, calibration, design, same_delta))
    classes = class_states(verdicts, target, require, by_class)
    header += [c.line() for c in classes.values()]
    unfinished = [f"{s} is {d.get('status')!r}" for s, d in zip(new_sources, new_docs)
                  if d.get("status") not in (None, "complete")]
    return GateResult(verdicts, design, alpha, new_sources, baseline_sources, header, warnings, classes, unfinished)


# ---------------------------------------------------------------------------------------------
# Rendering


def _num(x: float | None, digits: int = 3) -> str:
    return "" if x is None else f"{x:.{digits}f}"


def _band_text(r: RowVerdict) -> str:
    """The row's band ±δ, and its equivalence band where that is wider (`±3.0% (same ±5.0%)`)."""
    if r.delta is None:
        return ""
    wider = r.same_delta is not None and r.same_delta > r.delta
    return f"±{r.delta:.1%}" + (f" (same ±{r.same_delta:.1%})" if wider else "")


def table_rows(result: GateResult, hide_same: bool = False) -> list[list[str]]:
    out = []
    for r in result.rows:
        if hide_same and r.verdict == gs.SAME:
            continue
        ci = "" if r.ci_low is None else f"[{r.ci_low:.3f}, {r.ci_high:.3f}]"
        digits = 3 if r.metric.endswith("/floor") else 2
        n = f"{r.n_baseline}/{r.n_new}" if r.n_baseline or r.n_new else ""
        out.append([r.label, r.metric, _num(r.baseline, digits), _num(r.new, digits), _num(r.ratio), ci,
                    _band_text(r), r.verdict, n, r.note])
    return out


def as_data(result: GateResult, hide_same: bool = False) -> dict[str, Any]:
    """The verdicts as plain data (--format json): what a CI step or another tracker reads."""
    import dataclasses

    def finite(x: Any) -> Any:  # JSON has no inf: an unbounded CI or detectable slowdown, d0 ∞ is null
        if isinstance(x, dict):
            return {k: finite(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [finite(v) for v in x]
        return None if isinstance(x, float) and not math.isfinite(x) else x

    rows = [{**{k: finite(v) for k, v in dataclasses.asdict(r).items()}, "row_class": r.row_class,
             "gating": result.gating(r)} for r in result.rows if not (hide_same and r.verdict == gs.SAME)]
    return {"kind": "dbench-gate", "outcome": result.outcome, "exit_code": result.exit_code,
            "summary": result.summary(), "design": result.design, "alpha_row": result.alpha,
            "header": result.header, "warnings": result.warnings,
            "undecided_reasons": result.undecided_reasons() if result.outcome == NO_DECISION else [],
            "counts": result.counts, "decided": result.decided,
            "classes": {k: {**{f: finite(v) for f, v in dataclasses.asdict(c).items()}, "name": c.name}
                        for k, c in result.classes.items()},
            "new_sources": result.new_sources, "baseline_sources": result.baseline_sources, "rows": rows}


def render(result: GateResult, fmt: str = "md", hide_same: bool = False) -> str:
    if fmt == "json":
        import json

        return json.dumps(as_data(result, hide_same), indent=1) + "\n"
    # Row names, notes (a FAILED row's reason), A/B sides and sources come from result files: every
    # line and cell is escaped for its format (md: markdown, txt: the terminal).
    from dbench.bench.io.escape import markdown, table, terminal

    ci_name = f"{level_text(result.alpha)} CI"
    headers = ["row", "metric", "baseline", "new", "ratio", ci_name, "δ", "verdict", "n base/new", "note"]
    rows = table_rows(result, hide_same)
    undecided = result.undecided_reasons() if result.outcome == NO_DECISION else []
    if fmt == "md":
        lines = [f"### Regression gate — {markdown(result.summary())}", ""]
        lines += [f"- {markdown(h)}" for h in result.header] + [f"- warning: {markdown(w)}" for w in result.warnings]
        lines += [f"- **no decision:** {markdown(w)}" for w in undecided] + [""]
        lines.append(table(rows, headers, "md") if rows else "_no rows_")
        if hide_same and result.counts.get(gs.SAME):
            lines.append(f"\n{result.counts[gs.SAME]} rows `same` not shown.")
    else:
        lines = [*map(terminal, result.header), *[f"warning: {terminal(w)}" for w in result.warnings],
                 *[f"no decision: {terminal(w)}" for w in undecided], ""]
        lines.append(table(rows, headers, "txt") if rows else "no rows")
        if hide_same and result.counts.get(gs.SAME):
            lines.append(f"({result.counts[gs.SAME]} rows same, not shown)")
        lines += ["", terminal(result.summary())]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Command line


def main(argv: list[str] | None = None, prog: str = "python -m dbench.analysis.gate") -> int:
    p = Parser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("new", type=path_value, help="the new run: a result file or a folder of them")
    p.add_argument("baseline", type=path_value, nargs="*",
                   help="baseline files or folders (pooled); none for an A/B file")
    p.add_argument("--format", choices=("md", "txt", "json"), default="txt",
                   help="a table as markdown or text, or the verdicts as JSON (outcome, classes, rows)")
    p.add_argument("--calibration", type=path_value,
                   help="per-row noise and δ from python -m dbench.analysis.calibrate")
    p.add_argument("--delta", type=float,
                   help="the band ±δ of rows no calibration covers (default 0.05; in an A/B run 0.03 for CPU rows)")
    p.add_argument("--same-delta", type=float,
                   help=f"a row is `same` when its CI lies inside ±this, or ±δ where wider "
                        f"(default {DEFAULT_SAME_DELTA})")
    p.add_argument("--alpha", type=float,
                   help="one-sided level of each CI bound (default: calibrated, else --alpha-night / rows judged)")
    p.add_argument("--alpha-night", type=float,
                   help=f"false alarms a night may raise, shared by the rows judged (default {DEFAULT_ALPHA_NIGHT})")
    p.add_argument("--target", type=float, help="a class of rows gates when its median row flags this slowdown "
                   f"with {POWER:.0%}% power at tonight's design (default: C++ driver rows 0.15, the others 0.10)")
    p.add_argument("--require", type=name_list, action="append", default=[], metavar="CLASS[,CLASS]",
                   help=f"classes that gate whatever they can detect: {', '.join(CLASSES)}")
    p.add_argument("--metric", choices=("auto", ABSOLUTE, RATIO), default="auto",
                   help="CPU rows: ratio to the in-run floor (auto, ratio) or absolute µs")
    p.add_argument("--allow-different-env", action="store_true",
                   help="judge runs of different scenarios, devices, GPUs, drivers, torch builds or dtypes")
    p.add_argument("--hide-same", action="store_true", help="leave rows judged `same` out of the table")
    p.add_argument("--per-row", action="store_true",
                   help="A/B: judge each row on its own pairs only, not on its class's moderated t")
    args = p.parse_args(argv)
    require = [c for names in args.require for c in names]
    try:
        check_delta(args.delta)
        check_delta(args.same_delta, "--same-delta")
        check_alpha(args.alpha)
        check_alpha(args.alpha_night, "--alpha-night")
        check_delta(args.target, "--target")
        check_classes(require, "--require")
        new = load_run(args.new)
        base = [item for path in args.baseline for item in load_run(path)]
        calibration = load_calibration(args.calibration) if args.calibration else None
        result = gate([d for _, d in new], [d for _, d in base], calibration=calibration, delta=args.delta,
                      metric=args.metric, alpha=args.alpha, alpha_night=args.alpha_night, target=args.target,
                      require=require, allow_different_env=args.allow_different_env, pool=not args.per_row,
                      same_delta=args.same_delta, new_sources=[s for s, _ in new],
                      baseline_sources=[s for s, _ in base])
    except (ResultFileError, GateInputError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stdout.write(render(result, args.format, args.hide_same))
    return result.exit_code


if __name__ == "__main__":
    from dbench.bench.harness.guard import exit_with

    exit_with("gate", main)
