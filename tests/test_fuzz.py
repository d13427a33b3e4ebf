"""Fuzzing every entry point with hostile documents and command lines.

Whatever a user (or a broken CI artifact) hands the suite, each command answers with an exit status
from its documented set — 0 ok, 1 failed or regressed, 2 bad input, 3 nothing decided, 130
interrupted — raises nothing past its own main(), and leaves no partial or temporary file behind.
The documents are mutations of committed, valid ones (hypothesis, derandomized: the same examples on
every run), so most of them are nearly valid and reach deep into each reader.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXIT_CODES = {0, 1, 2, 3, 130}
GOLDEN = ROOT / "tests" / "golden"
VALID = {name: json.loads((GOLDEN / name).read_text()) for name in ("gate-base.json", "gate-new.json",
                                                                     "boundary-small-a.json")}
# DBENCH_FUZZ_EXAMPLES=N: a longer, randomized search (for a probe by hand; CI keeps the fixed 30).
_EXAMPLES = os.environ.get("DBENCH_FUZZ_EXAMPLES")
FUZZ = settings(max_examples=int(_EXAMPLES or 30), deadline=None, derandomize=not _EXAMPLES, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2 ** 80), max_value=2 ** 80)
           | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(["", "nan", "inf", "-1", "1e999", "ok"])
           | st.text(max_size=6))
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


def _paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a document (rows' samples left out: long lists of floats teach nothing new)."""
    out = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            if key != "samples":
                out += _paths(value, (*prefix, key))
    elif isinstance(document, list):
        for i, value in enumerate(document[:4]):
            out += _paths(value, (*prefix, i))
    return out


@st.composite
def mutated(draw: Any, name: str) -> Any:
    """A valid document with one to three places replaced by a hostile value, deleted or nested deep."""
    document = json.loads(json.dumps(VALID[name]))
    for _ in range(draw(st.integers(1, 3))):
        places = _paths(document)
        place = draw(st.sampled_from(places))
        action = draw(st.sampled_from(["replace", "replace", "delete", "nest"]))
        if not place:
            document = draw(JSON_VALUES) if action != "nest" else [[[document]]]
            continue
        parent = document
        for key in place[:-1]:
            parent = parent[key]
        key = place[-1]
        if action == "delete":
            del parent[key]
        elif action == "nest":
            value: Any = parent[key]
            for _ in range(draw(st.integers(10, 60))):
                value = [value]
            parent[key] = value
        else:
            parent[key] = draw(JSON_VALUES)
    return document


def _write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document))  # NaN and Infinity as Python writes them
    return path


