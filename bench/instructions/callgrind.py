"""Reading callgrind's dump files: the total event counts of one dump, and which libc variants ran.

Only the header lines and the function names are read (`part:`, `events:`, `summary:` /
`totals:`, `fn=`), so no callgrind_annotate run is needed and a fixture file is enough to test it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


class CallgrindFormatError(ValueError):
    """A file that is not a callgrind dump (the message names it)."""


@dataclass(frozen=True)
class Dump:
    part: int  # 1-based index of the dump within the run (0: the dump at exit)
    events: tuple[str, ...]
    totals: dict[str, int]

    @property
    def instructions(self) -> int:
        return self.totals["Ir"]


_NAME_LINE = re.compile(r"^c?fn=(?:\(\d+\))?\s*(\S.*)$", re.MULTILINE)
# glibc's string/memory functions pick an implementation per CPU at load time (ifunc): their names
# say which one ran (__memmove_avx_unaligned_erms, __strlen_sse2; the SSE2 memcpy is named by its
# versioned symbol, memcpy@GLIBC_2.2.5).
_LIBC_VARIANT = re.compile(
    r"^(?:__)?(?:mem|str|wmem|wcs|stp|raw)[a-z]*(?:_(?:sse|ssse|avx|evex|erms)\w*)?(?:@GLIBC\S*)?$")


def parse_dump(text: str, name: str = "<dump>") -> Dump:
    part, events, totals = 0, None, None
    summary = None
    for line in text.splitlines():
        if line.startswith("part:"):
            part = int(line.split(":", 1)[1])
        elif line.startswith("events:"):
            events = tuple(line.split(":", 1)[1].split())
        elif line.startswith("summary:"):
            summary = [int(v) for v in line.split(":", 1)[1].split()]
        elif line.startswith("totals:"):
            totals = [int(v) for v in line.split(":", 1)[1].split()]
    counts = totals if totals is not None else summary
    if events is None or counts is None:
        raise CallgrindFormatError(f"{name}: not a callgrind dump (no events: or summary:/totals: line)")
    if "Ir" not in events:
        raise CallgrindFormatError(f"{name}: no Ir event (events: {' '.join(events)})")
    # Trailing zero counts may be left out of the line.
    counts = counts + [0] * (len(events) - len(counts))
    return Dump(part=part, events=events, totals=dict(zip(events, counts)))


def libc_variants(text: str) -> set[str]:
    """The ifunc-selected glibc string/memory functions named in a dump."""
    return {m.group(1).strip() for m in _NAME_LINE.finditer(text) if _LIBC_VARIANT.match(m.group(1).strip())}


def read_dumps(folder: Path, stem: str) -> tuple[list[Dump], set[str]]:
    """Every numbered dump `<stem>.N` in `folder`, by part, and the libc variants they name."""
    dumps, variants = [], set()
    for path in folder.glob(f"{stem}.*"):
        if not path.suffix[1:].isdigit():
            continue
        text = path.read_text(errors="replace")
        dumps.append(parse_dump(text, path.name))
        variants |= libc_variants(text)
    return sorted(dumps, key=lambda d: d.part), variants
