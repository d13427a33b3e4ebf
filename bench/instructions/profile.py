"""Reading where a callgrind dump's instructions were spent: each function's self cost.

callgrind's format (valgrind's docs, "Callgrind Format Specification"): a function's block starts
at `fn=`, under the object named by the last `ob=`; each cost line after it adds to that function's
own cost, except the one line after `calls=`, which is the inclusive cost of a call it made
(counted again in the callee's own lines, so not the caller's). Names may be compressed: `(7) name`
defines id 7, a later `(7)` reuses it (ids are per kind: objects, files, functions). A dump's self
costs add up to its total, which `parse_profile` checks, so a line this reader mistook for self cost
(or missed) is an error, not a wrong breakdown.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from dbench.bench.instructions.callgrind import CallgrindFormatError

Function = tuple[str, str]  # (its object file's name, its name without callgrind's recursion suffix)
_COMPRESSED = re.compile(r"^\((\d+)\)\s*(.*)$")
# The kind of id space each position line names (calls go to cob/cfn, sharing ob's and fn's ids).
_RECURSION = re.compile(r"'\d+$")  # fn'2: the same function one recursion level deeper
_KINDS = {"ob": "ob", "cob": "ob", "fn": "fn", "cfn": "fn", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl",
          "cfl": "fl"}


@dataclass(frozen=True)
class Profile:
    part: int  # the dump's number within the run (child.py: 1 the calibration loop, then the cases)
    total: int  # Ir of the whole dump
    self_ir: dict[Function, int]  # Ir run in the function itself
    calls: dict[tuple[Function, Function], int]  # (caller, callee) -> Ir of those calls, inclusive


def _name(kind: str, value: str, names: dict[str, dict[str, str]]) -> str:
    match = _COMPRESSED.match(value.strip())
    if match is None:
        return value.strip()
    ident, name = match.groups()
    table = names[_KINDS[kind]]
    if name:
        table[ident] = name
        return name
    if ident not in table:
        raise CallgrindFormatError(f"compressed name ({ident}) used before it was defined")
    return table[ident]


@dataclass
class _Reader:
    """One dump's lines in order: where they are (object, function, call target) and what they add."""

    name: str
    names: dict[str, dict[str, str]] = field(default_factory=lambda: {"ob": {}, "fn": {}, "fl": {}})
    events: list[str] | None = None
    ir: int = 0  # Ir's column among the events
    positions: int = 1  # position columns before the events (`positions: line` by default)
    part: int = 0
    total: int | None = None
    obj: str = "???"
    fn: str | None = None
    callee_obj: str | None = None
    callee: Function | None = None
    after_call: bool = False
    self_ir: dict[Function, int] = field(default_factory=dict)
    calls: dict[tuple[Function, Function], int] = field(default_factory=dict)

    def cost(self, line: str, number: int) -> None:
        if self.events is None or self.fn is None:
            raise CallgrindFormatError(f"{self.name}:{number}: a cost line before events: and fn=")
        values = line.split()[self.positions:]
        cost = int(values[self.ir]) if self.ir < len(values) else 0  # trailing zero counts may be left out
        if self.after_call:  # the call's inclusive cost: the callee's own lines count it
            self.after_call = False
            if self.callee is not None:
                edge = ((self.obj, self.fn), self.callee)
                self.calls[edge] = self.calls.get(edge, 0) + cost
            self.callee_obj, self.callee = None, None
        else:
            here = (self.obj, self.fn)
            self.self_ir[here] = self.self_ir.get(here, 0) + cost

    def position(self, key: str, value: str, number: int) -> None:
        if key in ("calls", "jump", "jcnd"):
            self.after_call = key == "calls"
            if self.after_call and self.callee is None:
                raise CallgrindFormatError(f"{self.name}:{number}: calls= without a cfn= before it")
            return
        resolved = _name(key, value, self.names)
        if key == "ob":
            self.obj = os.path.basename(resolved)
        elif key == "cob":
            self.callee_obj = os.path.basename(resolved)
        elif key == "fn":
            self.fn = _RECURSION.sub("", resolved)
        elif key == "cfn":  # the callee lies in the caller's object unless cob= said otherwise
            self.callee = (self.callee_obj or self.obj, _RECURSION.sub("", resolved))

    def header(self, key: str, value: str) -> None:
        if key == "events":
            self.events = value.split()
            if "Ir" not in self.events:
                raise CallgrindFormatError(f"{self.name}: no Ir event (events: {value.strip()})")
            self.ir = self.events.index("Ir")
        elif key == "positions":
            self.positions = len(value.split())
        elif key == "part":
            self.part = int(value)
        elif key in ("summary", "totals") and self.events is not None:
            counts = value.split()
            if self.ir < len(counts):
                self.total = int(counts[self.ir])


def parse_profile(text: str, name: str = "<dump>") -> Profile:
    """Each function's self Ir in one dump, and its calls' inclusive Ir (the module's docstring)."""
    reader = _Reader(name)
    for number, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        if line[0].isdigit() or line[0] in "+-*":
            reader.cost(line, number)
            continue
        key, equals, value = line.partition("=")
        if equals and (key in _KINDS or key in ("calls", "jump", "jcnd")):
            reader.position(key, value, number)
            continue
        key, _, value = line.partition(":")
        reader.header(key, value)
    if reader.events is None or reader.total is None:
        raise CallgrindFormatError(f"{name}: not a callgrind dump (no events: or summary:/totals: line)")
    counted = sum(reader.self_ir.values())
    if counted != reader.total:
        raise CallgrindFormatError(f"{name}: the functions' own costs add up to {counted} Ir, the dump's total is "
                                   f"{reader.total}: a line this reader does not know (report it with the dump)")
    return Profile(part=reader.part, total=reader.total, self_ir=reader.self_ir, calls=reader.calls)


def read_profiles(folder: Path, stem: str) -> list[Profile]:
    """Every numbered dump `<stem>.N` in `folder`, by part."""
    profiles = [parse_profile(p.read_text(errors="replace"), p.name) for p in folder.glob(f"{stem}.*")
                if p.suffix[1:].isdigit()]
    return sorted(profiles, key=lambda p: p.part)
