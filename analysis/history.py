"""Change points over a folder of nightly results: steps and slow drifts that no single night shows.

    python -m dbench.analysis.history DIR [--row SUBSTRING] [--format md|txt] [--plot PNG] [--penalty 4]

Loads every result file of DIR, ordered by env.time. Per row the series is one value per night:
the geometric mean of its per-process values, the ratio to the in-run floor for CPU rows that
have one, the absolute median otherwise (gpu_us for GPU rows). Change points are found on the
log series by PELT with a least-squares cost (`ruptures`), penalised BIC-style at
penalty·σ²·ln(n) per change point, σ being the night-to-night noise estimated robustly from
the first differences (so a drift does not inflate it). A drift of 1 % a night, each night well
inside the gate's band, shows as one or more steps once enough nights have moved. At the default
penalty about 2.5 % of flat 30-night series show a spurious change point.

For each change point it names the first night after the step (its file, git sha and torch),
the step (geometric mean after / before - 1) and the level against the first segment.
Files of the folder that are not result documents (a calibration, an instruction-count file)
are skipped with a note. --plot FILE writes a PNG (a folder: history.png in it); without
matplotlib it warns and the exit status stays the history's.
Exit status: 0 (the history is information, not a gate); 2 bad input (a folder without result
documents, a damaged one, an unwritable --plot path, a --penalty that is not a positive number)
or `ruptures` missing.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

# Light imports only (numpy, tabulate, ruptures and matplotlib are imported where used).
from dbench.analysis import gate as gatemod
from dbench.analysis import gate_stats as gs
from dbench.analysis.load import ResultFileError, is_folder, read_results
from dbench.analysis.outputs import OutputPathError, check_output_file, output_path
from dbench.bench.harness.cli import Parser, path_value  # usage errors in one line, like run.py's

if TYPE_CHECKING:
    import numpy as np

EXIT_OK, EXIT_BAD_INPUT = 0, 2
PLOT_NAME = "history.png"  # --plot given a folder writes this file in it
DEFAULT_PENALTY = 4.0
MIN_SEGMENT = 2  # nights
MIN_NIGHTS = 2 * MIN_SEGMENT


class MissingLibrary(RuntimeError):
    pass


def _ruptures() -> Any:
    try:
        import ruptures
    except ImportError:
        raise MissingLibrary("change-point detection needs the `ruptures` package (pip install ruptures); "
                             "it is in requirements.txt") from None
    return ruptures


@dataclass(frozen=True)
class Night:
    source: str
    time: str
    git: str
    torch: str


@dataclass(frozen=True)
class Series:
    label: str
    metric: str  # cpu_us/floor, cpu_us or gpu_us
    nights: list[int]  # indices into the history's nights
    values: list[float]


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first night after the step, into the history's nights
    step: float  # relative: after / before - 1
    level: float  # relative to the first segment
    before: float
    after: float


@dataclass(frozen=True)
class RowHistory:
    series: Series
    sigma: float  # night-to-night noise of the log series
    changes: list[ChangePoint]


def night_of(source: str, doc: Mapping[str, Any]) -> Night:
    env = doc.get("env") or {}
    git = env.get("git") or {}
    sha = str(git.get("sha") or "")[:10] if isinstance(git, Mapping) else str(git)[:10]
    dirty = "+dirty" if isinstance(git, Mapping) and git.get("dirty") else ""
    return Night(source, str(env.get("time") or ""), (sha + dirty) or "?", str(env.get("torch") or "?"))


def load_history(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """The folder's result files, ordered by env.time (then file name); files that are not result
    documents are skipped, each with a note on stderr."""
    if not is_folder(folder):
        raise ResultFileError(f"{folder}: not a folder of result files")
    items = [(str(p), d) for p, d in read_results([folder], note=lambda text: print(f"history: {text}",
                                                                                   file=sys.stderr))]
    return sorted(items, key=lambda item: (str((item[1].get("env") or {}).get("time") or ""), item[0]))


def row_series(docs: Sequence[Mapping[str, Any]], row_filter: str = "") -> list[Series]:
    """Per row (first-seen order), its value in each night that timed it."""
    per_night = [gatemod.collect([d]) for d in docs]
    keys: dict[Any, gatemod.RowRun] = {}
    for rows in per_night:
        for key, row in rows.items():
            keys.setdefault(key, row)
    out = []
    for key, first in keys.items():
        label = gatemod.row_label(first.row)
        if row_filter not in label:
            continue
        metric = first.row["metric"]
        # The ratio to the floor where it covers as many nights as the absolute median (older
        # files may lack it): a series must not switch quantity between nights.
        count = {q: sum(key in r and r[key].status == "ok" and r[key].usable(q) for r in per_night)
                 for q in (gatemod.RATIO, gatemod.ABSOLUTE)}
        ratio = metric == "cpu_us" and count[gatemod.RATIO] > 0 and count[gatemod.RATIO] >= count[gatemod.ABSOLUTE]
        q = gatemod.RATIO if ratio else gatemod.ABSOLUTE
        nights, values = [], []
        for i, rows in enumerate(per_night):
            night = rows.get(key)
            value = gatemod.geomean(night.values[q]) if night is not None and night.status == "ok" else None
            if value is not None:
                nights.append(i)
                values.append(value)
        out.append(Series(label, gatemod.metric_name(metric, q), nights, values))
    return out


def noise(x: np.ndarray) -> float:
    """σ of one night from the first differences (MAD, normal-consistent): robust to steps and drifts."""
    import numpy as np

    d = np.diff(x)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2)) if d.size else 0.0


def change_points(values: Sequence[float], penalty: float = DEFAULT_PENALTY) -> tuple[float, list[int]]:
    """(σ, positions): the indices of the first value after each step."""
    import numpy as np

    x = gs.log_values(values)
    if x.size < MIN_NIGHTS:
        return 0.0, []
    sigma = noise(x)
    if sigma == 0:  # identical nights but for a step: use the smallest visible difference as the noise
        d = np.abs(np.diff(x))
        sigma = float(d[d > 0].min()) / 10 if np.any(d > 0) else 0.0
        if sigma == 0:
            return 0.0, []
    algo = _ruptures().Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(x.reshape(-1, 1))
    ends = algo.predict(pen=penalty * sigma ** 2 * math.log(x.size))
    return sigma, [int(e) for e in ends[:-1]]


def row_history(series: Series, penalty: float = DEFAULT_PENALTY) -> RowHistory:
    import numpy as np

    sigma, positions = change_points(series.values, penalty)
    if not positions:
        return RowHistory(series, sigma, [])
    x = np.log(series.values)
    bounds = [0, *positions, len(x)]
    levels = [float(np.exp(x[a:b].mean())) for a, b in zip(bounds, bounds[1:])]
    changes = [ChangePoint(series.nights[p], levels[i + 1] / levels[i] - 1, levels[i + 1] / levels[0] - 1,
                           levels[i], levels[i + 1]) for i, p in enumerate(positions)]
    return RowHistory(series, sigma, changes)


def history(docs: Sequence[Mapping[str, Any]], row_filter: str = "",
            penalty: float = DEFAULT_PENALTY) -> list[RowHistory]:
    return [row_history(s, penalty) for s in row_series(docs, row_filter)]


def render(rows: Sequence[RowHistory], nights: Sequence[Night], fmt: str = "txt") -> str:
    from dbench.bench.io.escape import markdown, table as tabulated

    found = [(h, c) for h in rows for c in h.changes]
    headers = ["row", "metric", "first night after", "file", "git", "torch", "before", "after", "step", "vs first",
               "σ/night"]
    table = [[h.series.label, h.series.metric, nights[c.index].time, Path(nights[c.index].source).name,
              nights[c.index].git, nights[c.index].torch, f"{c.before:.4g}", f"{c.after:.4g}", f"{c.step:+.2%}",
              f"{c.level:+.2%}", f"{h.sigma:.2%}"] for h, c in found]
    quiet = sum(not h.changes for h in rows)
    short = sum(len(h.series.values) < MIN_NIGHTS for h in rows)
    summary = (f"{len(nights)} nights, {len(rows)} rows: {len(found)} change point(s) in "
               f"{len(rows) - quiet} row(s); {quiet} row(s) without"
               + (f" ({short} with fewer than {MIN_NIGHTS} nights)" if short else ""))
    # Row names, file names, git and torch come from result files: tabulated escapes them for `fmt`.
    if fmt == "md":
        body = tabulated(table, headers, "md") if table else "_no change points_"
        return f"### History — {markdown(summary)}\n\n{body}\n"
    body = tabulated(table, headers, "txt") if table else "no change points"
    return f"{body}\n\n{summary}\n"


def plot(rows: Sequence[RowHistory], nights: Sequence[Night], path: Path) -> None:
    """The series of the rows with change points (else all rows), normalised to their first
    segment, change points marked; written atomically (OutputPathError when it cannot be)."""
    import numpy as np
    from matplotlib.figure import Figure  # no pyplot: no global backend or figure state

    shown = [h for h in rows if h.changes] or list(rows)
    fig = Figure(figsize=(10, 5))
    ax = fig.subplots()
    for h in shown[:12]:  # beyond a dozen lines a plot is unreadable
        first = h.changes[0].before if h.changes else float(np.exp(np.mean(np.log(h.series.values))))
        line, = ax.plot(h.series.nights, np.asarray(h.series.values) / first, marker=".",
                        label=f"{h.series.label} ({h.series.metric})")
        for c in h.changes:
            ax.axvline(c.index - 0.5, color=line.get_color(), linestyle="--", alpha=0.6)
            ax.annotate(f"{c.step:+.1%}", (c.index - 0.5, c.after / first), color=line.get_color(), fontsize=8,
                        xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("night (ordered by env.time)")
    ax.set_ylabel("value / first segment's level")
    ax.set_title("Per-row series with change points (dashed: first night after a step)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    ticks = list(range(0, len(nights), max(1, len(nights) // 10)))
    ax.set_xticks(ticks, [nights[i].time[:10] or str(i) for i in ticks], rotation=30, ha="right", fontsize=7)
    fig.tight_layout()
    with output_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")  # the format given: a name without .png gets none added


def plot_target(path: Path) -> Path:
    """--plot: a folder gets PLOT_NAME inside it; a file name is used as it is. Checked writable."""
    return check_output_file(Path(path) / PLOT_NAME if is_folder(path) else Path(path), "--plot")


def main(argv: list[str] | None = None, prog: str = "python -m dbench.analysis.history") -> int:
    p = Parser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("folder", type=path_value, help="a folder of nightly result files")
    p.add_argument("--row", default="", help="only rows whose label contains this")
    p.add_argument("--format", choices=("md", "txt"), default="txt")
    p.add_argument("--plot", type=path_value, help="write a figure of the series (PNG)")
    p.add_argument("--penalty", type=float, default=DEFAULT_PENALTY,
                   help="per change point, in units of σ²·ln(nights) (higher: fewer, larger steps)")
    args = p.parse_args(argv)
    try:
        if not (math.isfinite(args.penalty) and args.penalty > 0):
            raise ValueError(f"--penalty must be a positive number, not {args.penalty}")
        plot_path = plot_target(args.plot) if args.plot else None
        items = load_history(args.folder)
        _ruptures()
    except (ValueError, MissingLibrary) as exc:  # ResultFileError, OutputPathError, the checks above
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if plot_path is not None and importlib.util.find_spec("matplotlib") is None:
        print(f"{prog}: warning: --plot needs matplotlib (pip install matplotlib): no figure", file=sys.stderr)
        plot_path = None
    nights = [night_of(s, d) for s, d in items]
    rows = history([d for _, d in items], args.row, args.penalty)
    if not rows:
        why = f"no row matches {args.row!r}" if args.row else "no cpu_us or gpu_us row in these files"
        print(f"{prog}: error: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stdout.write(render(rows, nights, args.format))
    if plot_path is not None:
        try:
            plot(rows, nights, plot_path)
        except OutputPathError as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        print(f"wrote {plot_path}")
    return EXIT_OK


if __name__ == "__main__":
    from dbench.bench.harness.guard import exit_with

    exit_with("history", main)
