"""The result's types: `Row` (one case and metric) and `ResultDocument` (one run), declared once.

Everything else about the result derives from these two: the reader's field groups
(bench/io/document.py: which fields must be text, numbers or lists of numbers, which are required),
the JSON Schema (bench/io/schema.py), and every document a run, a merge or an interrupt writes
(`ResultDocument.to_json`, the one builder: it adds `schema_version` and the `failures` list).

A row stays a JSON-native mapping, declared as a TypedDict rather than a class: it is read by pandas
as one record and written as one JSON object, and it carries its scenario's axis values as extra keys
named in its `axes` (`arity`, `arg_kind`...), which no fixed class can list. (A TypedDict with extra
keys of any name, PEP 728, is not in the Pythons supported here; so the code holds rows as
`dict[str, Any]`, and `Row` is their one declaration, which the checks and the schema are made from.)

Standard library only: the interrupt path writes documents while an import may have been cut short.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any, TypedDict

# The version of the documents written. 2: rows carry their scenario axes (bench/core/identity.py);
# 1 reads as axis-free.
SCHEMA_VERSION = 2
DOCUMENT_STATUSES = ("running", "complete", "interrupted", "incomplete", "failed")
# "not run": a case that was to be timed, in a run that stopped (interrupted, failed) before its first round.
ROW_STATUSES = ("ok", "n/a", "failed", "not run")
UNTIMED = ("n/a", "failed", "not run")  # a row with one of these statuses has no values to check or judge

# The kinds of a row's checked fields: the reader and the schema check each field by its kind.
Text = typing.Optional[str]
Number = typing.Optional[float]  # a JSON number (counts too); null where there is none
Numbers = typing.Optional[typing.List[typing.Optional[float]]]
IdentityValue = Any  # a scalar or a list of them, nested (a shape, an axis value)


class RowContract(TypedDict):
    """The fields every row has (a document whose rows lack one is not a result)."""

    # What the row is (its identity, bench/core/identity.py, with the shape and axes of Row)
    scenario: Text
    op: Text
    variant: Text
    mode: Text
    device: Text
    driver: Text
    metric: Text
    unit: Text
    timer: Text
    # Its statistics, per call, in `unit` (null in a FAILED, n/a or not-run row)
    median: Number
    q1: Number
    q3: Number
    ci_low: Number
    ci_high: Number
    samples: Numbers


class Row(RowContract, total=False):
    """One case and metric of a run. Within a kind, fields are listed in the schema's order."""

    dtype: Text
    reason: Text  # why FAILED or n/a
    baseline: Text  # the label of the case it is paired with
    delta_reason: Text  # why a row that names a baseline has no Δ
    graph_break_reason: Text
    checked_on: Text  # the layouts its contract checks ran on, when not all
    # Its paired statistics, its counts, and what an A/B run adds
    delta_median: Number
    delta_ci_low: Number
    delta_ci_high: Number
    ratio_median: Number
    ratio_ci_low: Number
    ratio_ci_high: Number
    rel_iqr: Number
    a_median: Number  # an A/B run: side A's
    ab_ratio_median: Number
    ab_ratio_ci_low: Number
    ab_ratio_ci_high: Number
    ab_floor_ratio_median: Number
    ab_floor_ratio_ci_low: Number
    ab_floor_ratio_ci_high: Number
    n: Number
    block_calls: Number
    ab_pairs: Number
    # The roofline's
    bytes: Number
    flops: Number
    gbps: Number
    tflops: Number
    intensity: Number
    roof_tflops: Number
    pct_of_roof: Number
    instructions: Number
    target_us: Number
    # Regions: what compiling (or capturing) a chain took
    graph_breaks: Number
    graphs: Number
    first_call_s: Number
    # Side A's samples; medians per process (a run of several processes, an A/B run)
    a_samples: Numbers
    process_medians: Numbers
    a_process_medians: Numbers
    process_ratio_medians: Numbers
    a_process_ratio_medians: Numbers
    process_delta_medians: Numbers
    process_n: Numbers
    a_process_n: Numbers
    # Checked by value
    status: str  # one of ROW_STATUSES
    a_status: str
    shape: IdentityValue
    axes: typing.List[str]  # the names of the scenario's axes; each is also a key of the row
    gpu_bound: typing.Optional[bool]  # a CPU row whose GPU time per call is at least its CPU time


