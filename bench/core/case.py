"""A case: one row of a table, as the runner times it (a callable doing exactly one call, or why there
is none), with its samples. The scenarios make them; the runner, the GPU pass and the rows read them."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Callable

from dbench.bench.core.identity import case_label


@dataclass
class Case:
    """One row of a table: a callable doing exactly one call, or why there is none."""

    key: dict[str, Any]
    call: Callable[[], Any] | None
    sync: Callable[[], None] = lambda: None
    na_reason: str | None = None
    error: str | None = None  # failed its pre-flight check, or raised while timed: no CPU row
    gpu_error: str | None = None  # raised in the GPU pass: no GPU rows
    # Cold-cache cases: timed in the GPU pass only, one call per block, `flush` (a write over more
    # than the L2) run before each block, outside its window, so CUPTI never attributes it.
    flush: Callable[[], None] | None = None
    work: Any = None  # ops.contract.Work of one call, for the derived rates (kernel scenarios)
    baseline: str | None = None  # label of the case it is paired with
    # Entered around each block of calls, outside the timed loop (the mode's torch.no_grad() or
    # torch.inference_mode(): ops/specs.py Mode); None: none.
    context: Callable[[], AbstractContextManager[Any]] | None = None
    block: int = 0
    samples: list[float] = field(default_factory=list)  # microseconds per call, one per round

    @property
    def label(self) -> str:
        return case_label(self.key)

    @property
    def runnable(self) -> bool:
        return self.call is not None and self.na_reason is None and self.error is None


# What a case may raise and still fail alone: any error, and SystemExit, since an op's code that
# calls sys.exit() is a broken op, not the end of the run (which would then exit with its code and
# no result). KeyboardInterrupt stays out: it stops the run.
CASE_ERRORS: tuple[type[BaseException], ...] = (Exception, SystemExit)


# torch.testing.assert_close's first line; its summary follows on the next lines.
_COMPARISON_HEADS = ("are not close!", "are not equal!")


def first_line(exc: BaseException, limit: int = 200) -> str:
    """What a failed check says in a row: the exception's first line (its type when it has none);
    for a comparison of torch.testing, its summary too (how many elements differ, the greatest
    differences and where), joined on one line."""
    if isinstance(exc, SystemExit):
        return f"SystemExit: the op's code called sys.exit({exc.code!r})"
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__[:limit]
    if lines[0].endswith(_COMPARISON_HEADS):
        return "; ".join(lines[:4])[:max(limit, 400)]
    return lines[0][:limit]


def raised(exc: BaseException, limit: int = 240) -> str:
    """An exception as a reason names it: its type, its first line and the frame that raised it
    (`ValueError: bad size at my_ops.py:12 in reference`)."""
    import traceback
    from pathlib import Path

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
    return f"{type(exc).__name__}: {first_line(exc, limit)}{where}"


def failure(phase: str, exc: BaseException) -> str:
    """What a case's row says when it raised: where, the exception type and its first line."""
    if isinstance(exc, SystemExit):
        return f"raised {phase}: {first_line(exc)}"
    text = str(exc).strip()
    first = text.splitlines()[0][:200] if text else ""
    return f"raised {phase}: {type(exc).__name__}{': ' + first if first else ''}"