def _call(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """main(argv)'s exit status, argparse's SystemExit included; any other exception fails the test."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    assert code in EXIT_CODES, f"exit {code!r} for {argv}\n{err.getvalue()[-2000:]}"
    if code == 2:
        assert err.getvalue().strip(), f"exit 2 without a word on stderr for {argv}"
    return code


def _no_debris(folder: Path) -> None:
    """No temporary file left, and no empty file written, in an output folder."""
    for path in folder.rglob("*") if folder.exists() else ():
        assert not path.name.endswith(".tmp"), f"temporary file left: {path}"
        if path.is_file():
            assert path.stat().st_size > 0, f"empty file written: {path}"


def _analysis(name: str) -> Callable[[list[str]], int]:
    module = __import__(f"analysis.{name}", fromlist=["main"])
    return module.main


@pytest.fixture(autouse=True)
def _headless(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")


@FUZZ
@given(doc=mutated("gate-new.json"), side=st.sampled_from(["new", "baseline"]))
def test_gate_and_compare_on_hostile_documents(tmp_path_factory: pytest.TempPathFactory, doc: Any, side: str) -> None:
    folder = tmp_path_factory.mktemp("gate")
    bad = _write(folder / "bad.json", doc)
    good = _write(folder / "good.json", VALID["gate-base.json"])
    pair = [str(bad), str(good)] if side == "new" else [str(good), str(bad)]
    _call(_analysis("gate"), pair)
    out = folder / "out"
    out.mkdir()
    _call(_analysis("compare"), [*pair, "--csv", str(out / "spread.csv")])
    _no_debris(out)


@FUZZ
@given(doc=mutated("boundary-small-a.json"))
def test_report_figures_history_calibrate_on_hostile_documents(tmp_path_factory: pytest.TempPathFactory,
                                                               doc: Any) -> None:
    folder = tmp_path_factory.mktemp("docs")
    runs = folder / "runs"
    runs.mkdir()
    bad = _write(runs / "bad.json", doc)
    _write(runs / "good.json", VALID["boundary-small-a.json"])
    out = folder / "out"
    _call(_analysis("report"), [str(bad)])
    _call(_analysis("figures"), [str(bad), "--out", str(out), "--kinds", "cpu,ratio"])
    _call(_analysis("history"), [str(runs), "--plot", str(out / "history.png")])
    _call(_analysis("calibrate"), [str(bad), str(runs / "good.json"), "--out", str(out / "calibration.json")])
    _no_debris(out)


@FUZZ
@given(doc=mutated("gate-new.json"))
def test_gate_calibration_files_are_checked(tmp_path_factory: pytest.TempPathFactory, doc: Any) -> None:
    folder = tmp_path_factory.mktemp("calibration")
    calibration = _write(folder / "calibration.json", doc)  # a result document is no calibration
    good = _write(folder / "good.json", VALID["gate-base.json"])
    assert _call(_analysis("gate"), [str(good), str(good), "--calibration", str(calibration)]) == 2


@FUZZ
@given(delta=st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.05, 1.0, 5.0]),
       alpha=st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, 0.5, 0.51, 1.0]))
def test_gate_numbers_out_of_range_are_bad_input(tmp_path_factory: pytest.TempPathFactory, delta: float,
                                                 alpha: float) -> None:
    folder = tmp_path_factory.mktemp("numbers")
    new = _write(folder / "new.json", VALID["gate-new.json"])
    base = _write(folder / "base.json", VALID["gate-base.json"])
    code = _call(_analysis("gate"), [str(new), str(base), "--delta", repr(delta), "--alpha", repr(alpha)])
    sane = math.isfinite(delta) and 0 < delta < 1 and math.isfinite(alpha) and 0 < alpha <= 0.5
    assert (code == 2) == (not sane), (delta, alpha, code)


@pytest.mark.parametrize("content", [b"", b"\x00\xff\xfe", b"[]", b"{}", b'{"rows": 5}', b'{"rows": []}',
                                     b'{"rows": [1, 2]}', b"[" * 50_000 + b"]" * 50_000, b'"a string"',
                                     b'{"rows": [], "env": [], "config": 3}', b"NaN", b"1" * 5000])
def test_every_analysis_entry_point_on_junk_files(tmp_path: Path, content: bytes) -> None:
    nights = tmp_path / "nights"
    nights.mkdir()
    junk = nights / "junk.json"
    junk.write_bytes(content)
    good = _write(tmp_path / "good.json", VALID["gate-base.json"])
    out = tmp_path / "out"
    for name, argv in (("gate", [str(junk), str(good)]), ("gate", [str(good), str(junk)]),
                       ("compare", [str(junk), str(good)]), ("report", [str(junk)]),
                       ("figures", [str(junk), "--out", str(out)]), ("history", [str(nights)]),
                       ("calibrate", [str(junk), str(good), "--out", str(out / "c.json")])):
        assert _call(_analysis(name), argv) != 0, (name, content[:20])
    _no_debris(out)


# ---------------------------------------------------------------------------
# Command lines: a table of hostile ones, each in a fresh process as a user would type it.

LONG = "x" * 300
RUN_PY = [
    ["--scenario", "boundary", "--out", f"{{tmp}}/{LONG}"],
    ["--scenario", "boundary", "--out", "/proc/no-such-folder"],
    ["--scenario", "boundary", "--baseline", "/dev/zero"],
    ["--scenario", "boundary", "--baseline", "{tmp}/junk.json"],
    ["--scenario", "boundary", "--baseline", "{tmp}/empty"],
    ["--scenario", "boundary", "--rounds", "-1"],
    ["--scenario", "boundary", "--rounds", "nan"],
    ["--scenario", "boundary", "--ops", ","],
    ["--scenario", "boundary", "--variants", "nosuch"],
    ["--scenario", "boundary", "--pin-cores", "4096"],
    ["--scenario", "boundary", "--ab", "/bin/sh", "env:"],
    ["--scenario", "boundary", "--ab", "env:", "env:DBENCH_BUILD_DIR=/nonexistent"],
    ["--scenario", "boundary", "--ab", "env:", "env:DBENCH_MM_KERNEL=bogus"],
    ["--scenario", "boundary", "--processes", "0"],
    ["--scenario", "nosuch"],
    ["--scenario", "boundary", "--device", "cuda:99"],
]


@pytest.mark.parametrize("argv", RUN_PY, ids=lambda a: " ".join(a)[:60])
def test_run_py_refuses_hostile_command_lines_at_once(tmp_path: Path, argv: list[str]) -> None:
    (tmp_path / "junk.json").write_text('{"rows": "no"}')
    (tmp_path / "empty").mkdir()
    out = tmp_path / "results"
    args = [a.format(tmp=tmp_path) for a in argv]
    if "--out" not in args:
        args += ["--out", str(out)]
    proc = subprocess.run([sys.executable, str(ROOT / "run.py"), *args, "--device", "cpu"] if "--device" not in args
                          else [sys.executable, str(ROOT / "run.py"), *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 2, proc.stdout[-1000:] + proc.stderr[-1000:]
    assert "Traceback" not in proc.stderr and "error" in proc.stderr.lower(), proc.stderr
    assert not list(tmp_path.rglob("*.tmp")) and not (out.exists() and list(out.glob("*.json")))