_HINTS = typing.get_type_hints(Row)  # RowContract's fields first


def _of_kind(kind: Any) -> tuple[str, ...]:
    return tuple(name for name, hint in _HINTS.items() if hint == kind)


TEXT_FIELDS = _of_kind(Text)
NUMBER_FIELDS = _of_kind(Number)
NUMBER_LISTS = _of_kind(Numbers)
REQUIRED_ROW_FIELDS = tuple(RowContract.__annotations__)
# Numbers that must be positive in a timed row of a time metric (unit "us"): times and ratios of times.
POSITIVE_FIELDS = ("median", "a_median", "ratio_median", "ab_ratio_median", "ab_floor_ratio_median")
POSITIVE_LISTS = ("process_medians", "a_process_medians", "process_ratio_medians", "a_process_ratio_medians")
SIDE_A = ("a_median", "a_process_medians", "a_process_ratio_medians", "a_samples")


def failures(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failed rows of a document, one line each (the document's "failures" list)."""
    return [{"row": "/".join(str(r.get(k)) for k in ("op", "variant", "mode")), "driver": r.get("driver"),
             "metric": r.get("metric"), "reason": r.get("reason")} for r in rows if r.get("status") == "failed"]


@dataclass
class ResultDocument:
    """One run's result, as every writer builds it. `status` is None only inside a merge, before its
    children's statuses settle it; `children_failed` names child processes that failed (their
    entries join the failed rows in `failures`)."""

    scenario: str | None
    status: str | None
    config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)  # each a Row
    error: str | None = None
    ab: dict[str, Any] | None = None  # an A/B run: its sides, pairs and order
    speed_probe: dict[str, Any] | None = None
    a_speed_probe: dict[str, Any] | None = None  # an A/B run: side A's processes'
    roofs: dict[str, Any] | None = None  # the machine's measured roofs (kernel scenarios)
    duplicate_baseline_rows: list[dict[str, Any]] | None = None  # a sharded run: baselines timed by several shards
    children_failed: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status is not None and self.status not in DOCUMENT_STATUSES:
            raise ValueError(f"a result's status is one of {', '.join(DOCUMENT_STATUSES)}, not {self.status!r}")

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> "ResultDocument":
        """A document as read (or as a merge left it) back as its type; keys it does not know are refused."""
        known = {f for f in cls.__dataclass_fields__ if f != "children_failed"}
        unknown = set(document) - known - {"schema_version", "failures"}
        if unknown:
            raise ValueError(f"a result document has no field {', '.join(sorted(unknown))}")
        named = [f for f in document.get("failures") or [] if isinstance(f, dict) and "child" in f]
        fields = {k: v for k, v in document.items() if k in known}
        return cls(**{"scenario": None, "status": None, **fields, "children_failed": named})

    def to_json(self) -> dict[str, Any]:
        """The document as written: schema_version first, optional parts only when present, and the
        failures list (failed rows, then failed children)."""
        document: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        for name in ("scenario", "status"):  # (absent only in a part of a merge, or a test's document)
            if getattr(self, name) is not None:
                document[name] = getattr(self, name)
        document.update(config=self.config, env=self.env)
        if self.error is not None:
            document["error"] = self.error
        for name in (n for n in OBJECT_FIELDS if n != "config"):
            if getattr(self, name) is not None:
                document[name] = getattr(self, name)
        document["rows"] = self.rows
        if self.duplicate_baseline_rows is not None:
            document["duplicate_baseline_rows"] = self.duplicate_baseline_rows
        document["failures"] = failures(self.rows) + self.children_failed
        return document


# The document's parts that are objects (or null) when present, env aside (always an object).
OBJECT_FIELDS = tuple(name for name, hint in typing.get_type_hints(ResultDocument).items()
                      if name != "env" and hint in (dict[str, Any], dict[str, Any] | None))
