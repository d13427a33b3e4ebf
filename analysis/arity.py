"""The args scenario's tables as data: per mode, variant and argument kind, CPU µs per call at each
arity and the fitted cost of one more argument (µs per argument, with a 95 % CI). Their console
sink is analysis/kernels.py's print_args.

The fit: the least-squares slope (scipy.stats.linregress) of the per-arity medians against the
arity. Its CI comes from a bootstrap over rounds, not from linregress's standard error: every round
times every arity once, interleaved, so resampling whole rounds keeps a slow round's arities
together and measures what the timing noise does to the slope, while the standard error of four to
seven medians would measure only how far they stray from a line (with two to five degrees of freedom).
Beside it, the slope as a share of the call at the smallest arity (%/arg), from the same resamples:
on a host whose speed state shifts between runs the µs figure moves with it, the share does not.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import numpy as np
import pandas as pd
import scipy.stats

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 0  # the bootstrap's resamples: a result's table is the same every time it is made
SLOPE_COLUMN = "µs/arg [95 % CI]"


SHARE_COLUMN = "%/arg [95 % CI]"


class Fit(NamedTuple):
    slope: float  # µs per extra argument
    ci_low: float
    ci_high: float
    intercept: float  # µs at arity 0, extrapolated
    r2: float  # of the line through the medians: well below 1, the cost is not linear in the arity
    # The slope as a share of the median at the smallest arity (0.02: each argument adds 2 % of the
    # one-argument call). An absolute slope moves with the host's speed as every µs figure does; a
    # slope and the call it is a share of, timed in the same rounds, move together, and this does not.
    share: float = math.nan
    share_low: float = math.nan
    share_high: float = math.nan


def fit_slope(arities: Sequence[float], samples: np.ndarray, seed: int = SEED) -> Fit:
    """The slope of `samples` (one row of per-round µs per arity, rounds aligned) against `arities`,
    with its bootstrap CI over rounds (NaN with fewer than 3 rounds)."""
    x = np.asarray(arities, dtype=float)
    samples = np.asarray(samples, dtype=float)
    medians = np.median(samples, axis=1)
    point = scipy.stats.linregress(x, medians)
    line = (float(point.intercept), float(point.rvalue) ** 2)
    share = float(point.slope) / float(medians[np.argmin(x)])
    if samples.shape[1] < 3:
        return Fit(float(point.slope), math.nan, math.nan, *line, share)

    def statistic(of_share: bool) -> Any:
        def slope(rounds: np.ndarray, axis: int = -1) -> np.ndarray:
            resampled = np.median(samples[:, rounds.astype(int)], axis=-1).reshape(len(x), -1)  # arity x resample
            fitted = np.polyfit(x, resampled, 1)[0]
            return (fitted / resampled[np.argmin(x)] if of_share else fitted).reshape(rounds.shape[:-1])
        return slope

    # The same seed: both intervals come from the same resamples of rounds.
    ci, share_ci = (scipy.stats.bootstrap((np.arange(samples.shape[1]),), statistic(of_share), vectorized=True,
                                          n_resamples=RESAMPLES, confidence_level=CONFIDENCE, method="percentile",
                                          rng=np.random.default_rng(seed)).confidence_interval
                    for of_share in (False, True))
    return Fit(float(point.slope), float(ci.low), float(ci.high), *line, share, float(share_ci.low),
               float(share_ci.high))


def args_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The CPU rows of an args result, in the scenario's order."""
    if "arity" not in frame:
        return frame.iloc[0:0]
    rows = frame[(frame["scenario"] == "args") & (frame["metric"] == "cpu_us")]
    return rows.reset_index(drop=True)


def args_fits(frame: pd.DataFrame) -> pd.DataFrame:
    """One line per mode x variant x argument kind with at least two timed arities: the Fit, and
    the arities it is fitted over."""
    rows = args_rows(frame)
    timed = rows[rows["status"] == "ok"]
    out = []
    for (mode, variant, kind), g in timed.groupby(["mode", "variant", "arg_kind"], sort=False):
        if g["arity"].nunique() < 2:
            continue
        g = g.sort_values("arity")
        rounds = min(len(s) for s in g["samples"])  # aligned: every round timed every case once
        fit = fit_slope(g["arity"].astype(float).tolist(), np.array([s[:rounds] for s in g["samples"]]))
        out.append({"mode": mode, "variant": variant, "arg_kind": kind, **fit._asdict(),
                    "arities": [int(a) for a in g["arity"]]})
    return pd.DataFrame(out, columns=["mode", "variant", "arg_kind", *Fit._fields, "arities"])


def slope_text(fit: pd.Series) -> str:
    ci = "" if pd.isna(fit["ci_low"]) else f" [{fit['ci_low']:.3f}, {fit['ci_high']:.3f}]"
    return f"{fit['slope']:.3f}{ci}"


def _cell(r: pd.Series) -> str:
    return {"n/a": "n/a", "failed": "FAILED"}.get(r["status"], "-" if pd.isna(r["median"]) else f"{r['median']:.2f}")


def _shown(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of the variants that run in their mode (a variant n/a at every arity is a note)."""
    runs = rows.groupby(["mode", "variant"], sort=False)["status"].transform(lambda s: (s != "n/a").any())
    return rows[runs]


def share_text(fit: pd.Series) -> str:
    ci = "" if pd.isna(fit["share_low"]) else f" [{100 * fit['share_low']:.2f}, {100 * fit['share_high']:.2f}]"
    return f"{100 * fit['share']:.2f}{ci}"


def _slope_of(fits: pd.DataFrame, mode: str, variant: str, kind: str, column: str = "slope") -> str:
    found = fits[(fits["mode"] == mode) & (fits["variant"] == variant) & (fits["arg_kind"] == kind)]
    if not len(found):
        return ""
    text = {"slope": slope_text, "share": share_text}.get(column)
    return text(found.iloc[0]) if text else f"{found.iloc[0][column]:.2f}"


def args_grids(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Per mode, the µs per extra argument of each variant (rows) and kind (columns); then per mode
    and kind, µs per call of each variant at each arity, the fitted slope, and the slope as a share
    of the call at the smallest arity."""
    rows, fits = _shown(args_rows(frame)), args_fits(frame)
    out = []
    for mode, g in rows.groupby("mode", sort=False):
        variants, kinds = list(dict.fromkeys(g["variant"])), list(dict.fromkeys(g["arg_kind"]))
        summary = pd.DataFrame({k: [_slope_of(fits, mode, v, k) for v in variants] for k in kinds},
                               index=pd.Index(variants, name="variant"))
        out.append((f"args {mode}: CPU µs per extra argument, by kind [95 % CI]", summary))
    for (mode, kind), g in rows.groupby(["mode", "arg_kind"], sort=False):
        grid = g.assign(cell=g.apply(_cell, axis=1)).pivot_table(
            index="variant", columns="arity", values="cell", aggfunc="first", sort=False).fillna("")
        grid = grid[sorted(grid.columns)]
        grid.columns = [str(int(a)) for a in grid.columns]
        grid[SLOPE_COLUMN] = [_slope_of(fits, mode, v, kind) for v in grid.index]
        grid[SHARE_COLUMN] = [_slope_of(fits, mode, v, kind, "share") for v in grid.index]
        grid["r²"] = [_slope_of(fits, mode, v, kind, "r2") for v in grid.index]
        out.append((f"args {kind}/{mode}: CPU µs per call by number of arguments", grid.rename_axis("variant")))
    return out
