"""Compare a collection with the expected file: one verdict per row, and the file to commit instead.

A row fails when its count rose beyond its margin (a regression), when it is present on one side
only, or when it FAILED; rows that are n/a on both sides are not compared. A count that fell beyond
its margin (an improvement) is printed with the hint to re-record the file, which keeps the gain
(until then a later regression of the same size would pass unnoticed), but passes unless strict:
CI must not go red because a change made a call cheaper, and the CI machine is not the machine
that recorded the file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbench.bench.core.identity import case_label, identity_text, row_identity
from dbench.bench.io.document import ResultFileError, read_json

from dbench.bench.instructions import METRIC, SCHEMA

DEFAULT_MARGIN = 0.01  # ±1 % of the expected count per call


class InputError(ValueError):
    """An unreadable or malformed counts / expected file (the message names it)."""


@dataclass(frozen=True)
class Verdict:
    label: str
    status: str  # ok | regression | improvement | missing | new | failed
    expected: float | None
    actual: float | None
    margin: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def fails(self, strict: bool = False) -> bool:
        """Whether this verdict fails the check (an improvement only when strict)."""
        return self.status not in ("ok", "improvement") or (strict and self.status == "improvement")

    @property
    def change(self) -> float | None:
        if self.expected and self.actual is not None:
            return self.actual / self.expected - 1
        return None

    def line(self) -> str:
        change = f"{self.change:+.2%}" if self.change is not None else "n/a"
        exp = f"{self.expected:,.1f}" if self.expected is not None else "-"
        act = f"{self.actual:,.1f}" if self.actual is not None else "-"
        return (f"{self.status.upper():<11} {self.label:<42} {exp:>12} -> {act:>12} "
                f"({change}, margin ±{self.margin:.1%})")


def load(path: Path, what: str) -> dict[str, Any]:
    try:
        document = read_json(path, what)
    except ResultFileError as exc:
        raise InputError(str(exc)) from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA or not isinstance(document.get("rows"), list):
        raise InputError(f"{path}: not an instruction-count file (schema {SCHEMA!r} with a list of rows)")
    for key in ("env", "config"):
        if not isinstance(document.get(key, {}), dict):
            raise InputError(f"{path}: its {key} is not an object")
    default = document.get("default_margin", DEFAULT_MARGIN)
    if not _margin(default):
        raise InputError(f"{path}: bad default_margin {default!r} (a fraction from 0 to 1)")
    for i, row in enumerate(document["rows"]):
        if not isinstance(row, dict) or row.get("metric") != METRIC or "instructions" not in row:
            raise InputError(f"{path}: row {i} is not an instruction-count row")
        try:
            label = case_label(row)
            row_identity(row)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise InputError(f"{path}: row {i} lacks the fields that name a case") from None
        value = row["instructions"]
        if value is not None and not (_number(value) and math.isfinite(value) and value > 0):
            raise InputError(f"{path}: row {i} ({label}) has a bad count {value!r}")
        margin = row.get("margin", DEFAULT_MARGIN)
        if not _margin(margin):
            raise InputError(f"{path}: row {i} ({label}) has a bad margin {margin!r}")
    return document


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _variant_of(row: dict[str, Any]) -> tuple[Any, Any]:
    """A row's op and variant: its rows (the modes) share one margin. Not across ops: the heap
    layout moves one op's rows more than another's (l2norm's function_raw 2.1 % in A/A collections
    where muladd's moved 0.4 %: results/cpu-instructions/power-boundary-ops.json)."""
    return row.get("op"), row.get("variant")


def _margin(value: Any) -> bool:
    return _number(value) and 0 <= value < 1


def _by_identity(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {identity_text(row_identity(r)): r for r in document["rows"]}


def compare(expected: dict[str, Any], actual: dict[str, Any]) -> list[Verdict]:
    exp, act = _by_identity(expected), _by_identity(actual)
    default = float(expected.get("default_margin", DEFAULT_MARGIN))
    verdicts = []
    for key in [*exp, *(k for k in act if k not in exp)]:
        e, a = exp.get(key), act.get(key)
        row = e or a
        assert row is not None
        margin = float(e.get("margin", default)) if e else default
        e_val = e.get("instructions") if e else None
        a_val = a.get("instructions") if a else None
        if e_val is None and a_val is None:
            continue  # n/a (or failed) on both sides: nothing measured
        if e_val is None:
            status = "new"
        elif a is None:
            status = "missing"
        elif a_val is None:
            status = "failed"
        elif abs(a_val / e_val - 1) <= margin:
            status = "ok"
        else:
            status = "regression" if a_val > e_val else "improvement"
        verdicts.append(Verdict(case_label(row), status, e_val, a_val, margin))
    return verdicts


def env_differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """What differs between the two files' environments that changes counts by itself."""
    e, a = expected.get("env", {}), actual.get("env", {})
    out = [f"{k}: expected {e.get(k)!r}, this run {a.get(k)!r}" for k in ("torch", "python", "valgrind", "glibc")
           if e.get(k) != a.get(k)]
    e_src, a_src = e.get("user_op_digests", {}), a.get("user_op_digests", {})
    out += [f"{source}: its file changed (source digest {e_src[source]} -> {a_src[source]})"
            for source in sorted(set(e_src) & set(a_src)) if e_src[source] != a_src[source]]
    defaults = {"layouts": 1, "allocator": "glibc"}  # what files from before those options were
    for key, what in (("calls", "calls per case"), ("layouts", "builds per case"), ("allocator", "allocator")):
        e_val, a_val = (doc.get("config", {}).get(key, defaults.get(key)) for doc in (expected, actual))
        if e_val != a_val:
            out.append(f"{what}: expected {e_val}, this run {a_val}")
    return out


def updated_expected(actual: dict[str, Any], previous: dict[str, Any] | None,
                     measured: dict[str, float] | None = None) -> dict[str, Any]:
    """The expected file to commit for `actual`: its counts, with each row's margin kept from the
    previous expected file where that row had one (widened margins are measured, not guessed).

    A row also takes the widest margin of its variant's rows: a host's offset comes from the
    variant's Python machinery, which its modes share (CI counted `function_define_impl/no_grad`
    +1.31 % while only that variant's `fwd_requires_grad` row had been widened). measured: per row
    label, the margin a power study's A/A shifts call for (power.margins_from); a row takes the
    wider of it and the one it had."""
    margins: dict[str, float] = {}
    widest: dict[tuple[Any, Any], float] = {}
    default = DEFAULT_MARGIN
    if previous is not None:
        default = float(previous.get("default_margin", DEFAULT_MARGIN))
        for k, r in _by_identity(previous).items():
            if "margin" in r:
                margins[k] = float(r["margin"])
                family = _variant_of(r)
                widest[family] = max(widest.get(family, 0.0), float(r["margin"]))
    for label, margin in (measured or {}).items():  # a power study's A/A shifts (power.margins_from)
        for k, r in _by_identity(actual).items():
            if case_label(r) == label and margin > margins.get(k, 0.0):
                margins[k] = margin
                widest[_variant_of(r)] = max(widest.get(_variant_of(r), 0.0), margin)
    rows = []
    for key, row in _by_identity(actual).items():
        kept = {k: v for k, v in row.items() if k not in ("total", "margin")}
        margin = max(margins.get(key, 0.0), widest.get(_variant_of(row), 0.0))
        if margin > default and row.get("instructions") is not None:
            kept["margin"] = margin
        elif key in margins:
            kept["margin"] = margins[key]
        rows.append(kept)
    return {"schema": SCHEMA, "default_margin": default, "config": actual["config"], "env": actual["env"],
            "rows": rows}
